// SPDX-License-Identifier: Apache-2.0
// A shard's writes, under its writer lock: write() (upsert, insert,
// replace, compare-and-replace), erase() and clear(), and the removal they share
// (remove_at, with the dead marker removal_marker() makes room for).
// Every path makes room for what it may need (the policy's node, a list
// entry, a record) before it changes anything, so a failure leaves the
// shard as it was; an update's old record is freed, deferred (periodic) or
// retired for the removal listener, depending on the mode.
//
// And the atomic read-modify-write (Shard::compute): the key's current
// value and the decision on it, taken and applied under one hold of the
// writer lock, so that no other write of the key comes in between; and the
// batches of writes and removals that take the lock once for many keys.
#pragma once

#include <offheap/detail/shard/shard.hpp>
#include <offheap/value_type.hpp>

#include <cstdint>
#include <cstring>
#include <string_view>

namespace offheap::detail {

/// Writes key -> value into a slot allocate() returned, with its checksum
/// in file-backed stores and its deadline (0: none).
template <class P>
inline void Shard<P>::write_record(const Slot& s, std::string_view key, std::string_view value,
                                   std::uint8_t type, record::State state, std::uint64_t deadline) noexcept {
  const std::uint64_t stamp = next_stamp();
  std::uint64_t word2 = 0;
  if (durable_) {
    const std::uint64_t slack = (s.capacity - record::payload_for(key.size(), value.size())) / 8;
    const record::Meta m{static_cast<std::uint32_t>(value.size()),
                         static_cast<std::uint16_t>(key.size()),
                         record::Meta::make_flags(state, slack, s.prev_free, 0), type};
    word2 = record::checksum_of(crc_seed_, stamp, m.encode(), s.loc, key, value, deadline);
    journal_.mark_dirty(s.loc.chunk());
  }
  record::write_live(s.rec, stamp, key, value, type, s.capacity, s.prev_free, 0, word2, state, deadline);
  if (state == record::State::live) durability_.wrote_live(stamp);
  journal_.publish_tail();  // after the record: see Journal::publish_tail
}

template <class P>
Computed Shard<P>::write(std::string_view key, std::uint64_t h, std::string_view value, std::uint8_t type,
                         Mode mode, std::string_view expected, std::uint64_t deadline, const ValueFill* fill) {
  const WriteLock guard(*this);
  // The key's look, when the short path made it (else write_locked() does).
  Index::Found looked{};
  bool have_look = false;
  if constexpr (kInPlace && !kEvicts) {
    if ((mode == Mode::upsert || mode == Mode::replace) && fill == nullptr && deadline == 0) {
      const InPlace r = overwrite_in_place(key, h, value, type, looked);
      if (r == InPlace::done) [[likely]] return Computed::updated;
      have_look = r == InPlace::looked;
    }
  }
  // Bounds what one write may evict or sweep for the limit when that does
  // not bring the room it lacks.
  std::uint64_t rounds = 0;
  bool evicted_for_wheel = false;
  const OwnKey own(*this);
  KeySeen& seen = own.seen();
  for (;;) {
    try {
      return write_locked(key, h, value, type, mode, expected, deadline, seen, fill, have_look ? &looked : nullptr);
    } catch (const LimitReached& e) {
      // (write_locked() throws only before it changes anything, and the
      // key itself may have been evicted since its look: it goes on with
      // the decision taken then.)
      const std::size_t n = fill != nullptr ? fill->size : value.size();
      if (!room_for_retry(e, record::payload_for(key.size(), n, deadline != 0), rounds,
                          evicted_for_wheel)) {
        throw;
      }
    }
  }
}

template <class P>
typename Shard<P>::InPlace Shard<P>::overwrite_in_place(std::string_view key, std::uint64_t h,
                                                        std::string_view value, std::uint8_t type,
                                                        Index::Found& f) {
  // What write_locked() would do in this case, less what does not apply:
  // no migration step due, no listener to retire the old record for, no
  // checksum, no deadline on either side (so nothing expired, nothing to
  // schedule), no policy to tell. (find_for_write() is find_intact() here:
  // the store is anonymous.)
  if (durable_ || removals_.on() || index_.migrating()) return InPlace::not_looked;
  std::byte* rec = nullptr;
  f = find_for_write(key, h, &rec);
  if (!f.found) return InPlace::looked;  // an insert: write_locked() goes on from this look
  const record::Meta m = record::read_meta(rec);
  if (record::deadline_of(rec, m, record::kHeaderBytes + m.capacity()) != 0) return InPlace::looked;
  const std::uint64_t cap = m.capacity();
  const std::uint64_t need = record::payload_for(key.size(), value.size());
  // A value that does not fit, or leaves a remainder to free
  // (rewrite_in_place()): the general path.
  if (need > cap || cap - need >= record::kMinRecord) return InPlace::looked;
  ++replaced_;
  record::rewrite_value(rec, next_stamp(), key, value, type, cap);
  key_value_bytes_ += value.size();
  key_value_bytes_ -= m.value_len;
  ++puts_;
  return InPlace::done;
}

template <class P>
bool Shard<P>::room_for_retry(const LimitReached& e, std::uint64_t need, std::uint64_t& rounds,
                              bool& evicted_for_wheel) {
  // Options::memory_limit_bytes refused a mapping (a chunk for the record,
  // a policy segment, expiry wheel nodes): make room, then the caller
  // tries again from the start.
  if (++rounds > 16) return false;
  if (e.sweep_helps) {
    // The wheel's nodes: first the entries of records gone since (they
    // stay until they fall due or a sweep drops them); then, in a cache,
    // one round of evictions, whose entries the next sweep drops (if the
    // records had deadlines: else the write fails).
    if (expiry_.sweep_all(*this)) return true;
    if constexpr (kEvicts) {
      if (!evicted_for_wheel) {
        evicted_for_wheel = true;
        const std::uint64_t evicted = cache_.evictions();
        (void)evict_for_room(0, 1);
        if (cache_.evictions() != evicted) return true;
      }
    }
    return false;
  }
  if constexpr (kEvicts) {
    if (e.evicting_helps && evict_for_room(record::kHeaderBytes + need, rounds)) return true;
  }
  return false;
}

/// The write's decision is taken on the key as its first look under this
/// hold of the lock finds it, before any room is made: insert returns at
/// once if the key is there, replace if it is not, replace_if if its value
/// differs. The room then made may evict the key's own record; the write
/// goes on as decided, and that removal is reported as what the write
/// made it (replaced, or expired), not as an eviction (own_key_done).
template <class P>
Computed Shard<P>::write_locked(std::string_view key, std::uint64_t h, std::string_view value,
                                std::uint8_t type, Mode mode, std::string_view expected,
                                std::uint64_t deadline, KeySeen& seen, const ValueFill* fill,
                                const Index::Found* looked) {
  // A migration's step first: slot numbers found below stay valid for
  // the rest of the write (no step or growth comes between).
  if (index_.migrating()) [[unlikely]] IndexGrowth<Shard>::migrate_index(*this);
  const std::uint64_t need =
      record::payload_for(key.size(), fill != nullptr ? fill->size : value.size(), deadline != 0);
  Index::Found f{};
  const bool fresh = !seen.looked;
  if (fresh) {
    if (looked != nullptr) {
      f = *looked;  // write()'s short path looked, under this hold of the lock
      note_key(f, seen);
    } else {
      f = look_at_key(key, h, seen);
    }
    // A record whose deadline has passed is absent: insert writes over it
    // (it leaves as expired), replace finds nothing to replace.
    if (seen.present() ? mode == Mode::insert : (mode == Mode::replace || mode == Mode::replace_if)) {
      return Computed::unchanged;
    }
    if (mode == Mode::replace_if) {
      const std::byte* rec = journal_.at(Location::from_raw(seen.loc));
      const record::Meta m = record::read_meta(rec);
      if (!(m.value_len == expected.size() &&
            std::memcmp(record::value_bytes(rec, m.key_len), expected.data(), expected.size()) == 0)) {
        return Computed::unchanged;
      }
    }
  }
  // A record evicted for this write's room, kept for it (space.hpp,
  // Handover): taken by allocate() below, else freed on the way out.
  [[maybe_unused]] const HandoverGuard handover(*this);
  if constexpr (kEvicts) {
    // (Anonymous, no listener: where the removal would free it at once.)
    if (!durable_ && !removals_.on()) handover_.want = need;
    make_room(record::kHeaderBytes + need, &seen);  // may evict the key's own record
    handover_.want = 0;
    reserve_policy();  // may throw; nothing has changed yet
  }
  if (deadline != 0) expiry_.reserve_one();  // may throw; nothing has changed yet
  // The slot again if the look was an earlier try's, or the room made
  // evicted the key's own record. (Evictions of other keys only empty
  // slots: the key's slot, or the free one found for it, stays as found.)
  if (!fresh || seen.evicted) f = find_intact(key, h);
  if (f.found) {
    const Location old = index_.location(f.slot);
    std::byte* rec = journal_.at(old);
    const record::Meta m = record::read_meta(rec);
    const std::uint64_t cap = m.capacity();
    const bool gone = seen.expired;
    [[maybe_unused]] const eviction::Handle before{old.raw(), record::read_stamp(rec), h,
                                                   record::kHeaderBytes + m.capacity()};
    const RemovalCause cause = gone ? RemovalCause::expired : RemovalCause::replaced;
    int err = 0;
    if (kInPlace && !durable_ && !removals_.on() && need <= cap && fill == nullptr) {
      if (gone) expiry_.count_expired(); else ++replaced_;
      rewrite_in_place(old, rec, cap, need, key, value, type, deadline);
      if constexpr (kEvicts) cache_replaced(before, f.slot, old, h);
      if (deadline != 0) schedule_expiry(old, deadline);
    } else {
      if (removals_.on()) {
        removals_.reserve(*this);  // may throw; nothing has changed yet
      } else {
        durability_.reserve(1, 0);  // (periodic) may throw; nothing has changed yet
      }
      const Slot s = allocate(need);  // may throw; nothing has changed yet
      if (fill != nullptr) value = fill_slot(s, key.size(), *fill);  // may throw: the slot goes back
      if (gone) expiry_.count_expired(); else ++replaced_;
      write_record(s, key, value, type, record::State::live, deadline);
      index_.update(f.slot, s.loc);
      if constexpr (kEvicts) cache_replaced(before, f.slot, s.loc, h);
      if (deadline != 0) schedule_expiry(s.loc, deadline);
      // every_write: the new record is on disk before the old one goes, so
      // that its space is reused only once the record that superseded it
      // is durable.
      if (durability_.sync_each()) err = journal_.sync_range(s.loc, record::kHeaderBytes + s.capacity);
      if (removals_.on()) {
        // The old record stays whole until the listener has seen it
        // (removal_reports.hpp); on disk it is live with a lower stamp,
        // which recovery ranks below the new one.
        removals_.retire(old, Location::none(), cause, record::kHeaderBytes + cap);
      } else if (durability_.defers()) {
        // periodic: the old record stays on disk as it is (live, with its
        // lower stamp: recovery prefers the new one) until a sync has made
        // the new one durable; then sync() frees it. A power loss before
        // finds one or the other, never neither. Readers that still hold
        // its location are turned away by the slot check.
        durability_.defer_old(old);
      } else {
        // The prev-free bit read now: allocate() may have taken the record before.
        release(old, rec, cap, record::read_meta(rec).prev_free());
        if (durability_.sync_each() && err == 0) err = journal_.sync_range(old, record::kHeaderBytes);
      }
      live_bytes_ += s.capacity;
      live_bytes_ -= cap;
    }
    key_value_bytes_ += value.size();
    key_value_bytes_ -= m.value_len;
    ++puts_;
    if (err != 0) sync_failed(err);
    return gone ? Computed::inserted : Computed::updated;
  }
  // Absent, or its record evicted for this write's room (then reported
  // as replaced or expired, below).
  if (index_.needs_room()) {
    grow_index();  // may throw; nothing has changed yet
    f = find_for_write(key, h);
  }
  const Slot s = allocate(need);  // may throw; the index only grew
  if (fill != nullptr) value = fill_slot(s, key.size(), *fill);  // may throw: the slot goes back
  write_record(s, key, value, type, record::State::live, deadline);
  index_.insert(f.insert_slot, h, s.loc);
  if constexpr (kEvicts) cache_admitted(f.insert_slot, s.loc, h);
  if (deadline != 0) schedule_expiry(s.loc, deadline);
  records_.store(records_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  if (durable_) journal_.set_records_hint(size());
  key_value_bytes_ += key.size() + value.size();
  live_bytes_ += record::kHeaderBytes + s.capacity;
  ++puts_;
  if (++writes_since_reclaim_ % 1024 == 0) index_.drop_retired(walks_);
  const bool replaced = seen.present();
  if (seen.evicted) own_key_done(seen, seen.expired ? RemovalCause::expired : RemovalCause::replaced);
  if (durability_.sync_each()) {
    if (const int err = journal_.sync_range(s.loc, record::kHeaderBytes + s.capacity)) sync_failed(err);
  }
  return replaced ? Computed::updated : Computed::inserted;
}

template <class P>
Index::Found Shard<P>::look_at_key(std::string_view key, std::uint64_t h, KeySeen& seen) {
  const Index::Found f = find_intact(key, h);
  note_key(f, seen);
  return f;
}

template <class P>
void Shard<P>::note_key(const Index::Found& f, KeySeen& seen) {
  seen.looked = true;
  if (f.found) {
    const Location at = index_.location(f.slot);
    const std::byte* rec = journal_.at(at);
    const record::Meta m = record::read_meta(rec);
    const std::uint64_t dl = record::deadline_of(rec, m, record::kHeaderBytes + m.capacity());
    seen.found = true;
    seen.expired = dl != 0 && expired(dl);
    seen.loc = at.raw();
    seen.bytes = record::kHeaderBytes + m.capacity();
  }
}

template <class P>
void Shard<P>::own_key_done(KeySeen& seen, RemovalCause cause) noexcept {
  seen.evicted = false;
  cache_.uncount_own_eviction(seen);
  switch (cause) {
    case RemovalCause::expired: expiry_.count_expired(); break;
    case RemovalCause::replaced: ++replaced_; break;
    default: ++removes_; break;
  }
  if (seen.report != nullptr) {
    seen.report->rec = (seen.report->rec & ~Location::kSlotBits) | static_cast<std::uint64_t>(cause);
  }
}

template <class P>
std::string_view Shard<P>::fill_slot(const Slot& s, std::size_t key_len, const ValueFill& fill) {
  const std::size_t n = fill.size;
  // The slot is this writer's: off every free list, not in the index, its
  // header still free to a stale reader (who discards it by its state).
  // The value goes where write_record() would copy it, which then finds it
  // in place (record::store_concat stores those words as they are).
  auto* dst = reinterpret_cast<std::byte*>(const_cast<char*>(record::value_bytes(s.rec, key_len)));
  try {
    // A stale reader may still load these words (atomically: it holds an
    // old location); fill writes them plainly, before the record is
    // stamped, and the stamps decide what such a reader's read counts. TSan
    // builds ignore the fill's accesses, as they ignore a reader's callback.
    const TsanIgnoreAccesses seqlock_race;
    fill.fn(fill.ctx, dst, n);
  } catch (...) {
    release(s.loc, s.rec, s.capacity, s.prev_free);
    throw;
  }
  return std::string_view(reinterpret_cast<const char*>(dst), n);
}

template <class P>
bool Shard<P>::erase(std::string_view key, std::uint64_t h, const std::string_view* expected) {
  const WriteLock guard(*this);
  return erase_locked(key, h, expected);
}

template <class P>
bool Shard<P>::erase_locked(std::string_view key, std::uint64_t h, const std::string_view* expected) {
  const Index::Found f = find_intact(key, h);
  if (!f.found) return false;
  const Location loc = index_.location(f.slot);
  std::byte* rec = journal_.at(loc);
  const record::Meta m = record::read_meta(rec);
  const std::uint64_t deadline = record::deadline_of(rec, m, record::kHeaderBytes + m.capacity());
  const bool gone = deadline != 0 && expired(deadline);
  if (!gone && expected != nullptr &&
      !(m.value_len == expected->size() &&
        std::memcmp(record::value_bytes(rec, m.key_len), expected->data(), expected->size()) == 0)) {
    return false;
  }
  const Slot marker = removal_marker(key.size());  // may throw; nothing has changed yet
  policy_forget(f.slot, loc, record::read_stamp(rec), h, record::kHeaderBytes + m.capacity());
  // An expired record is absent for the caller; it leaves now, as expired.
  const int err = remove_at(f.slot, loc, rec, m, key, marker,
                            gone ? RemovalCause::expired : RemovalCause::explicit_remove);
  if (gone) expiry_.count_expired(); else ++removes_;
  if (err != 0) sync_failed(err);  // removed in memory; the store refuses writes from now on
  return !gone;
}

template <class P>
typename Shard<P>::Slot Shard<P>::removal_marker(std::uint64_t key_len) {
  // A marker may take the part of the memory limit that record chunks
  // leave (JournalConfig::limit_reserve): at the limit, a removal or an
  // eviction needs one before it frees anything.
  if (removals_.on()) {
    removals_.reserve(*this);
    if (!durable_) return Slot{};
    const Journal::MarkerRoom room(journal_);
    return allocate(record::payload_for(key_len, 0));
  }
  if (!durability_.defers()) return Slot{};
  durability_.reserve(0, 1);  // the marker's entry first, then the record's
  durability_.reserve(1, 0);
  const Journal::MarkerRoom room(journal_);
  return allocate(record::payload_for(key_len, 0));
}

template <class P>
int Shard<P>::remove_at(std::uint64_t slot, Location loc, std::byte* rec, const record::Meta& m,
              std::string_view key, const Slot& marker, RemovalCause cause) noexcept {
  index_.erase(slot);  // first: no reader may find a freed record through the index
  const std::uint64_t cap = m.capacity();
  int err = 0;
  if (removals_.on()) {
    // The record stays whole until the listener has seen it. File-backed:
    // a dead marker (as periodic writes) keeps a crash from bringing it
    // back meanwhile; the record and the marker are freed after the
    // report, as this mode frees them (removal_reports.hpp).
    if (durable_) {
      write_record(marker, key, {}, 0, record::State::dead);
      if (durability_.sync_each()) err = journal_.sync_range(marker.loc, record::kHeaderBytes + marker.capacity);
    }
    removals_.retire(loc, durable_ ? marker.loc : Location::none(), cause, record::kHeaderBytes + cap);
  } else if (durability_.defers()) {
    // periodic: older records of the key may still read as live on disk
    // (freed at the last sync, not yet durably), so the removal is a dead
    // marker: a new record holding the key, with a higher stamp, freed
    // two syncs later. The key's record stays on disk as it is until a
    // sync has made the marker durable, as an update's old record does: a
    // crash inside the marker's write finds it whole, never an older one.
    if (marker.rec != nullptr) {
      write_record(marker, key, {}, 0, record::State::dead);
      durability_.defer_marker(marker.loc);
      durability_.defer_old(loc);
    } else {
      // No marker: a settled record evicted at the memory limit
      // (EvictHost::evict in cache/cache_host.hpp), freed now.
      release(loc, rec, cap, m.prev_free());
    }
  } else {
    // (To the write that makes room, when it evicts: space.hpp, Handover.)
    ShardSpace<Shard>::release_or_hand_over(*this, loc, rec, cap, m.prev_free());
  }
  records_.store(records_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
  if (durable_) journal_.set_records_hint(size());
  key_value_bytes_ -= std::uint64_t{m.key_len} + m.value_len;
  live_bytes_ -= record::kHeaderBytes + cap;
  if (durability_.sync_each() && !removals_.on()) err = journal_.sync_range(loc, record::kHeaderBytes);
  if (err != 0) note_sync_error(err);
  return err;
}

template <class P>
void Shard<P>::clear() noexcept {
  // After a report() in progress: its batch's records are read and freed.
  const std::lock_guard<std::mutex> reporting(removals_.mutex());
  const WriteLock guard(*this);
  // Removals waiting for their report go unreported (their records are
  // dropped with the rest).
  removals_.drop_all();
  // A fresh table (the old one retired, as after growth), or emptied in
  // place; either way the generation moves: readers inside restart.
  index_.clear(walks_);  // the old table retired, or emptied in place
  expiry_.clear(now_ms());
  next_due_.store(ExpiryWheel::kNever, std::memory_order_seq_cst);
  pages_.clear();  // (reset() below hands every chunk's pages back)
  // The policy emptied; the readers' buffered hits name records that are
  // gone: a drain would hand them to it (W-TinyLFU would count their keys).
  // (Last before the journal's reset: the fewest hits recorded after it.)
  cache_.clear();
  // every_write: each step on disk before the next (see reset()).
  if (const int err = journal_.reset(durability_.sync_each() || durability_.defers())) note_sync_error(err);  // writes refused: see reset()
  free_.clear();
  durability_.drop_all();
  if (durable_) journal_.set_records_hint(0);
  records_.store(0, std::memory_order_relaxed);
  key_value_bytes_ = 0;
  live_bytes_ = 0;
}

// ---- compute and batches ------------------------------------------------------

template <class P>
template <class Decide>
Computed Shard<P>::compute(std::string_view key, std::uint64_t h, std::uint64_t deadline, Decide& decide) {
  const WriteLock guard(*this);
  std::uint64_t rounds = 0;
  bool evicted_for_wheel = false;
  ComputeDecision d;
  bool decided = false;
  const OwnKey own(*this);
  KeySeen& seen = own.seen();  // the look decide() was given, for the write that follows
  for (;;) {
    try {
      if (!decided) {
        ComputeCurrent cur;
        (void)look_at_key(key, h, seen);
        // A record whose deadline has passed is absent (as for write()).
        if (seen.present()) {
          const std::byte* rec = journal_.at(Location::from_raw(seen.loc));
          const record::Meta m = record::read_meta(rec);
          cur.present = true;
          cur.value = std::string_view(record::value_bytes(rec, m.key_len), m.value_len);
          cur.type = m.type;
          cur.stamp = record::read_stamp(rec);
        }
        d = decide(cur);  // may throw: nothing has changed
        decided = true;
      }
      // Room the limit refuses below is made by evictions under this same
      // hold of the lock: the decision stands (it was taken on the key as
      // it was). An eviction of the key's own record made for this write
      // is reported as the write's own removal (own_key_done()).
      switch (d.action) {
        case ComputeDecision::Action::keep:
          return Computed::unchanged;
        case ComputeDecision::Action::remove:
          if (!seen.present()) return Computed::unchanged;
          if (erase_locked(key, h, nullptr)) return Computed::removed;
          if (!seen.evicted) return Computed::unchanged;
          own_key_done(seen, RemovalCause::explicit_remove);  // (its marker's room evicted it)
          return Computed::removed;
        case ComputeDecision::Action::write:
          (void)write_locked(key, h, d.value, d.type, Mode::upsert, {}, deadline, seen);
          return seen.present() ? Computed::updated : Computed::inserted;
      }
      return Computed::unchanged;
    } catch (const LimitReached& e) {
      const std::uint64_t need = d.action == ComputeDecision::Action::write
                                     ? record::payload_for(key.size(), d.value.size(), deadline != 0)
                                     : record::payload_for(key.size(), 0);
      if (!room_for_retry(e, need, rounds, evicted_for_wheel)) throw;
    }
  }
}

template <class P>
template <class Entry>
void Shard<P>::write_batch(std::size_t n, std::size_t& done, std::size_t& inserted, std::uint64_t deadline,
                           Entry&& entry) {
  const WriteLock guard(*this);
  std::uint64_t rounds = 0;
  bool evicted_for_wheel = false;
  const OwnKey own(*this);
  KeySeen& seen = own.seen();  // the current entry's look at its key (kept over its tries)
  while (done < n) {
    const auto [key, h, value] = entry(done);
    try {
      inserted += write_locked(key, h, value, type_tag::bytes, Mode::upsert, {}, deadline, seen) ==
                  Computed::inserted;
      ++done;
      own.renew();
      rounds = 0;
      evicted_for_wheel = false;
    } catch (const LimitReached& e) {
      if (!room_for_retry(e, record::payload_for(key.size(), value.size(), deadline != 0), rounds,
                          evicted_for_wheel)) {
        throw;
      }
    }
  }
}

template <class P>
template <class Key>
void Shard<P>::erase_batch(std::size_t n, std::size_t& done, std::size_t& removed, Key&& key) {
  const WriteLock guard(*this);
  while (done < n) {
    const auto [k, h] = key(done);
    removed += erase_locked(k, h, nullptr);  // may throw (a marker's room): done says where
    ++done;
  }
}

}  // namespace offheap::detail
