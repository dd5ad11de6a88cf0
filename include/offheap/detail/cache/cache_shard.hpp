// SPDX-License-Identifier: Apache-2.0
// A shard as a cache: its eviction policy (PolicyTraits<P>::Eviction) told
// of every insert, replacement and removal, asked for victims, and answered
// through EvictHost, the policy's view of the shard's records.
//
// Every call here runs under the shard's writer lock. The policy keeps
// handles (location + stamp); a handle is current while the record at its
// location is live with its stamp and the key's index slot leads there (an
// update's old record may stay live on disk in Durability::periodic until a
// sync, but no slot leads to it). The policy bits live in the low bits of
// the slot's word (Location::kSlotBits), which the host finds through the
// record's key.
//
// Capacity: each shard holds its share of Options::capacity_bytes, counted
// as the live records' journal bytes (headers, keys, values, padding:
// Stats::live_bytes). Writers evict only past the hard limit (the share
// plus the slack), from their own shard, as many records as make room for
// the one they write, before they write it; the maintenance thread (or
// maintain()) evicts down to the share.
#pragma once

#include <offheap/detail/shard/shard.hpp>

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

namespace offheap::detail {

/// A reader's hit on a cache whose policy counts reads in the slot's
/// low 2 bits (S3Fifo): raised while below 3, so a hot record's reads
/// write nothing. One compare-and-swap against the word the reader
/// validated: if a writer changed the slot meanwhile it fails and the
/// count is lost, nothing else (the word is never a value byte; a
/// replaced table's dropped page reads 0 and is never written, as the
/// load before the swap sees).
template <class P>
void Shard<P>::raise_frequency(const std::uint64_t* slot, std::uint64_t seen) noexcept {
  if ((seen & 3) == 3) return;
  auto* w = const_cast<std::uint64_t*>(slot);
  if (load_relaxed(w) != seen) return;
  // Relaxed: a count, ordered with nothing; writers read it under the lock.
  std::atomic_ref<std::uint64_t>(*w).compare_exchange_strong(seen, seen + 1, std::memory_order_relaxed);
}
/// A reader's hit (Lru, WTinyLfu) goes to its ring. With a maintenance
/// thread (which drains the rings every round) a hit that finds the ring
/// full is dropped: the drain's work stays off the read path.
template <class P>
[[gnu::always_inline]] inline void Shard<P>::record_hit(Location loc, std::uint64_t stamp, std::uint64_t h) const {
  if (count_hits_ && !hits_.record(loc.raw(), stamp, h, readers_drain_)) [[unlikely]] {
    drain_full_ring(loc, stamp, h);
  }
}
/// Without a maintenance thread, a reader whose ring is full drains the
/// shard's rings if the writer lock is free at once (never waits), then
/// records the hit; else drops it. (A reader holding the lock finds
/// try_lock refused: the hit drops.)
template <class P>
[[gnu::noinline, gnu::cold]] void Shard<P>::drain_full_ring(Location loc, std::uint64_t stamp, std::uint64_t h) const {
  if constexpr (requires { lock_.try_lock(); }) {
    if (starving_readers_.load(std::memory_order_relaxed) != 0 || !lock_.try_lock()) {
      hits_.note_dropped();
      return;
    }
    std::atomic_thread_fence(std::memory_order_release);  // as WriteLock's
    const_cast<Shard*>(this)->drain_hits();
    lock_.unlock();
    hits_.record(loc.raw(), stamp, h, false);
  } else {
    // A lock without try_lock (NullLock: a reader cannot tell whether the
    // one writer is inside): the hit drops, counted.
    hits_.note_dropped();
  }
}

template <class P>
struct Shard<P>::EvictHost {
  Shard& s;

  bool current(eviction::Handle& h) {
    // A file may be damaged after a clean close: a record whose checksum
    // fails is never evicted (freed by lengths that cannot be trusted, over
    // its neighbours); the policy lets it go, the index keeps it until a
    // reader or writer meets it (integrity.hpp).
    const Held r = s.held_record(Location::from_raw(h.loc), h.stamp, s.durable_);
    if (!r.found) return false;
    s.host_loc_ = h.loc;
    s.host_slot_ = r.slot;
    h.hash = r.hash;
    h.bytes = r.bytes;
    return true;
  }
  std::uint8_t bits(const eviction::Handle& h) { return s.index_.bits(slot_of(h)); }
  void set_bits(const eviction::Handle& h, std::uint8_t b) {
    s.index_.set_bits(slot_of(h), b);
    // File-backed: a copy of the frequency in the record's header, for a
    // rebuild after a crash (a hint: no sync waits for it).
    if (s.durable_) record::set_policy_bits(s.journal_.at(Location::from_raw(h.loc)), b);
  }
  void evict(const eviction::Handle& h) {
    const std::uint64_t slot = slot_of(h);
    const Location loc = Location::from_raw(h.loc);
    std::byte* rec = s.journal_.at(loc);
    const record::Meta m = record::read_meta(rec);
    const std::string_view key(reinterpret_cast<const char*>(rec + record::kHeaderBytes), m.key_len);
    Slot marker{};
    try {
      marker = s.removal_marker(key.size());  // may throw; nothing has changed yet
    } catch (const LimitReached&) {
      // Options::memory_limit_bytes left no room for the dead marker (or
      // its list entries): a full journal, no chunk for one. Periodic, a
      // settled record goes without one, freed at once: every older record
      // of its key is free on disk, so that a crash brings back at most
      // this one, the key's latest value (an eviction, not a removal the
      // application asked for). Else the store syncs and tries again.
      if (!s.defer_frees_ || s.removals_.on() || record::read_stamp(rec) >= s.settled_below_) throw;
      marker = Slot{};
      ++s.markerless_evictions_;
    }
    // A failed msync (every_write) is noted store-wide, which refuses
    // writes from then on; the eviction stands, so the policy's books do.
    (void)s.remove_at(slot, loc, rec, m, key, marker, RemovalCause::evicted);
    s.host_loc_ = ~std::uint64_t{0};
    ++s.evictions_;
    // The record the write under way replaces or removes: reported as an
    // eviction unless that write then completes (own_key_done()).
    if (s.own_.active && s.own_.loc == h.loc && !s.own_.evicted) {
      s.own_.evicted = true;
      s.own_.limit_counted = s.limit_round_;
      s.own_.report = s.removals_.on() ? s.removals_.last() : nullptr;
    }
  }

 private:
  /// The slot of the record current() just found (the policy asks right
  /// after it), else found again.
  std::uint64_t slot_of(const eviction::Handle& h) {
    if (s.host_loc_ != h.loc) {
      eviction::Handle again = h;
      [[maybe_unused]] const bool ok = current(again);
      assert(ok);
    }
    return s.host_slot_;
  }
};

template <class P>
typename Shard<P>::Held Shard<P>::held_record(Location loc, std::uint64_t stamp, bool check_intact) const {
  std::uint64_t avail = 0;
  const std::byte* rec = journal_.resolve(loc, record::kMinRecord, avail);
  if (rec == nullptr || record::read_stamp(rec) != stamp) return {};
  const record::Meta m = record::read_meta(rec);
  if (m.state() != record::State::live || record::kHeaderBytes + m.capacity() > avail) return {};
  if (check_intact && !intact(loc, rec)) return {};
  const std::string_view key(reinterpret_cast<const char*>(rec + record::kHeaderBytes), m.key_len);
  const std::uint64_t hash = hash_(key);
  // An old record of its key (periodic) or one removed has no slot.
  const Index::Found f = index_.find(hash, [&](Location l) { return l == loc; });
  if (!f.found) return {};
  return Held{true, f.slot, hash, record::kHeaderBytes + m.capacity()};
}

template <class P>
void Shard<P>::set_capacity(std::uint64_t capacity, std::uint64_t slack) {
  const WriteLock guard(*this);
  capacity_ = capacity;
  hard_limit_ = capacity + slack;
  policy_.set_capacity(capacity);
}

template <class P>
std::uint64_t Shard<P>::evict_to_capacity(std::uint64_t max_records) {
  if constexpr (!kEvicts) {
    return 0;
  } else {
    const WriteLock guard(*this);
    if constexpr (kBufferedHits) drain_hits();
    EvictHost host{*this};
    std::uint64_t n = 0;
    while (n < max_records && live_bytes_ > capacity_ && policy_.evict_one(host)) ++n;
    return n;
  }
}

template <class P>
void Shard<P>::prepare_policy_rebuild() {
  if constexpr (kEvicts) {
    const WriteLock guard(*this);
    policy_.clear();
    try {
      // A page for each waiting list (periodic): evictions at open need
      // their entries, and the policy would take every page left.
      if (defer_frees_) {
        deferred_.reserve(1);
        dead_.reserve(1);
      }
      // And the policy's first segments: a shard whose policy held nothing
      // could evict nothing to make room for its records.
      reserve_policy();
    } catch (const Error&) {
      // (Less room than that: rebuild_policy() meets the limit and says so.)
    }
  }
}

template <class P>
void Shard<P>::rebuild_policy(bool may_evict) {
  if constexpr (kEvicts) {
    // Oldest first: the policy's queues in the order the records were
    // written. (A transient list at open, freed before the first write.)
    struct Item {
      std::uint64_t stamp;
      std::uint64_t slot;
      Location loc;
    };
    std::vector<Item> items;
    {
      const WriteLock guard(*this);
      items.reserve(size());
      index_.for_each_full([&](std::uint64_t slot, Location loc) {
        // A clean open trusts the saved index, not the records (state_file.hpp):
        // a damaged one is left to the readers and writers that meet it.
        if (durable_ && (loc.chunk() >= journal_.chunks() || !intact(loc, journal_.at(loc)))) return;
        items.push_back(Item{record::read_stamp(journal_.at(loc)), slot, loc});
      });
    }
    std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.stamp < b.stamp; });
    // Under Options::memory_limit_bytes, a cache killed at its limit can
    // come back with more records than its policy had room for (evictions
    // whose dead markers no sync had made durable come back with their
    // records). Then the policy evicts from what it holds already (by its
    // own order: the oldest restored first), with markers, as at run time,
    // until the next record fits; the shard is synced when the markers or
    // the waiting lists find no room (periodic). No other thread runs yet:
    // the lock is let go for the syncs. Refused when nothing moves on,
    // and after a clean close (`may_evict` false: the files must stay as
    // the state files describe them until the open marks them unclean).
    std::size_t next = 0;
    std::exception_ptr refused;
    int idle_syncs = 0;  // blocked rounds in a row that moved nothing on
    while (next < items.size()) {
      bool blocked = false;
      const std::size_t next_before = next;
      const std::uint64_t evicted_before = evictions_;
      {
        const WriteLock guard(*this);
        EvictHost host{*this};
        while (next < items.size()) {
          const Item& it = items[next];
          try {
            reserve_policy();
          } catch (const LimitReached&) {
            if (!may_evict) throw;
            refused = std::current_exception();
            bool evicted = false;
            try {
              const std::uint64_t before = evictions_;
              evicted = policy_.evict_one(host);
              limit_evictions_ += evictions_ - before;
            } catch (const LimitReached& e) {
              blocked = true;  // the marker or the waiting lists: a sync first
              break;
            }
            if (!evicted) std::rethrow_exception(refused);  // nothing left to evict
            continue;
          }
          const std::byte* rec = journal_.at(it.loc);
          const record::Meta m = record::read_meta(rec);
          const std::string_view key(reinterpret_cast<const char*>(rec + record::kHeaderBytes), m.key_len);
          host_loc_ = it.loc.raw();
          host_slot_ = it.slot;
          policy_.restore(eviction::Handle{it.loc.raw(), it.stamp, hash_(key),
                                           record::kHeaderBytes + m.capacity()},
                          host);
          ++next;
        }
      }
      if (blocked) {
        // Periodic: the records evicted so far are freed by a sync, their
        // markers by the next; the two settle every record (evicted without
        // a marker when none finds room). Else (a listener's reports wait for the
        // maintenance thread, not started yet) nothing frees them now.
        idle_syncs = next == next_before && evictions_ == evicted_before ? idle_syncs + 1 : 0;
        if (!defer_frees_ || removals_.on() || idle_syncs > 2 || (deferred_records() == 0 && !unsettled())) {
          std::rethrow_exception(refused);
        }
        if (const int err = sync(false)) sync_failed(err);
        if (const int err = sync(false)) sync_failed(err);
      }
    }
  }
}

/// Hands the readers' buffered hits to the policy (under the lock), as
/// they were recorded: location, stamp and key hash, without looking the
/// record up again. The policy applies a hit only to the record it holds
/// at that location with that stamp (a record that went since was
/// forgotten, or evicted, first); the key's frequency counts either way.
template <class P>
void Shard<P>::drain_hits() {
  if constexpr (kBufferedHits) {
    EvictHost host{*this};
    hits_applied_ += hits_.drain([&](std::uint64_t loc, std::uint64_t stamp, std::uint64_t hash) {
      policy_.hit(eviction::Handle{loc, stamp, hash, 0}, host);
    });
  }
}

template <class P>
void Shard<P>::make_room(std::uint64_t need, const KeySeen* own) {
  // The record may take a free slot up to kMinRecord - 8 bytes larger.
  const std::uint64_t bytes = need + record::kMinRecord;
  // The record the write replaces leaves as the new one comes (its bytes
  // leave live_bytes_ then, whatever frees its space): a write that grows
  // a value by nothing evicts nothing. (Unless this very loop evicts it.)
  const auto leaving = [&] { return own != nullptr && own->found && !own->evicted ? own->bytes : 0; };
  if (live_bytes_ + bytes <= hard_limit_ + leaving()) [[likely]] return;
  if (bytes > hard_limit_) {
    throw Error(Errc::value_too_large,
                journal_.name() + ": a record of " + std::to_string(need) +
                    " bytes cannot fit in a cache shard that holds " + std::to_string(capacity_) +
                    " bytes (Options::capacity_bytes / shards, plus the slack)");
  }
  // Under Options::memory_limit_bytes, a record no chunk could hold is
  // refused before anything is evicted for it (evictions give the limit
  // nothing back).
  if (!journal_.could_hold(bytes)) {
    LimitReached e(journal_.name() + ": a record of " + std::to_string(need) +
                   " bytes fits no journal chunk mapped and no chunk that Options::memory_limit_bytes (" +
                   std::to_string(journal_.store_name().budget.limit()) + " bytes) leaves room for");
    e.evicting_helps = false;
    throw e;
  }
  // Past the hard limit: the maintenance thread has fallen behind (or is
  // not running). Evict as much as this record needs, no more: the work
  // stays proportional to what the writer writes. The readers' latest hits
  // first, so that the victims are chosen on them.
  if constexpr (kBufferedHits) drain_hits();
  EvictHost host{*this};
  while (live_bytes_ != 0 && live_bytes_ + bytes > hard_limit_ + leaving() && policy_.evict_one(host)) {
  }
}

/// A write that Options::memory_limit_bytes refused a new chunk
/// (LimitReached): evicts records, by the policy, of at least `bytes` and
/// about 1% of the shard more (doubled with each `round` of the same
/// write, from 1, up to 16%), so that the write, tried again, finds room in space
/// already mapped (records, policy nodes and segments), and the next
/// writes do without coming back here. Returns false when evicting cannot
/// help now: nothing is left to evict, or the evicted records' space is
/// not free yet (a removal listener, or Durability::periodic, keeps it
/// until the listener or a sync has run: the store's write runs them and
/// tries again).
template <class P>
void Shard<P>::reserve_policy() {
  try {
    policy_.reserve();
  } catch (const LimitReached&) {
    if constexpr (requires(EvictHost& host) { policy_.drop_stale(host); }) {
      EvictHost host{*this};
      if (policy_.drop_stale(host)) {
        policy_.reserve();  // may throw again: the caller evicts, or gives up
        return;
      }
    }
    throw;
  }
}

template <class P>
bool Shard<P>::evict_for_room(std::uint64_t bytes, std::uint64_t round) {
  if constexpr (kBufferedHits) drain_hits();
  EvictHost host{*this};
  const std::uint64_t before = live_bytes_, evicted = evictions_;
  // Evictions that free only after a report or a sync (the caller's, in
  // Upkeep::free_waiting_removals()) take 1/16 at once: fewer of those.
  const std::uint64_t share = removals_.on() || defer_frees_ ? before / 16 : before / 128;
  const std::uint64_t want = bytes + (share << std::min<std::uint64_t>(round - 1, 4));
  // (A write's own record evicted here is counted in limit_evictions_;
  // the flag goes down however this ends.)
  struct LimitRound {
    bool& on;
    explicit LimitRound(bool& flag) noexcept : on(flag) { on = true; }
    LimitRound(const LimitRound&) = delete;
    LimitRound& operator=(const LimitRound&) = delete;
    ~LimitRound() { on = false; }
  } const limit_round(limit_round_);
  try {
    while (live_bytes_ != 0 && before - live_bytes_ < want && policy_.evict_one(host)) {
    }
  } catch (const LimitReached&) {
    // An eviction's dead marker found no room (its space waits for a sync
    // or a report): those made so far count; the store's write frees
    // what waits and tries again.
    limit_evictions_ += evictions_ - evicted;
    throw;
  }
  limit_evictions_ += evictions_ - evicted;
  // (Periodic: even when evictions without markers freed room at once, the
  // caller's retry goes through the store, which syncs: retried here, the
  // rounds' doubling shares would evict most of the shard for one write.)
  return live_bytes_ < before && !removals_.on() && !defer_frees_;
}

template <class P>
void Shard<P>::cache_admitted(std::uint64_t slot, Location loc, std::uint64_t h) {
#if defined(OFFHEAP_TESTING_POLICY_HOOK)
  if (testing_skip_policy("admit")) return;
#endif
  const std::byte* rec = journal_.at(loc);
  host_loc_ = loc.raw();
  host_slot_ = slot;
  EvictHost host{*this};
  policy_.admit(eviction::Handle{loc.raw(), record::read_stamp(rec), h,
                                 record::kHeaderBytes + record::read_meta(rec).capacity()},
                host);  // cannot fail: reserved in write()
}

template <class P>
void Shard<P>::policy_forget(std::uint64_t slot, Location loc, std::uint64_t stamp, std::uint64_t h,
                             std::uint64_t bytes) {
  if constexpr (kEvicts) {
#if defined(OFFHEAP_TESTING_POLICY_HOOK)
    if (testing_skip_policy("forget")) return;
#endif
    host_loc_ = loc.raw();
    host_slot_ = slot;
    EvictHost host{*this};
    policy_.forget(eviction::Handle{loc.raw(), stamp, h, bytes}, host);
  } else {
    (void)slot, (void)loc, (void)stamp, (void)h, (void)bytes;
  }
}

/// The policy learns that the record `before` names was overwritten, now
/// at `loc` (slot `slot`); `moved` (compaction): the same record, moved,
/// which a policy with relocate() (Lru, WTinyLfu) takes as no access: its
/// node is rekeyed where it stands.
template <class P>
void Shard<P>::cache_replaced(const eviction::Handle& before, std::uint64_t slot, Location loc,
                              std::uint64_t h, bool moved) {
  const std::byte* rec = journal_.at(loc);
  host_loc_ = loc.raw();
  host_slot_ = slot;
  EvictHost host{*this};
  const eviction::Handle after{loc.raw(), record::read_stamp(rec), h,
                               record::kHeaderBytes + record::read_meta(rec).capacity()};
  if constexpr (requires { policy_.relocate(before, after, host); }) {
    if (moved) {
      policy_.relocate(before, after, host);
      return;
    }
  }
  policy_.replace(before, after, host);  // cannot fail: reserved by the caller
}

/// verify()'s part for caches (under the lock): the policy holds every
/// live record once (its other handles are stale: skipped by their
/// stamps), and its byte counts are the live records' bytes.
template <class P>
std::string Shard<P>::verify_policy() const {
  if constexpr (!kEvicts) {
    return {};
  } else {
    if (!count_hits_) return {};  // read-only: the policy was never rebuilt (no evictions)
    std::vector<std::uint64_t> held;  // locations of the current records the policy holds
    std::uint64_t held_bytes = 0, entries = 0;
    policy_.for_each_entry([&](std::uint64_t raw, std::uint64_t stamp) {
      ++entries;
      const Held r = held_record(Location::from_raw(raw), stamp, false);
      if (!r.found) return;  // stale: skipped by its stamp
      held.push_back(raw);
      held_bytes += r.bytes;
    });
    std::sort(held.begin(), held.end());
    if (std::adjacent_find(held.begin(), held.end()) != held.end()) {
      return journal_.name() + ": the eviction policy holds a live record twice";
    }
    if (held.size() != size() || held_bytes != live_bytes_) {
      return journal_.name() + ": the eviction policy holds " + std::to_string(held.size()) +
             " live records (" + std::to_string(held_bytes) + " bytes) of the " + std::to_string(size()) +
             " indexed (" + std::to_string(live_bytes_) + " bytes)";
    }
    const eviction::PolicyStats p = policy_.stats();
    if (p.bytes != live_bytes_) {
      return journal_.name() + ": the eviction policy counts " + std::to_string(p.bytes) +
             " bytes; its live records hold " + std::to_string(live_bytes_);
    }
    if (p.entries != entries) {
      return journal_.name() + ": the eviction policy counts " + std::to_string(p.entries) + " entries and holds " +
             std::to_string(entries);
    }
    return {};
  }
}

}  // namespace offheap::detail
