// SPDX-License-Identifier: Apache-2.0
// for_each's walk of a shard: the index table is read slot by slot while
// writers go on, each slot's record copied out under the same rules as a
// lookup (a generation loaded before the slot, the slot still leading to the
// record, no length used before both hold). A table that growth replaced
// meanwhile is frozen: its slots may lead to records that were freed and
// merged since, so a key read through one is confirmed by a lookup in the
// current table, which copies the value.
#pragma once

#include <offheap/detail/index/index.hpp>
#include <offheap/detail/index/location.hpp>
#include <offheap/detail/journal/record.hpp>
#include <offheap/detail/memory/atomic_word.hpp>
#include <offheap/detail/shard/probe.hpp>
#include <offheap/detail/shard/reader_support.hpp>
#include <offheap/error.hpp>

#include <cstdint>
#include <string>

namespace offheap::detail {

/// What a walk (for_each, scan) copied of one record (below): its key,
/// its value unless `values` is false, and its type tag.
struct WalkCopy {
  std::string key;
  std::string value;
  std::uint8_t type = 0;
  bool values = true;  // false: keys only (the value is read only to check a checksum)
};

/// A shard's walks (for_each, scan) and their validated copies. S is the
/// Shard, which lets it in (friend) and forwards to it; no state of its own.
template <class S>
class ShardWalk {
 public:
  static bool copy_record(const S& sh, const TableView& t, const std::uint64_t* slot, WalkCopy& copy);
  /// Rounds of copy_record a slot starts again at once when the generation
  /// moved (beyond them, with the backoff's pauses).
  static constexpr unsigned kAtOnce = 1024;
  static bool copy_from_frozen(const S& sh, const std::uint64_t* slot, WalkCopy& copy);
  template <class F>
  static void for_each(const S& sh, F& fn, WalkCopy& copy);
  /// A scan position's flag: a position in the table a migration drains.
  static constexpr std::uint64_t kDrainedPart = std::uint64_t{1} << 62;
  /// Position 0 of the current table after the drained one was walked
  /// (keys were handed out: a restart from here counts).
  static constexpr std::uint64_t kDrainedDone = std::uint64_t{1} << 61;
  template <class F>
  static bool scan(const S& sh, std::uint64_t& pos, std::uint64_t& serial, std::uint64_t& moves,
                   std::uint32_t& restarts, std::uint64_t& budget, F& fn, WalkCopy& copy);
};

/// for_each's read of one slot of table `t`: copies the record its key
/// leads to into kbuf/vbuf and returns true only for a record that is its
/// key's current one. While `t` is the current table, the slot must still
/// lead to the record and the generation (loaded before the slot, as in
/// probe()) stay put, before any length read from the record sizes a
/// buffer and after the copy; once growth replaced `t`, its slots are
/// frozen and may lead anywhere, so the key is read and confirmed through a
/// lookup in the current table (copy_from_frozen). A record rewritten
/// continuously meanwhile may be skipped: the walk promises only keys left
/// alone during it.
template <class S>
bool ShardWalk<S>::copy_record(const S& sh, const TableView& t, const std::uint64_t* slot, WalkCopy& copy) {
  std::string& kbuf = copy.key;
  std::string& vbuf = copy.value;
  Backoff backoff;
  // Rounds started again at once, without the backoff's pause: the
  // generation moved (a merge elsewhere in the shard), which leaves nothing
  // to wait for, only the header to read again under a fresh generation.
  unsigned moved = 0;
  bool at_once = false;
  for (; !backoff.exhausted(); at_once ? (at_once = false, Backoff::relax()) : backoff.pause()) {
    // First, as in probe(): what is read below counts only while it stays.
    const std::uint64_t generation = sh.index_.acquire_generation();
    const std::uint64_t serial = sh.index_.acquire_serial();
    // (The walk's table keeps its address while the walk goes on: a
    // replaced table is neither dropped nor reused during a walk. The table
    // a migration drains is not frozen: writers still update and remove in
    // it, though no entry moves out of it during a walk.)
    if (!sh.index_.live_table(t.words)) return copy_from_frozen(sh, slot, copy);
    // Emptied by clear() (which leaves locations) or by a removal since the
    // walk saw it full: its key is gone.
    if (!Index::slot_full(slot)) return false;
    const Location loc = sh.slot_location(load_acquire(slot));
#if defined(OFFHEAP_TESTING_READ_HOOK)
    testing_reader_step();
#endif
    if (loc.is_none()) return false;  // its key was removed
    std::uint64_t avail = 0;
    const std::byte* rec = sh.journal_.resolve(loc, record::kMinRecord, avail);
    if (rec == nullptr) {
      if (sh.index_.unchanged_since(generation) && sh.leads_to(load_relaxed(slot), loc)) return false;
      continue;
    }
    const std::uint64_t s1 = record::read_stamp(rec);
    if (!record::stamp_is_stable(s1)) {
      // 0: zeroed by clear() (the generation moved) or damage. Odd: a
      // write in progress (worth waiting for, within the backoff) or
      // bytes that are no stamp (the generation moves).
      if (s1 == 0 && sh.index_.unchanged_since(generation) && sh.leads_to(load_relaxed(slot), loc)) {
        return false;
      }
      continue;
    }
    const record::Meta m = record::read_meta(rec);
    const bool whole = m.state() == record::State::live &&
                       record::kHeaderBytes + record::payload_for(m.key_len, m.value_len) <= avail;
    const std::uint64_t deadline = whole ? record::deadline_of(rec, m, avail) : 0;
    if (!record::validate(rec, s1)) continue;
    const bool gone = deadline != 0 && sh.expired(deadline);  // before the checks below (as in lookup())
    // The header belongs to the record the slot leads to only while the
    // generation stays and the slot still leads here; then, and only then,
    // may its lengths size the buffers. (Not "the record is still current"
    // as after the copy below: that proves the record at a later moment,
    // and the bytes read here may have been a value forged with the stamp
    // the record at this place got next.) A generation that moved is read
    // again at once, up to kAtOnce times a slot: a writer that keeps
    // removing keys moves it every few microseconds, and a walk that paused
    // at each move, yields included, waited out each of them (issue 31).
    if (!sh.index_.unchanged_since(generation)) {
      at_once = ++moved <= kAtOnce;
      continue;
    }
    if (!sh.leads_to(load_relaxed(slot), loc)) continue;  // the slot moved on
    if (!whole) return false;  // a slot leads to a record that is not live only in damage
    if (gone) {
      // Expired, unless rewritten since the clock read (as in lookup()).
      if (!record::validate(rec, s1)) continue;
      if (!sh.index_.unchanged_since(generation)) {
        at_once = ++moved <= kAtOnce;
        continue;
      }
      return false;
    }
#if defined(OFFHEAP_TESTING_READ_HOOK)
    testing_reader_before_hit(rec);
#endif
    // Keys only: the value is still read where its checksum is checked.
    const bool value = copy.values || sh.verify_;
    kbuf.resize(m.key_len);
    vbuf.resize(value ? m.value_len : 0);
    record::copy_out(kbuf.data(), rec, 0, m.key_len);
    if (value) record::copy_out(vbuf.data(), rec, m.key_len, m.value_len);
    const std::uint32_t stored = record::stored_checksum(rec);
    // As in examine(): the copy is the key's only if, after it, the
    // generation stays and the slot still leads here (or, if merges
    // elsewhere moved the generation, the record is still current).
    if (!record::validate(rec, s1)) continue;
    if (!(sh.index_.unchanged_since(generation) && sh.leads_to(load_relaxed(slot), loc)) &&
        !ShardProbe<S>::still_current(sh, serial, slot, loc, rec, s1)) {
      continue;
    }
    if (sh.verify_ && record::checksum_of(sh.crc_seed_, s1, m.encode(), loc, kbuf, vbuf, deadline) != stored) {
      // A damaged record: skipped (and counted), so that a walk can
      // salvage what is intact.
      sh.corrupt_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    copy.type = m.type;
    return true;
  }
  // Writers kept moving the generation (merges anywhere in the shard): the
  // slot's key is confirmed through a lookup instead, which takes the
  // writer lock when it starves, so that a key left alone is not skipped.
  return copy_from_frozen(sh, slot, copy);
}

/// copy_record() for a slot of a table that growth replaced: reads the
/// key the slot leads to (a key length sizes at most 64 KiB), then looks
/// the key up in the current table, which copies the value only if the
/// key's current record is the one the slot led to. One try, no waiting:
/// a stamp that is odd, or that changes while the key is copied, is a
/// record being written (its key is not one left alone during the walk,
/// which is all a walk promises) or bytes that are no stamp at a place
/// the frozen slot kept from before (half of a value's words are odd, and
/// stay so). Waiting out either, with a reader's backoff, cost up to 192
/// yields a slot, each a scheduler quantum on a busy core: walks beside a
/// writer that keeps removing keys (tables replaced under them) took
/// minutes (issue 31). A current record that fails its checksum is
/// skipped (the lookup counted it), as copy_record() skips one.
template <class S>
bool ShardWalk<S>::copy_from_frozen(const S& sh, const std::uint64_t* slot, WalkCopy& copy) {
  std::string& kbuf = copy.key;
  std::string& vbuf = copy.value;
  const Location loc = sh.slot_location(load_acquire(slot));
#if defined(OFFHEAP_TESTING_READ_HOOK)
  testing_reader_step();
#endif
  if (loc.is_none()) return false;
  std::uint64_t avail = 0;
  const std::byte* rec = sh.journal_.resolve(loc, record::kMinRecord, avail);
  if (rec == nullptr) return false;
  const std::uint64_t s1 = record::read_stamp(rec);
  if (!record::stamp_is_stable(s1)) return false;
  const record::Meta m = record::read_meta(rec);
  if (m.state() != record::State::live || record::kHeaderBytes + m.key_len > avail) return false;
  kbuf.resize(m.key_len);
  record::copy_out(kbuf.data(), rec, 0, m.key_len);
  if (!record::validate(rec, s1)) return false;
  // kbuf may hold any bytes (the slot is stale): the lookup decides, by
  // its last call of the callback, and only if it says it found the key
  // (an earlier call may have read bytes the lookup then refused).
  bool same = false;
  try {
    const bool found = sh.lookup(kbuf, sh.hash_(kbuf),
           [&](Location l, const std::byte* r, const record::Meta& cm, std::uint64_t s) {
             same = l == loc && s == s1;
             if (!same) return true;
             copy.type = cm.type;
             vbuf.resize(copy.values ? cm.value_len : 0);
             if (copy.values) record::copy_out(vbuf.data(), r, cm.key_len, cm.value_len);
             return record::validate(r, s);
           });
    return found && same;
  } catch (const Error& e) {
    // The key's current record fails its checksum (file-backed): skipped,
    // as copy_record() skips one, so that a walk salvages what is intact
    // (report_corrupt() counted it). A read of the key still throws.
    if (e.code() != Errc::corrupt_file) throw;
    return false;
  }
}

/// for_each's walk of this shard: during a migration, the table it drains
/// and then the current one. No entry moves from one to the other while
/// the walk is in progress (Index::migrate()), so none comes twice; new
/// keys go to the current table and may come or not.
template <class S>
template <class F>
void ShardWalk<S>::for_each(const S& sh, F& fn, WalkCopy& copy) {
  sh.index_.wait_moves();  // inside the WalkGate, before any table is loaded
  TableView current{}, drained{};
  (void)sh.index_.acquire_pair(current, drained);  // published together
  for (const TableView& t : {drained, current}) {
    if (t.words == nullptr) continue;
    for (std::uint64_t g = 0; g <= t.mask; ++g) {
      const std::uint64_t w = load_acquire(t.ctrl_word(g));
      for (std::uint64_t m = w & ctrl::kHighs; m; m &= m - 1) {
        if (copy_record(sh, t, t.ctrl_word(g) + 1 + ctrl::first(m), copy)) fn(copy);
      }
    }
  }
}

/// scan's walk of this shard: from position `pos` (8 per group: group g's
/// slot i is 8g + i; with kDrainedPart, of the table a migration drains,
/// which comes first) of the table whose serial is `serial`, handing
/// fn(copy) up to `budget` records; fn returns false to stop. A table
/// replaced since `serial` (growth, a rebuild: keys sit elsewhere in its
/// successor) is walked again from its start, so that no key left alone is
/// missed. Between two calls a migration may move entries from the drained
/// table to the current one (never during a call: the call is a walk): an
/// entry moved from a part not yet walked is met in the current table, one
/// moved from a part walked already may be met again there, which
/// `restarts` counts (`moves`: Index::moves() at the last call). A
/// migration that ended between two calls leaves every entry in the
/// current table, whose positions hold: a walk still in the drained part
/// goes on at the current table's start.
/// Leaves pos after the last slot it looked at (the record fn stopped at
/// included) and serial that of the table it walked.
/// Returns: true when the table's end was reached; false when the budget
/// ran out or fn stopped.
template <class S>
template <class F>
bool ShardWalk<S>::scan(const S& sh, std::uint64_t& pos, std::uint64_t& serial, std::uint64_t& moves,
                        std::uint32_t& restarts, std::uint64_t& budget, F& fn, WalkCopy& copy) {
  sh.index_.wait_moves();  // inside the WalkGate, before any table is loaded
  // The tables with the serial they were published under (Index::publish's
  // seqlock): a serial that stays across calls means the same current
  // table, slot positions unchanged.
  TableView current{}, drained{};
  const std::uint64_t now = sh.index_.acquire_pair(current, drained);  // published together
  const std::uint64_t moved = sh.index_.moves();
  if (now != serial) {
    if (pos != 0 && pos != kDrainedPart) ++restarts;  // (0: the shard's first call; kDrainedPart: nothing walked)
    pos = drained.words != nullptr ? kDrainedPart : 0;
    serial = now;
  } else {
    if (moved != moves && pos != kDrainedPart) ++restarts;
    // The migration ended: the rest is in the current table, from its start.
    if ((pos & kDrainedPart) != 0 && drained.words == nullptr) pos = pos == kDrainedPart ? 0 : kDrainedDone;
  }
  moves = moved;
  // One table from `pos` (slot positions of `t`, `part` their flag).
  const auto walk = [&](const TableView& t, std::uint64_t part) {
    const std::uint64_t end = (t.mask + 1) * 8;
    std::uint64_t at = pos & ~(kDrainedPart | kDrainedDone);
    while (at < end) {
      if (budget == 0) return false;
      const std::uint64_t g = at / 8;
      const unsigned from = static_cast<unsigned>(at % 8);
      std::uint64_t m = load_acquire(t.ctrl_word(g)) & ctrl::kHighs;
      m &= ~std::uint64_t{0} << (8 * from);  // the slots before `from` were walked
      for (; m; m &= m - 1) {
        const unsigned i = ctrl::first(m);
        // pos moves past a slot only once it is done with: an exception from
        // copy_record (bad_alloc) or fn leaves the cursor at the slot (copy)
        // or just after it (fn: the record counts as visited), never past
        // the rest of the group.
        pos = part | (g * 8 + i);
        if (!copy_record(sh, t, t.ctrl_word(g) + 1 + i, copy)) continue;
        --budget;
        pos = part | (g * 8 + i + 1);
        if (!fn(copy) || budget == 0) return false;  // the rest of the group in the next call
      }
      at = (g + 1) * 8;
      pos = part | at;
    }
    return true;
  };
  if ((pos & kDrainedPart) != 0) {
    if (!walk(drained, kDrainedPart)) return false;
    pos = kDrainedDone;  // then the current table, from its start
  }
  return walk(current, 0);
}

}  // namespace offheap::detail
