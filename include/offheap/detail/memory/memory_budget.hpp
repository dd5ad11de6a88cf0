// SPDX-License-Identifier: Apache-2.0
// Options::memory_limit_bytes: one count of every byte a store maps (journal
// chunks, chunk tables, index tables and the replaced ones kept, free-list
// tables, policy structures, the expiry wheel, read counters), taken before
// each mapping and given back after each unmapping. A mapping that would
// pass the limit is never made: the caller gets LimitReached (an
// Error(out_of_space)) instead, and a cache's writer evicts and tries again
// (shard/writes.hpp).
//
// Every component holds the store's name as a `const StoreName&`, which
// carries the budget with it: mapping goes through map_anonymous(),
// map_file() and unmap() below, which count. Nothing else maps.
#pragma once

#include <offheap/error.hpp>

#include <atomic>
#include <cstdint>
#include <string>

namespace offheap::detail {

/// The bytes a store has mapped against its limit (0: no limit, counted
/// all the same for Stats::memory_mapped_bytes).
class MemoryBudget {
 public:
  explicit MemoryBudget(std::uint64_t limit) noexcept : limit_(limit) {}
  MemoryBudget(const MemoryBudget&) = delete;
  MemoryBudget& operator=(const MemoryBudget&) = delete;

  /// Counts `bytes` about to be mapped, unless that would pass the limit:
  /// then counts nothing and returns false. Any thread (shards map
  /// concurrently, under their own locks).
  bool take(std::uint64_t bytes) const noexcept {
    // Relaxed: the count orders nothing else; the compare-exchange alone
    // keeps two shards from both taking the last bytes.
    std::uint64_t used = used_.load(std::memory_order_relaxed);
    do {
      if (limit_ != 0 && (bytes > limit_ || used > limit_ - bytes)) return false;
    } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
    return true;
  }
  /// Counts `bytes` just unmapped.
  void give(std::uint64_t bytes) const noexcept {
    used_.fetch_sub(bytes, std::memory_order_relaxed);  // orders nothing (see take)
  }
  /// Counts `bytes` of an optional structure (a sketch, a ghost: they
  /// only improve choices) about to be mapped, unless all of them would
  /// then hold more than a sixteenth of the limit: then false. Counted
  /// apart from, and as well as, take().
  bool take_optional(std::uint64_t bytes) const noexcept {
    if (limit_ == 0) return true;
    std::uint64_t held = optional_.load(std::memory_order_relaxed);  // relaxed: as used_
    do {
      if (bytes > limit_ / 16 || held > limit_ / 16 - bytes) return false;
    } while (!optional_.compare_exchange_weak(held, held + bytes, std::memory_order_relaxed));
    return true;
  }
  /// Counts optional `bytes` just unmapped (or never mapped after all).
  void give_optional(std::uint64_t bytes) const noexcept {
    if (limit_ != 0) optional_.fetch_sub(bytes, std::memory_order_relaxed);  // as give()
  }
  std::uint64_t used() const noexcept { return used_.load(std::memory_order_relaxed); }
  std::uint64_t limit() const noexcept { return limit_; }
  /// What may still be mapped (the largest uint64 without a limit).
  std::uint64_t available() const noexcept {
    if (limit_ == 0) return ~std::uint64_t{0};
    const std::uint64_t u = used();
    return u >= limit_ ? 0 : limit_ - u;
  }

 private:
  const std::uint64_t limit_;
  // mutable: components hold the budget through a const StoreName&; the
  // count is bookkeeping shared by all of them, not the name's state.
  mutable std::atomic<std::uint64_t> used_{0};
  mutable std::atomic<std::uint64_t> optional_{0};  // of used_: take_optional()'s
};

/// The store's name (for error messages) and its memory budget, one object
/// per store that outlives every component holding a reference to it.
struct StoreName {
  StoreName(const std::string& n, std::uint64_t limit, bool huge = false) noexcept
      : name(n), budget(limit), huge_pages(huge) {}
  StoreName(const StoreName&) = delete;
  StoreName& operator=(const StoreName&) = delete;
  operator const std::string&() const noexcept { return name; }
  // Messages start with the name: store + ": ...".
  friend std::string operator+(const StoreName& s, const char* text) { return s.name + text; }
  friend std::string operator+(const StoreName& s, const std::string& text) { return s.name + text; }

  const std::string& name;  // Options::name, which outlives the store's parts
  MemoryBudget budget;
  bool huge_pages = false;  // Options::huge_pages: journal chunks and index tables ask for THP
};

/// A mapping the memory limit refused. `evicting_helps`: for room that a
/// cache's evictions free in what is already mapped (records, policy
/// nodes and queue segments); not for an index table (an eviction leaves
/// a tombstone, the table stays as full).
class LimitReached : public Error {
 public:
  explicit LimitReached(const std::string& message) : Error(Errc::out_of_space, message) {}
  bool evicting_helps = true;
  // The expiry wheel's nodes: a sweep of the entries of records gone frees
  // some (an eviction only makes its record's entry stale).
  bool sweep_helps = false;
};

[[noreturn, gnu::cold, gnu::noinline]] inline void throw_limit_reached(const StoreName& store,
                                                                       std::uint64_t bytes,
                                                                       const char* what) {
  throw LimitReached(store.name + ": mapping " + std::to_string(bytes) + " bytes for " + what +
                     " would pass Options::memory_limit_bytes (" +
                     std::to_string(store.budget.limit()) + " bytes; " +
                     std::to_string(store.budget.used()) + " mapped)");
}

}  // namespace offheap::detail
