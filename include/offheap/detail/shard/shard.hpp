// SPDX-License-Identifier: Apache-2.0
// A shard: one journal, one index, one set of free lists, one stamp counter
// and one writer lock. The store routes each key to a shard by its hash;
// everything a write touches belongs to that shard alone.
//
// Writes take the lock, find room (a free record of a fitting class, split
// when the rest can hold a free record, or the journal's tail), write the
// record under the seqlock, point the index at it, then free the old record
// (new stamp first, then onto its free list). An overwrite that fits the old
// slot rewrites it in place when the policy allows. Every step that can fail
// (mapping a chunk or a bigger index) runs before the first change, so an
// exception leaves the shard as it was.
//
// Reads take no lock: they walk the index, validate each candidate record
// with its stamp, and draw a conclusion (this key, another key, gone) only
// from words read between two equal stamps, from a slot that still leads to
// the same record, while the index generation loaded before the slot has
// not moved. Two writer rules make that enough against values shaped like
// headers: a removal empties its slot's location before the record is freed
// (a slot whose key went away leads nowhere), and a merge of free records,
// after which a location a reader holds may lie inside another record's
// value, moves the generation before the merged space can be reused
// (Index::invalidate_readers). Readers write nothing: an index table that
// growth replaced stays mapped (its pages zeroed, its range reused) while
// the index lives, and chunks while the store lives (index.hpp). A reader that loses many
// races in a row to writers of its record takes the writer lock for one
// read, so a key under continuous rewrite is still read in bounded time (not
// with NullLock, where it keeps yielding).
//
// The shard's parts. Components that own their state, each a class
// template over the shard (which lets it in as a friend and holds one),
// included above, none including this header:
//   ShardExpiry     expiry/expiry_shard.hpp     the wheel, sweeps, expirations
//   RemovalReports  cache/removal_reports.hpp   the listener's queue, retired records
//   Compaction      compaction/compaction.hpp   emptying sparse chunks
//   PageRelease     compaction/page_release.hpp pages of free records back to the OS
// and those that hold none, which the shard forwards to: ShardWalk
// (journal/walk.hpp: for_each, scan), ShardVerify (shard/verify.hpp),
// ShardStateFile (files/state_file.hpp), IndexGrowth (index/index_growth.hpp),
// ShardStats (shard/stats.hpp), ShardIntegrity (files/integrity.hpp).
// Still defined out of the class as the shard's own members, in headers
// included at the end (each includes this one; the next components to
// become): shard/probe.hpp (reads: lookup, probe), shard/writes.hpp and
// shard/compute.hpp (writes, removals, compute), journal/space.hpp
// (allocation, freeing, merging), files/durability.hpp (syncs, deferred
// frees), files/recovery.hpp, and cache/cache_shard.hpp (the cache host).
#pragma once

#include <offheap/detail/memory/atomic_word.hpp>
#include <offheap/detail/shard/compute_support.hpp>
#include <offheap/detail/journal/crc32c.hpp>
#include <offheap/detail/expiry/wheel.hpp>
#include <offheap/detail/files/file.hpp>
#include <offheap/detail/files/format.hpp>
#include <offheap/detail/journal/free_lists.hpp>
#include <offheap/detail/index/hash.hpp>
#include <offheap/detail/cache/hit_buffers.hpp>
#include <offheap/detail/journal/walk.hpp>
#include <offheap/detail/shard/verify.hpp>
#include <offheap/detail/files/state_file.hpp>
#include <offheap/detail/index/index_growth.hpp>
#include <offheap/detail/shard/stats.hpp>
#include <offheap/detail/files/integrity.hpp>
#include <offheap/detail/cache/removal_reports.hpp>
#include <offheap/detail/compaction/compaction.hpp>
#include <offheap/detail/expiry/expiry_shard.hpp>
#include <offheap/detail/compaction/page_release.hpp>
#include <offheap/detail/index/index.hpp>
#include <offheap/detail/journal/journal.hpp>
#include <offheap/detail/index/location.hpp>
#include <offheap/detail/journal/location_list.hpp>
#include <offheap/detail/memory/mapped_fifo.hpp>
#include <offheap/detail/memory/os.hpp>
#include <offheap/detail/shard/reader_support.hpp>
#include <offheap/detail/journal/record.hpp>
#include <offheap/compute.hpp>
#include <offheap/expiry.hpp>
#include <offheap/policy.hpp>
#include <offheap/removal.hpp>
#include <offheap/stats.hpp>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <vector>

namespace offheap::detail {

struct ShardConfig {
  JournalConfig journal;
  std::uint64_t expected_entries = 0;
  // File-backed stores: records carry checksums and are never rewritten in
  // place (a crash mid-rewrite would lose the old value and the new one).
  bool durable = false;
  bool verify_reads = false;     // check a record's checksum on every read
  bool sync_each_write = false;  // Durability::every_write
  bool defer_frees = false;      // Durability::periodic: free an update's old record after a sync
  bool report_removals = false;  // Options::on_removal set: removed records wait for their report
  std::uint64_t store_id = 0;
  std::atomic<int>* sync_error = nullptr;  // the first failed sync's errno, store-wide
  const Clock* clock = nullptr;  // Options::clock; null: the default clock
  double compaction_factor = 0;  // Options::compaction_factor (0: never)
};

/// Aligned to a cache line so that shards laid side by side share none.
template <class P>
class alignas(64) Shard {
 public:
  using Hash = typename P::Hash;
  using Lock = typename P::Lock;
  static constexpr bool kInPlace = PolicyTraits<P>::in_place_updates;

  static constexpr bool kLocks = !std::is_same_v<Lock, NullLock>;
  using Eviction = typename PolicyTraits<P>::Eviction;
  static constexpr bool kEvicts = PolicyTraits<P>::evicts;
  static constexpr bool kBufferedHits = Eviction::reader_hits == eviction::ReaderHits::buffered;
  /// Caches keep each record's eviction-policy bits in its index slot.
  static constexpr bool kSlotBits = kEvicts;

  /// The location in a slot's word (without the policy bits of a cache).
  static Location slot_location(std::uint64_t w) noexcept {
    if constexpr (kSlotBits) {
      return Location::from_slot(w);
    } else {
      return Location::from_raw(w);
    }
  }
  /// A reader's hit on a cache (cache_shard.hpp): S3Fifo's frequency bits
  /// in the slot, raised while below 3 with one compare-and-swap; Lru's and
  /// WTinyLfu's to the reader's ring (drained by the maintenance thread, or
  /// by a reader that finds its ring full and the lock free).
  static void raise_frequency(const std::uint64_t* slot, std::uint64_t seen) noexcept;
  [[gnu::always_inline]] void record_hit(Location loc, std::uint64_t stamp, std::uint64_t h) const;
  [[gnu::noinline, gnu::cold]] void drain_full_ring(Location loc, std::uint64_t stamp, std::uint64_t h) const;
  /// Whether a slot's word leads to `loc` (a real location).
  static bool leads_to(std::uint64_t w, Location loc) noexcept {
    if constexpr (kSlotBits) {
      return (w & ~Location::kSlotBits) == loc.raw();
    } else {
      return w == loc.raw();
    }
  }

  Shard(const ShardConfig& config, std::uint32_t number, const StoreName& name,
        const Hash& hash, WalkGate& walks)
      : hash_(hash), walks_(walks), journal_(journal_config(config, number), name),
        index_(config.expected_entries, name), free_(journal_, name, config.durable),
        number_(number), durable_(config.durable), verify_(config.durable && config.verify_reads),
        sync_each_(config.durable && config.sync_each_write),
        defer_frees_(config.durable && config.defer_frees && !config.sync_each_write),
        crc_seed_(crc_seed(config.store_id, number)), sync_error_(config.sync_error),
        deferred_(name), dead_(name), removals_(name, config.report_removals), policy_(name),
        count_hits_(kEvicts && !(config.journal.files != nullptr && config.journal.files->read_only)),
        hits_(name), clock_(config.clock), expiry_(name, now_ms(), !(config.journal.files != nullptr && config.journal.files->read_only)),
        pages_(name),
        compaction_(config.journal.files != nullptr && config.journal.files->read_only
                        ? 0.0
                        : config.compaction_factor) {}
  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;
  /// Requires: no reader or writer is using the shard any more.
  ~Shard() = default;

  // ---- reads (no lock) -------------------------------------------------------

  /// Finds the live record of `key` and calls
  /// `on_hit(Location, const std::byte* rec, const record::Meta&, stamp)`,
  /// whose header and key have been validated against `stamp`. on_hit reads
  /// what it needs and returns record::validate(rec, stamp); on false the
  /// lookup tries again. Returns whether the key was found.
  ///
  /// The common case first, inline: one pass of the probe in which nothing
  /// moves, under the same checks as probe() and examine() make (each
  /// conclusion only from words read between two equal stamps, through a
  /// slot that still leads there, under the generation loaded before the
  /// table). At the first thing that would make them wait or start over (a
  /// record being written, a generation that moved, a slot that changed,
  /// a stamp that differs after the value was read) or that they check
  /// further (a file-backed store that checks checksums), the lookup goes
  /// the whole way instead, from the start.
  template <class OnHit>
  [[gnu::always_inline]] bool lookup(std::string_view key, std::uint64_t h, OnHit&& on_hit) const;
  /// The whole way (probe(), then, starved, under the writer lock).
  template <class OnHit>
  [[gnu::noinline]] bool lookup_slow(std::string_view key, std::uint64_t h, OnHit& on_hit) const;

  /// walk.hpp: for_each calls fn(copy) for every live record, on copies
  /// validated by their stamps; scan walks from a position and stops.
  /// Require: the caller has entered the store's WalkGate.
  template <class F>
  void for_each(F& fn, WalkCopy& copy) const { return ShardWalk<Shard>::for_each(*this, fn, copy); }
  template <class F>
  bool scan(std::uint64_t& pos, std::uint64_t& serial, std::uint32_t& restarts,
            std::uint64_t& budget, F& fn, WalkCopy& copy) const {
              return ShardWalk<Shard>::scan(*this, pos, serial, restarts, budget, fn, copy);
            }

  // ---- writes (take the lock) -------------------------------------------------

  enum class Mode { upsert, insert, replace, replace_if };

  /// Writes key -> value per `mode`, expiring at `deadline` (ms, the
  /// store's clock; 0: never); returns whether it wrote. `expected` is
  /// compared with the current value in Mode::replace_if. A record of the
  /// key whose deadline has passed counts as absent (and leaves as
  /// RemovalCause::expired). With a `fill`, `value` is not read: fill
  /// writes fill->size bytes into the new record.
  /// Returns inserted, updated, or unchanged (nothing written).
  Computed write(std::string_view key, std::uint64_t h, std::string_view value, std::uint8_t type,
                 Mode mode, std::string_view expected = {}, std::uint64_t deadline = 0,
                 const ValueFill* fill = nullptr);

  /// Writes entries [done, n) under one hold of the writer lock, each as
  /// write() would (Mode::upsert, bytes): entry(i) gives {key, hash,
  /// value}. `done` and `inserted` advance as they go, so that a call the
  /// memory limit interrupted (it throws as write() would) goes on from
  /// where it stopped when made again (shard/compute.hpp).
  template <class Entry>
  void write_batch(std::size_t n, std::size_t& done, std::size_t& inserted, std::uint64_t deadline,
                   Entry&& entry);
  /// Removes keys [done, n) under one hold of the writer lock, as erase();
  /// key(i) gives {key, hash}; `done` and `removed` advance as they go.
  template <class Key>
  void erase_batch(std::size_t n, std::size_t& done, std::size_t& removed, Key&& key);
  /// Brings the index line a lookup of `h` starts at into the cache (a
  /// hint: reads nothing a lookup relies on).
  void prefetch(std::uint64_t h) const noexcept {
    const TableView t = index_.acquire_view();
    ProbeSeq seq(h, t.mask);
    __builtin_prefetch(t.ctrl_word(seq.group()));
  }

  /// An atomic read-modify-write of the key (shard/compute.hpp): under the
  /// writer lock, `decide(const ComputeCurrent&)` returns a ComputeDecision
  /// on what the key holds; the shard applies it (written with `deadline`
  /// as write() would, or removed as erase() would) before the lock goes.
  /// `decide` is called once per call of compute() (what evictions for
  /// the memory limit do meanwhile changes nothing of its decision).
  template <class Decide>
  Computed compute(std::string_view key, std::uint64_t h, std::uint64_t deadline, Decide& decide);

  /// Removes `key` (only if its value equals *expected, when given). A
  /// record whose deadline has passed is absent: it leaves as expired, and
  /// erase returns false.
  bool erase(std::string_view key, std::uint64_t h, const std::string_view* expected);

  // ---- expiry (expiry/expiry_shard.hpp) ---------------------------------------------

  /// The store's time (ms since the Unix epoch, Options::clock).
  std::uint64_t now_ms() const noexcept { return clock_ != nullptr ? clock_->now_ms() : default_now_ms(); }
  /// Whether a deadline (not 0) has passed.
  bool expired(std::uint64_t deadline) const noexcept {
#if defined(OFFHEAP_TESTING_NO_EXPIRY_CHECK)
    // Test-only (a manual check that the expiry tests can fail): readers
    // and writers ignore deadlines; the wheel still removes records.
    (void)deadline;
    return false;
#else
    const bool passed = deadline_passed(clock_, deadline);
    // The clock's loads come before the reader's checks that follow (the
    // slot, the generation, the stamp), on weakly ordered CPUs too.
    std::atomic_thread_fence(std::memory_order_acquire);
    return passed;
#endif
  }
  /// Removes up to `max` records whose deadlines are at or before `now`
  /// (RemovalCause::expired), and sweeps a slice of stale entries out of
  /// the wheel when they pile up; returns how many records went. `more`,
  /// if given, says whether work is left (`max` reached, or a sweep under
  /// way). Takes the lock.
  std::uint64_t expire(std::uint64_t now, std::uint64_t max, bool* more = nullptr) {
    return expiry_.expire(*this, now, max, more);
  }
  /// After an open: schedules every record with a deadline. Takes the lock.
  void rebuild_expiry() { expiry_.rebuild(*this); }
  /// When (ms, the store's clock) this shard next wants a maintenance
  /// round: the wheel's next event, or now (1) while stale entries are
  /// swept or freed pages wait to go back to the OS. Kept up to date by
  /// writers and the rounds for the maintenance thread's sleep: it may be
  /// early, never late. Lock-free.
  std::uint64_t next_due() const noexcept { return next_due_.load(std::memory_order_seq_cst); }

  // ---- memory back to the OS (page_release.hpp) -------------------------------

  /// Hands the whole pages inside free records (queued as they were
  /// freed) and past the journal's tail back to the OS, up to about
  /// `max_bytes`; returns the bytes handed back. `more`: candidates are
  /// left. Takes the lock.
  std::uint64_t release_pages(std::uint64_t max_bytes, bool* more = nullptr) {
    return pages_.release_pages(*this, max_bytes, more);
  }

  // ---- compaction (compaction.hpp) ---------------------------------------------

  /// Whether the journal outside emptied chunks holds more than
  /// compaction_factor times the live records' bytes (and 1 MiB more).
  bool compaction_due() const noexcept { return compaction_.compaction_due(*this); }
  /// Empties the sparsest chunks until that is no longer so, or about
  /// `max_bytes` were moved; returns the bytes moved. `more`: work is
  /// left. After a round that could do nothing more, the next waits a
  /// second, unless `now_anyway` (maintain()). Takes the lock.
  std::uint64_t compact(std::uint64_t max_bytes, bool* more = nullptr, bool now_anyway = false) {
    return compaction_.compact(*this, max_bytes, more, now_anyway);
  }

  /// Drops every record. The index is replaced by an empty table (the old
  /// one retired as after growth; emptied in place if no memory is left),
  /// and the journal's pages go back to the OS (anonymous chunks read as
  /// zeros, which no stamp accepts; file-backed ones are zeroed). Chunks
  /// stay mapped, so readers inside need no grace period for them.
  void clear() noexcept;

  /// Drops the pages of replaced index tables once no walk is in progress,
  /// and drains the readers' hits. Returns whether a reader dropped a hit
  /// on a full ring since the last call (the rings want draining more
  /// often than they were). Takes the lock.
  bool maintain() {
    std::lock_guard<Lock> guard(lock_);
    index_.drop_retired(walks_);
    if constexpr (kBufferedHits) {
      drain_hits();
      return hits_.take_full();
    }
    return false;
  }

  std::uint64_t size() const noexcept { return records_.load(std::memory_order_relaxed); }

  // ---- caches (cache_shard.hpp) ----------------------------------------------

  /// Sets this shard's share of the capacity and the slack writers may
  /// pass it by before they evict themselves. Takes the lock.
  void set_capacity(std::uint64_t capacity, std::uint64_t slack);
  /// Evicts until the live bytes are at most the share, or `max_records`
  /// went; returns how many went. Takes the lock.
  std::uint64_t evict_to_capacity(std::uint64_t max_records);
  /// A maintenance thread will drain the readers' hit rings: readers stop
  /// draining them. Before the store is shared.
  void leave_drains_to_maintenance() noexcept { readers_drain_ = false; }
  /// A reopened cache: the policy learns every record, oldest first, with
  /// the policy bits its index slot kept. Under Options::memory_limit_bytes,
  /// a recovered shard (`may_evict`) whose policy finds no room evicts by
  /// it until the rest fits. Takes the lock (and lets it go to sync).
  void rebuild_policy(bool may_evict);
  /// Before any shard's rebuild_policy() (one shard at a time, so that
  /// each gets its share before the rebuilds run side by side): empties
  /// the policy and maps its first segments, and a page for each waiting
  /// list (periodic).
  void prepare_policy_rebuild();

  // ---- the removal listener (removal_reports.hpp) ------------------------------

  /// A removed record waiting for its report (cache/removal_reports.hpp).
  using Retired = RetiredRecord;
  /// Calls fn(key, value, cause) for up to `max` of the oldest removed
  /// records (at most a batch of kReportBatch), without the writer lock,
  /// with t_in_removal_listener set to `store`, then frees them; returns how
  /// many. Takes the queue's mutex (with `busy`: only if free at once; else
  /// sets *busy and returns 0), and the lock twice. Throws
  /// Error(out_of_space), nothing changed, if the lists that free the batch
  /// (file-backed) cannot be made room on.
  static constexpr std::uint64_t kReportBatch = kRemovalReportBatch;
  template <class Fn>
  std::uint64_t report(Fn& fn, std::uint64_t max, const void* store, bool* busy = nullptr) {
    return removals_.report(*this, fn, max, store, busy);
  }
  /// Removed records not yet freed (a clean close saves no shard with any).
  std::uint64_t retired_left() const {
    const std::lock_guard<Lock> guard(lock_);
    return removals_.retired_records();
  }
  /// Removed records waiting for report() (takes the lock).
  std::uint64_t reports_pending() const { return removals_.pending(*this); }

  /// Adds this shard's figures to `s` (takes the lock for a consistent
  /// view). shard/stats.hpp.
  void add_stats(Stats& s) const { return ShardStats<Shard>::add_stats(*this, s); }

  const Journal& journal() const noexcept { return journal_; }
  Journal& journal() noexcept { return journal_; }
  /// Damaged records and free lists met (recovery, reads, writes).
  std::uint64_t corrupt_records() const noexcept {
    return corrupt_.load(std::memory_order_relaxed) + free_.damaged();
  }
  /// Damage met since the open that is still in the files (records left
  /// where they lie, free records no list holds): a store with any is not
  /// saved clean, so that its next open rebuilds it. (What recovery dropped
  /// became free space.)
  std::uint64_t damage_left() const noexcept { return corrupt_records() - recovered_damage_; }

  // ---- file-backed shards -----------------------------------------------------

  /// Writes the chunks written since the last sync (`all`: every one) to
  /// their files and waits; 0 or an errno (durability.hpp).
  int sync(bool all);
  void settle(std::uint64_t begun, std::uint64_t freed_before) noexcept;  // durability.hpp

  /// Frees the record at `loc`, whatever its state, with the capacity and
  /// prev-free bit its header says.
  void free_record(Location loc) noexcept;

  /// Recovery: frees `loc` at once, or (periodic) adds it to `list` to be
  /// freed after syncs, as a running store would.
  void free_or_defer(LocationList& list, Location loc);

  /// Frees the first n records of `list` and drops them from it.
  void free_front(LocationList& list, std::uint64_t n) noexcept;

  /// Old records and dead markers waiting for syncs before they are freed
  /// (periodic).
  std::uint64_t deferred_records() const;

  /// Periodic: whether a record was written since the sync before last
  /// began (settled_below_): two syncs settle it, and a cache may then
  /// evict it without a dead marker when the memory limit leaves no room
  /// for one (cache_shard.hpp).
  bool unsettled() const;

  /// The state file of a clean close, written and adopted (state_file.hpp).
  void save_state(std::uint64_t generation) { return ShardStateFile<Shard>::save_state(*this, generation); }
  bool load_state(std::uint64_t generation, std::string& why) {
    return ShardStateFile<Shard>::load_state(*this, generation, why);
  }

  /// What recover() found.
  struct Recovery {
    std::uint64_t records = 0;     // live records indexed
    std::uint64_t dropped = 0;     // records with a live header whose checksum failed
    std::uint64_t superseded = 0;  // older records of a key found beside a newer one (or
                                   // beside its removal's dead marker), freed
  };

  /// Rebuilds the shard from the records in its chunks (recovery.hpp).
  Recovery recover(bool writable);

  /// The writer's invariants, checked record by record (verify.hpp).
  std::string verify() const { return ShardVerify<Shard>::verify(*this); }

 private:
  // The components that hold no state of their own (each forwarded to above).
  friend class ShardWalk<Shard>;
  friend class ShardVerify<Shard>;
  friend class ShardStateFile<Shard>;
  friend class IndexGrowth<Shard>;
  friend class ShardStats<Shard>;
  friend class ShardIntegrity<Shard>;

  /// The writer lock, taken after any starving reader (see lookup()).
  class WriteLock {
   public:
    explicit WriteLock(const Shard& s) noexcept : s_(s) {
      if constexpr (kLocks) {
        while (s_.starving_readers_.load(std::memory_order_relaxed) != 0) std::this_thread::yield();
      }
      s_.lock_.lock();
      // Every store this writer makes comes after a release fence that
      // follows the previous writers' Index::invalidate_readers(): a reader
      // that reads one of them over a destroyed record start, then passes
      // its acquire fence (record::validate), sees the new generation.
      // (Free on x86-64: a compiler barrier.)
      std::atomic_thread_fence(std::memory_order_release);
    }
    ~WriteLock() { s_.lock_.unlock(); }
    WriteLock(const WriteLock&) = delete;
    WriteLock& operator=(const WriteLock&) = delete;

   private:
    const Shard& s_;
  };

  struct Slot {
    Location loc;
    std::byte* rec;
    std::uint64_t capacity;
    bool prev_free;  // the record before the slot is free
  };

  /// What a removal needs before it changes anything: periodic, or a
  /// file-backed store whose removals are reported, a dead marker's slot
  /// (and room on the lists). Throws Error(out_of_space).
  Slot removal_marker(std::uint64_t key_len);

  /// Removes the record `rec` at `loc`, of `key`, that index slot `slot`
  /// leads to (erase, eviction), with the marker removal_marker() gave.
  /// Returns 0, or the errno of every_write's failed msync (noted
  /// store-wide: writes are refused from then on); the removal is made in
  /// memory either way.
  int remove_at(std::uint64_t slot, Location loc, std::byte* rec, const record::Meta& m,
                std::string_view key, const Slot& marker, RemovalCause cause) noexcept;

  // ---- defined in the concern headers included at the end ----------------------

  // state_file.hpp
  static std::uint64_t body_hash(const std::uint64_t* free_table, const std::uint64_t* index_head,
                                 const std::uint64_t* slots, std::uint64_t slot_words) noexcept {
                                   return ShardStateFile<Shard>::body_hash(free_table, index_head, slots, slot_words);
                                 }
  // verify.hpp
  std::string verify_index() const { return ShardVerify<Shard>::verify_index(*this); }
  // cache_shard.hpp
  std::string verify_policy() const;
  // expiry/expiry_shard.hpp
  bool finds(std::string_view key, Location loc) const { return ShardVerify<Shard>::finds(*this, key, loc); }
  // recovery.hpp
  struct PendingAdopt {  // a record waiting in an indexing batch
    Location loc;
    const std::byte* rec;
    record::Meta m;
    std::uint64_t stamp;
    std::uint64_t hash;
  };
  static constexpr unsigned kAdoptBatch = 16;
  std::uint64_t scan_chunk(std::uint32_t c, bool is_tail, bool writable,
                           std::vector<Location>& losers, std::uint64_t& max_stamp, Recovery& r);
  bool sync_before_freeing_markers() noexcept;
  void grow_slack(std::byte* rec, Location loc, std::uint64_t extra) noexcept;
  void queue_adopt(Location loc, const std::byte* rec, const record::Meta& m, std::uint64_t stamp,
                   std::vector<Location>& losers);
  void adopt_batch(std::vector<Location>& losers);
  void adopt_record(Location loc, const std::byte* rec, const record::Meta& m, std::uint64_t stamp,
                    std::uint64_t h, std::vector<Location>& losers);

  enum class Examined { hit, other, restart, starved };
  enum class Probe { hit, miss, starved };

  /// One lookup through the index; `may_starve`: give up with
  /// Probe::starved once the backoff is exhausted; `locked`: this reader
  /// holds the writer lock (no record can be half-written).
  template <class OnHit>
  Probe probe(std::string_view key, std::uint64_t h, OnHit& on_hit, Backoff& backoff,
              bool may_starve, bool locked) const;

  template <class OnHit>
  Examined examine(std::uint64_t generation, std::uint64_t serial, const std::uint64_t* slot,
                   std::string_view key, std::uint64_t h, OnHit& on_hit, Backoff& backoff,
                   bool may_starve, bool locked) const;

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
  bool still_current(std::uint64_t serial, const std::uint64_t* slot, Location loc,
                     const std::byte* rec, std::uint64_t s1) const noexcept {
    const std::uint64_t g2 = index_.acquire_generation();  // before the serial, as in probe()
    if (index_.acquire_serial() != serial) return false;
    if (!Index::slot_full(slot)) return false;
    if (!leads_to(load_acquire(slot), loc)) return false;
    if (record::read_stamp(rec) != s1) return false;
    std::atomic_thread_fence(std::memory_order_acquire);  // as in record::validate
    return index_.unchanged_since(g2);
  }

  // walk.hpp: for_each's and scan's reads
  bool copy_record(const TableView& t, const std::uint64_t* slot, WalkCopy& copy) const {
    return ShardWalk<Shard>::copy_record(*this, t, slot, copy);
  }
  bool copy_from_frozen(const std::uint64_t* slot, WalkCopy& copy) const {
    return ShardWalk<Shard>::copy_from_frozen(*this, slot, copy);
  }

  [[gnu::always_inline]] Index::Found find_for_write(std::string_view key, std::uint64_t h) const {
    return index_.find(h, [&](Location loc) {
      const std::byte* rec = journal_.at(loc);
      const record::Meta m = record::read_meta(rec);
      // (File-backed writers go through find_intact, which checks a
      // record's bounds and checksum before its key.)
      return m.key_len == key.size() &&
             equal_bytes(reinterpret_cast<const char*>(rec + record::kHeaderBytes), key.data(),
                         key.size());
    });
  }

  // integrity.hpp (file-backed stores: damage met by writers and readers)
  Examined met_damage() const noexcept { return ShardIntegrity<Shard>::met_damage(*this); }
  bool intact(Location loc, const std::byte* rec) const noexcept {
    return ShardIntegrity<Shard>::intact(*this, loc, rec);
  }
  [[noreturn, gnu::cold]] void report_corrupt(Location loc) const {
    ShardIntegrity<Shard>::report_corrupt(*this, loc);
  }
  [[gnu::noinline]] Index::Found find_intact_durable(std::string_view key, std::uint64_t h) {
    return ShardIntegrity<Shard>::find_intact_durable(*this, key, h);
  }
  void drop_damaged(std::uint64_t slot) noexcept { return ShardIntegrity<Shard>::drop_damaged(*this, slot); }

  /// find_for_write for writers of file-backed stores: any damaged record
  /// met on the key's probe path (whose key cannot be told, or whose bytes
  /// fail the checksum) leaves the index first, counted, its bytes left
  /// where they are (their lengths cannot be trusted to free them).
  Index::Found find_intact(std::string_view key, std::uint64_t h) {
    if (!durable_) [[likely]] return find_for_write(key, h);
    return find_intact_durable(key, h);
  }

  // space.hpp: room for records, freeing and merging
  void rewrite_in_place(Location loc, std::byte* rec, std::uint64_t cap, std::uint64_t need,
                        std::string_view key, std::string_view value, std::uint8_t type,
                        std::uint64_t deadline) noexcept;
  /// Room for a record of `need` payload bytes: a free record, an emptied
  /// chunk of at most `revive_most` bytes brought back, or the tail (a new
  /// chunk only if `grow`; else a none location when nothing else has room).
  Slot allocate(std::uint64_t need, bool grow = true, std::uint64_t revive_most = ~std::uint64_t{0});
  std::uint64_t companion_bytes() const noexcept;
  void push_free_range(Location l, std::byte* r, std::uint64_t bytes, bool prev_free,
                       std::uint64_t stamp) noexcept;
  void release(Location loc, std::byte* rec, std::uint64_t cap, bool prev_free) noexcept;
  void release_huge(Location loc, std::byte* rec, std::uint64_t cap, bool prev_free) noexcept;
  void want_round() noexcept {
    // seq_cst: as in schedule_expiry(), against the maintenance thread's
    // plan (the due lambda of Upkeep::start).
    if (next_due_.load(std::memory_order_relaxed) > 1) next_due_.store(1, std::memory_order_seq_cst);
  }
  /// next_due_ after a round: the wheel's next event, or now while work is left.
  void plan_next_round(std::uint64_t now) noexcept {
    const bool busy = expiry_.sweeping() || journal_.tail_high() > journal_.tail_offset() || pages_.wants_round(*this);
    std::uint64_t next = busy ? now : expiry_.next_event();
    if (compaction_due()) next = std::min(next, std::max(now, compaction_.retry_ms()));
    next_due_.store(next, std::memory_order_seq_cst);
  }
  void retract_over_free(Location loc, std::byte* rec) noexcept;

  /// Writes key -> value into a slot allocate() returned, with its checksum
  /// in file-backed stores and its deadline (0: none). shard/writes.hpp.
  void write_record(const Slot& s, std::string_view key, std::string_view value, std::uint8_t type,
                    record::State state = record::State::live, std::uint64_t deadline = 0) noexcept;
  /// A record just written with `deadline` (not 0) at `loc`: the wheel
  /// learns it (room reserved), and the maintenance thread's next wake-up
  /// comes no later than it (expiry/expiry_shard.hpp).
  void schedule_expiry(Location loc, std::uint64_t deadline) noexcept { expiry_.schedule(*this, loc, deadline); }

  static JournalConfig journal_config(const ShardConfig& c, std::uint32_t number) noexcept {
    JournalConfig j = c.journal;
    j.shard = number;
    return j;
  }
  static std::uint32_t crc_seed(std::uint64_t store_id, std::uint32_t number) noexcept {
    const std::uint64_t words[2] = {store_id, number};
    return crc32c(words, sizeof words);
  }

  // durability.hpp
  void note_sync_error(int err) noexcept;
  [[noreturn, gnu::cold]] void sync_failed(int err);

  // index_growth.hpp
  void grow_index() { return IndexGrowth<Shard>::grow_index(*this); }


  // cache_shard.hpp: eviction (caches; no-ops in a store)
  struct EvictHost;
  /// A record a policy's handle leads to, if current: live at its location
  /// with its stamp, whole, and its key's index slot leads there.
  struct Held {
    bool found = false;
    std::uint64_t slot = 0;
    std::uint64_t hash = 0;   // the key's
    std::uint64_t bytes = 0;  // header, key, value, padding
  };
  Held held_record(Location loc, std::uint64_t stamp, bool check_intact) const;
  /// A write's look at its key, taken once per hold of the writer lock,
  /// before it makes room (write(), compute(), each entry of a batch): what
  /// the call decides on, and whether the room made for it evicted the
  /// key's own record (EvictHost::evict notes it).
  struct KeySeen {
    bool active = false;   // a write holds it (OwnKey)
    bool looked = false;
    bool found = false;    // a record of the key was there...
    bool expired = false;  // ... with its deadline passed (absent to the caller)
    std::uint64_t loc = ~std::uint64_t{0};  // its location (raw)
    std::uint64_t bytes = 0;                // and journal bytes
    bool evicted = false;        // the room made for this write evicted it
    bool limit_counted = false;  // ... in an eviction for the memory limit
    Retired* report = nullptr;   // ... and its report waits there (a listener)
    bool present() const noexcept { return found && !expired; }
  };
  /// Gives a write the shard's KeySeen (own_), fresh, for as long as it
  /// holds the lock.
  struct OwnKey {
    Shard& s;
    explicit OwnKey(Shard& shard) noexcept : s(shard) { renew(); }
    OwnKey(const OwnKey&) = delete;
    OwnKey& operator=(const OwnKey&) = delete;
    ~OwnKey() { s.own_.active = false; }
    KeySeen& seen() const noexcept { return s.own_; }
    /// A fresh look, for the next write of the same hold (a batch's entry).
    void renew() const noexcept {
      s.own_ = KeySeen{};
      s.own_.active = true;
    }
  };
  /// Finds the key (find_intact()) and notes in `seen` what it found.
  Index::Found look_at_key(std::string_view key, std::uint64_t h, KeySeen& seen);
  /// The write `seen` belongs to has written (or removed) its key: if the
  /// room made for it evicted the key's own record, that removal is
  /// reported, and counted, with `cause` (the one the write gives what it
  /// replaces or removes) instead of evicted. Its report is still queued:
  /// the lock was held from the eviction to here.
  void own_key_done(KeySeen& seen, RemovalCause cause) noexcept;
  /// Evicts until a record of `bytes` fits under the hard limit, the bytes
  /// of `own` (the record the write replaces, while it is there) counted
  /// as leaving.
  void make_room(std::uint64_t bytes, const KeySeen* own = nullptr);
  /// policy_.reserve(); when the memory limit refuses it, the policy's
  /// entries of records gone since go first (drop_stale), then once more.
  void reserve_policy();
  bool evict_for_room(std::uint64_t bytes, std::uint64_t round);
  // shard/writes.hpp
  /// After Options::memory_limit_bytes refused a write of a record of
  /// `need` payload bytes (or a removal's marker) by `e`: makes room as it
  /// can (sweeps, evictions); whether to try again. `rounds` and
  /// `evicted_for_wheel` carry over the tries of the same call.
  bool room_for_retry(const LimitReached& e, std::uint64_t need, std::uint64_t& rounds, bool& evicted_for_wheel);
  /// erase() with the writer lock held.
  bool erase_locked(std::string_view key, std::uint64_t h, const std::string_view* expected);
  /// write() with the writer lock held; `seen` carries the call's look at
  /// its key over its tries (a write_locked() the memory limit refused is
  /// tried again).
  Computed write_locked(std::string_view key, std::uint64_t h, std::string_view value, std::uint8_t type,
                        Mode mode, std::string_view expected, std::uint64_t deadline, KeySeen& seen,
                        const ValueFill* fill = nullptr);
  /// A fill write's value, written by `fill` into the slot just allocated
  /// for it; if fill throws, the slot is freed again and the exception goes on.
  std::string_view fill_slot(const Slot& s, std::size_t key_len, const ValueFill& fill);
  void cache_admitted(std::uint64_t slot, Location loc, std::uint64_t h);
  /// A cache's policy lets go of the record at `loc` (index slot `slot`)
  /// about to leave by a removal or an expiry; nothing in a store.
  void policy_forget(std::uint64_t slot, Location loc, std::uint64_t stamp, std::uint64_t h,
                     std::uint64_t bytes);
  void cache_replaced(const eviction::Handle& before, std::uint64_t slot, Location loc,
                      std::uint64_t h, bool moved = false);
  void drain_hits();

  std::uint64_t next_stamp() noexcept {
    stamp_ += 2;
    return stamp_;
  }

  const Hash& hash_;
  WalkGate& walks_;
  Journal journal_;
  Index index_;
  FreeLists free_;
  // Written by every write: apart from what readers load (the index's table
  // and generation, the journal's chunk table).
  alignas(64) mutable Lock lock_;
  std::mutex sync_mutex_;  // one sync() of the shard at a time
  mutable std::atomic<std::uint32_t> starving_readers_{0};
  std::uint64_t stamp_ = 0;  // the last stamp drawn; even
  std::atomic<std::uint64_t> records_{0};
  std::uint64_t key_value_bytes_ = 0;
  std::uint64_t live_bytes_ = 0;
  std::uint64_t puts_ = 0;
  std::uint64_t removes_ = 0;
  std::uint64_t writes_since_reclaim_ = 0;
  std::uint32_t number_;
  bool durable_;
  bool verify_;
  bool sync_each_;
  bool defer_frees_;
  std::uint32_t crc_seed_;
  std::atomic<int>* sync_error_;
  LocationList deferred_;  // old records of updates, oldest first (periodic)
  std::uint64_t deferred_dropped_ = 0;  // entries ever taken off deferred_
  LocationList dead_;  // dead markers of removals, oldest first (periodic)
  std::uint64_t dead_dropped_ = 0;   // entries ever taken off dead_
  std::uint64_t dead_freeable_ = 0;  // dead_ entries below this may go at the next sync
  // Periodic (durability.hpp): a record stamped below freed_below_ has had
  // every older record of its key freed in memory (the last sync freed the
  // deferred records of writes made before it began); below settled_below_,
  // those frees are on disk too (a later sync's msync), so that the record
  // is the oldest of its key a crash could bring back.
  std::uint64_t freed_below_ = 0;
  std::uint64_t settled_below_ = 0;
  std::uint64_t newest_live_ = 0;  // the stamp of the last live record written (or recovered)
  std::uint64_t markerless_evictions_ = 0;  // settled records evicted without a marker
  // Removed records waiting for the removal listener (cache/removal_reports.hpp).
  friend class RemovalReports<Shard>;
  RemovalReports<Shard> removals_;
  std::uint64_t replaced_ = 0;         // records a write replaced
  bool normalized_ = true;  // false after a read-only recovery: free space left as found
  PendingAdopt batch_[kAdoptBatch];  // recovery only
  std::vector<Location> dead_found_;  // recovery only: dead markers met
  unsigned batch_size_ = 0;
  mutable std::atomic<std::uint64_t> corrupt_{0};  // damaged records met (recovery, reads)
  std::uint64_t recovered_damage_ = 0;  // of which recovery turned into free space
  // Caches (cache_shard.hpp).
  Eviction policy_;
  std::uint64_t capacity_ = ~std::uint64_t{0};    // this shard's share of capacity_bytes
  std::uint64_t hard_limit_ = ~std::uint64_t{0};  // capacity_ plus the slack
  std::uint64_t evictions_ = 0;
  std::uint64_t limit_evictions_ = 0;  // of evictions_: for Options::memory_limit_bytes
  std::uint64_t hits_applied_ = 0;  // buffered hits handed to the policy
  KeySeen own_;                // the write under way's look at its key (OwnKey: active)
  bool limit_round_ = false;   // evict_for_room() is evicting
  std::uint64_t host_loc_ = ~std::uint64_t{0};  // the record whose slot current() found last
  std::uint64_t host_slot_ = 0;
  bool count_hits_;  // readers raise policy bits (a writable cache: a read-only one writes nothing)
  bool readers_drain_ = true;  // false once a maintenance thread drains the hit rings
  struct NoHitBuffers {
    explicit NoHitBuffers(const StoreName&) noexcept {}
    std::uint64_t mapped_bytes() const noexcept { return 0; }
  };
  // Lru, WTinyLfu: readers' hits on their way to the policy (hit_buffers.hpp).
  [[no_unique_address]] mutable std::conditional_t<kBufferedHits, HitBuffers, NoHitBuffers> hits_;
  // Expiry (expiry/expiry_shard.hpp).
  const Clock* clock_;
  friend class ShardExpiry<Shard>;
  ShardExpiry<Shard> expiry_;  // the wheel, its sweeps, expirations (expiry/expiry_shard.hpp)
  std::atomic<std::uint64_t> next_due_{ExpiryWheel::kNever};  // see next_due()
  // Memory back to the OS (compaction/page_release.hpp).
  friend class PageRelease<Shard>;
  PageRelease<Shard> pages_;
  // Compaction (compaction/compaction.hpp).
  friend class Compaction<Shard>;
  Compaction<Shard> compaction_;
};

}  // namespace offheap::detail

// The shard's other concerns, defined out of the class in headers of their
// own (each includes this one): whoever includes the shard gets them all.
#include <offheap/detail/files/durability.hpp>
#include <offheap/detail/shard/probe.hpp>
#include <offheap/detail/shard/writes.hpp>
#include <offheap/detail/shard/compute.hpp>
#include <offheap/detail/files/recovery.hpp>
#include <offheap/detail/journal/space.hpp>
#include <offheap/detail/cache/cache_shard.hpp>
