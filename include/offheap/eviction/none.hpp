// SPDX-License-Identifier: Apache-2.0
// NoEviction: the policy of a store (StorePolicy), which keeps every record
// until it is removed. Every call does nothing; a store built with it has
// no capacity, and readers record no hits.
//
// Thread safety: stateless. Nothing here hands out memory.
#pragma once

#include <offheap/eviction/policy.hpp>

#include <offheap/detail/memory/memory_budget.hpp>

#include <cstdint>
#include <string>

namespace offheap::eviction {

class NoEviction {
 public:
  static constexpr std::uint8_t id = 0;
  static constexpr ReaderHits reader_hits = ReaderHits::none;

  explicit NoEviction(const detail::StoreName&) noexcept {}
  void set_capacity(std::uint64_t) noexcept {}
  void reserve() noexcept {}
  static constexpr std::uint64_t first_bytes() noexcept { return 0; }
  template <class Host>
  void admit(const Handle&, Host&) noexcept {}
  template <class Host>
  void restore(const Handle&, Host&) noexcept {}
  template <class Host>
  void replace(const Handle&, const Handle&, Host&) noexcept {}
  template <class Host>
  void forget(const Handle&, Host&) noexcept {}
  template <class Host>
  void hit(const Handle&, Host&) noexcept {}
  template <class Host>
  bool evict_one(Host&) noexcept {
    return false;
  }
  void clear() noexcept {}
  PolicyStats stats() const noexcept { return {}; }
  template <class F>
  void for_each_entry(F&&) const noexcept {}
};

static_assert(EvictionPolicy<NoEviction>);

}  // namespace offheap::eviction
