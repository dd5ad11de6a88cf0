// SPDX-License-Identifier: Apache-2.0
// The removal listener's side of a shard (Options::on_removal): a removed
// record is retired, not freed, until the listener has seen it.
//
//   remove / replace / evict ──retire()──> reports_ (mapped FIFO, oldest first)
//        (under the writer lock)                 │
//   report(): a batch off the front (lock) ──> fn(key, value, cause) for each
//             (no lock: the records are whole and nobody writes them)
//        ──> finish_report() for each (lock): freed as this mode frees
//
// A retired record is out of the index, so no reader or writer reaches it
// any more (a reader that still holds its location is turned away by its
// slot check, as after any removal); its bytes stay as they are, since its
// space is in no free list and updates do not rewrite records in place
// while reports are on. File-backed stores keep a crash from bringing a
// retired record back: a removal writes a dead marker (as periodic does),
// and a replaced record is outranked by its successor's higher stamp.
// After its report a record is freed as the store's mode frees a removed
// one: periodic hands it (and its marker) to the lists that syncs free;
// every_write frees the record, syncs that, then frees the marker; the
// others free both at once.
//
// clear() waits for a batch in flight (report_mutex_) and drops what is
// still queued, unreported. The listener runs on the thread that calls
// report() with a thread-local mark naming its store, which that store
// checks to refuse clear(), close() and verify() from inside it (they would
// wait for themselves), and to make maintain() and sync() return at once.
// Whatever the periodic lists need for a record is mapped when it is
// retired (reserve_retire()), so that freeing a batch cannot fail halfway
// (a record in no list would never be freed, and would come back after a
// crash) and a report never needs room the memory limit may refuse.
#pragma once

#include <offheap/detail/shard/shard.hpp>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <string_view>

namespace offheap::detail {

/// The store whose removal listener this thread is inside, or null.
inline thread_local const void* t_in_removal_listener = nullptr;

/// Room for one more retired record everywhere it goes until it is freed:
/// the queue, and (file-backed) the lists that finish_report() fills, for
/// it and for every record queued or in a batch. A report then never maps:
/// at Options::memory_limit_bytes, a report that had to map room could not
/// free the room it lacked (the limit refused the maintenance thread's
/// reports while the writer waited for them). Throws Error(out_of_space),
/// nothing changed, if it cannot.
template <class P>
void Shard<P>::reserve_retire() {
  reports_.reserve_one();
  const std::uint64_t coming = retired_records_ + 1;  // queued or in a batch, and this one
  if (durable_) dead_.reserve(coming);
  if (defer_frees_) deferred_.reserve(coming);
}

template <class P>
void Shard<P>::retire(Location loc, Location marker, RemovalCause cause, std::uint64_t bytes) noexcept {
  reports_.push_back(Retired{loc.raw() | static_cast<std::uint64_t>(cause), marker.raw()});  // reserved
  ++retired_records_;
  retired_bytes_ += bytes;
}

template <class P>
template <class Fn>
std::uint64_t Shard<P>::report(Fn& fn, std::uint64_t max, const void* store, bool* busy) {
  struct Item {
    Retired r;
    const std::byte* rec;
    std::uint32_t value_len;
    std::uint16_t key_len;
  };
  Item batch[kReportBatch];
  std::unique_lock<std::mutex> one_batch(report_mutex_, std::defer_lock);
  if (busy == nullptr) {
    one_batch.lock();
  } else if (!one_batch.try_lock()) {
    *busy = true;  // another thread reports this shard (or this one, further out)
    return 0;
  }
  std::uint64_t n = 0;
  {
    const WriteLock guard(*this);
    n = std::min({max, kReportBatch, reports_.size()});
    // Room on the lists that finish_report() fills, before anything leaves
    // the queue: reserve_retire() made it for every retired record, so
    // this maps nothing (may throw: nothing changed).
    if (n != 0 && durable_) dead_.reserve(n);
    if (n != 0 && defer_frees_) deferred_.reserve(n);
    for (std::uint64_t i = 0; i < n; ++i) {
      const Retired r = reports_.front();
      reports_.pop_front();
      const std::byte* rec = journal_.at(r.loc());
      const record::Meta m = record::read_meta(rec);
      batch[i] = Item{r, rec, m.value_len, m.key_len};
    }
  }
  if (n == 0) return 0;
  // The records' bytes were written under the lock just released (which
  // orders them before these reads) and nobody writes them until
  // finish_report() frees them.
  std::uint64_t errors = 0;
  const void* outer = t_in_removal_listener;  // another store's listener may have called this one
  t_in_removal_listener = store;
  for (std::uint64_t i = 0; i < n; ++i) {
    const Item& it = batch[i];
    const std::string_view key(reinterpret_cast<const char*>(it.rec + record::kHeaderBytes), it.key_len);
    const std::string_view value(record::value_bytes(it.rec, it.key_len), it.value_len);
    try {
      fn(key, value, it.r.cause());
    } catch (...) {
      ++errors;
    }
  }
  t_in_removal_listener = outer;
  const WriteLock guard(*this);
  listener_errors_ += errors;
  for (std::uint64_t i = 0; i < n; ++i) finish_report(batch[i].r);  // reserved above: cannot fail
  return n;
}

template <class P>
void Shard<P>::finish_report(const Retired& r) noexcept {
  const Location loc = r.loc();
  const Location marker = Location::from_raw(r.marker);
  std::byte* rec = journal_.at(loc);
  const record::Meta m = record::read_meta(rec);
  const std::uint64_t bytes = record::kHeaderBytes + m.capacity();
  if (defer_frees_) {
    // As a periodic removal would have at once: the record is freed by the
    // next sync (its successor or marker is on disk by then), the marker
    // two syncs later (durability.hpp).
    deferred_.push(loc);  // reserved by report()
    if (!marker.is_none()) dead_.push(marker);
  } else {
    release(loc, rec, m.capacity(), m.prev_free());
    int err = 0;
    if (sync_each_) err = journal_.sync_range(loc, record::kHeaderBytes);
    // The marker goes once the record's free is on disk (every_write), so
    // that a power loss finds one or the other; after a failed sync it waits
    // on the dead-marker list as recovery leaves it (writes are refused from
    // now on).
    if (!marker.is_none() && err != 0) {
      dead_.push(marker);  // reserved by report()
    } else if (!marker.is_none()) {
      std::byte* mrec = journal_.at(marker);
      const record::Meta mm = record::read_meta(mrec);
      release(marker, mrec, mm.capacity(), mm.prev_free());
      if (sync_each_) err = journal_.sync_range(marker, record::kHeaderBytes);
    }
    if (err != 0) note_sync_error(err);
  }
  --retired_records_;
  retired_bytes_ -= bytes;
  ++reported_;
}

template <class P>
std::uint64_t Shard<P>::reports_pending() const {
  const std::lock_guard<Lock> guard(lock_);
  return reports_.size();
}

}  // namespace offheap::detail
