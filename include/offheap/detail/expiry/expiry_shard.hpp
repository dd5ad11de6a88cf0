// SPDX-License-Identifier: Apache-2.0
// A shard's expiry: records whose deadline has passed leave as
// RemovalCause::expired, found through the shard's timing wheel
// (wheel.hpp), which writers fill as they write records with deadlines.
//
// Readers never need this to be on time: a read compares the record's own
// deadline with the clock, so an expired record is absent from the moment
// its deadline passes (shard.hpp, shard/probe.hpp, walk.hpp). What the
// wheel decides is when the record's memory is freed and the removal
// listener hears of it: within one tick (1 ms) of the deadline once
// maintenance runs (the maintenance thread sleeps until the wheel's next
// event, woken by a writer that schedules an earlier one).
//
// ShardExpiry<S> owns this: a component of the shard (S), which holds one.
#pragma once

#include <offheap/detail/expiry/wheel.hpp>
#include <offheap/detail/index/index.hpp>
#include <offheap/detail/index/location.hpp>
#include <offheap/detail/journal/record.hpp>
#include <offheap/detail/memory/atomic_word.hpp>
#include <offheap/detail/memory/memory_budget.hpp>
#include <offheap/removal.hpp>
#include <offheap/stats.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace offheap::detail {

/// A shard's expiry. S is the Shard, which holds one and lets it in
/// (friend). Its state: the timing wheel, whether it tracks deadlines (a
/// writable shard; a read-only one leaves the wheel empty), whether a sweep
/// of stale entries is under way, whether a record with a deadline was
/// ever written (saved in the state file), and the count of expirations.
/// Every call runs under the shard's writer lock (expire() and rebuild()
/// take it; writers hold it for the others). The shard's time (its clock,
/// Shard::expired(), the next round it wants) is the shard's own.
template <class S>
class ShardExpiry {
 public:
  ShardExpiry(const StoreName& name, std::uint64_t now, bool tracks) : wheel_(name, now), tracks_expiry_(tracks) {}
  ShardExpiry(const ShardExpiry&) = delete;
  ShardExpiry& operator=(const ShardExpiry&) = delete;

  /// A record just written with `deadline` (not 0) at `loc`: the wheel
  /// learns it (room reserved by reserve_one()), and the maintenance
  /// thread's next wake-up comes no later than it.
  void schedule(S& sh, Location loc, std::uint64_t deadline) noexcept;
  /// Room for one more entry, before a write changes anything (may throw).
  void reserve_one() { wheel_.reserve_one(); }
  /// Shard::expire (shard.hpp says what it does). Takes the lock.
  std::uint64_t expire(S& sh, std::uint64_t now, std::uint64_t max, bool* more);
  /// For a write the memory limit refused: drops every stale entry now.
  bool sweep_all(S& sh);
  /// After an open: schedules every record with a deadline. Takes the lock.
  void rebuild(S& sh);
  /// verify()'s part: every live record with a deadline has its entry.
  std::string verify(const S& sh) const;

  /// A record left because its deadline passed (a write found it so).
  void count_expired() noexcept { ++expirations_; }
  /// Recovery met a record with a deadline; the state file's flag.
  void note_deadlines(bool had) noexcept { had_deadlines_ = had_deadlines_ || had; }
  bool had_deadlines() const noexcept { return had_deadlines_; }
  void set_had_deadlines(bool had) noexcept { had_deadlines_ = had; }
  /// clear(): the wheel emptied, as new.
  void clear(std::uint64_t now) noexcept {
    wheel_.reset(now);
    had_deadlines_ = false;
  }
  /// A sweep of stale entries is under way (the shard wants rounds now).
  bool sweeping() const noexcept { return sweeping_; }
  std::uint64_t next_event() const noexcept { return wheel_.next_event(); }
  std::uint64_t mapped_bytes() const noexcept { return wheel_.mapped_bytes(); }
  void add_stats(Stats& st) const noexcept {
    st.expirations += expirations_;
    st.expiry_entries += wheel_.size();
    st.mapped_bytes += wheel_.mapped_bytes();
  }

  /// Wheel entries expire() looks at per call while it sweeps stale ones,
  /// and the stale entries a shard may hold (beyond as many as it has
  /// records) before a sweep begins.
  static constexpr std::uint64_t kSweepSlice = 4096;
  static constexpr std::uint64_t kSweepFloor = 1024;

 private:
  ExpiryWheel wheel_;
  std::uint64_t expirations_ = 0;  // records removed because their deadline passed
  bool sweeping_ = false;          // a sweep of stale wheel entries is under way
  bool tracks_expiry_;             // writable: the wheel holds every deadline (read-only: empty)
  bool had_deadlines_ = false;     // a record with a deadline was written since the shard was
                                   // created or cleared (saved: see format::kStateDeadlines)
};

template <class S>
void ShardExpiry<S>::schedule(S& sh, Location loc, std::uint64_t deadline) noexcept {
  wheel_.schedule(deadline, loc.raw(), record::read_stamp(sh.journal_.at(loc)));
  had_deadlines_ = true;
  // Stale entries piling up (records rewritten before their deadlines):
  // due now, so that the maintenance thread's next round sweeps.
  if (wheel_.size() > 2 * sh.size() + kSweepFloor) deadline = 1;
  // seq_cst: pairs with the maintenance thread's store of its wake-up
  // time and its load of this (the due lambda of Upkeep::start, store/upkeep.hpp): one of the two
  // sees the other's store.
  if (deadline < sh.next_due_.load(std::memory_order_relaxed)) sh.next_due_.store(deadline, std::memory_order_seq_cst);
}

template <class S>
std::uint64_t ShardExpiry<S>::expire(S& sh, std::uint64_t now, std::uint64_t max, bool* more) {
  const typename S::WriteLock guard(sh);
  std::uint64_t n = 0, looked = 0;
  // Stale entries that fall due are dropped, within a bound too: writers
  // wait for this lock.
  const std::uint64_t max_looked = max > (~std::uint64_t{0} >> 4) ? ~std::uint64_t{0} : max * 16;
  bool stopped = false;
  wheel_.advance(now, [&](const ExpiryWheel::Entry& e) {
    if (looked++ == max_looked) {
      stopped = true;
      return false;  // the entry stays for the next call
    }
    const Location loc = Location::from_raw(e.loc);
    // Current only while the record at the location is live with the
    // entry's stamp, whole, and its key's slot leads there (a rewrite or a
    // removal changed the stamp or the slot: the entry is stale, dropped).
    const typename S::Held r = sh.held_record(loc, e.stamp, sh.durable_);
    if (!r.found) return true;
    if (n == max) {
      stopped = true;
      return false;  // the entry stays for the next call
    }
    std::byte* rec = sh.journal_.at(loc);
    const record::Meta m = record::read_meta(rec);
    const std::string_view key(reinterpret_cast<const char*>(rec + record::kHeaderBytes), m.key_len);
    const typename S::Slot marker = sh.removal_marker(key.size());  // may throw: the entry stays, nothing changed
    sh.policy_forget(r.slot, loc, e.stamp, r.hash, r.bytes);
    // A failed msync (every_write) is noted store-wide inside; the removal
    // stands in memory.
    (void)sh.remove_at(r.slot, loc, rec, m, key, marker, RemovalCause::expired);
    ++expirations_;
    ++n;
    return true;
  });
  // Stale entries (records rewritten or removed before their deadline)
  // piling up: swept out a slice per call until a pass is done.
  if (!sweeping_ && wheel_.size() > 2 * sh.size() + kSweepFloor) sweeping_ = true;
  if (sweeping_ && wheel_.sweep(kSweepSlice, [&](std::uint64_t loc, std::uint64_t stamp) {
        return !sh.held_record(Location::from_raw(loc), stamp, false).found;
      })) {
    sweeping_ = false;
  }
  sh.plan_next_round(now);
  if (more != nullptr) *more = stopped || sweeping_;
  return n;
}

/// For a write the memory limit refused: drops every stale entry from the
/// wheel now (under the lock), so that the entries it frees take new
/// deadlines. Returns whether it dropped any.
template <class S>
bool ShardExpiry<S>::sweep_all(S& sh) {
  const std::uint64_t before = wheel_.size();
  const auto stale = [&](std::uint64_t loc, std::uint64_t stamp) {
    return !sh.held_record(Location::from_raw(loc), stamp, false).found;
  };
  // From where a sweep in progress stopped to the end, then once round.
  while (!wheel_.sweep(~std::uint64_t{0}, stale)) {
  }
  while (!wheel_.sweep(~std::uint64_t{0}, stale)) {
  }
  sweeping_ = false;
  return wheel_.size() < before;
}

template <class S>
void ShardExpiry<S>::rebuild(S& sh) {
  const typename S::WriteLock guard(sh);
  wheel_.reset(sh.now_ms());
  // A shard that never held a deadline (saved at a clean close, or found
  // by recovery's scan) is not read at all.
  if (had_deadlines_) {
    sh.index_.for_each_full([&](std::uint64_t, Location loc) {
      if (loc.chunk() >= sh.journal_.chunks() ||
          loc.offset() + record::kMinRecord > sh.journal_.chunk_size(loc.chunk())) {
        return;  // damage: left to the readers and writers that meet it
      }
      const std::byte* rec = sh.journal_.at(loc);
      if (!record::has_deadline(load_relaxed(word_at(rec + 16)))) return;  // no deadline: nothing more to read
      // (A damaged record is left to the readers and writers that meet it.)
      if (sh.durable_ && !sh.intact(loc, rec)) return;
      const record::Meta m = record::read_meta(rec);
      const std::uint64_t deadline = record::deadline_of(rec, m, record::kHeaderBytes + m.capacity());
      if (deadline == 0) return;
      wheel_.reserve_one();  // may throw: the open fails
      wheel_.schedule(deadline, loc.raw(), record::read_stamp(rec));
    });
  }
  sh.plan_next_round(sh.now_ms());
}

/// verify()'s part for expiry (under the lock): every live record with a
/// deadline has an entry in the wheel with its location, stamp and
/// deadline (other entries are stale: dropped by their stamps).
template <class S>
std::string ShardExpiry<S>::verify(const S& sh) const {
  if (!tracks_expiry_) return {};
  std::vector<std::tuple<std::uint64_t, std::uint64_t, std::uint64_t>> entries;
  entries.reserve(wheel_.size());
  wheel_.for_each([&](const ExpiryWheel::Entry& e) { entries.emplace_back(e.loc, e.stamp, e.deadline); });
  if (entries.size() != wheel_.size()) {
    return sh.journal_.name() + ": the expiry wheel counts " + std::to_string(wheel_.size()) +
           " entries and holds " + std::to_string(entries.size());
  }
  std::sort(entries.begin(), entries.end());
  std::string problem;
  sh.index_.for_each_full([&](std::uint64_t, Location loc) {
    if (!problem.empty()) return;
    const std::byte* rec = sh.journal_.at(loc);
    const record::Meta m = record::read_meta(rec);
    const std::uint64_t deadline = record::deadline_of(rec, m, record::kHeaderBytes + m.capacity());
    if (deadline == 0) return;
    if (!std::binary_search(entries.begin(), entries.end(),
                            std::make_tuple(loc.raw(), record::read_stamp(rec), deadline))) {
      problem = sh.journal_.name() + ": chunk " + std::to_string(loc.chunk()) + " offset " +
                std::to_string(loc.offset()) + ": a record with a deadline (" + std::to_string(deadline) +
                ") has no entry in the expiry wheel";
    }
  });
  return problem;
}

}  // namespace offheap::detail
