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
#pragma once

#include <offheap/detail/shard/shard.hpp>

#include <cstdint>
#include <mutex>
#include <string>

namespace offheap::detail {

/// Writes the chunks written since the last sync (`all`: every chunk) to
/// their files and waits. Returns 0, or the errno of the first failure,
/// which is also noted store-wide. Takes the writer lock only to collect
/// them. Then frees the old records of updates made before the call
/// (periodic), whose successors are now durable.
/// Syncs of a shard run one at a time (sync_mutex_): a sync that found
/// the dirty range taken by another one still in its msync would return
/// (and free records) before that data is on disk.
template <class P>
int Shard<P>::sync(bool all) {
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
    std::lock_guard<Lock> guard(lock_);
    journal_.take_dirty(lo, hi);
    begun = stamp_ + 1;
    freed_before = freed_below_;
    if (all) {
      lo = 0;
      hi = journal_.chunks();
    }
    upto = deferred_dropped_ + deferred_.size();
    dead_ready = dead_freeable_;
    dead_seen = dead_dropped_ + dead_.size();
    work = deferred_.size() != 0 || dead_ready > dead_dropped_ || dead_seen > dead_freeable_;
  }
  for (std::uint32_t c = lo; c < hi; ++c) {
    if (const int err = journal_.sync_chunk(c)) {
      note_sync_error(err);
      return err;
    }
  }
  if (!work) {
    if (defer_frees_) {
      std::lock_guard<Lock> guard(lock_);
      settle(begun, freed_before);
    }
    return 0;
  }
  {  // (not in the other modes: their lists stay empty)
    const WriteLock guard(*this);
    settle(begun, freed_before);
    // Another sync, or clear(), may have dropped some meanwhile.
    const std::uint64_t n = upto > deferred_dropped_ ? upto - deferred_dropped_ : 0;
    free_front(deferred_, n);
    deferred_dropped_ += n;
    // A dead marker goes once the key's older records it outranks were
    // freed by an earlier sync and this sync's msync made that durable.
    const std::uint64_t d = dead_ready > dead_dropped_ ? dead_ready - dead_dropped_ : 0;
    free_front(dead_, d);
    dead_dropped_ += d;
    // The markers that existed when this sync began: every record older
    // than them has been freed now; the next sync's msync makes it durable.
    if (dead_seen > dead_freeable_) dead_freeable_ = dead_seen;
  }
  return 0;
}

/// After a sync's msync, under the lock: the frees the sync before made
/// (all of freed_below_'s) are on disk now; and this sync frees, next, the
/// deferred records of every write made before it began.
template <class P>
void Shard<P>::settle(std::uint64_t begun, std::uint64_t freed_before) noexcept {
  // After a failed msync nothing counts as settled any more: that sync's
  // range was taken off the dirty list unwritten, so a later sync would
  // not write the frees it stands for.
  if (sync_error_ != nullptr && sync_error_->load(std::memory_order_relaxed) != 0) return;
  if (freed_before > settled_below_) settled_below_ = freed_before;
  if (begun > freed_below_) freed_below_ = begun;
}

template <class P>
bool Shard<P>::unsettled() const {
  std::lock_guard<Lock> guard(lock_);
  // Live records only: frees and markers draw stamps too, and are never
  // evicted.
  return newest_live_ >= settled_below_;
}

template <class P>
void Shard<P>::free_record(Location loc) noexcept {
  std::byte* rec = journal_.at(loc);
  const record::Meta m = record::read_meta(rec);
  release(loc, rec, m.capacity(), m.prev_free());
}

template <class P>
void Shard<P>::free_or_defer(LocationList& list, Location loc) {
  if (!defer_frees_) return free_record(loc);
  list.reserve_one();
  list.push(loc);
}

template <class P>
void Shard<P>::free_front(LocationList& list, std::uint64_t n) noexcept {
  for (std::uint64_t i = 0; i < n; ++i) free_record(list[i]);
  list.drop_front(n);
}

template <class P>
std::uint64_t Shard<P>::deferred_records() const {
  std::lock_guard<Lock> guard(lock_);
  return deferred_.size() + dead_.size();
}

/// Records the first failed sync of the store (later writes are refused).
template <class P>
void Shard<P>::note_sync_error(int err) noexcept {
  if (sync_error_ == nullptr) return;
  int expected = 0;
  sync_error_->compare_exchange_strong(expected, err, std::memory_order_relaxed);
}

template <class P>
[[noreturn, gnu::cold]] void Shard<P>::sync_failed(int err) {
  note_sync_error(err);
  throw Error(errc_of(err), journal_.name() + ": writing records to disk (msync) failed: " +
                                errno_text(err) +
                                "; the store refuses writes from now on (reopen it to recover)");
}

}  // namespace offheap::detail
