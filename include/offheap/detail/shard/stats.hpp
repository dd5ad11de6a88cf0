// SPDX-License-Identifier: Apache-2.0
// A shard's figures for OffHeapStore::stats(): counters, contents, memory,
// index, and the cache's policy and hit rings, summed over the shards.
#pragma once

#include <offheap/detail/journal/free_lists.hpp>
#include <offheap/eviction/policy.hpp>
#include <offheap/stats.hpp>

#include <atomic>
#include <mutex>

namespace offheap::detail {

/// A shard's figures for OffHeapStore::stats() (S: the shard, which lets it
/// in and forwards to it); no state of its own.
template <class S>
class ShardStats {
 public:
  static void add_stats(const S& sh, Stats& s);
};

template <class S>
void ShardStats<S>::add_stats(const S& sh, Stats& s) {
  std::lock_guard<typename S::Lock> guard(sh.lock_);
  s.puts += sh.puts_;
  s.removes += sh.removes_;
  s.removals_replaced += sh.replaced_;
  sh.removals_.add_stats(s);
  s.mapped_bytes += sh.durability_.mapped_bytes();
  s.records += sh.records_.load(std::memory_order_relaxed);
  sh.expiry_.add_stats(s);
  sh.pages_.add_stats(s);
  s.key_value_bytes += sh.key_value_bytes_;
  s.live_bytes += sh.live_bytes_;
  s.free_records += sh.free_.total_records();
  s.free_bytes += sh.free_.total_bytes();
  if (s.free_classes.empty()) {
    for (unsigned c = 0; c < FreeLists::kClasses; ++c) {
      s.free_classes.push_back({FreeLists::class_min_capacity(c), 0, 0});
    }
  }
  for (unsigned c = 0; c < FreeLists::kClasses; ++c) {
    s.free_classes[c].records += sh.free_.class_records(c);
    s.free_classes[c].bytes += sh.free_.class_bytes(c);
  }
  s.journal_bytes += sh.journal_.active_bytes();
  s.mapped_bytes += sh.journal_.mapped_bytes() - sh.journal_.emptied_bytes() + sh.index_.mapped_bytes() +
                    sh.free_.mapped_bytes();
  s.chunks += sh.journal_.chunks();
  s.emptied_chunks += sh.journal_.emptied_chunks();
  s.emptied_bytes += sh.journal_.emptied_bytes();
  sh.compaction_.add_stats(s);
  s.index_capacity += sh.index_.capacity();
  s.index_tombstones += sh.index_.tombstones();
  s.index_migrations += sh.index_.migrations();
  s.index_migrating += sh.index_.migrating() ? 1 : 0;
  s.index_migrating_entries += sh.index_.old_size();
  s.retired_tables += sh.index_.retired_tables();
  s.retired_bytes += sh.index_.retired_bytes();
  s.mapped_bytes += sh.index_.retired_bytes();
  if constexpr (S::kEvicts) sh.cache_.add_stats(s, sh.live_bytes_);
}

}  // namespace offheap::detail
