// SPDX-License-Identifier: Apache-2.0
// A reader's way through the index: Shard::lookup's inline fast path (one
// pass in which nothing moves) and, when it steps aside, lookup_slow():
// probe() walks the key's probe sequence under one generation and table
// serial; examine() reads one slot's record
// between two equal stamps, backs off while a writer is inside it, and
// turns every anomaly (a generation that moved, a slot that changed, a
// record torn or damaged) into a restart or a miss, never a wrong value.
// Lock-free; `locked` only when a starved reader holds the writer lock.
#pragma once

#include <offheap/detail/shard/shard.hpp>

#include <atomic>
#include <cstdint>
#include <string_view>

namespace offheap::detail {

// Shard::lookup: the common case of a read, inline (see its declaration).
template <class P>
template <class OnHit>
inline bool Shard<P>::lookup(std::string_view key, std::uint64_t h, OnHit&& on_hit) const {
  if (!verify_) [[likely]] {
    const std::uint64_t generation = index_.acquire_generation();
    const std::uint64_t serial = index_.acquire_serial();  // after the generation
    const TableView t = index_.acquire_view();              // after the serial
    const std::uint8_t tag = ctrl::tag_of(h);
    ProbeSeq seq(h, t.mask);
    do {
      const std::uint64_t* line = t.ctrl_word(seq.group());
      // Pairs with the release store in Index::set_ctrl.
      const std::uint64_t w = load_acquire(line);
      for (std::uint64_t m = ctrl::match(w, tag); m; m &= m - 1) {
        const std::uint64_t* slot = line + 1 + ctrl::first(m);
        // Pairs with the release stores in Index::insert/update.
        const std::uint64_t sw = load_acquire(slot);
        const Location loc = slot_location(sw);
#if defined(OFFHEAP_TESTING_READ_HOOK)
        testing_reader_step();
#endif
        if (loc.is_none()) continue;  // removed: another key's slot now
        std::uint64_t avail = 0;
        const std::byte* rec = journal_.resolve(loc, record::kMinRecord, avail);
        if (rec == nullptr) [[unlikely]] goto slow;
        const std::uint64_t s1 = record::read_stamp(rec);
        if (!record::stamp_is_stable(s1)) [[unlikely]] goto slow;
        const record::Meta rm = record::read_meta(rec);
        const bool mine = record::is_live_record_of(rec, rm, avail, key);
        const std::uint64_t deadline = mine ? record::deadline_of(rec, rm, avail) : 0;
        if (!record::validate(rec, s1)) [[unlikely]] goto slow;
        if (!mine) {
          // Another key's record, while the slot still leads here.
          if (leads_to(load_relaxed(slot), loc)) [[likely]] continue;
          goto slow;
        }
        // Expired is decided on the clock read here, before the record's
        // stamp, the slot and the generation are checked again: the
        // record was the key's current one when its deadline had passed
        // (a refresh meanwhile rewrote it in place, or moved the slot:
        // the read starts over).
        const bool gone = deadline != 0 && expired(deadline);
        if (!index_.unchanged_since(generation) || !leads_to(load_relaxed(slot), loc)) [[unlikely]] {
          goto slow;
        }
        // The key's record, expired: a miss (no other record of the key
        // is in the index).
        if (gone) [[unlikely]] {
          if (!record::validate(rec, s1) || !index_.unchanged_since(generation)) goto slow;
          return false;
        }
#if defined(OFFHEAP_TESTING_READ_HOOK)
        testing_reader_before_hit(rec);
#endif
        if (on_hit(loc, rec, rm, s1)) [[likely]] {
          // As in examine(): a merge elsewhere in the shard moves the
          // generation, which costs a check, not a second read.
          if (index_.unchanged_since(generation) || still_current(serial, slot, loc, rec, s1)) [[likely]] {
            if constexpr (Eviction::reader_hits == eviction::ReaderHits::frequency_bits) {
              if (count_hits_) raise_frequency(slot, sw);
            } else if constexpr (kBufferedHits) {
              record_hit(loc, s1, h);
            }
            return true;
          }
        }
        goto slow;
      }
      if (ctrl::match_empty(w)) {
        // (The acquire load of the control word comes first.)
        if (index_.unchanged_since(generation)) [[likely]] return false;
        goto slow;
      }
    } while (seq.next());
  }
slow:
  return lookup_slow(key, h, on_hit);
}

template <class P>
template <class OnHit>
bool Shard<P>::lookup_slow(std::string_view key, std::uint64_t h, OnHit& on_hit) const {
  Backoff backoff;
  const Probe p = probe(key, h, on_hit, backoff, kLocks, false);
  if (p != Probe::starved) [[likely]] return p == Probe::hit;
  // Writers kept changing the record under this reader: read it once with
  // them held off. New writers step aside until the reader has the lock
  // (an unfair lock would otherwise keep going to the busy writer); this is
  // the only time writers wait for a reader.
  starving_readers_.fetch_add(1, std::memory_order_relaxed);
  std::unique_lock<Lock> guard(lock_);
  starving_readers_.fetch_sub(1, std::memory_order_relaxed);
  Backoff locked;
  return probe(key, h, on_hit, locked, false, true) == Probe::hit;
}


template <class P>
template <class OnHit>
typename Shard<P>::Probe Shard<P>::probe(std::string_view key, std::uint64_t h, OnHit& on_hit, Backoff& backoff,
            bool may_starve, bool locked) const {
  const std::uint8_t tag = ctrl::tag_of(h);
  for (;;) {
    const std::uint64_t generation = index_.acquire_generation();
    const std::uint64_t serial = index_.acquire_serial();  // after the generation
    const TableView t = index_.acquire_view();              // after the serial
    bool restart = false;
    ProbeSeq seq(h, t.mask);
    do {
      const std::uint64_t* line = t.ctrl_word(seq.group());
      // Pairs with the release store in Index::set_ctrl.
      const std::uint64_t w = load_acquire(line);
      for (std::uint64_t m = ctrl::match(w, tag); m; m &= m - 1) {
        const Examined e = examine(generation, serial, line + 1 + ctrl::first(m), key, h, on_hit,
                                   backoff, may_starve, locked);
        if (e == Examined::hit) return Probe::hit;
        if (e == Examined::starved) return Probe::starved;
        if (e == Examined::restart) {
          restart = true;
          break;
        }
      }
      if (!restart && ctrl::match_empty(w)) {
        // A miss is a conclusion about this table: it must still be current.
        // (The acquire loads above come first.)
        if (index_.unchanged_since(generation)) return Probe::miss;
        restart = true;
      }
      // Every group visited without an empty slot: only in a table being
      // rebuilt in a reused range, which the generation says is stale.
    } while (!restart && seq.next());
    if (may_starve && backoff.exhausted()) return Probe::starved;
    backoff.pause();
  }
}

template <class P>
template <class OnHit>
typename Shard<P>::Examined Shard<P>::examine(std::uint64_t generation, std::uint64_t serial, const std::uint64_t* slot,
                 std::string_view key, std::uint64_t h, OnHit& on_hit, Backoff& backoff,
                 bool may_starve, bool locked) const {
  for (;; backoff.pause()) {
    if (may_starve && backoff.exhausted()) return Examined::starved;
    // Pairs with the release stores in Index::insert/update: the record the
    // location leads to is visible.
    const std::uint64_t sw = load_acquire(slot);
    const Location loc = slot_location(sw);
#if defined(OFFHEAP_TESTING_READ_HOOK)
    testing_reader_step();
#endif
    // A removal empties the slot's location before its record is freed:
    // the key this reader saw in the control word is gone from here.
    if (loc.is_none()) return Examined::other;
    std::uint64_t avail = 0;
    const std::byte* rec = journal_.resolve(loc, record::kMinRecord, avail);
    if (rec == nullptr) {
      // Only a stale table leads outside (or, in a file-backed store, a
      // damaged one: passed over, counted).
      if (durable_ && index_.unchanged_since(generation) && leads_to(load_relaxed(slot), loc)) {
        return met_damage();
      }
      return Examined::restart;
    }
    const std::uint64_t s1 = record::read_stamp(rec);
    if (!record::stamp_is_stable(s1)) {
      // A file-backed record that the current index leads to and that
      // stays 0, or odd with no writer possible, is damage, never waited
      // for forever. Whose record it was cannot be told: passed over and
      // counted (the next write of its key drops it from the index). A
      // write publishes its slot only after an even stamp, and clear()
      // moves the generation first.
      if (durable_ && (s1 == 0 || locked || backoff.hopeless()) &&
          index_.unchanged_since(generation) && leads_to(load_relaxed(slot), loc)) {
        return met_damage();
      }
      if (s1 == 0) return Examined::restart;  // zeroed by clear(): the table is stale
      // Odd: a write in progress at a record the slot still leads to in a
      // current table (then wait), or bytes from a stale location that are
      // no stamp (then move on). The acquire load of the stamp orders these.
      if (!index_.unchanged_since(generation)) return Examined::restart;
      continue;  // reloads the slot
    }
    const record::Meta m = record::read_meta(rec);
    const bool mine = record::is_live_record_of(rec, m, avail, key);
    const std::uint64_t deadline = mine ? record::deadline_of(rec, m, avail) : 0;
    if (!record::validate(rec, s1)) continue;
    if (mine) {
      // Expired, by the clock read before the slot and the generation are
      // checked again (as in lookup()).
      const bool gone = deadline != 0 && expired(deadline);
      // The record is the key's only while the slot still leads to it and
      // the index generation has not moved: a stale location may land
      // inside a newer record's bytes once its own record was freed and
      // merged into a neighbour, or after clear(). The validate fence
      // orders these loads after the record's words; the writer changed
      // the slot or the generation before it freed the record.
      if (!index_.unchanged_since(generation)) return Examined::restart;
      if (!leads_to(load_relaxed(slot), loc)) continue;
      if (verify_) {
        const bool intact = record::checksum_in_place(crc_seed_, rec, loc, s1, m.encode(), avail) ==
                            record::stored_checksum(rec);
        if (!record::validate(rec, s1)) continue;
        if (!index_.unchanged_since(generation)) return Examined::restart;
        if (!intact) report_corrupt(loc);  // throws
      }
      // The key's record, expired: absent (the probe goes on to a miss:
      // no other record of the key is in the index).
      if (gone) {
        if (!record::validate(rec, s1)) continue;  // rewritten since the clock read (as in lookup())
        if (!index_.unchanged_since(generation)) return Examined::restart;
        return Examined::other;
      }
#if defined(OFFHEAP_TESTING_READ_HOOK)
      testing_reader_before_hit(rec);
#endif
      // on_hit reads the value and validates the stamp. The bytes it read
      // are the key's only if, after that validation (its acquire fence
      // orders this load), the generation has not moved: meanwhile a
      // writer may have removed the key, merged its record away (or moved
      // the tail back over it) and covered its start with a value forged
      // with the very same stamp. (Without such a move, the record could
      // only have been freed, which changes its stamp, or superseded and
      // kept whole: then it was the key's current one at the slot check.)
      if (on_hit(loc, rec, m, s1)) {
        if (index_.unchanged_since(generation) || still_current(serial, slot, loc, rec, s1)) {
          if constexpr (Eviction::reader_hits == eviction::ReaderHits::frequency_bits) {
            if (count_hits_) raise_frequency(slot, sw);
          } else if constexpr (kBufferedHits) {
            record_hit(loc, s1, h);
          }
          return Examined::hit;
        }
        return Examined::restart;
      }
      continue;
    }
    // Another key's record, or a freed one. That holds only while the slot
    // still leads here (the validate fence orders this load after the
    // record's words).
    if (leads_to(load_relaxed(slot), loc)) return Examined::other;
  }
}

}  // namespace offheap::detail
