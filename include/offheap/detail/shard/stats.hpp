// SPDX-License-Identifier: Apache-2.0
// A shard's figures for OffHeapStore::stats(): counters, contents, memory,
// index, and the cache's policy and hit rings, summed over the shards.
#pragma once

#include <offheap/detail/shard/shard.hpp>
#include <offheap/stats.hpp>

#include <atomic>
#include <cstdint>
#include <mutex>

namespace offheap::detail {

template <class P>
void Shard<P>::add_stats(Stats& s) const {
  std::lock_guard<Lock> guard(lock_);
  s.puts += puts_;
  s.removes += removes_;
  s.removals_replaced += replaced_;
  s.removals_reported += reported_;
  s.removals_pending += reports_.size();
  s.removals_unreported += unreported_;
  s.retired_records += retired_records_;
  s.retired_record_bytes += retired_bytes_;
  s.listener_errors += listener_errors_;
  s.mapped_bytes += reports_.mapped_bytes() + deferred_.mapped_bytes() + dead_.mapped_bytes();
  s.records += records_.load(std::memory_order_relaxed);
  s.expirations += expirations_;
  s.expiry_entries += wheel_.size();
  s.mapped_bytes += wheel_.mapped_bytes();
  pages_.add_stats(s);
  s.key_value_bytes += key_value_bytes_;
  s.live_bytes += live_bytes_;
  s.free_records += free_.total_records();
  s.free_bytes += free_.total_bytes();
  if (s.free_classes.empty()) {
    for (unsigned c = 0; c < FreeLists::kClasses; ++c) {
      s.free_classes.push_back({FreeLists::class_min_capacity(c), 0, 0});
    }
  }
  for (unsigned c = 0; c < FreeLists::kClasses; ++c) {
    s.free_classes[c].records += free_.class_records(c);
    s.free_classes[c].bytes += free_.class_bytes(c);
  }
  s.journal_bytes += journal_.active_bytes();
  s.mapped_bytes += journal_.mapped_bytes() - journal_.emptied_bytes() + index_.mapped_bytes() +
                    free_.mapped_bytes();
  s.chunks += journal_.chunks();
  s.emptied_chunks += journal_.emptied_chunks();
  s.emptied_bytes += journal_.emptied_bytes();
  compaction_.add_stats(s);
  s.index_capacity += index_.capacity();
  s.index_tombstones += index_.tombstones();
  s.retired_tables += index_.retired_tables();
  s.retired_bytes += index_.retired_bytes();
  s.mapped_bytes += index_.retired_bytes();
  if constexpr (kEvicts) {
    const eviction::PolicyStats p = policy_.stats();
    s.evictions += evictions_;
    s.limit_evictions += limit_evictions_;
    s.markerless_evictions += markerless_evictions_;
    s.maintenance_backlog_bytes += live_bytes_ > capacity_ ? live_bytes_ - capacity_ : 0;
    s.policy_entries += p.entries;
    s.policy_small_bytes += p.small_bytes;
    s.policy_main_bytes += p.main_bytes;
    s.policy_protected_bytes += p.protected_bytes;
    s.policy_ghost_entries += p.ghost_entries;
    s.policy_window_target += p.window_target;
    s.policy_sketch_resets += p.sketch_resets;
    if constexpr (kBufferedHits) {
      s.policy_hits_applied += hits_applied_;
      s.policy_hits_dropped += hits_.dropped();
    }
    s.policy_mapped_bytes += p.mapped_bytes + hits_.mapped_bytes();
    s.mapped_bytes += p.mapped_bytes + hits_.mapped_bytes();
  }
}

}  // namespace offheap::detail
