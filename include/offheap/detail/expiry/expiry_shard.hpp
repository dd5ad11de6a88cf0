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
#pragma once

#include <offheap/detail/shard/shard.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace offheap::detail {

template <class P>
void Shard<P>::schedule_expiry(Location loc, std::uint64_t deadline) noexcept {
  wheel_.schedule(deadline, loc.raw(), record::read_stamp(journal_.at(loc)));
  had_deadlines_ = true;
  // Stale entries piling up (records rewritten before their deadlines):
  // due now, so that the maintenance thread's next round sweeps.
  if (wheel_.size() > 2 * size() + kSweepFloor) deadline = 1;
  // seq_cst: pairs with the maintenance thread's store of its wake-up
  // time and its load of this (OffHeapStore's due()): one of the two
  // sees the other's store.
  if (deadline < next_due_.load(std::memory_order_relaxed)) next_due_.store(deadline, std::memory_order_seq_cst);
}

template <class P>
std::uint64_t Shard<P>::expire(std::uint64_t now, std::uint64_t max, bool* more) {
  const WriteLock guard(*this);
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
    const Held r = held_record(loc, e.stamp, durable_);
    if (!r.found) return true;
    if (n == max) {
      stopped = true;
      return false;  // the entry stays for the next call
    }
    std::byte* rec = journal_.at(loc);
    const record::Meta m = record::read_meta(rec);
    const std::string_view key(reinterpret_cast<const char*>(rec + record::kHeaderBytes), m.key_len);
    const Slot marker = removal_marker(key.size());  // may throw: the entry stays, nothing changed
    policy_forget(r.slot, loc, e.stamp, r.hash, r.bytes);
    // A failed msync (every_write) is noted store-wide inside; the removal
    // stands in memory.
    (void)remove_at(r.slot, loc, rec, m, key, marker, RemovalCause::expired);
    ++expirations_;
    ++n;
    return true;
  });
  // Stale entries (records rewritten or removed before their deadline)
  // piling up: swept out a slice per call until a pass is done.
  if (!sweeping_ && wheel_.size() > 2 * size() + kSweepFloor) sweeping_ = true;
  if (sweeping_ && wheel_.sweep(kSweepSlice, [&](std::uint64_t loc, std::uint64_t stamp) {
        return !held_record(Location::from_raw(loc), stamp, false).found;
      })) {
    sweeping_ = false;
  }
  plan_next_round(now);
  if (more != nullptr) *more = stopped || sweeping_;
  return n;
}

/// For a write the memory limit refused: drops every stale entry from the
/// wheel now (under the lock), so that the entries it frees take new
/// deadlines. Returns whether it dropped any.
template <class P>
bool Shard<P>::sweep_wheel() {
  const std::uint64_t before = wheel_.size();
  const auto stale = [&](std::uint64_t loc, std::uint64_t stamp) {
    return !held_record(Location::from_raw(loc), stamp, false).found;
  };
  // From where a sweep in progress stopped to the end, then once round.
  while (!wheel_.sweep(~std::uint64_t{0}, stale)) {
  }
  while (!wheel_.sweep(~std::uint64_t{0}, stale)) {
  }
  sweeping_ = false;
  return wheel_.size() < before;
}

template <class P>
void Shard<P>::rebuild_expiry() {
  const WriteLock guard(*this);
  wheel_.reset(now_ms());
  // A shard that never held a deadline (saved at a clean close, or found
  // by recovery's scan) is not read at all.
  if (had_deadlines_) {
    index_.for_each_full([&](std::uint64_t, Location loc) {
      if (loc.chunk() >= journal_.chunks() ||
          loc.offset() + record::kMinRecord > journal_.chunk_size(loc.chunk())) {
        return;  // damage: left to the readers and writers that meet it
      }
      const std::byte* rec = journal_.at(loc);
      if ((load_relaxed(word_at(rec + 16)) >> 32) == 0) return;  // no deadline: nothing more to read
      // (A damaged record is left to the readers and writers that meet it.)
      if (durable_ && !intact(loc, rec)) return;
      const record::Meta m = record::read_meta(rec);
      const std::uint64_t deadline = record::deadline_of(rec, m, record::kHeaderBytes + m.capacity());
      if (deadline == 0) return;
      wheel_.reserve_one();  // may throw: the open fails
      wheel_.schedule(deadline, loc.raw(), record::read_stamp(rec));
    });
  }
  plan_next_round(now_ms());
}

/// verify()'s part for expiry (under the lock): every live record with a
/// deadline has an entry in the wheel with its location, stamp and
/// deadline (other entries are stale: dropped by their stamps).
template <class P>
std::string Shard<P>::verify_expiry() const {
  if (!tracks_expiry_) return {};
  std::vector<std::tuple<std::uint64_t, std::uint64_t, std::uint64_t>> entries;
  entries.reserve(wheel_.size());
  wheel_.for_each([&](const ExpiryWheel::Entry& e) { entries.emplace_back(e.loc, e.stamp, e.deadline); });
  if (entries.size() != wheel_.size()) {
    return journal_.name() + ": the expiry wheel counts " + std::to_string(wheel_.size()) +
           " entries and holds " + std::to_string(entries.size());
  }
  std::sort(entries.begin(), entries.end());
  std::string problem;
  index_.for_each_full([&](std::uint64_t, Location loc) {
    if (!problem.empty()) return;
    const std::byte* rec = journal_.at(loc);
    const record::Meta m = record::read_meta(rec);
    const std::uint64_t deadline = record::deadline_of(rec, m, record::kHeaderBytes + m.capacity());
    if (deadline == 0) return;
    if (!std::binary_search(entries.begin(), entries.end(),
                            std::make_tuple(loc.raw(), record::read_stamp(rec), deadline))) {
      problem = journal_.name() + ": chunk " + std::to_string(loc.chunk()) + " offset " +
                std::to_string(loc.offset()) + ": a record with a deadline (" + std::to_string(deadline) +
                ") has no entry in the expiry wheel";
    }
  });
  return problem;
}

}  // namespace offheap::detail
