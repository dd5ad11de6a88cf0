// SPDX-License-Identifier: Apache-2.0
// A shard as a cache: its eviction policy (PolicyTraits<P>::Eviction) told
// of every insert, replacement and removal, asked for victims, and answered
// through EvictHost, the policy's view of the shard's records; the readers'
// hits, raised in the slot (S3Fifo) or buffered in rings (Lru, WTinyLfu).
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
// Stats::live_bytes). A write to a shard that earlier writes left past its
// share evicts from it, before it writes, records of up to twice its own
// bytes (and, past the hard limit, the share plus the slack, as many as
// make its record fit under it); the maintenance thread (or maintain())
// evicts the rest down to the share, in a shard no write changed since its
// last round (one being written is left to its writers). So a cache at its
// capacity holds up to a record more than its share between writes.
//
// CacheHost<S> owns this: a component of the shard (S), which holds one
// (an empty policy and no rings in a store) and lets it in (friend).
#pragma once

#include <offheap/detail/cache/hit_buffers.hpp>
#include <offheap/detail/cache/removal_reports.hpp>
#include <offheap/detail/index/index.hpp>
#include <offheap/detail/index/location.hpp>
#include <offheap/detail/journal/record.hpp>
#include <offheap/detail/memory/atomic_word.hpp>
#include <offheap/detail/memory/memory_budget.hpp>
#include <offheap/detail/shard/reader_support.hpp>
#include <offheap/eviction/policy.hpp>
#include <offheap/error.hpp>
#include <offheap/removal.hpp>
#include <offheap/stats.hpp>

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace offheap::detail {

/// A record a policy's handle leads to, if current: live at its location
/// with its stamp, whole, and its key's index slot leads there.
struct HeldRecord {
  bool found = false;
  std::uint64_t slot = 0;
  std::uint64_t hash = 0;   // the key's
  std::uint64_t bytes = 0;  // header, key, value, padding
};

/// A write's look at its key, taken once per hold of the writer lock,
/// before it makes room (write(), compute(), each entry of a batch): what
/// the call decides on, and whether the room made for it evicted the
/// key's own record (EvictHost::evict notes it).
struct KeySeen {
  bool active = false;   // a write holds it (Shard::OwnKey)
  bool looked = false;
  bool found = false;    // a record of the key was there...
  bool expired = false;  // ... with its deadline passed (absent to the caller)
  std::uint64_t loc = ~std::uint64_t{0};  // its location (raw)
  std::uint64_t bytes = 0;                // and journal bytes
  bool evicted = false;        // the room made for this write evicted it
  bool limit_counted = false;  // ... in an eviction for the memory limit
  RetiredRecord* report = nullptr;  // ... and its report waits there (a listener)
  bool present() const noexcept { return found && !expired; }
};

/// A shard's cache host (S: the shard). Its state: the eviction policy,
/// the shard's share of the capacity and the hard limit (share + slack),
/// the eviction figures, the readers' hit rings (Lru, WTinyLfu) and
/// whether readers count hits at all (a writable cache), the look of the
/// write under way at its key (own(): for an eviction of that very
/// record), and the slot current() found last. Every call runs under the
/// shard's writer lock (the caller holds it, or the call takes it: said
/// below), except the readers' raise_frequency() and record_hit().
template <class S>
class CacheHost {
 public:
  using Eviction = typename S::Eviction;
  using Slot = typename S::Slot;
  using WriteLock = typename S::WriteLock;
  static constexpr bool kBufferedHits = S::kBufferedHits;

  CacheHost(const StoreName& name, bool count_hits) : count_hits_(count_hits), hits_(name), policy_(name) {}
  CacheHost(const CacheHost&) = delete;
  CacheHost& operator=(const CacheHost&) = delete;

  /// A reader's hit on a cache: S3Fifo's frequency bits in the slot, raised
  /// while below 3 with one compare-and-swap; Lru's and WTinyLfu's to the
  /// reader's ring (drained by the maintenance thread, or by a reader that
  /// finds its ring full and the lock free). Lock-free.
  [[gnu::always_inline]] static void raise_frequency(const std::uint64_t* slot, std::uint64_t seen) noexcept {
    if ((seen & 3) != 3) [[unlikely]] raise_frequency_below_3(slot, seen);  // (a hot record's reads: nothing)
  }
  [[gnu::always_inline]] void record_hit(const S& sh, Location loc, std::uint64_t stamp, std::uint64_t h) const;
  /// Whether readers count hits (a writable cache: a read-only one writes nothing).
  bool counts_hits() const noexcept { return count_hits_; }

  /// The policy's view of a record its handle names (static: no state).
  static HeldRecord held_record(const S& sh, Location loc, std::uint64_t stamp, bool check_intact);
  /// Sets this shard's share of the capacity and the slack writers may
  /// pass it by before they evict themselves. Takes the lock.
  void set_capacity(S& sh, std::uint64_t capacity, std::uint64_t slack);
  /// Evicts until the live bytes are at most the share, or `max_records`
  /// went; returns how many went. Takes the lock. `yield` (the maintenance
  /// thread's rounds): stops as soon as a writer waits for the lock, and
  /// evicts nothing from a shard written since the last such call unless
  /// it is past the hard limit (its writers evict as they write).
  std::uint64_t evict_to_capacity(S& sh, std::uint64_t max_records, bool yield = false);
  /// A maintenance thread will drain the readers' hit rings: readers stop
  /// draining them. Before the store is shared.
  void leave_drains_to_maintenance() noexcept { readers_drain_ = false; }
  /// Before any shard's rebuild_policy(): empties the policy and maps its
  /// first segments, and a page for each waiting list (periodic). Takes the lock.
  void prepare_policy_rebuild(S& sh);
  /// A reopened cache: the policy learns every record, oldest first, with
  /// the policy bits its index slot kept; a recovered shard (`may_evict`)
  /// whose policy finds no room under the memory limit evicts by it until
  /// the rest fits. Takes the lock (and lets it go to sync).
  void rebuild_policy(S& sh, bool may_evict);
  /// Hands the readers' buffered hits to the policy; `yield`: stops, the
  /// rest left in the rings, as soon as a writer waits for the lock (the
  /// maintenance thread's drains).
  void drain_hits(S& sh, bool yield = false);
  /// Whether a reader dropped a hit on a full ring since the last call.
  bool take_full() noexcept { return hits_.take_full(); }
  /// clear(): the policy emptied, the buffered hits (of records gone) dropped.
  void clear() noexcept {
    policy_.clear();
    if constexpr (kBufferedHits) hits_.discard();
  }

  /// The write under way's look at its key (Shard::OwnKey renews it).
  KeySeen& own() noexcept { return own_; }
  /// Evicts until a record of `bytes` fits under the hard limit, the bytes
  /// of `own` (the record the write replaces, while it is there) counted
  /// as leaving.
  void make_room(S& sh, std::uint64_t bytes, const KeySeen* own);
  /// policy_.reserve(); when the memory limit refuses it, the policy's
  /// entries of records gone since go first (drop_stale), then once more.
  void reserve_policy(S& sh);
  /// After the memory limit refused a write: evicts by the policy (see the
  /// definition); whether the write, tried again, may find room.
  bool evict_for_room(S& sh, std::uint64_t bytes, std::uint64_t round);
  /// The write that `seen` belongs to evicted its key's own record and then
  /// wrote or removed the key: that eviction is not counted as one.
  void uncount_own_eviction(const KeySeen& seen) noexcept {
    --evictions_;
    if (seen.limit_counted) --limit_evictions_;
  }
  std::uint64_t evictions() const noexcept { return evictions_; }
  /// The policy learns a new record (admitted), a rewrite (replaced; moved
  /// by compaction), a record about to leave by removal or expiry (forget).
  void cache_admitted(S& sh, std::uint64_t slot, Location loc, std::uint64_t h);
  void policy_forget(S& sh, std::uint64_t slot, Location loc, std::uint64_t stamp, std::uint64_t h,
                     std::uint64_t bytes);
  void cache_replaced(S& sh, const eviction::Handle& before, std::uint64_t slot, Location loc,
                      std::uint64_t h, bool moved);

  /// verify()'s part for caches (under the lock).
  std::string verify_policy(const S& sh) const;
  /// What the policy and the rings map.
  std::uint64_t mapped_bytes() const noexcept { return policy_.stats().mapped_bytes + hits_.mapped_bytes(); }
  /// Adds the cache's figures to `s` (under the lock); `live_bytes`: the shard's.
  void add_stats(Stats& s, std::uint64_t live_bytes) const;

 private:
  /// The policy's view of the shard's records (eviction/policy.hpp).
  struct EvictHost {
    S& s;


    bool current(eviction::Handle& h) {
      // A file may be damaged after a clean close: a record whose checksum
      // fails is never evicted (freed by lengths that cannot be trusted, over
      // its neighbours); the policy lets it go, the index keeps it until a
      // reader or writer meets it (integrity.hpp).
      const HeldRecord r = held_record(s, Location::from_raw(h.loc), h.stamp, s.durable_);
      if (!r.found) return false;
      s.cache_.host_loc_ = h.loc;
      s.cache_.host_slot_ = r.slot;
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
    /// The record's node word (eviction/policy.hpp; record.hpp keeps it
    /// in word 2): any handle, checked only for its stamp; the policy
    /// checks the number against its node.
    std::uint32_t node(const eviction::Handle& h) const noexcept {
      std::uint64_t avail = 0;
      const std::byte* rec = s.journal_.resolve(Location::from_raw(h.loc), record::kMinRecord, avail);
      if (rec == nullptr || record::read_stamp(rec) != h.stamp) return eviction::kNoNode;
      const std::uint32_t w = record::node_word(rec);
      return w == 0 ? eviction::kNoNode : w - 1;
    }
    void set_node(const eviction::Handle& h, std::uint32_t n) noexcept {
      assert(n <= eviction::kMaxNode);
      record::set_node_word(s.journal_.at(Location::from_raw(h.loc)), n + 1);
    }
    /// The policy's hint (eviction/policy.hpp): the record at `loc` comes
    /// next. Its first two lines into the cache; nothing read is relied on.
    void prefetch(std::uint64_t loc) const noexcept { s.prefetch_record_at(Location::from_raw(loc)); }
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
        if (!s.durability_.defers() || s.removals_.on() || !s.durability_.settled(record::read_stamp(rec))) throw;
        marker = Slot{};
        ++s.cache_.markerless_evictions_;
      }
      // A failed msync (every_write) is noted store-wide, which refuses
      // writes from then on; the eviction stands, so the policy's books do.
      (void)s.remove_at(slot, loc, rec, m, key, marker, RemovalCause::evicted);
      s.cache_.host_loc_ = ~std::uint64_t{0};
      ++s.cache_.evictions_;
      // The record the write under way replaces or removes: reported as an
      // eviction unless that write then completes (own_key_done()).
      if (s.cache_.own_.active && s.cache_.own_.loc == h.loc && !s.cache_.own_.evicted) {
        s.cache_.own_.evicted = true;
        s.cache_.own_.limit_counted = s.cache_.limit_round_;
        s.cache_.own_.report = s.removals_.on() ? s.removals_.last() : nullptr;
      }
    }

   private:
    /// The slot of the record current() just found (the policy asks right
    /// after it), else found again.
    std::uint64_t slot_of(const eviction::Handle& h) {
      if (s.cache_.host_loc_ != h.loc) {
        eviction::Handle again = h;
        [[maybe_unused]] const bool ok = current(again);
        assert(ok);
      }
      return s.cache_.host_slot_;
    }
  };

  [[gnu::noinline]] static void raise_frequency_below_3(const std::uint64_t* slot, std::uint64_t seen) noexcept;
  [[gnu::noinline, gnu::cold]] void drain_full_ring(const S& sh, Location loc, std::uint64_t stamp, std::uint64_t h) const;

  struct NoHitBuffers {
    explicit NoHitBuffers(const StoreName&) noexcept {}
    std::uint64_t mapped_bytes() const noexcept { return 0; }
  };

  // What every reader's hit reads: a line of their own, which writers do
  // not dirty (the rest below changes with every insert, update, removal).
  alignas(64) bool count_hits_;  // readers raise policy bits (a writable cache: a read-only one writes nothing)
  bool readers_drain_ = true;    // false once a maintenance thread drains the hit rings
  // Lru, WTinyLfu: readers' hits on their way to the policy (hit_buffers.hpp).
  [[no_unique_address]] mutable std::conditional_t<kBufferedHits, HitBuffers, NoHitBuffers> hits_;

  alignas(64) Eviction policy_;
  std::uint64_t capacity_ = ~std::uint64_t{0};    // this shard's share of capacity_bytes
  std::uint64_t hard_limit_ = ~std::uint64_t{0};  // capacity_ plus the slack
  std::uint64_t evictions_ = 0;
  std::uint64_t limit_evictions_ = 0;  // of evictions_: for Options::memory_limit_bytes
  std::uint64_t puts_at_round_ = 0;    // the shard's puts_ at the last round's evict_to_capacity()
  std::uint64_t markerless_evictions_ = 0;  // settled records evicted without a marker
  std::uint64_t hits_applied_ = 0;  // buffered hits handed to the policy
  KeySeen own_;                // the write under way's look at its key (OwnKey: active)
  bool limit_round_ = false;   // evict_for_room() is evicting
  std::uint64_t host_loc_ = ~std::uint64_t{0};  // the record whose slot current() found last
  std::uint64_t host_slot_ = 0;
};

/// A reader's hit on a cache whose policy counts reads in the slot's
/// low 2 bits (S3Fifo): raised while below 3, so a hot record's reads
/// write nothing. One compare-and-swap against the word the reader
/// validated: if a writer changed the slot meanwhile it fails and the
/// count is lost, nothing else (the word is never a value byte; a
/// replaced table's dropped page reads 0 and is never written, as the
/// load before the swap sees).
template <class S>
void CacheHost<S>::raise_frequency_below_3(const std::uint64_t* slot, std::uint64_t seen) noexcept {
  auto* w = const_cast<std::uint64_t*>(slot);
  if (load_relaxed(w) != seen) return;
  // Relaxed: a count, ordered with nothing; writers read it under the lock.
  std::atomic_ref<std::uint64_t>(*w).compare_exchange_strong(seen, seen + 1, std::memory_order_relaxed);
}
/// A reader's hit (Lru, WTinyLfu) goes to its ring. With a maintenance
/// thread (which drains the rings every round) a hit that finds the ring
/// full is dropped: the drain's work stays off the read path.
template <class S>
[[gnu::always_inline]] inline void CacheHost<S>::record_hit(const S& sh, Location loc, std::uint64_t stamp, std::uint64_t h) const {
  if (count_hits_ && !hits_.record(loc.raw(), stamp, h, readers_drain_)) [[unlikely]] {
    drain_full_ring(sh, loc, stamp, h);
  }
}
/// Without a maintenance thread, a reader whose ring is full drains the
/// shard's rings if the writer lock is free at once (never waits), then
/// records the hit; else drops it. (A reader holding the lock finds
/// try_lock refused: the hit drops.)
template <class S>
[[gnu::noinline, gnu::cold]] void CacheHost<S>::drain_full_ring(const S& sh, Location loc, std::uint64_t stamp, std::uint64_t h) const {
  if constexpr (requires { sh.lock_.try_lock(); }) {
    if (sh.starving_readers_.load(std::memory_order_relaxed) != 0 || !sh.lock_.try_lock()) {
      hits_.note_dropped();
      return;
    }
    std::atomic_thread_fence(std::memory_order_release);  // as WriteLock's
    const_cast<CacheHost*>(this)->drain_hits(const_cast<S&>(sh));
    sh.lock_.unlock();
    hits_.record(loc.raw(), stamp, h, false);
  } else {
    // A lock without try_lock (NullLock: a reader cannot tell whether the
    // one writer is inside): the hit drops, counted.
    hits_.note_dropped();
  }
}

template <class S>
HeldRecord CacheHost<S>::held_record(const S& sh, Location loc, std::uint64_t stamp, bool check_intact) {
  std::uint64_t avail = 0;
  const std::byte* rec = sh.journal_.resolve(loc, record::kMinRecord, avail);
  if (rec == nullptr || record::read_stamp(rec) != stamp) return {};
  const record::Meta m = record::read_meta(rec);
  if (m.state() != record::State::live || record::kHeaderBytes + m.capacity() > avail) return {};
  if (check_intact && !sh.intact(loc, rec)) return {};
  const std::string_view key(reinterpret_cast<const char*>(rec + record::kHeaderBytes), m.key_len);
  const std::uint64_t hash = sh.hash_(key);
  // An old record of its key (periodic) or one removed has no slot.
  const Index::Found f = sh.index_.find(hash, [&](Location l) { return l == loc; });
  if (!f.found) return {};
  return HeldRecord{true, f.slot, hash, record::kHeaderBytes + m.capacity()};
}

template <class S>
void CacheHost<S>::set_capacity(S& sh, std::uint64_t capacity, std::uint64_t slack) {
  const WriteLock guard(sh);
  capacity_ = capacity;
  hard_limit_ = capacity + slack;
  policy_.set_capacity(capacity);
}

template <class S>
std::uint64_t CacheHost<S>::evict_to_capacity(S& sh, std::uint64_t max_records, bool yield) {
  if constexpr (!S::kEvicts) {
    return 0;
  } else {
    const WriteLock guard(sh);
    if constexpr (S::kBufferedHits) drain_hits(sh, yield);
    if (yield) {
      // The maintenance thread's round: a shard written since the last
      // round is left to its writers, who evict as they write (make_room:
      // each leaves the shard at most its own record over the share).
      // Evicting that record here took the lock from them for a
      // microsecond of misses once a round per shard, and made most of
      // LruCache's put p99.9 (bench/offheap_latency's cache scene).
      const bool written = sh.puts_ != puts_at_round_;
      puts_at_round_ = sh.puts_;
      if (written && sh.live_bytes_ <= hard_limit_) return 0;
    }
    EvictHost host{sh};
    std::uint64_t n = 0;
    while (n < max_records && sh.live_bytes_ > capacity_ && !(yield && sh.writer_waiting()) &&
           policy_.evict_one(host)) {
      ++n;
    }
    return n;
  }
}

template <class S>
void CacheHost<S>::prepare_policy_rebuild(S& sh) {
  if constexpr (S::kEvicts) {
    const WriteLock guard(sh);
    policy_.clear();
    try {
      // A page for each waiting list (periodic): evictions at open need
      // their entries, and the policy would take every page left.
      sh.durability_.reserve(1, 1);
      // And the policy's first segments: a shard whose policy held nothing
      // could evict nothing to make room for its records.
      reserve_policy(sh);
    } catch (const Error&) {
      // (Less room than that: rebuild_policy() meets the limit and says so.)
    }
  }
}

template <class S>
void CacheHost<S>::rebuild_policy(S& sh, bool may_evict) {
  if constexpr (S::kEvicts) {
    // Oldest first: the policy's queues in the order the records were
    // written. (A transient list at open, freed before the first write.)
    struct Item {
      std::uint64_t stamp;
      std::uint64_t slot;
      Location loc;
    };
    std::vector<Item> items;
    {
      const WriteLock guard(sh);
      items.reserve(sh.size());
      sh.index_.for_each_full([&](std::uint64_t slot, Location loc) {
        // A clean open trusts the saved index, not the records (state_file.hpp):
        // a damaged one is left to the readers and writers that meet it.
        if (sh.durable_ && (loc.chunk() >= sh.journal_.chunks() || !sh.intact(loc, sh.journal_.at(loc)))) return;
        items.push_back(Item{record::read_stamp(sh.journal_.at(loc)), slot, loc});
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
    // (What restore() may write before that mark, node words whose numbers
    // were taken, lies outside the checksums and the state files: a crash
    // there leaves the store as clean as it was.)
    if constexpr (requires { policy_.begin_restore(items.size()); }) {
      const WriteLock guard(sh);
      policy_.begin_restore(items.size());
    }
    std::size_t next = 0;
    std::exception_ptr refused;
    int idle_syncs = 0;  // blocked rounds in a row that moved nothing on
    while (next < items.size()) {
      bool blocked = false;
      const std::size_t next_before = next;
      const std::uint64_t evicted_before = evictions_;
      {
        const WriteLock guard(sh);
        EvictHost host{sh};
        while (next < items.size()) {
          const Item& it = items[next];
          try {
            reserve_policy(sh);
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
          const std::byte* rec = sh.journal_.at(it.loc);
          const record::Meta m = record::read_meta(rec);
          const std::string_view key(reinterpret_cast<const char*>(rec + record::kHeaderBytes), m.key_len);
          host_loc_ = it.loc.raw();
          host_slot_ = it.slot;
          policy_.restore(eviction::Handle{it.loc.raw(), it.stamp, sh.hash_(key),
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
        if (!sh.durability_.defers() || sh.removals_.on() || idle_syncs > 2 || (sh.deferred_records() == 0 && !sh.unsettled())) {
          std::rethrow_exception(refused);
        }
        if (const int err = sh.sync(false)) sh.sync_failed(err);
        if (const int err = sh.sync(false)) sh.sync_failed(err);
      }
    }
  }
}

/// Hands the readers' buffered hits to the policy (under the lock), as
/// they were recorded: location, stamp and key hash, without looking the
/// record up again. The policy applies a hit only to the record it holds
/// at that location with that stamp (a record that went since was
/// forgotten, or evicted, first); the key's frequency counts either way.
template <class S>
void CacheHost<S>::drain_hits(S& sh, bool yield) {
  if constexpr (S::kBufferedHits) {
    EvictHost host{sh};
    hits_applied_ += hits_.drain(
        [&](std::uint64_t loc, std::uint64_t stamp, std::uint64_t hash) {
          policy_.hit(eviction::Handle{loc, stamp, hash, 0}, host);
        },
        [&] { return yield && sh.writer_waiting(); });
  }
}

template <class S>
void CacheHost<S>::make_room(S& sh, std::uint64_t need, const KeySeen* own) {
  // The record may take a free slot up to kMinRecord - 8 bytes larger.
  const std::uint64_t bytes = need + record::kMinRecord;
  // The record the write replaces leaves as the new one comes (its bytes
  // leave live_bytes_ then, whatever frees its space): a write that grows
  // a value by nothing evicts nothing. (Unless this very loop evicts it.)
  const auto leaving = [&] { return own != nullptr && own->found && !own->evicted ? own->bytes : 0; };
  // Over the share: by what earlier writes added (this one's record is
  // not in yet: the policy has seen every record before it evicts, as a
  // cache that inserts, then evicts).
  const auto over_share = [&] { return sh.live_bytes_ > capacity_ + leaving(); };
  const auto over_hard = [&] { return sh.live_bytes_ + bytes > hard_limit_ + leaving(); };
  if (!over_share() && !over_hard()) [[likely]] return;
  if (bytes > hard_limit_) {
    throw Error(Errc::value_too_large,
                sh.journal_.name() + ": a record of " + std::to_string(need) +
                    " bytes cannot fit in a cache shard that holds " + std::to_string(capacity_) +
                    " bytes (Options::capacity_bytes / shards, plus the slack)");
  }
  // Under Options::memory_limit_bytes, a record no chunk could hold is
  // refused before anything is evicted for it (evictions give the limit
  // nothing back).
  if (!sh.journal_.could_hold(bytes)) {
    LimitReached e(sh.journal_.name() + ": a record of " + std::to_string(need) +
                   " bytes fits no journal chunk mapped and no chunk that Options::memory_limit_bytes (" +
                   std::to_string(sh.journal_.store_name().budget.limit()) + " bytes) leaves room for");
    e.evicting_helps = false;
    throw e;
  }
  // Over the share: the write evicts what the writes before it added, so
  // that a cache at its capacity pays an eviction or so per write, on
  // every write, instead of waiting for the maintenance thread's batches
  // under the lock (put p99.9 of 100+ us beside a p50 under 1 us,
  // bench/offheap_latency). Bounded by what the write brings: records of
  // up to twice its bytes (the maintenance thread evicts the rest down to
  // the share); past the hard limit (the maintenance thread has fallen
  // behind, or is not running), as much as the record needs to fit under
  // it. The readers' latest hits first, so that the victims are chosen on
  // them (a few entries: every such write drains them).
  if constexpr (S::kBufferedHits) drain_hits(sh);
  EvictHost host{sh};
  const std::uint64_t start = sh.live_bytes_;
  const auto freed = [&] { return start - std::min(start, sh.live_bytes_); };
  while (sh.live_bytes_ != 0 && ((over_share() && freed() < 2 * bytes) || over_hard()) && policy_.evict_one(host)) {
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
template <class S>
void CacheHost<S>::reserve_policy(S& sh) {
  try {
    policy_.reserve();
  } catch (const LimitReached&) {
    if constexpr (requires(EvictHost& host) { policy_.drop_stale(host); }) {
      EvictHost host{sh};
      if (policy_.drop_stale(host)) {
        policy_.reserve();  // may throw again: the caller evicts, or gives up
        return;
      }
    }
    throw;
  }
}

template <class S>
bool CacheHost<S>::evict_for_room(S& sh, std::uint64_t bytes, std::uint64_t round) {
  if constexpr (S::kBufferedHits) drain_hits(sh);
  EvictHost host{sh};
  const std::uint64_t before = sh.live_bytes_, evicted = evictions_;
  // Evictions that free only after a report or a sync (the caller's, in
  // Upkeep::free_waiting_removals()) take 1/16 at once: fewer of those.
  const std::uint64_t share = sh.removals_.on() || sh.durability_.defers() ? before / 16 : before / 128;
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
    while (sh.live_bytes_ != 0 && before - sh.live_bytes_ < want && policy_.evict_one(host)) {
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
  return sh.live_bytes_ < before && !sh.removals_.on() && !sh.durability_.defers();
}

template <class S>
void CacheHost<S>::cache_admitted(S& sh, std::uint64_t slot, Location loc, std::uint64_t h) {
#if defined(OFFHEAP_TESTING_POLICY_HOOK)
  if (testing_skip_policy("admit")) return;
#endif
  const std::byte* rec = sh.journal_.at(loc);
  host_loc_ = loc.raw();
  host_slot_ = slot;
  EvictHost host{sh};
  policy_.admit(eviction::Handle{loc.raw(), record::read_stamp(rec), h,
                                 record::kHeaderBytes + record::read_meta(rec).capacity()},
                host);  // cannot fail: reserved in write()
}

template <class S>
void CacheHost<S>::policy_forget(S& sh, std::uint64_t slot, Location loc, std::uint64_t stamp, std::uint64_t h,
                             std::uint64_t bytes) {
  if constexpr (S::kEvicts) {
#if defined(OFFHEAP_TESTING_POLICY_HOOK)
    if (testing_skip_policy("forget")) return;
#endif
    host_loc_ = loc.raw();
    host_slot_ = slot;
    EvictHost host{sh};
    policy_.forget(eviction::Handle{loc.raw(), stamp, h, bytes}, host);
  } else {
    (void)slot, (void)loc, (void)stamp, (void)h, (void)bytes;
  }
}

/// The policy learns that the record `before` names was overwritten, now
/// at `loc` (slot `slot`); `moved` (compaction): the same record, moved,
/// which a policy with relocate() (Lru, WTinyLfu) takes as no access: its
/// node is rekeyed where it stands.
template <class S>
void CacheHost<S>::cache_replaced(S& sh, const eviction::Handle& before, std::uint64_t slot, Location loc,
                              std::uint64_t h, bool moved) {
  std::byte* rec = sh.journal_.at(loc);
  // The node word goes with the key to its new record (eviction/policy.hpp);
  // the old one is still whole (freed after this call). In place, it stayed.
  if (loc.raw() != before.loc) {
    record::set_node_word(rec, record::node_word(sh.journal_.at(Location::from_raw(before.loc))));
  }
  host_loc_ = loc.raw();
  host_slot_ = slot;
  EvictHost host{sh};
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
template <class S>
std::string CacheHost<S>::verify_policy(const S& sh) const {
  if constexpr (!S::kEvicts) {
    return {};
  } else {
    if (!count_hits_) return {};  // read-only: the policy was never rebuilt (no evictions)
    std::vector<std::uint64_t> held;  // locations of the current records the policy holds
    std::uint64_t held_bytes = 0, entries = 0;
    std::string bad_word;  // the first current record whose node word is not its node's
    // One pass over the handles: a handle names a current record or is
    // stale (skipped by its stamp); with a node (`n`, kNoNode for a policy
    // that keeps none), a current record keeps its node's number in its
    // node word (carried over by each replacement and move).
    const auto audit = [&](std::uint32_t n, std::uint64_t raw, std::uint64_t stamp) {
      ++entries;
      const HeldRecord r = held_record(sh, Location::from_raw(raw), stamp, false);
      if (!r.found) return;
      held.push_back(raw);
      held_bytes += r.bytes;
      if (n == eviction::kNoNode || !bad_word.empty()) return;
      const std::uint32_t w = record::node_word(sh.journal_.at(Location::from_raw(raw)));
      if (w != n + 1) {
        bad_word = sh.journal_.name() + ": the record at " + std::to_string(raw) + " keeps node word " +
                   std::to_string(w) + "; its policy node is " + std::to_string(n) + " (+1)";
      }
    };
    if constexpr (requires { policy_.for_each_node([](std::uint32_t, std::uint64_t, std::uint64_t) {}); }) {
      policy_.for_each_node(audit);
    } else {
      policy_.for_each_entry([&](std::uint64_t raw, std::uint64_t stamp) { audit(eviction::kNoNode, raw, stamp); });
    }
    std::sort(held.begin(), held.end());
    if (std::adjacent_find(held.begin(), held.end()) != held.end()) {
      return sh.journal_.name() + ": the eviction policy holds a live record twice";
    }
    if (held.size() != sh.size() || held_bytes != sh.live_bytes_) {
      return sh.journal_.name() + ": the eviction policy holds " + std::to_string(held.size()) +
             " live records (" + std::to_string(held_bytes) + " bytes) of the " + std::to_string(sh.size()) +
             " indexed (" + std::to_string(sh.live_bytes_) + " bytes)";
    }
    if (!bad_word.empty()) return bad_word;
    const eviction::PolicyStats p = policy_.stats();
    if (p.bytes != sh.live_bytes_) {
      return sh.journal_.name() + ": the eviction policy counts " + std::to_string(p.bytes) +
             " bytes; its live records hold " + std::to_string(sh.live_bytes_);
    }
    if (p.entries != entries) {
      return sh.journal_.name() + ": the eviction policy counts " + std::to_string(p.entries) + " entries and holds " +
             std::to_string(entries);
    }
    return {};
  }
}

template <class S>
void CacheHost<S>::add_stats(Stats& s, std::uint64_t live_bytes) const {
  const eviction::PolicyStats p = policy_.stats();
  s.evictions += evictions_;
  s.limit_evictions += limit_evictions_;
  s.markerless_evictions += markerless_evictions_;
  s.maintenance_backlog_bytes += live_bytes > capacity_ ? live_bytes - capacity_ : 0;
  s.policy_entries += p.entries;
  s.policy_small_bytes += p.small_bytes;
  s.policy_main_bytes += p.main_bytes;
  s.policy_protected_bytes += p.protected_bytes;
  s.policy_ghost_entries += p.ghost_entries;
  s.policy_window_target += p.window_target;
  s.policy_sketch_resets += p.sketch_resets;
  if constexpr (kBufferedHits) {
    s.policy_hits_applied += hits_applied_;
    s.policy_hits_dropped += hits_.dropped();
  }
  s.policy_mapped_bytes += p.mapped_bytes + hits_.mapped_bytes();
  s.mapped_bytes += p.mapped_bytes + hits_.mapped_bytes();
}

}  // namespace offheap::detail
