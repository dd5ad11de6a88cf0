// SPDX-License-Identifier: Apache-2.0
// The store's writes over many keys: put_all(), remove_all() (get_all() is
// a read: reads.hpp, with the slice below).
// Keys go in slices of 64: hashed once, their shards' index lines
// prefetched (reads), and grouped by shard so that a write takes each
// shard's lock once per slice (Shard::write_batch, erase_batch).
#pragma once

#include <offheap/detail/store/engine.hpp>
#include <offheap/detail/store/upkeep.hpp>
#include <offheap/expiry.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

namespace offheap::detail {

/// One slice of keys: their hashes, and their positions ordered by shard
/// (stable: a shard's keys keep the caller's order).
struct BatchSlice {
  static constexpr std::size_t kKeys = 64;
  std::array<std::uint64_t, kKeys> hash;
  std::array<std::uint32_t, kKeys> shard;
  std::array<std::uint8_t, kKeys> order;
  std::size_t n = 0;

  /// Sorts positions 0..n-1 by shard (insertion sort: 64 at most).
  void order_by_shard() noexcept {
    for (std::size_t i = 0; i < n; ++i) {
      const auto at = static_cast<std::uint8_t>(i);
      std::size_t j = i;
      while (j > 0 && shard[order[j - 1]] > shard[at]) {
        order[j] = order[j - 1];
        --j;
      }
      order[j] = at;
    }
  }
};

/// put_all() and remove_all(), built per call on the store's engine and
/// Upkeep, which outlive it. Every entry is checked before any is written;
/// keys go in slices of 64, hashed once and grouped by shard, each shard's
/// run written under one hold of its lock (and at_limit()'s waits).
template <Policy P>
class Batches {
 public:
  using Engine = StoreEngine<P>;
  using Shard = typename Engine::Shard;
  Batches(Engine& e, Upkeep<P>& u) noexcept : e_(e), u_(u) {}

  std::size_t put_all(std::span<const std::pair<std::string_view, std::string_view>> entries, Ttl ttl);
  std::size_t remove_all(std::span<const std::string_view> keys);

 private:
  /// Keys key_of(0..count-1) in slices of 64, each slice's run of keys in
  /// one shard handed to run(shard, n, done, at) under at_limit() (at(j):
  /// the j-th key's index in the call and hash).
  template <class KeyOf, class Run>
  void by_shard_slices(std::size_t count, KeyOf&& key_of, Run&& run);

  Engine& e_;
  Upkeep<P>& u_;
};

template <Policy P>
std::size_t Batches<P>::put_all(std::span<const std::pair<std::string_view, std::string_view>> entries,
                                     Ttl ttl) {
  e_.check_writable(u_.thread());
  const std::uint64_t deadline = e_.deadline_for(ttl);
  for (const auto& [k, v] : entries) {
    e_.check(k, v.size());
    e_.check_deadline_word(k, v.size(), deadline);
  }
  std::size_t inserted = 0;
  by_shard_slices(entries.size(), [&](std::size_t i) { return entries[i].first; },
                  [&](Shard& s, std::size_t n, std::size_t& done, auto&& at) {
                    s.write_batch(n, done, inserted, deadline, [&](std::size_t j) {
                      const auto [i, h] = at(j);
                      return std::tuple<std::string_view, std::uint64_t, std::string_view>(
                          entries[i].first, h, entries[i].second);
                    });
                  });
  return inserted;
}

template <Policy P>
std::size_t Batches<P>::remove_all(std::span<const std::string_view> keys) {
  e_.check_writable(u_.thread());
  for (const std::string_view k : keys) e_.check_key(k);
  std::size_t removed = 0;
  by_shard_slices(keys.size(), [&](std::size_t i) { return keys[i]; },
                  [&](Shard& s, std::size_t n, std::size_t& done, auto&& at) {
                    s.erase_batch(n, done, removed, [&](std::size_t j) {
                      const auto [i, h] = at(j);
                      return std::pair<std::string_view, std::uint64_t>(keys[i], h);
                    });
                  });
  return removed;
}

template <Policy P>
template <class KeyOf, class Run>
void Batches<P>::by_shard_slices(std::size_t count, KeyOf&& key_of, Run&& run) {
  BatchSlice slice;
  for (std::size_t base = 0; base < count; base += slice.kKeys) {
    slice.n = std::min(slice.kKeys, count - base);
    for (std::size_t i = 0; i < slice.n; ++i) {
      slice.hash[i] = e_.hash_(key_of(base + i));
      slice.shard[i] = static_cast<std::uint32_t>(&e_.shards_.for_hash(slice.hash[i]) - e_.shards_.begin());
    }
    slice.order_by_shard();
    for (std::size_t first = 0; first < slice.n;) {
      const std::uint32_t sh = slice.shard[slice.order[first]];
      std::size_t last = first;
      while (last < slice.n && slice.shard[slice.order[last]] == sh) ++last;
      Shard& s = e_.shards_.begin()[sh];
      // The run's j-th key: its index in the call, and its hash.
      auto at = [&](std::size_t j) {
        const std::size_t k = slice.order[first + j];
        return std::pair<std::size_t, std::uint64_t>(base + k, slice.hash[k]);
      };
      std::size_t done = 0;  // carried over the memory limit's retries
      u_.at_limit(s, [&] {
        run(s, last - first, done, at);
        return true;
      });
      u_.nudge(s);
      first = last;
    }
  }
}

}  // namespace offheap::detail
