// SPDX-License-Identifier: Apache-2.0
// A reader's way through the index: Shard::lookup's inline fast path (one
// pass in which nothing moves) and, when it steps aside, lookup_slow():
// probe() walks the key's probe sequence under one generation and table
// serial; examine() reads one slot's record
// between two equal stamps, backs off while a writer is inside it, and
// turns every anomaly (a generation that moved, a slot that changed, a
// record torn or damaged) into a restart or a miss, never a wrong value.
// Lock-free; `locked` only when a starved reader holds the writer lock.
//
// ShardProbe<S> holds no state: a component of the shard (S), which lets it
// in (friend) and forwards lookup() and lookup_slow() to it.
#pragma once

#include <offheap/detail/cache/cache_host.hpp>
#include <offheap/detail/index/index.hpp>
#include <offheap/detail/index/location.hpp>
#include <offheap/detail/journal/record.hpp>
#include <offheap/detail/memory/atomic_word.hpp>
#include <offheap/detail/shard/reader_support.hpp>
#include <offheap/eviction/policy.hpp>

#include <atomic>
#include <cstdint>
#include <string_view>

namespace offheap::detail {

/// A shard's reads (S: the shard). Every function is lock-free and
/// writes nothing but the policy's hit (a frequency bit's compare-and-swap
/// or the reader's own ring), except lookup_slow()'s one read under the
/// writer lock after a starved probe.
template <class S>
class ShardProbe {
 public:
  using Examined = typename S::Examined;
  using Probe = typename S::Probe;
  using Eviction = typename S::Eviction;
  using Lock = typename S::Lock;
  static constexpr bool kLocks = S::kLocks;
  static constexpr bool kBufferedHits = S::kBufferedHits;

  /// Shard::lookup (shard.hpp says what on_hit gets and returns): the
  /// common case first, inline: one pass of the probe in which nothing
  /// moves, under the same checks as probe() and examine() make (each
  /// conclusion only from words read between two equal stamps, through a
  /// slot that still leads there, under the generation loaded before the
  /// table). At the first thing that would make them wait or start over (a
  /// record being written, a generation that moved, a slot that changed,
  /// a stamp that differs after the value was read) or that they check
  /// further (a file-backed store that checks checksums), the lookup goes
  /// the whole way instead, from the start.
  template <class OnHit>
  [[gnu::always_inline]] static bool lookup(const S& sh, std::string_view key, std::uint64_t h, OnHit&& on_hit);
  /// The whole way (probe(), then, starved, under the writer lock).
  template <class OnHit>
  [[gnu::noinline]] static bool lookup_slow(const S& sh, std::string_view key, std::uint64_t h, OnHit& on_hit);

  /// One lookup through the index; `may_starve`: give up with
  /// Probe::starved once the backoff is exhausted; `locked`: this reader
  /// holds the writer lock (no record can be half-written).
  template <class OnHit>
  static Probe probe(const S& sh, std::string_view key, std::uint64_t h, OnHit& on_hit, Backoff& backoff,
                     bool may_starve, bool locked);
  /// One slot's record: read between two equal stamps; a hit, another
  /// key's record, or a restart (or starved) when something moved.
  template <class OnHit>
  static Examined examine(const S& sh, std::uint64_t generation, std::uint64_t serial,
                          const std::uint64_t* slot, std::string_view key, std::uint64_t h,
                          OnHit& on_hit, Backoff& backoff, bool may_starve, bool locked);
  /// After a read of the record at `loc` (stamp s1), through `slot` of
  /// the table published as `serial`, during which the generation moved (a
  /// merge or a retreat of the tail anywhere in the shard): the bytes read
  /// were the record's if, under a generation loaded afresh that holds
  /// meanwhile, that table is still the current one (no table was
  /// published since `serial`: a replaced table is frozen, its slots may
  /// lead to freed records, and its range may since hold another table;
  /// the serial, unlike the address, never comes back), the slot is still
  /// full (clear() leaves locations) and still leads to `loc`, and the
  /// record still shows s1. A full slot of the current
  /// table under an unmoved generation leads to a record start, whose stamp
  /// is drawn afresh at every write and free and so never shows s1 again
  /// once the record was changed: the record stayed as it was throughout.
  static bool still_current(const S& sh, std::uint64_t serial, const std::uint64_t* slot, Location loc,
                     const std::byte* rec, std::uint64_t s1) noexcept {
    const std::uint64_t g2 = sh.index_.acquire_generation();  // before the serial, as in probe()
    if (sh.index_.acquire_serial() != serial) return false;
    if (!Index::slot_full(slot)) return false;
    if (!S::leads_to(load_acquire(slot), loc)) return false;
    if (record::read_stamp(rec) != s1) return false;
    std::atomic_thread_fence(std::memory_order_acquire);  // as in record::validate
    return sh.index_.unchanged_since(g2);
  }
};

// Shard::lookup: the common case of a read, inline (see its declaration).
template <class S>
template <class OnHit>
inline bool ShardProbe<S>::lookup(const S& sh, std::string_view key, std::uint64_t h, OnHit&& on_hit) {
  if (!sh.verify_) [[likely]] {
    const std::uint64_t generation = sh.index_.acquire_generation();
    const std::uint64_t serial = sh.index_.acquire_serial();  // after the generation
    const TableView t = sh.index_.acquire_view();              // after the serial
    // One table, published under that serial (Index::publish's seqlock);
    // else (a migration under way, a publish in progress) the whole way,
    // which probes both tables of a pair.
    if (!sh.index_.single_table_since(serial)) [[unlikely]] goto slow;
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
        const Location loc = S::slot_location(sw);
#if defined(OFFHEAP_TESTING_READ_HOOK)
        testing_reader_step();
#endif
        if (loc.is_none()) continue;  // removed: another key's slot now
        std::uint64_t avail = 0;
        const std::byte* rec = sh.journal_.resolve(loc, record::kMinRecord, avail);
        if (rec == nullptr) [[unlikely]] goto slow;
        const std::uint64_t s1 = record::read_stamp(rec);
        if (!record::stamp_is_stable(s1)) [[unlikely]] goto slow;
        const record::Meta rm = record::read_meta(rec);
        const bool mine = record::is_live_record_of(rec, rm, avail, key);
        const std::uint64_t deadline = mine ? record::deadline_of(rec, rm, avail) : 0;
        if (!record::validate(rec, s1)) [[unlikely]] goto slow;
        if (!mine) {
          // Another key's record, while the slot still leads here.
          if (S::leads_to(load_relaxed(slot), loc)) [[likely]] continue;
          goto slow;
        }
        // Expired is decided on the clock read here, before the record's
        // stamp, the slot and the generation are checked again: the
        // record was the key's current one when its deadline had passed
        // (a refresh meanwhile rewrote it in place, or moved the slot:
        // the read starts over).
        const bool gone = deadline != 0 && sh.expired(deadline);
        if (!sh.index_.unchanged_since(generation) || !S::leads_to(load_relaxed(slot), loc)) [[unlikely]] {
          goto slow;
        }
        // The key's record, expired: a miss (no other record of the key
        // is in the index).
        if (gone) [[unlikely]] {
          if (!record::validate(rec, s1) || !sh.index_.unchanged_since(generation)) goto slow;
          return false;
        }
#if defined(OFFHEAP_TESTING_READ_HOOK)
        testing_reader_before_hit(rec);
#endif
        if (on_hit(loc, rec, rm, s1)) [[likely]] {
          // As in examine(): a merge elsewhere in the shard moves the
          // generation, which costs a check, not a second read.
          if (sh.index_.unchanged_since(generation) || still_current(sh, serial, slot, loc, rec, s1)) [[likely]] {
            if constexpr (Eviction::reader_hits == eviction::ReaderHits::frequency_bits) {
              if (sh.cache_.counts_hits()) CacheHost<S>::raise_frequency(slot, sw);
            } else if constexpr (kBufferedHits) {
              sh.cache_.record_hit(sh, loc, s1, h);
            }
            return true;
          }
        }
        goto slow;
      }
      if (ctrl::match_empty(w)) {
        // (The acquire load of the control word comes first.)
        if (sh.index_.unchanged_since(generation)) [[likely]] return false;
        goto slow;
      }
    } while (seq.next());
  }
slow:
  return lookup_slow(sh, key, h, on_hit);
}

template <class S>
template <class OnHit>
bool ShardProbe<S>::lookup_slow(const S& sh, std::string_view key, std::uint64_t h, OnHit& on_hit) {
  Backoff backoff;
  const Probe p = probe(sh, key, h, on_hit, backoff, kLocks, false);
  if (p != Probe::starved) [[likely]] return p == Probe::hit;
  // Writers kept changing the record under this reader: read it once with
  // them held off. New writers step aside until the reader has the lock
  // (an unfair lock would otherwise keep going to the busy writer); this is
  // the only time writers wait for a reader.
  sh.starving_readers_.fetch_add(1, std::memory_order_relaxed);
  std::unique_lock<Lock> guard(sh.lock_);
  sh.starving_readers_.fetch_sub(1, std::memory_order_relaxed);
  Backoff locked;
  return probe(sh, key, h, on_hit, locked, false, true) == Probe::hit;
}


template <class S>
template <class OnHit>
typename S::Probe ShardProbe<S>::probe(const S& sh, std::string_view key, std::uint64_t h, OnHit& on_hit, Backoff& backoff,
            bool may_starve, bool locked) {
  const std::uint8_t tag = ctrl::tag_of(h);
  for (;;) {
    const std::uint64_t generation = sh.index_.acquire_generation();
    // During a migration, the table it drains first, then the current one:
    // a step stores a moved entry in the current table before it empties
    // the old slot, so a key moved after this probe passed its old slot is
    // found in the current table (index.hpp, Index::migrate). The two as
    // published together (Index::publish's seqlock), after the generation.
    TableView current{}, drained{};
    const std::uint64_t serial = sh.index_.acquire_pair(current, drained);
    const TableView tables[2] = {drained, current};
    bool restart = false;
    for (const TableView& t : tables) {
      if (t.words == nullptr) continue;
      bool ended = false;  // an empty slot met: the key is not in this table
      ProbeSeq seq(h, t.mask);
      do {
        const std::uint64_t* line = t.ctrl_word(seq.group());
        // Pairs with the release store in Index::set_ctrl.
        const std::uint64_t w = load_acquire(line);
        for (std::uint64_t m = ctrl::match(w, tag); m; m &= m - 1) {
          const Examined e = examine(sh, generation, serial, line + 1 + ctrl::first(m), key, h, on_hit,
                                     backoff, may_starve, locked);
          if (e == Examined::hit) return Probe::hit;
          if (e == Examined::starved) return Probe::starved;
          if (e == Examined::restart) {
            restart = true;
            break;
          }
        }
        if (!restart && ctrl::match_empty(w)) ended = true;
        // Every group visited without an empty slot: only in a table being
        // rebuilt in a reused range, which the generation says is stale.
      } while (!restart && !ended && seq.next());
      if (restart) break;
      if (!ended) {
        restart = true;
        break;
      }
    }
    // A miss is a conclusion about these tables: the generation must not
    // have moved. (The acquire loads above come first.)
    if (!restart && sh.index_.unchanged_since(generation)) return Probe::miss;
    if (may_starve && backoff.exhausted()) return Probe::starved;
    backoff.pause();
  }
}

template <class S>
template <class OnHit>
typename S::Examined ShardProbe<S>::examine(const S& sh, std::uint64_t generation, std::uint64_t serial, const std::uint64_t* slot,
                 std::string_view key, std::uint64_t h, OnHit& on_hit, Backoff& backoff,
                 bool may_starve, bool locked) {
  for (;; backoff.pause()) {
    if (may_starve && backoff.exhausted()) return Examined::starved;
    // Pairs with the release stores in Index::insert/update: the record the
    // location leads to is visible.
    const std::uint64_t sw = load_acquire(slot);
    const Location loc = S::slot_location(sw);
#if defined(OFFHEAP_TESTING_READ_HOOK)
    testing_reader_step();
#endif
    // A removal empties the slot's location before its record is freed:
    // the key this reader saw in the control word is gone from here.
    if (loc.is_none()) return Examined::other;
    std::uint64_t avail = 0;
    const std::byte* rec = sh.journal_.resolve(loc, record::kMinRecord, avail);
    if (rec == nullptr) {
      // Only a stale table leads outside (or, in a file-backed store, a
      // damaged one: passed over, counted).
      if (sh.durable_ && sh.index_.unchanged_since(generation) && S::leads_to(load_relaxed(slot), loc)) {
        return sh.met_damage();
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
      if (sh.durable_ && (s1 == 0 || locked || backoff.hopeless()) &&
          sh.index_.unchanged_since(generation) && S::leads_to(load_relaxed(slot), loc)) {
        return sh.met_damage();
      }
      if (s1 == 0) return Examined::restart;  // zeroed by clear(): the table is stale
      // Odd: a write in progress at a record the slot still leads to in a
      // current table (then wait), or bytes from a stale location that are
      // no stamp (then move on). The acquire load of the stamp orders these.
      if (!sh.index_.unchanged_since(generation)) return Examined::restart;
      continue;  // reloads the slot
    }
    const record::Meta m = record::read_meta(rec);
    const bool mine = record::is_live_record_of(rec, m, avail, key);
    const std::uint64_t deadline = mine ? record::deadline_of(rec, m, avail) : 0;
    if (!record::validate(rec, s1)) continue;
    if (mine) {
      // Expired, by the clock read before the slot and the generation are
      // checked again (as in lookup()).
      const bool gone = deadline != 0 && sh.expired(deadline);
      // The record is the key's only while the slot still leads to it and
      // the index generation has not moved: a stale location may land
      // inside a newer record's bytes once its own record was freed and
      // merged into a neighbour, or after clear(). The validate fence
      // orders these loads after the record's words; the writer changed
      // the slot or the generation before it freed the record.
      if (!sh.index_.unchanged_since(generation)) return Examined::restart;
      if (!S::leads_to(load_relaxed(slot), loc)) continue;
      if (sh.verify_) {
        const bool intact = record::checksum_in_place(sh.crc_seed_, rec, loc, s1, m.encode(), avail) ==
                            record::stored_checksum(rec);
        if (!record::validate(rec, s1)) continue;
        if (!sh.index_.unchanged_since(generation)) return Examined::restart;
        if (!intact) sh.report_corrupt(loc);  // throws
      }
      // The key's record, expired: absent (the probe goes on to a miss:
      // no other record of the key is in the index).
      if (gone) {
        if (!record::validate(rec, s1)) continue;  // rewritten since the clock read (as in lookup())
        if (!sh.index_.unchanged_since(generation)) return Examined::restart;
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
        if (sh.index_.unchanged_since(generation) || still_current(sh, serial, slot, loc, rec, s1)) {
          if constexpr (Eviction::reader_hits == eviction::ReaderHits::frequency_bits) {
            if (sh.cache_.counts_hits()) CacheHost<S>::raise_frequency(slot, sw);
          } else if constexpr (kBufferedHits) {
            sh.cache_.record_hit(sh, loc, s1, h);
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
    if (S::leads_to(load_relaxed(slot), loc)) return Examined::other;
  }
}

}  // namespace offheap::detail
