// SPDX-License-Identifier: Apache-2.0
// OffHeapStore's life cycle, defined out of the class: the open of a
// file-backed store's shards (a clean open maps the saved state, any other
// rebuilds from the records; deadlines and cache policies learned again),
// the maintenance thread's rounds, maintain(), sync(), close() and stats().
#pragma once

#include <offheap/store.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>
#include <thread>

namespace offheap {

template <Policy P>
void OffHeapStore<P>::open_shards() {
  const auto start = std::chrono::steady_clock::now();
  detail::StoreFiles& f = *files_;
  for (std::uint32_t i = 0; i < shards_.size(); ++i) {
    shards_.begin()[i].journal().attach(f.chunk_counts[i], store_name_);
  }
  const bool clean = f.meta.clean == 1 && !f.created;
  std::vector<std::uint8_t> rebuilt(shards_.size(), 0);
  std::vector<std::uint64_t> superseded(shards_.size(), 0);
  const bool writable = !f.read_only;
  parallel_for_shards([&](std::uint32_t i) {
    Shard& s = shards_.begin()[i];
    std::string why;
    if (clean && s.load_state(f.meta.generation, why)) return;
    const typename Shard::Recovery r = s.recover(writable);
    rebuilt[i] = 1;
    superseded[i] = r.superseded;
  });
  for (std::uint32_t i = 0; i < shards_.size(); ++i) {
    rebuilt_ = rebuilt_ || (rebuilt[i] != 0 && !f.created);
    superseded_ += superseded[i];
  }
  // Deadlines are kept in the records: the wheels learn them again, before
  // the policies (under Options::memory_limit_bytes, the wheel's entries
  // are not optional; a policy's ghost or sketch may do with less).
  if (writable) parallel_for_shards([&](std::uint32_t i) { shards_.begin()[i].rebuild_expiry(); });
  if constexpr (Shard::kEvicts) {
    if (writable) {
      for (Shard& s : shards_) s.prepare_policy_rebuild();
      parallel_for_shards([&](std::uint32_t i) { shards_.begin()[i].rebuild_policy(rebuilt[i] != 0); });
    }
  }
  if (writable) {
    // Not clean from here on, durably, before the first write.
    f.meta.generation += 1;
    f.meta.clean = 0;
    detail::write_meta(f, name());
    for (std::uint32_t i = 0; i < shards_.size(); ++i) {
      ::unlinkat(f.dir.get(), detail::format::state_file_name(i).c_str(), 0);
    }
    // What expired while the store was closed leaves now (reported to the
    // listener, if any, by the first maintenance round).
    const std::uint64_t now = now_ms();
    // Under Options::memory_limit_bytes, removals need dead markers and list
    // entries before a sync or a report frees anything: what finds no room
    // is left to the maintenance rounds.
    parallel_for_shards([&](std::uint32_t i) {
      try {
        (void)shards_.begin()[i].expire(now, ~std::uint64_t{0});
      } catch (const detail::LimitReached&) {
        // (Not limited(): shards run on threads of their own here.)
      }
    });
  }
  last_sync_.store(now_ns(), std::memory_order_relaxed);
  open_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

template <Policy P>
void OffHeapStore<P>::start_maintenance() {
  const bool periodic = files_ && options_.durability == Durability::periodic;
  const auto interval = std::chrono::nanoseconds(options_.sync_interval);
  const bool quick = Shard::kEvicts || static_cast<bool>(options_.on_removal);
  // A store with neither (nor periodic syncs) has only deadlines to wait
  // for, and writers wake the thread for those: it sleeps 10 s at a time.
  const auto slow = periodic ? interval : std::chrono::nanoseconds(std::chrono::seconds(10));
  const auto idle = quick ? std::chrono::nanoseconds(std::chrono::milliseconds(1)) : slow;
  const auto max_idle = quick ? std::min(interval, std::chrono::nanoseconds(std::chrono::milliseconds(16))) : slow;
  maintenance_ = std::make_unique<detail::MaintenanceThread>(
      [this, periodic] {
        bool backlog = false, work = false;
        limit_blocked_ = false;
        // Records whose deadline passed (a shard is locked only when its
        // wheel has something due).
        const std::uint64_t now = now_ms();
        for (Shard& s : shards_) {
          if (s.next_due() > now) continue;
          bool more = false;
          const std::uint64_t n = limited([&] { return s.expire(now, 256, &more); });
          backlog = backlog || more;  // (a sweep of stale entries under way: on at once)
          work = work || n != 0;
        }
        if constexpr (Shard::kEvicts) {
          for (Shard& s : shards_) {
            const std::uint64_t n = limited([&] { return s.evict_to_capacity(256); });
            backlog = backlog || n == 256;
            work = work || n != 0;
          }
        }
        for (Shard& s : shards_) {
          // Readers dropped hits on full rings: work, so that the next
          // drain comes after `idle`, not after a backed-off sleep.
          if (s.maintain()) work = true;
        }
        if (options_.on_removal) {
          for (Shard& s : shards_) {
            const std::uint64_t n =
                limited([&] { return s.report(options_.on_removal, Shard::kReportBatch, this); });
            backlog = backlog || n == Shard::kReportBatch;
            work = work || n != 0;
          }
        }
        // Sparse chunks emptied (compaction.hpp), then freed pages back to
        // the OS (the frees above queued theirs).
        for (Shard& s : shards_) {
          if (s.next_due() > now) continue;
          bool more = false;
          if (limited([&] { return s.compact(kCompactSlice, &more); }) != 0) work = true;
          backlog = backlog || more;
          more = false;
          if (s.release_pages(kReleaseSlice, &more) != 0) work = true;
          backlog = backlog || more;
        }
        if (periodic &&
            now_ns() - last_sync_.load(std::memory_order_relaxed) >=
                std::chrono::duration_cast<std::chrono::nanoseconds>(options_.sync_interval).count()) {
          sync_shards();  // a failure is also noted in files_->sync_error
          work = true;
        }
        if (limit_blocked_) return detail::RoundFound::work;  // (not back to back: see limited())
        return backlog ? detail::RoundFound::backlog : work ? detail::RoundFound::work : detail::RoundFound::nothing;
      },
      [this, periodic, interval, max_idle]() -> std::int64_t {
        // The time left to the next periodic sync (none: a day) or the
        // wheels' next event, whichever comes first.
        std::int64_t due = std::int64_t{86400} * 1000000000;
        if (periodic && !files_->closed.load(std::memory_order_relaxed)) {
          const std::int64_t since = now_ns() - last_sync_.load(std::memory_order_relaxed);
          due = std::max<std::int64_t>(0, interval.count() - since);
        }
        due = std::min<std::int64_t>(due, max_idle.count());
        // The planned wake-up goes out before the shards' next events
        // are read (seq_cst, as schedule_expiry()'s store and the
        // writer's load of wake_at_ in write()): a writer that schedules
        // an earlier deadline meanwhile either is seen here or sees a
        // wake-up later than its deadline, and wakes the thread.
        const std::uint64_t now = now_ms();
        const std::uint64_t planned = now + static_cast<std::uint64_t>(due / 1000000);
        wake_at_.store(planned, std::memory_order_seq_cst);
        std::uint64_t next = detail::ExpiryWheel::kNever;
        for (const Shard& s : shards_) next = std::min(next, s.next_due());
        if (limit_blocked_) next = std::max(next, now + 1);  // a deadline the limit held up: in 1 ms
        if (next < planned) {
          wake_at_.store(next, std::memory_order_seq_cst);
          due = next <= now ? 0 : static_cast<std::int64_t>(next - now) * 1000000;
        }
        return due;
      },
      idle, max_idle);
}

/// Runs a maintenance step (an expiry, an eviction, a report, a
/// compaction), each of which throws only before it changes anything:
/// a mapping Options::memory_limit_bytes refuses leaves the rest for a
/// later round (what waits is freed by then, by a sync or a report)
/// instead of stopping the maintenance thread. The round then counts as
/// blocked (limit_blocked_): the thread sleeps at least a millisecond
/// before the next, even with a deadline past, rather than spinning on a
/// refusal. The maintenance thread's only.
template <Policy P>
template <class Step>
std::uint64_t OffHeapStore<P>::limited(Step&& step) {
  try {
    return step();
  } catch (const detail::LimitReached&) {
    limit_blocked_ = true;
    return 0;
  }
}

/// For a write the memory limit refused: frees the shard's removals that
/// wait, and returns how many it freed (0: nothing could be freed now).
///  - Reports: with a maintenance thread, the listener runs there only
///    (never on the writer's thread, where a lock the writer holds around
///    the write could be one the listener takes): the thread is woken and
///    the writer waits until the shard's reports are out, while the
///    thread's rounds report them (see the loop for when it stops).
///    Without one (background_maintenance off), they are reported here,
///    on the writer's thread, as maintain() would. Never from inside a
///    listener on this thread (its own store's, or another's).
///  - Durability::periodic: the shard is synced twice (the first sync
///    frees the records removed before it, the second their dead markers).
template <Policy P>
std::uint64_t OffHeapStore<P>::free_waiting_removals(Shard& s, ReportWait& wait) {
  std::uint64_t freed = 0;
  if (options_.on_removal && detail::t_in_removal_listener == nullptr) {
    // Counted until freed, not until taken off the queue: a batch in
    // flight holds its records until its listener calls are done (a writer
    // that counted the queue retried, and was refused, while the thread's
    // batch of 200 was still being told under a sanitizer).
    std::uint64_t left = s.retired_left();
    if (maintenance_ && maintenance_->running()) {
      // Waits while the thread reports this shard's removals, by signs of
      // progress rather than by a clock (a sanitizer on a loaded machine
      // can leave the thread a second between two batches): the wait ends
      // when none are left, when two rounds ended since the last report
      // went out (a round that ends reports the shard's batch unless the
      // limit refused it room: then it cannot report them now, and the
      // caller's syncs free what they can), or after 5 s without a report
      // (a listener that stalls, perhaps on a lock this writer holds
      // around its write; later rounds of the same write then look only
      // briefly), 30 s in all for the write (backpressure has its limit).
      const auto start = std::chrono::steady_clock::now();
      const auto patience = wait.begin(start);
      auto stalled = start + patience;
      std::uint64_t rounds_at_report = maintenance_->rounds();
      for (std::uint64_t waited = 0; left != 0 && maintenance_->running(); ++waited) {
        const auto now = std::chrono::steady_clock::now();
        if (now >= stalled) {
          wait.stalled = true;
          break;
        }
        if (now >= wait.last || maintenance_->rounds() >= rounds_at_report + 2) break;
        if (waited % 64 == 0) maintenance_->wake();
        std::this_thread::sleep_for(std::chrono::microseconds(50));
        const std::uint64_t now_left = s.retired_left();
        if (now_left < left) {
          freed += left - now_left;
          rounds_at_report = maintenance_->rounds();
          stalled = std::chrono::steady_clock::now() + patience;
        }
        left = now_left;
      }
    } else {
      // Another writer may be reporting the shard: waited for as above.
      const auto start = std::chrono::steady_clock::now();
      const auto patience = wait.begin(start);
      auto stalled = start + patience;
      while (left != 0) {
        bool busy = false;
        const std::uint64_t n = s.report(options_.on_removal, left, this, &busy);
        if (busy) {
          // Those the other writer reports free as well.
          const auto now = std::chrono::steady_clock::now();
          if (now >= stalled) wait.stalled = true;
          if (now >= stalled || now >= wait.last) break;
          std::this_thread::sleep_for(std::chrono::microseconds(50));
          const std::uint64_t now_left = s.retired_left();
          if (now_left < left) {
            freed += left - now_left;
            stalled = std::chrono::steady_clock::now() + patience;
          }
          left = now_left;
          continue;
        }
        if (n == 0) break;  // clear() took them
        freed += n;
        left -= std::min(left, n);
      }
    }
  }
  if (files_ && options_.durability == Durability::periodic) {
    const std::uint64_t waiting = s.deferred_records();
    // A cache's records written since the sync before last are not
    // settled: an eviction that finds no room for its dead marker cannot
    // take them without one (cache_shard.hpp); two syncs settle them.
    const bool settling = Shard::kEvicts && !options_.on_removal && s.unsettled();
    // A failed msync is noted store-wide: the write tried again is refused.
    if ((waiting != 0 || settling) && s.sync(false) == 0 && s.sync(false) == 0) {
      freed += waiting != 0 ? waiting : 1;
    }
  }
  return freed;
}

template <Policy P>
void OffHeapStore<P>::close() {
  if (detail::t_in_compute == this) [[unlikely]] throw_in_compute("close()");
  if (detail::t_in_removal_listener == this) [[unlikely]] throw_in_listener("close()");
  if (!files_) {
    const std::lock_guard<std::mutex> closing(close_mutex_);
    if (closed_.exchange(true, std::memory_order_relaxed)) return;
    stop_maintenance();
    report_all();  // the removals still waiting (anonymous memory: no room to map for them)
    return;
  }
  // Held through the syncs and the saved state: a sync() from another
  // thread that sees the store closing waits for them (see sync()).
  const std::lock_guard<std::mutex> closing(close_mutex_);
  if (files_->closed.exchange(true)) return;
  stop_maintenance();
  // Removals still waiting are reported (and their records freed) before
  // anything is saved: a saved store holds no retired record. If room to
  // free them cannot be mapped, the records are still written to disk and
  // the store left unclean (rebuilt at its next open); then close throws.
  std::exception_ptr report_error;
  if (!files_->read_only) {
    try {
      report_all();
    } catch (const Error&) {
      report_error = std::current_exception();
    }
  }
  if (files_->read_only || options_.durability == Durability::none) {
    files_->close_synced.store(true, std::memory_order_relaxed);  // nothing to write
    return;
  }
  if (const int err = files_->sync_error.load(std::memory_order_relaxed)) {
    throw Error(Errc::io_error, name() + ": not closed cleanly: an earlier sync failed (" +
                                    detail::errno_text(err) + ")");
  }
  // Three passes: the first writes the records and frees the old records
  // of updates (periodic), the second writes those frees and frees the
  // removals' dead markers, the third writes those.
  for (int pass = 0; pass < 3; ++pass) {
    for (Shard& s : shards_) {
      if (const int err = s.sync(true)) {
        detail::throw_os(err, name(), "writing the records to disk at close (msync)");
      }
    }
  }
  files_->close_synced.store(true, std::memory_order_relaxed);  // read under close_mutex_
  // A store that met damage (a record failing its checksum, a free list
  // dropped) is left unclean: its next open rebuilds every shard from its
  // records, which steps over the damage instead of trusting it.
  for (const Shard& s : shards_) {
    if (s.damage_left() != 0) return;
    // Removed records the listener has not seen (report_all() failed to
    // map room to free them): in no list a saved state would keep.
    if (s.retired_left() != 0) {
      if (report_error) std::rethrow_exception(report_error);
      return;
    }
  }
  for (Shard& s : shards_) s.save_state(files_->meta.generation);
  detail::sync_dir(files_->dir.get(), name(), files_->path);
  files_->meta.clean = 1;
  detail::write_meta(*files_, name());
}

template <Policy P>
void OffHeapStore<P>::sync() {
  if (detail::t_in_compute == this) [[unlikely]] throw_in_compute("sync()");
  if (!files_ || files_->read_only) return;
  // From inside the listener while close() reports: close() makes it all
  // durable (and waiting for it here would wait for ourselves).
  if (detail::t_in_removal_listener == this && files_->closed.load()) return;
#if defined(OFFHEAP_TESTING_NO_SYNC)
  return;  // a broken build for tests only (tests/power_loss_test.cpp's twin)
#endif
  if (!sync_shards()) {
    // close() began: its syncs make everything written before durable;
    // wait for them (it holds close_mutex_ throughout), and say if they
    // failed.
    const std::lock_guard<std::mutex> closed(close_mutex_);
    if (!files_->close_synced.load(std::memory_order_relaxed)) {
      const int err = files_->sync_error.load(std::memory_order_relaxed);
      throw Error(Errc::io_error, name() + ": sync() during close(), whose writes to disk failed (" +
                                      detail::errno_text(err != 0 ? err : EIO) + ")");
    }
  }
}

template <Policy P>
bool OffHeapStore<P>::sync_shards() {
  if (files_->closed.load(std::memory_order_relaxed)) return false;
  if (const int err = files_->sync_error.load(std::memory_order_relaxed)) throw_sync_failed(err);
  for (Shard& s : shards_) {
    if (const int err = s.sync(false)) throw_sync_failed(err);
  }
  // New chunk files' directory entries (synced as they are made unless
  // Durability::none).
  if (!files_->backing.sync_new_files) detail::sync_dir(files_->dir.get(), name(), files_->path);
  last_sync_.store(now_ns(), std::memory_order_relaxed);
  return true;
}

template <Policy P>
void OffHeapStore<P>::maintain() {
  if (detail::t_in_compute == this) [[unlikely]] throw_in_compute("maintain()");
  // Not in a closed store: its state is saved (an eviction or expiry
  // would free records the saved index still leads to).
  if (!writes_stopped()) {
    const std::uint64_t now = now_ms();
    for (Shard& s : shards_) s.expire(now, ~std::uint64_t{0});
    if constexpr (Shard::kEvicts) {
      for (Shard& s : shards_) s.evict_to_capacity(~std::uint64_t{0});
    }
  }
  for (Shard& s : shards_) s.maintain();
  if (!options_.background_maintenance && !writes_stopped()) report_all();
  if (!writes_stopped()) {
    for (Shard& s : shards_) s.compact(~std::uint64_t{0}, nullptr, true);
    if constexpr (Shard::kEvicts) {
      // Compaction moves a record into a free record up to kMinRecord - 8
      // bytes larger than it, and the spare bytes count (Stats::live_bytes):
      // a cache at its capacity can pass it by a few bytes per record
      // moved. Evicted down to the capacity again, so that it holds when
      // maintain() returns; their reports go out too.
      std::uint64_t evicted = 0;
      for (Shard& s : shards_) evicted += s.evict_to_capacity(~std::uint64_t{0});
      if (evicted != 0 && !options_.background_maintenance) report_all();
    }
    for (Shard& s : shards_) s.release_pages(~std::uint64_t{0});
  }
  if (files_ && !options_.background_maintenance &&
      options_.durability == Durability::periodic && !files_->closed.load() &&
      now_ns() - last_sync_.load(std::memory_order_relaxed) >=
          std::chrono::duration_cast<std::chrono::nanoseconds>(options_.sync_interval).count()) {
    sync();
  }
}

template <Policy P>
Stats OffHeapStore<P>::stats() const {
  if (detail::t_in_compute == this) [[unlikely]] throw_in_compute("stats()");
  Stats s;
  s.name = options_.name;
  s.shards = shards_.size();
  for (const Shard& sh : shards_) sh.add_stats(s);
  counters_.sum(s.hits, s.misses);
  s.gets = s.hits + s.misses;
  for (const Shard& sh : shards_) {
    s.corrupt_records += sh.corrupt_records();
    s.deferred_records += sh.deferred_records();
  }
  s.rebuilt = rebuilt_;
  s.capacity_bytes = options_.capacity_bytes;
  s.superseded_records = superseded_;
  s.open_seconds = open_seconds_;
  if (maintenance_) {
    s.maintenance_running = maintenance_->running();
    s.maintenance_rounds = maintenance_->rounds();
    s.maintenance_lag_seconds = maintenance_->seconds_since_round();
  }
  s.mapped_bytes += detail::ReadCounters::mapped_bytes();
  s.memory_limit_bytes = options_.memory_limit_bytes;
  s.memory_mapped_bytes = store_name_.budget.used();
  std::erase_if(s.free_classes, [](const FreeClassStats& c) { return c.records == 0; });
  s.index_load = s.index_capacity == 0
                     ? 0.0
                     : static_cast<double>(s.records + s.index_tombstones) /
                           static_cast<double>(s.index_capacity);
  return s;
}

}  // namespace offheap
