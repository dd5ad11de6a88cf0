// SPDX-License-Identifier: Apache-2.0
// Upkeep<P>: the work a store does besides its callers' own, and the
// memory limit's backpressure on writers. It owns the maintenance thread
// (maintenance.hpp runs it; its rounds are defined here), the thread's
// planned wake-up, and the time of the last sync; it works on the
// StoreEngine it is given (engine.hpp), which outlives it.
//
// A round: records past their deadline expire; a cache evicts down to its
// capacity (in batches of up to 256 records per shard, in the shards no
// write changed since the last round: writers evict as they write);
// readers' hits are drained into the policy and replaced index tables
// dropped (the batches of evictions and hits let the shard's lock go as
// soon as a writer waits for it: WriterLock::contended(), so that a writer
// waits for one eviction or one hit, not a batch: LruCache's put p99.9 was
// 5.4x its p50 with the batches, 3.4x without the thread); removals are
// reported to the listener (in batches); sparse chunks are compacted and
// free pages handed back to the OS; a sync runs when Durability::periodic's
// interval has passed. Caches and listeners: a round 1 ms after one that
// found work, backing off to one every 16 ms while none is found (an idle cache wakes
// 60 times a second; one that is read keeps its 1 ms rounds, each draining
// up to 32 hits per reader thread and shard). No sleep runs past the next
// periodic sync or deadline: a writer that schedules an earlier deadline
// wakes the thread (nudge()).
//
// Backpressure (at_limit()): a write that Options::memory_limit_bytes
// refuses while removed records wait for the listener or a sync frees them
// (free_waiting_removals()) and tries again, within a budget of 30 s.
//
// Thread safety: start() and stop() are the owner's (construction, close);
// nudge(), at_limit() and free_waiting_removals() run on writers' threads;
// the round and limited() on the maintenance thread only; sync_shards() on
// any thread (shards serialize their syncs).
#pragma once

#include <offheap/detail/store/engine.hpp>
#include <offheap/detail/store/maintenance.hpp>
#include <offheap/stats.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>

namespace offheap::detail {

template <Policy P>
class Upkeep {
 public:
  using Engine = StoreEngine<P>;
  using Shard = typename Engine::Shard;

  explicit Upkeep(Engine& e) noexcept : e_(e) {}
  Upkeep(const Upkeep&) = delete;
  Upkeep& operator=(const Upkeep&) = delete;
  /// Stops and joins the thread (before the engine's shards go).
  ~Upkeep() { stop(); }

  /// Starts the maintenance thread (once, by the store's constructor).
  void start();
  void stop() noexcept {
    if (maintenance_) maintenance_->stop();
  }
  /// The thread, if the store has one (its state for checks and stats).
  const MaintenanceThread* thread() const noexcept { return maintenance_.get(); }

  /// After a write to `s`: if the shard now wants a maintenance round
  /// before the thread's planned wake-up (a deadline, freed pages, stale
  /// wheel entries), wakes the thread (seq_cst: pairs with the round's
  /// store of wake_at_ before it reads the shards' next events; the thread
  /// then plans again).
  void nudge(const Shard& s) noexcept {
    if (maintenance_ && s.next_due() < wake_at_.load(std::memory_order_seq_cst)) [[unlikely]] {
      wake_at_.store(0, std::memory_order_relaxed);  // one wake-up is enough until it plans again
      maintenance_->wake();
    }
  }

  /// Reports every removal waiting now, shard by shard, on this thread
  /// (maintain(), close(), an anonymous store's destructor): those the
  /// listener's own writes cause meanwhile wait for the next call.
  void report_all() {
    // From inside the listener (maintain() called by it): the batch in
    // flight holds the shard's report mutex; what waits goes next round.
    if (!e_.options_.on_removal || t_in_removal_listener == e_.id()) return;
    for (Shard& s : e_.shards_) {
      for (std::uint64_t left = s.reports_pending(); left != 0;) {
        const std::uint64_t n = s.report(e_.options_.on_removal, left, e_.id());
        if (n == 0) break;  // clear() took them
        left -= n;
      }
    }
  }

  /// Runs op() (a write or a removal on `s`). When Options::memory_limit_bytes
  /// refused it a mapping that removals waiting for the listener or a sync
  /// (Durability::periodic) hold the room for (a cache's evictions, a
  /// store's removals and updates), they are freed (free_waiting_removals)
  /// outside the shard's lock and op() tries again: while each round frees
  /// something (a cache's evictions free at most what the waiting lists
  /// hold per round), at most 16 rounds; after a round that freed nothing,
  /// once more (the maintenance thread may have freed them first), then
  /// the refusal stands.
  template <class Op>
  auto at_limit(Shard& s, Op&& op);

  /// How long one at_limit() call may still wait for the maintenance
  /// thread's reports: one budget for all its rounds.
  struct ReportWait {
    std::chrono::steady_clock::time_point last{};  // 30 s after the first wait began
    bool stalled = false;  // a wait ended 5 s without a report: the next ones look once
    /// The write's first refusal at `now`: its budget starts.
    void start(std::chrono::steady_clock::time_point now) noexcept {
      if (last == std::chrono::steady_clock::time_point{}) last = now + std::chrono::seconds(30);
    }
    /// A wait begins at `now`: how long it waits for a report.
    std::chrono::milliseconds begin(std::chrono::steady_clock::time_point now) noexcept {
      start(now);
      return stalled ? std::chrono::milliseconds(20) : std::chrono::milliseconds(5000);
    }
  };
  /// For a write the memory limit refused: frees the shard's removals
  /// that wait for the listener or a sync; how many.
  std::uint64_t free_waiting_removals(Shard& s, ReportWait& wait);

  /// Syncs every shard (false: the store is closing, whose close() syncs);
  /// throws for a failed sync (and every later one: files_->sync_error).
  bool sync_shards();
  /// When the last sync ended (steady clock, ns): Lifecycle's open sets it.
  void mark_synced() noexcept { last_sync_.store(Engine::now_ns(), std::memory_order_relaxed); }
  /// Durability::periodic's interval has passed since the last sync.
  bool sync_due() const noexcept {
    return Engine::now_ns() - last_sync_.load(std::memory_order_relaxed) >=
           std::chrono::duration_cast<std::chrono::nanoseconds>(e_.options_.sync_interval).count();
  }

  /// One maintenance round on the caller's thread (OffHeapStore::maintain(),
  /// whose doc says what it does), all but its sync: returns whether a
  /// periodic sync is due (no background thread, the interval passed).
  bool maintain();
  /// The thread's figures, into `s`.
  void add_stats(Stats& s) const noexcept {
    if (maintenance_) {
      s.maintenance_running = maintenance_->running();
      s.maintenance_rounds = maintenance_->rounds();
      s.maintenance_lag_seconds = maintenance_->seconds_since_round();
    }
  }

  /// The most bytes of pages a maintenance round hands back per shard.
  static constexpr std::uint64_t kReleaseSlice = std::uint64_t{64} << 20;
  /// About the most journal bytes a maintenance round moves per shard when
  /// it compacts (a chunk is moved whole: one may pass it).
  static constexpr std::uint64_t kCompactSlice = std::uint64_t{64} << 20;
  /// Index groups a round moves of a migration writes left unfinished (up
  /// to 448 records read under the shard's lock: some tens of microseconds).
  static constexpr std::uint64_t kMigrateSlice = 64;

 private:
  /// A maintenance step that the memory limit may refuse.
  template <class Step>
  std::uint64_t limited(Step&& step);

  Engine& e_;
  std::atomic<std::int64_t> last_sync_{0};  // steady clock, ns; sync() may run on two threads
  // The maintenance thread's planned wake-up (ms, the store's clock): a
  // write with an earlier deadline wakes it (see nudge()).
  std::atomic<std::uint64_t> wake_at_{0};
  // The memory limit refused a step of the round under way (limited()):
  // the maintenance thread's only.
  bool limit_blocked_ = false;
  // Last: destroyed (stopped and joined) first.
  std::unique_ptr<MaintenanceThread> maintenance_;
};

template <Policy P>
void Upkeep<P>::start() {
  const bool periodic = e_.files_ && e_.options_.durability == Durability::periodic;
  const auto interval = std::chrono::nanoseconds(e_.options_.sync_interval);
  const bool quick = Shard::kEvicts || static_cast<bool>(e_.options_.on_removal);
  // A store with neither (nor periodic syncs) has only deadlines to wait
  // for, and writers wake the thread for those: it sleeps 10 s at a time.
  const auto slow = periodic ? interval : std::chrono::nanoseconds(std::chrono::seconds(10));
  const auto idle = quick ? std::chrono::nanoseconds(std::chrono::milliseconds(1)) : slow;
  const auto max_idle = quick ? std::min(interval, std::chrono::nanoseconds(std::chrono::milliseconds(16))) : slow;
  maintenance_ = std::make_unique<MaintenanceThread>(
      [this, periodic] {
        bool backlog = false, work = false;
        limit_blocked_ = false;
        // Records whose deadline passed (a shard is locked only when its
        // wheel has something due).
        const std::uint64_t now = e_.now_ms();
        for (Shard& s : e_.shards_) {
          if (s.next_due() > now) continue;
          bool more = false;
          const std::uint64_t n = limited([&] { return s.expire(now, 256, &more); });
          backlog = backlog || more;  // (a sweep of stale entries under way: on at once)
          work = work || n != 0;
        }
        if constexpr (Shard::kEvicts) {
          for (Shard& s : e_.shards_) {
            // (Each batch lets the lock go at once to a writer that waits
            // for it: the writer evicts for itself.)
            const std::uint64_t n = limited([&] { return s.evict_to_capacity(256, true); });
            backlog = backlog || n == 256;
            work = work || n != 0;
          }
        }
        for (Shard& s : e_.shards_) {
          // Readers dropped hits on full rings: work, so that the next
          // drain comes after `idle`, not after a backed-off sleep.
          if (s.maintain(true)) work = true;
        }
        if (e_.options_.on_removal) {
          for (Shard& s : e_.shards_) {
            const std::uint64_t n =
                limited([&] { return s.report(e_.options_.on_removal, Shard::kReportBatch, e_.id()); });
            backlog = backlog || n == Shard::kReportBatch;
            work = work || n != 0;
          }
        }
        // The next journal chunk, made ahead of need with no lock held
        // (the appends that passed half of their last chunk asked for
        // it): one per round, so that a round's other work (syncs,
        // evictions) waits for one chunk file at most; a shard left
        // wanting keeps the rounds coming (plan_next_round()).
        for (Shard& s : e_.shards_) {
          if (s.spare_chunk_wanted()) {
            work = true;
            if (s.make_spare_chunk()) break;
          }
        }
        // An index migration that writes left unfinished (they move a few
        // groups each; this finishes it once they stop).
        // (Not without a writer lock: the thread would be a second writer.)
        if constexpr (Shard::kLocks) {
          for (Shard& s : e_.shards_) {
            if (s.index_migrating() && s.help_index_migration(kMigrateSlice, false)) work = true;
          }
        }
        // Sparse chunks emptied (compaction.hpp), then freed pages back to
        // the OS (the frees above queued theirs).
        for (Shard& s : e_.shards_) {
          if (s.next_due() > now) continue;
          bool more = false;
          if (limited([&] { return s.compact(kCompactSlice, &more); }) != 0) work = true;
          backlog = backlog || more;
          more = false;
          if (s.release_pages(kReleaseSlice, &more) != 0) work = true;
          backlog = backlog || more;
        }
        if (periodic && sync_due()) {
          sync_shards();  // a failure is also noted in e_.files_->sync_error
          work = true;
        }
        if (limit_blocked_) return RoundFound::work;  // (not back to back: see limited())
        return backlog ? RoundFound::backlog : work ? RoundFound::work : RoundFound::nothing;
      },
      [this, periodic, interval, max_idle]() -> std::int64_t {
        // The time left to the next periodic sync (none: a day) or the
        // wheels' next event, whichever comes first.
        std::int64_t due = std::int64_t{86400} * 1000000000;
        if (periodic && !e_.files_->closed.load(std::memory_order_relaxed)) {
          const std::int64_t since = e_.now_ns() - last_sync_.load(std::memory_order_relaxed);
          due = std::max<std::int64_t>(0, interval.count() - since);
        }
        due = std::min<std::int64_t>(due, max_idle.count());
        // The planned wake-up goes out before the shards' next events
        // are read (seq_cst, as schedule_expiry()'s store and the
        // writer's load of wake_at_ in nudge()): a writer that schedules
        // an earlier deadline meanwhile either is seen here or sees a
        // wake-up later than its deadline, and wakes the thread.
        const std::uint64_t now = e_.now_ms();
        const std::uint64_t planned = now + static_cast<std::uint64_t>(due / 1000000);
        wake_at_.store(planned, std::memory_order_seq_cst);
        std::uint64_t next = ExpiryWheel::kNever;
        for (const Shard& s : e_.shards_) next = std::min(next, s.next_due());
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
std::uint64_t Upkeep<P>::limited(Step&& step) {
  try {
    return step();
  } catch (const LimitReached&) {
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
std::uint64_t Upkeep<P>::free_waiting_removals(Shard& s, ReportWait& wait) {
  std::uint64_t freed = 0;
  if (e_.options_.on_removal && t_in_removal_listener == nullptr) {
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
        const std::uint64_t n = s.report(e_.options_.on_removal, left, e_.id(), &busy);
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
  if (e_.files_ && e_.options_.durability == Durability::periodic) {
    const std::uint64_t waiting = s.deferred_records();
    // A cache's records written since the sync before last are not
    // settled: an eviction that finds no room for its dead marker cannot
    // take them without one (cache/cache_host.hpp); two syncs settle them.
    const bool settling = Shard::kEvicts && !e_.options_.on_removal && s.unsettled();
    // A failed msync is noted store-wide: the write tried again is refused.
    if ((waiting != 0 || settling) && s.sync(false) == 0 && s.sync(false) == 0) {
      freed += waiting != 0 ? waiting : 1;
    }
  }
  return freed;
}

template <Policy P>
bool Upkeep<P>::sync_shards() {
  if (e_.files_->closed.load(std::memory_order_relaxed)) return false;
  if (const int err = e_.files_->sync_error.load(std::memory_order_relaxed)) e_.throw_sync_failed(err);
  for (Shard& s : e_.shards_) {
    if (const int err = s.sync(false)) e_.throw_sync_failed(err);
  }
  // New chunk files' directory entries (synced as they are made unless
  // Durability::none).
  if (!e_.files_->backing.sync_new_files) sync_dir(e_.files_->dir.get(), e_.name(), e_.files_->path);
  mark_synced();
  return true;
}

template <Policy P>
template <class Op>
auto Upkeep<P>::at_limit(Shard& s, Op&& op) {
  // Rounds go on while they free something (each frees records for good:
  // the shard's records bound them), until two in a row free nothing, or
  // (after 16) the write's wait budget (ReportWait::last, 30 s) is spent.
  bool idle_round = false;
  ReportWait wait;
  for (int round = 0;; ++round) {
    try {
      return op();
    } catch (const LimitReached& e) {
      if (!e.evicting_helps || !e_.removals_wait()) throw;
      const auto now = std::chrono::steady_clock::now();
      wait.start(now);
      if (round >= 16 && now >= wait.last) throw;
      if (free_waiting_removals(s, wait) == 0) {
        if (idle_round) throw;
        idle_round = true;
      } else {
        idle_round = false;
      }
      e_.check_writable(maintenance_.get());  // a sync that failed refuses the write (io_error)
    }
  }
}

template <Policy P>
bool Upkeep<P>::maintain() {
  // Not in a closed store: its state is saved (an eviction or expiry
  // would free records the saved index still leads to).
  if (!e_.writes_stopped()) {
    const std::uint64_t now = e_.now_ms();
    for (Shard& s : e_.shards_) s.expire(now, ~std::uint64_t{0});
    if constexpr (Shard::kEvicts) {
      for (Shard& s : e_.shards_) s.evict_to_capacity(~std::uint64_t{0});
    }
  }
  for (Shard& s : e_.shards_) s.maintain();
  // An index migration under way ends (the program's call: it may wait),
  // and the next journal chunk is made where appends asked for it.
  if (!e_.writes_stopped()) {
    for (Shard& s : e_.shards_) (void)s.help_index_migration(~std::uint64_t{0}, true);
    for (Shard& s : e_.shards_) {
      if (s.spare_chunk_wanted()) (void)s.make_spare_chunk();
    }
  }
  if (!e_.options_.background_maintenance && !e_.writes_stopped()) report_all();
  if (!e_.writes_stopped()) {
    for (Shard& s : e_.shards_) s.compact(~std::uint64_t{0}, nullptr, true);
    if constexpr (Shard::kEvicts) {
      // Compaction moves a record into a free record up to kMinRecord - 8
      // bytes larger than it, and the spare bytes count (Stats::live_bytes):
      // a cache at its capacity can pass it by a few bytes per record
      // moved. Evicted down to the capacity again, so that it holds when
      // maintain() returns; their reports go out too.
      std::uint64_t evicted = 0;
      for (Shard& s : e_.shards_) evicted += s.evict_to_capacity(~std::uint64_t{0});
      if (evicted != 0 && !e_.options_.background_maintenance) report_all();
    }
    for (Shard& s : e_.shards_) s.release_pages(~std::uint64_t{0});
  }
  return e_.files_ && !e_.options_.background_maintenance &&
         e_.options_.durability == Durability::periodic && !e_.files_->closed.load() && sync_due();
}

}  // namespace offheap::detail
