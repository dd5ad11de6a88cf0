// SPDX-License-Identifier: Apache-2.0
// The removal listener's side of a shard (Options::on_removal): a removed
// record is retired, not freed, until the listener has seen it.
//
//   remove / replace / evict ──retire()──> reports_ (mapped FIFO, oldest first)
//        (under the writer lock)                 │
//   report(): a batch off the front (lock) ──> fn(key, value, cause) for each
//             (no lock: the records are whole and nobody writes them)
//        ──> finish() for each (lock): freed as this mode frees
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
// RemovalReports<S> owns this: a component of the shard (S), which holds
// one.
//
// clear() waits for a batch in flight (report_mutex_) and drops what is
// still queued, unreported. The listener runs on the thread that calls
// report() with a thread-local mark naming its store, which that store
// checks to refuse clear(), close() and verify() from inside it (they would
// wait for themselves), and to make maintain() and sync() return at once.
// Whatever the periodic lists need for a record is mapped when it is
// retired (reserve()), so that freeing a batch cannot fail halfway
// (a record in no list would never be freed, and would come back after a
// crash) and a report never needs room the memory limit may refuse.
#pragma once

#include <offheap/detail/index/location.hpp>
#include <offheap/detail/journal/record.hpp>
#include <offheap/detail/memory/mapped_fifo.hpp>
#include <offheap/detail/memory/memory_budget.hpp>
#include <offheap/removal.hpp>
#include <offheap/stats.hpp>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <string_view>

namespace offheap::detail {

/// The store whose removal listener this thread is inside, or null.
inline thread_local const void* t_in_removal_listener = nullptr;

/// A removed record waiting for its report: its location with the cause
/// in the low 3 bits (always 0 in a location), and its dead marker's
/// location (file-backed) or none.
struct RetiredRecord {
  std::uint64_t rec;
  std::uint64_t marker;
  Location loc() const noexcept { return Location::from_raw(rec & ~Location::kSlotBits); }
  RemovalCause cause() const noexcept { return static_cast<RemovalCause>(rec & Location::kSlotBits); }
};

/// The most records one report() hands the listener.
inline constexpr std::uint64_t kRemovalReportBatch = 256;

/// A shard's removed records on their way to the listener. S is the Shard,
/// which holds one and lets it in (friend). Its state: whether reports are
/// on (Options::on_removal), the queue, the mutex a batch holds, the
/// retired records' count and bytes (queued or in a batch: removed, not yet
/// freed), and its figures. Under the shard's writer lock, except report()'s
/// listener calls and the queue's mutex.
template <class S>
class RemovalReports {
 public:
  RemovalReports(const StoreName& name, bool on) : on_(on), reports_(name, "the removal listener's queue") {}
  RemovalReports(const RemovalReports&) = delete;
  RemovalReports& operator=(const RemovalReports&) = delete;

  /// Options::on_removal is set: removed records are retired, not freed.
  bool on() const noexcept { return on_; }
  /// Room for one more retired record everywhere it goes (see below).
  void reserve(S& sh);
  /// A removed record (not freed) joins the queue (room reserved).
  void retire(Location loc, Location marker, RemovalCause cause, std::uint64_t bytes) noexcept {
    reports_.push_back(RetiredRecord{loc.raw() | static_cast<std::uint64_t>(cause), marker.raw()});  // reserved
    ++retired_records_;
    retired_bytes_ += bytes;
  }
  /// The report just queued (a write relabels its cause: cache/cache_host.hpp).
  RetiredRecord* last() noexcept { return &reports_.back(); }
  /// Shard::report (shard.hpp says what it does).
  template <class Fn>
  std::uint64_t report(S& sh, Fn& fn, std::uint64_t max, const void* store, bool* busy);
  /// Removed records waiting for report() (takes the lock).
  std::uint64_t pending(const S& sh) const;
  /// Removed records not yet freed, and their journal bytes.
  std::uint64_t retired_records() const noexcept { return retired_records_; }
  std::uint64_t retired_bytes() const noexcept { return retired_bytes_; }
  /// Held by report() through a batch; clear() and verify() take it first.
  std::mutex& mutex() const noexcept { return report_mutex_; }
  /// clear(), holding mutex() and the lock: what waits is dropped unreported.
  void drop_all() noexcept {
    unreported_ += reports_.size();
    reports_.clear();
    retired_records_ = 0;
    retired_bytes_ = 0;
  }
  /// verify(): the queue, oldest first.
  template <class F>
  void for_each(F&& fn) const {
    reports_.for_each(fn);
  }
  std::uint64_t queued() const noexcept { return reports_.size(); }
  std::uint64_t mapped_bytes() const noexcept { return reports_.mapped_bytes(); }
  void add_stats(Stats& st) const noexcept {
    st.removals_reported += reported_;
    st.removals_pending += reports_.size();
    st.removals_unreported += unreported_;
    st.retired_records += retired_records_;
    st.retired_record_bytes += retired_bytes_;
    st.listener_errors += listener_errors_;
    st.mapped_bytes += reports_.mapped_bytes();
  }

  static constexpr std::uint64_t kReportBatch = kRemovalReportBatch;

 private:
  /// A reported record freed as the store's mode frees a removed one.
  void finish(S& sh, const RetiredRecord& r) noexcept;

  bool on_;
  MappedFifo<RetiredRecord> reports_;  // oldest first
  mutable std::mutex report_mutex_;    // held by report() through a batch; clear() and verify() wait for it
  std::uint64_t retired_records_ = 0;  // removed, not yet freed: queued or in a batch
  std::uint64_t retired_bytes_ = 0;    // their journal bytes (header, key, value, padding)
  std::uint64_t reported_ = 0;
  std::uint64_t unreported_ = 0;       // dropped by clear()
  std::uint64_t listener_errors_ = 0;
};

/// Room for one more retired record everywhere it goes until it is freed:
/// the queue, and (file-backed) the lists that finish() fills, for
/// it and for every record queued or in a batch. A report then never maps:
/// at Options::memory_limit_bytes, a report that had to map room could not
/// free the room it lacked (the limit refused the maintenance thread's
/// reports while the writer waited for them). Throws Error(out_of_space),
/// nothing changed, if it cannot.
template <class S>
void RemovalReports<S>::reserve(S& sh) {
  reports_.reserve_one();
  const std::uint64_t coming = retired_records_ + 1;  // queued or in a batch, and this one
  if (sh.durable_) sh.durability_.reserve_marker(coming);
  sh.durability_.reserve(coming, 0);
}

template <class S>
template <class Fn>
std::uint64_t RemovalReports<S>::report(S& sh, Fn& fn, std::uint64_t max, const void* store, bool* busy) {
  struct Item {
    RetiredRecord r;
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
    const typename S::WriteLock guard(sh);
    n = std::min({max, kReportBatch, reports_.size()});
    // Room on the lists that finish() fills, before anything leaves
    // the queue: reserve() made it for every retired record, so
    // this maps nothing (may throw: nothing changed).
    if (n != 0 && sh.durable_) sh.durability_.reserve_marker(n);
    sh.durability_.reserve(n, 0);
    for (std::uint64_t i = 0; i < n; ++i) {
      const RetiredRecord r = reports_.front();
      reports_.pop_front();
      const std::byte* rec = sh.journal_.at(r.loc());
      const record::Meta m = record::read_meta(rec);
      batch[i] = Item{r, rec, m.value_len, m.key_len};
    }
  }
  if (n == 0) return 0;
  // The records' bytes were written under the lock just released (which
  // orders them before these reads) and nobody writes them until
  // finish() frees them.
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
  const typename S::WriteLock guard(sh);
  listener_errors_ += errors;
  for (std::uint64_t i = 0; i < n; ++i) finish(sh, batch[i].r);  // reserved above: cannot fail
  return n;
}

template <class S>
void RemovalReports<S>::finish(S& sh, const RetiredRecord& r) noexcept {
  const Location loc = r.loc();
  const Location marker = Location::from_raw(r.marker);
  std::byte* rec = sh.journal_.at(loc);
  const record::Meta m = record::read_meta(rec);
  const std::uint64_t bytes = record::kHeaderBytes + m.capacity();
  if (sh.durability_.defers()) {
    // As a periodic removal would have at once: the record is freed by the
    // next sync (its successor or marker is on disk by then), the marker
    // two syncs later (durability.hpp).
    sh.durability_.defer_old(loc);  // reserved by report()
    if (!marker.is_none()) sh.durability_.defer_marker(marker);
  } else {
    sh.release(loc, rec, m.capacity(), m.prev_free());
    int err = 0;
    if (sh.durability_.sync_each()) err = sh.journal_.sync_range(loc, record::kHeaderBytes);
    // The marker goes once the record's free is on disk (every_write), so
    // that a power loss finds one or the other; after a failed sync it waits
    // on the dead-marker list as recovery leaves it (writes are refused from
    // now on).
    if (!marker.is_none() && err != 0) {
      sh.durability_.defer_marker(marker);  // reserved by report()
    } else if (!marker.is_none()) {
      std::byte* mrec = sh.journal_.at(marker);
      const record::Meta mm = record::read_meta(mrec);
      sh.release(marker, mrec, mm.capacity(), mm.prev_free());
      if (sh.durability_.sync_each()) err = sh.journal_.sync_range(marker, record::kHeaderBytes);
    }
    if (err != 0) sh.note_sync_error(err);
  }
  --retired_records_;
  retired_bytes_ -= bytes;
  ++reported_;
}

template <class S>
std::uint64_t RemovalReports<S>::pending(const S& sh) const {
  const std::lock_guard<typename S::Lock> guard(sh.lock_);
  return reports_.size();
}

}  // namespace offheap::detail
