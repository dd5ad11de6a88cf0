// SPDX-License-Identifier: Apache-2.0
// When a file-backed shard's records reach the disk, and what waits for it.
//
// sync() msyncs the chunks written since the last sync, one sync of a shard
// at a time, then frees what waited for that durability point
// (Durability::periodic): the old records of updates, whose successors are
// now on disk, and the dead markers of removals once the older records they
// outrank were freed by an earlier sync and that free is on disk too. Both
// wait in LocationLists (mapped memory, not the heap), oldest first. A
// failed msync is noted store-wide: the store refuses writes until reopened.
//
// ShardDurability<S> owns this: a component of the shard (S), which holds
// one and lets it in (friend).
#pragma once

#include <offheap/detail/files/file.hpp>
#include <offheap/detail/index/location.hpp>
#include <offheap/detail/journal/location_list.hpp>
#include <offheap/detail/journal/record.hpp>
#include <offheap/detail/memory/memory_budget.hpp>
#include <offheap/error.hpp>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

namespace offheap::detail {

/// A file-backed shard's durability (S: the shard). Its state: the mode
/// (every_write's msync per write, or periodic's frees deferred until a
/// sync), the store-wide sync error it notes, and for periodic the two
/// waiting lists with the stamps that say what is settled:
///
///   - deferred_: old records of updates (and records removed), oldest
///     first; sync() frees those pushed before it began, once its msync
///     made their successors durable.
///   - dead_: dead markers of removals; one goes once every older record
///     of its key was freed by an earlier sync and a later msync made that
///     free durable (dead_freeable_).
///   - freed_below_: a record stamped below it has had every older record
///     of its key freed in memory; settled_below_: those frees are on disk
///     too, so that the record is the oldest of its key a crash could bring
///     back (a cache may evict it without a marker: settled()).
///
/// Every call but sync(), unsettled() and the figures runs under the
/// shard's writer lock (the caller holds it); sync() takes it twice,
/// unsettled() once. A store in another mode leaves the lists empty.
template <class S>
class ShardDurability {
 public:
  ShardDurability(const StoreName& name, bool durable, bool sync_each, bool defer_frees,
                  std::atomic<int>* sync_error)
      : sync_each_(durable && sync_each),
        defer_frees_(durable && defer_frees && !sync_each),
        sync_error_(sync_error),
        deferred_(name),
        dead_(name) {}
  ShardDurability(const ShardDurability&) = delete;
  ShardDurability& operator=(const ShardDurability&) = delete;

  /// Durability::every_write: each write msyncs its record before it returns.
  bool sync_each() const noexcept { return sync_each_; }
  /// Durability::periodic: an update's old record, a removal's record and
  /// marker are freed after syncs, not at once.
  bool defers() const noexcept { return defer_frees_; }
  /// Whether a sync of the store has failed (writes are refused).
  bool failed() const noexcept {
    return sync_error_ != nullptr && sync_error_->load(std::memory_order_relaxed) != 0;
  }
  /// Records the first failed sync of the store (later writes are refused).
  void note_error(int err) noexcept {
    if (sync_error_ == nullptr) return;
    int expected = 0;
    sync_error_->compare_exchange_strong(expected, err, std::memory_order_relaxed);
  }
  /// note_error(), then throws the Error a failed msync of `name` is.
  [[noreturn, gnu::cold]] void failed_sync(const std::string& name, int err) {
    note_error(err);
    throw Error(errc_of(err), name + ": writing records to disk (msync) failed: " + errno_text(err) +
                                  "; the store refuses writes from now on (reopen it to recover)");
  }

  /// Writes the chunks written since the last sync (`all`: every chunk) to
  /// their files and waits. Returns 0, or the errno of the first failure,
  /// which is also noted store-wide. Takes the writer lock only to collect
  /// them. Then frees the old records of updates made before the call
  /// (periodic), whose successors are now durable.
  /// Syncs of a shard run one at a time (sync_mutex_): a sync that found
  /// the dirty range taken by another one still in its msync would return
  /// (and free records) before that data is on disk.
  int sync(S& sh, bool all);

  /// A live record stamped `stamp` was written (or recovered).
  void wrote_live(std::uint64_t stamp) noexcept { newest_live_ = stamp; }
  /// Whether the record stamped `stamp` is settled: every older record of
  /// its key is freed on disk (periodic), so that a crash brings back none.
  bool settled(std::uint64_t stamp) const noexcept { return stamp < settled_below_; }
  /// Periodic: whether a live record was written since the sync before
  /// last began: two syncs settle it. Takes the lock.
  bool unsettled(const S& sh) const {
    std::lock_guard<typename S::Lock> guard(sh.lock_);
    // Live records only: frees and markers draw stamps too, and are never
    // evicted.
    return newest_live_ >= settled_below_;
  }

  /// Room on the lists for `old_records` more deferred records and
  /// `markers` more dead markers (may throw Error(out_of_space); nothing
  /// changes then). Without periodic, none is needed.
  void reserve(std::uint64_t old_records, std::uint64_t markers) {
    if (!defer_frees_) return;
    if (old_records != 0) deferred_.reserve(old_records);
    if (markers != 0) dead_.reserve(markers);
  }
  /// Room for `n` dead markers more, whatever the mode (a file-backed store
  /// whose removals are reported keeps its markers here until the report).
  void reserve_marker(std::uint64_t n = 1) { dead_.reserve(n); }
  /// Onto the lists, in room reserved before.
  void defer_old(Location loc) noexcept { deferred_.push(loc); }
  void defer_marker(Location loc) noexcept { dead_.push(loc); }
  /// Frees `loc` at once, or (periodic) defers it as an old record or a
  /// dead marker, as a running store would (recovery). May throw before
  /// it changes anything.
  void free_or_defer_old(S& sh, Location loc) { free_or_defer(sh, deferred_, loc); }
  void free_or_defer_marker(S& sh, Location loc) { free_or_defer(sh, dead_, loc); }
  /// Every_write's recovery, when the frees cannot be made durable: the
  /// records wait on the lists as in periodic (writes are refused anyway).
  void keep_old(Location loc) { push_one(deferred_, loc); }
  void keep_marker(Location loc) { push_one(dead_, loc); }
  /// clear(): the lists emptied (their records are gone with the journal).
  void drop_all() noexcept {
    deferred_dropped_ += deferred_.size();
    deferred_.drop_front(deferred_.size());
    dead_dropped_ += dead_.size();
    dead_.drop_front(dead_.size());
  }

  /// Records waiting on the lists (the caller holds the lock).
  std::uint64_t waiting() const noexcept { return deferred_.size() + dead_.size(); }
  /// fn(Location) for every record waiting on the lists (verify()).
  template <class Fn>
  void for_each_waiting(Fn&& fn) const {
    for (std::uint64_t i = 0; i < deferred_.size(); ++i) fn(deferred_[i]);
    for (std::uint64_t i = 0; i < dead_.size(); ++i) fn(dead_[i]);
  }
  std::uint64_t mapped_bytes() const noexcept { return deferred_.mapped_bytes() + dead_.mapped_bytes(); }

 private:
  /// After a sync's msync, under the lock: the frees the sync before made
  /// (all of freed_below_'s) are on disk now; and this sync frees, next, the
  /// deferred records of every write made before it began.
  void settle(std::uint64_t begun, std::uint64_t freed_before) noexcept;
  void free_or_defer(S& sh, LocationList& list, Location loc) {
    if (!defer_frees_) return sh.free_record(loc);
    push_one(list, loc);
  }
  /// Onto `list`, room made first (may throw before anything changes).
  static void push_one(LocationList& list, Location loc) {
    list.reserve_one();
    list.push(loc);
  }
  /// Frees the first n records of `list` and drops them from it.
  static void free_front(S& sh, LocationList& list, std::uint64_t n) noexcept {
    for (std::uint64_t i = 0; i < n; ++i) sh.free_record(list[i]);
    list.drop_front(n);
  }

  const bool sync_each_;
  const bool defer_frees_;
  std::atomic<int>* const sync_error_;  // the first failed sync's errno, store-wide
  std::mutex sync_mutex_;               // one sync() of the shard at a time
  LocationList deferred_;               // old records of updates, oldest first (periodic)
  std::uint64_t deferred_dropped_ = 0;  // entries ever taken off deferred_
  LocationList dead_;                   // dead markers of removals, oldest first (periodic)
  std::uint64_t dead_dropped_ = 0;      // entries ever taken off dead_
  std::uint64_t dead_freeable_ = 0;     // dead_ entries below this may go at the next sync
  std::uint64_t freed_below_ = 0;       // see the class comment
  std::uint64_t settled_below_ = 0;
  std::uint64_t newest_live_ = 0;  // the stamp of the last live record written (or recovered)
};

template <class S>
int ShardDurability<S>::sync(S& sh, bool all) {
  const std::lock_guard<std::mutex> one_at_a_time(sync_mutex_);
  std::uint32_t lo = 0, hi = 0;
  // Entries are counted since the shard began (clear() drops some).
  std::uint64_t upto = 0;        // deferred records to free: pushed before this sync
  std::uint64_t dead_ready = 0;  // dead markers to free: older records freed by now
  std::uint64_t dead_seen = 0;   // dead markers that exist now
  bool work = false;             // anything above for the second lock
  std::uint64_t begun = 0;         // records stamped below it: written before this sync
  std::uint64_t freed_before = 0;  // freed_below_ now: its frees are in this sync's range
  {
    std::lock_guard<typename S::Lock> guard(sh.lock_);
    sh.journal_.take_dirty(lo, hi);
    begun = sh.stamp_ + 1;
    freed_before = freed_below_;
    if (all) {
      lo = 0;
      hi = sh.journal_.chunks();
    }
    upto = deferred_dropped_ + deferred_.size();
    dead_ready = dead_freeable_;
    dead_seen = dead_dropped_ + dead_.size();
    work = deferred_.size() != 0 || dead_ready > dead_dropped_ || dead_seen > dead_freeable_;
  }
  for (std::uint32_t c = lo; c < hi; ++c) {
    if (const int err = sh.journal_.sync_chunk(c)) {
      note_error(err);
      return err;
    }
  }
  if (!work) {
    if (defer_frees_) {
      std::lock_guard<typename S::Lock> guard(sh.lock_);
      settle(begun, freed_before);
    }
    return 0;
  }
  {  // (not in the other modes: their lists stay empty)
    const typename S::WriteLock guard(sh);
    settle(begun, freed_before);
    // Another sync, or clear(), may have dropped some meanwhile.
    const std::uint64_t n = upto > deferred_dropped_ ? upto - deferred_dropped_ : 0;
    free_front(sh, deferred_, n);
    deferred_dropped_ += n;
    // A dead marker goes once the key's older records it outranks were
    // freed by an earlier sync and this sync's msync made that durable.
    const std::uint64_t d = dead_ready > dead_dropped_ ? dead_ready - dead_dropped_ : 0;
    free_front(sh, dead_, d);
    dead_dropped_ += d;
    // The markers that existed when this sync began: every record older
    // than them has been freed now; the next sync's msync makes it durable.
    if (dead_seen > dead_freeable_) dead_freeable_ = dead_seen;
  }
  return 0;
}

template <class S>
void ShardDurability<S>::settle(std::uint64_t begun, std::uint64_t freed_before) noexcept {
  // After a failed msync nothing counts as settled any more: that sync's
  // range was taken off the dirty list unwritten, so a later sync would
  // not write the frees it stands for.
  if (failed()) return;
  if (freed_before > settled_below_) settled_below_ = freed_before;
  if (begun > freed_below_) freed_below_ = begun;
}

}  // namespace offheap::detail
