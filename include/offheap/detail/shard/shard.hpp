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
// The shard's parts. The shard itself holds what every write touches (the
// journal, the index, the free lists, the lock, the stamp counter, the
// counts) and defines its writes here and in shard/writes.hpp (write,
// erase, compute, batches, clear). Its other concerns are components, each
// a class template over the shard that the shard lets in (friend), included
// above, none including this header. Those that own their state, held as
// members:
//   ShardDurability files/durability.hpp        syncs, deferred frees, what is settled
//   CacheHost       cache/cache_host.hpp        eviction policy, readers' hits, capacity
//   ShardExpiry     expiry/expiry_shard.hpp     the wheel, sweeps, expirations
//   RemovalReports  cache/removal_reports.hpp   the listener's queue, retired records
//   Compaction      compaction/compaction.hpp   emptying sparse chunks
//   PageRelease     compaction/page_release.hpp pages of free records back to the OS
//   ShardRecovery   files/recovery.hpp          one recovery (made for the call)
// and those that hold none, which the shard forwards to: ShardProbe
// (shard/probe.hpp: lookups), ShardSpace (journal/space.hpp: allocation,
// freeing, merging), ShardWalk (journal/walk.hpp: for_each, scan),
// ShardVerify (shard/verify.hpp), ShardStateFile (files/state_file.hpp),
// IndexGrowth (index/index_growth.hpp), ShardStats (shard/stats.hpp),
// ShardIntegrity (files/integrity.hpp).
#pragma once

#include <offheap/detail/memory/atomic_word.hpp>
#include <offheap/detail/shard/compute_support.hpp>
#include <offheap/detail/journal/crc32c.hpp>
#include <offheap/detail/expiry/wheel.hpp>
#include <offheap/detail/files/durability.hpp>
#include <offheap/detail/files/file.hpp>
#include <offheap/detail/files/format.hpp>
#include <offheap/detail/files/recovery.hpp>
#include <offheap/detail/journal/free_lists.hpp>
#include <offheap/detail/index/hash.hpp>
#include <offheap/detail/cache/cache_host.hpp>
#include <offheap/detail/journal/space.hpp>
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
#include <offheap/detail/memory/os.hpp>
#include <offheap/detail/shard/reader_support.hpp>
#include <offheap/detail/shard/probe.hpp>
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
        crc_seed_(crc_seed(config.store_id, number)),
        durability_(name, config.durable, config.sync_each_write, config.defer_frees, config.sync_error),
        removals_(name, config.report_removals),
        cache_(name, kEvicts && !(config.journal.files != nullptr && config.journal.files->read_only)),
        clock_(config.clock), expiry_(name, now_ms(), !(config.journal.files != nullptr && config.journal.files->read_only)),
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
  /// lookup tries again. Returns whether the key was found. Lock-free
  /// (shard/probe.hpp: the inline common case, then the whole way).
  template <class OnHit>
  [[gnu::always_inline]] bool lookup(std::string_view key, std::uint64_t h, OnHit&& on_hit) const {
    return ShardProbe<Shard>::lookup(*this, key, h, on_hit);
  }

  /// walk.hpp: for_each calls fn(copy) for every live record, on copies
  /// validated by their stamps; scan walks from a position and stops.
  /// Require: the caller has entered the store's WalkGate.
  template <class F>
  void for_each(F& fn, WalkCopy& copy) const { return ShardWalk<Shard>::for_each(*this, fn, copy); }
  template <class F>
  bool scan(std::uint64_t& pos, std::uint64_t& serial, std::uint64_t& moves, std::uint32_t& restarts,
            std::uint64_t& budget, F& fn, WalkCopy& copy) const {
    return ShardWalk<Shard>::scan(*this, pos, serial, moves, restarts, budget, fn, copy);
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
  /// where it stopped when made again (shard/writes.hpp).
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
  /// After prefetch(h), once its line has had time to come: brings the
  /// record that the first slot of that line whose tag matches `h` leads
  /// to into the cache (its first two lines: header, key and the start of
  /// the value), so that a batch's lookups find both their lines there. A
  /// hint: reads nothing a lookup relies on. Its loads are relaxed and
  /// unchecked (a table replaced meanwhile, a slot removed, another key's
  /// record: a wasted prefetch, never a fault: resolve() bounds the
  /// location, and a prefetch of any address is harmless).
  void prefetch_record(std::uint64_t h) const noexcept {
    const TableView t = index_.acquire_view();
    ProbeSeq seq(h, t.mask);
    const std::uint64_t* line = t.ctrl_word(seq.group());
    const std::uint64_t m = ctrl::match(load_relaxed(line), ctrl::tag_of(h));
    if (m == 0) return;
    const Location loc = slot_location(load_relaxed(line + 1 + ctrl::first(m)));
    if (!loc.is_none()) prefetch_record_at(loc);
  }
  /// Brings the first two lines of the record at `loc` into the cache (a
  /// hint; a location past the chunks prefetches nothing).
  void prefetch_record_at(Location loc) const noexcept {
    std::uint64_t avail = 0;
    if (const std::byte* rec = journal_.resolve(loc, record::kMinRecord, avail)) {
      __builtin_prefetch(rec);
      if (avail > 64) __builtin_prefetch(rec + 64);
    }
  }

  /// An atomic read-modify-write of the key (shard/writes.hpp): under the
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
  /// and drains the readers' hits (`yield`: until a writer waits for the
  /// lock). Returns whether a reader dropped a hit on a full ring since
  /// the last call (the rings want draining more often than they were).
  /// Takes the lock.
  bool maintain(bool yield = false) {
    std::lock_guard<Lock> guard(lock_);
    index_.drop_retired(walks_);
    if constexpr (kBufferedHits) {
      cache_.drain_hits(*this, yield);
      return cache_.take_full();
    }
    return false;
  }

  std::uint64_t size() const noexcept { return records_.load(std::memory_order_relaxed); }

  /// Ends an index migration under way at once (a clean close, recovery:
  /// no writer or walk of the caller's meanwhile).
  void finish_index_migration() noexcept { IndexGrowth<Shard>::finish_index_migration(*this); }
  /// Whether the index is migrating to a new table (lock-free).
  bool index_migrating() const noexcept { return index_.migrating_now(); }
  /// The maintenance's part of an index migration: moves up to `groups`
  /// groups if no write has moved any since its last call (`always`: in
  /// any case), so that a migration ends when writes stop before they have
  /// ended it. Returns whether it moved any. Takes the lock, unless a walk
  /// holds the moves back (nothing to do then).
  bool help_index_migration(std::uint64_t groups, bool always) {
    if (walks_.active()) return false;
    // Writes moved groups since the last call: theirs to go on with (the
    // lock is not taken from them).
    const std::uint64_t moves = index_.moves();
    if (!always && helped_moves_.exchange(moves, std::memory_order_relaxed) != moves) return false;
    const WriteLock guard(*this);
    if (!index_.migrating()) return false;
    const std::uint64_t before = index_.migration_cursor();
    IndexGrowth<Shard>::migrate_index(*this, groups);
    helped_moves_.store(index_.moves(), std::memory_order_relaxed);
    return !index_.migrating() || index_.migration_cursor() != before;
  }

  // ---- the spare chunk (journal/journal.hpp) ----------------------------------

  /// Whether an append asked for the next chunk ahead of need (lock-free).
  bool spare_chunk_wanted() const noexcept { return spare_wanted_.load(std::memory_order_relaxed); }
  /// Makes the next journal chunk ahead of need: planned and handed over
  /// under the lock, made (a file reserved whole and synced, or a mapping)
  /// with no lock held, so that no write waits for it. A refusal (disk
  /// full, a memory limit) is left for the write that needs the chunk to
  /// meet and report. Returns whether a spare was kept.
  bool make_spare_chunk() noexcept {
    // One maker per shard at a time (the maintenance thread and maintain()
    // calls on any threads): the others leave it to it. Acquire/release:
    // pairs with the release below, so that a maker sees the previous one's
    // work (it also meets it under the lock).
    if (making_spare_.exchange(true, std::memory_order_acquire)) return false;
    const struct Done {
      std::atomic<bool>& f;
      ~Done() { f.store(false, std::memory_order_release); }
    } done{making_spare_};
    // Relaxed: a trigger; plan_spare() under the lock decides.
    spare_wanted_.store(false, std::memory_order_relaxed);
    Journal::SparePlan plan;
    {
      const WriteLock guard(*this);
      plan = journal_.plan_spare();
    }
    if (plan.size == 0) return false;
    std::byte* base = journal_.make_spare(plan);
    if (base == nullptr) return false;
    bool kept = false;
    {
      const WriteLock guard(*this);
      kept = journal_.keep_spare(plan, base);
    }
    if (!kept) journal_.drop_spare(plan, base);
    return kept;
  }
  /// At a close (writable stores): the spare goes, with its file, and no
  /// other is kept.
  void close_spare_chunks() noexcept {
    const WriteLock guard(*this);
    journal_.close_spares();
  }

  // ---- caches (cache/cache_host.hpp says what each does) -----------------------

  void set_capacity(std::uint64_t capacity, std::uint64_t slack) { cache_.set_capacity(*this, capacity, slack); }
  std::uint64_t evict_to_capacity(std::uint64_t max_records, bool yield = false) {
    return cache_.evict_to_capacity(*this, max_records, yield);
  }
  /// Whether a writer waits for the lock (a hint, for the maintenance
  /// thread's batches: it lets the lock go; false where the Lock cannot
  /// tell, policy.hpp).
  bool writer_waiting() const noexcept {
    if constexpr (requires { lock_.contended(); }) {
      return lock_.contended();
    } else {
      return false;
    }
  }
  void leave_drains_to_maintenance() noexcept { cache_.leave_drains_to_maintenance(); }
  void rebuild_policy(bool may_evict) { cache_.rebuild_policy(*this, may_evict); }
  /// Before any shard's rebuild_policy() (one shard at a time, so that
  /// each gets its share before the rebuilds run side by side).
  void prepare_policy_rebuild() { cache_.prepare_policy_rebuild(*this); }

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
  int sync(bool all) { return durability_.sync(*this, all); }

  /// Frees the record at `loc`, whatever its state, with the capacity and
  /// prev-free bit its header says.
  void free_record(Location loc) noexcept { ShardSpace<Shard>::free_record(*this, loc); }

  /// Old records and dead markers waiting for syncs before they are freed
  /// (periodic).
  std::uint64_t deferred_records() const {
    std::lock_guard<Lock> guard(lock_);
    return durability_.waiting();
  }

  /// Periodic: whether a record was written since the sync before last
  /// began (settled_below_): two syncs settle it, and a cache may then
  /// evict it without a dead marker when the memory limit leaves no room
  /// for one (cache/cache_host.hpp).
  bool unsettled() const { return durability_.unsettled(*this); }

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

  /// Rebuilds the shard from the records in its chunks (files/recovery.hpp).
  /// Requires: no other thread in the shard.
  Recovery recover(bool writable) { return ShardRecovery<Shard>(*this).run(writable); }

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
  friend class ShardProbe<Shard>;
  friend class ShardSpace<Shard>;
  friend class ShardRecovery<Shard>;

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
  /// Frees, as a write ends, the record kept for it that it did not take
  /// (journal/space.hpp, Handover; a cache's writes only).
  struct HandoverGuard {
    Shard& s;
    explicit HandoverGuard(Shard& shard) noexcept : s(shard) {}
    HandoverGuard(const HandoverGuard&) = delete;
    HandoverGuard& operator=(const HandoverGuard&) = delete;
    ~HandoverGuard() {
      if constexpr (kEvicts) ShardSpace<Shard>::drop_handover(s);
    }
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
  // cache/cache_host.hpp
  std::string verify_policy() const { return cache_.verify_policy(*this); }
  // expiry/expiry_shard.hpp
  bool finds(std::string_view key, Location loc) const { return ShardVerify<Shard>::finds(*this, key, loc); }

  enum class Examined { hit, other, restart, starved };
  enum class Probe { hit, miss, starved };

  // walk.hpp: for_each's and scan's reads
  bool copy_record(const TableView& t, const std::uint64_t* slot, WalkCopy& copy) const {
    return ShardWalk<Shard>::copy_record(*this, t, slot, copy);
  }
  bool copy_from_frozen(const std::uint64_t* slot, WalkCopy& copy) const {
    return ShardWalk<Shard>::copy_from_frozen(*this, slot, copy);
  }

  /// The key's slot (writers only). `found`, if given, receives the key's
  /// record when found (the one the slot leads to), so that the caller
  /// does not resolve the slot again.
  [[gnu::always_inline]] Index::Found find_for_write(std::string_view key, std::uint64_t h,
                                                     std::byte** found = nullptr) const {
    return index_.find(h, [&](Location loc) {
      std::byte* rec = journal_.at(loc);
      const record::Meta m = record::read_meta(rec);
      // (File-backed writers go through find_intact, which checks a
      // record's bounds and checksum before its key.)
      const bool mine = m.key_len == key.size() &&
                        equal_bytes(reinterpret_cast<const char*>(rec + record::kHeaderBytes), key.data(),
                                    key.size());
      if (mine && found != nullptr) *found = rec;
      return mine;
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

  // journal/space.hpp: room for records, freeing and merging
  void rewrite_in_place(Location loc, std::byte* rec, std::uint64_t cap, std::uint64_t need,
                        std::string_view key, std::string_view value, std::uint8_t type,
                        std::uint64_t deadline) noexcept {
    ShardSpace<Shard>::rewrite_in_place(*this, loc, rec, cap, need, key, value, type, deadline);
  }
  Slot allocate(std::uint64_t need, bool grow = true, std::uint64_t revive_most = ~std::uint64_t{0}) {
    return ShardSpace<Shard>::allocate(*this, need, grow, revive_most);
  }
  void push_free_range(Location l, std::byte* r, std::uint64_t bytes, bool prev_free,
                       std::uint64_t stamp) noexcept {
    ShardSpace<Shard>::push_free_range(*this, l, r, bytes, prev_free, stamp);
  }
  void release(Location loc, std::byte* rec, std::uint64_t cap, bool prev_free) noexcept {
    ShardSpace<Shard>::release(*this, loc, rec, cap, prev_free);
  }
  /// An append passed the journal's spare mark: the maintenance thread
  /// makes the next chunk (make_spare_chunk()).
  void want_spare_chunk() noexcept {
    spare_wanted_.store(true, std::memory_order_relaxed);  // a trigger: see make_spare_chunk()
    want_round();
  }
  void want_round() noexcept {
    // seq_cst: as in schedule_expiry(), against the maintenance thread's
    // plan (the due lambda of Upkeep::start).
    if (next_due_.load(std::memory_order_relaxed) > 1) next_due_.store(1, std::memory_order_seq_cst);
  }
  /// next_due_ after a round: the wheel's next event, or now while work is left.
  void plan_next_round(std::uint64_t now) noexcept {
    const bool busy = expiry_.sweeping() || journal_.tail_high() > journal_.tail_offset() ||
                      pages_.wants_round(*this) || spare_chunk_wanted();
    std::uint64_t next = busy ? now : expiry_.next_event();
    // help_index_migration() in a round: every 16 ms while a migration is
    // under way (writes drive it; the round only finishes one they left).
    if (index_.migrating()) next = std::min(next, now + 16);
    if (compaction_due()) next = std::min(next, std::max(now, compaction_.retry_ms()));
    next_due_.store(next, std::memory_order_seq_cst);
  }

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

  // files/durability.hpp
  void note_sync_error(int err) noexcept { durability_.note_error(err); }
  [[noreturn, gnu::cold]] void sync_failed(int err) { durability_.failed_sync(journal_.name(), err); }

  // index_growth.hpp
  void grow_index() { return IndexGrowth<Shard>::grow_index(*this); }


  // cache/cache_host.hpp: eviction (caches; no-ops in a store)
  using Held = HeldRecord;
  Held held_record(Location loc, std::uint64_t stamp, bool check_intact) const {
    return CacheHost<Shard>::held_record(*this, loc, stamp, check_intact);
  }
  /// Gives a write the cache host's KeySeen (own()), fresh, for as long as
  /// it holds the lock.
  struct OwnKey {
    Shard& s;
    explicit OwnKey(Shard& shard) noexcept : s(shard) { renew(); }
    OwnKey(const OwnKey&) = delete;
    OwnKey& operator=(const OwnKey&) = delete;
    ~OwnKey() { s.cache_.own().active = false; }
    KeySeen& seen() const noexcept { return s.cache_.own(); }
    /// A fresh look, for the next write of the same hold (a batch's entry).
    void renew() const noexcept {
      s.cache_.own() = KeySeen{};
      s.cache_.own().active = true;
    }
  };
  /// Finds the key (find_intact()) and notes in `seen` what it found.
  Index::Found look_at_key(std::string_view key, std::uint64_t h, KeySeen& seen);
  /// look_at_key() of what find_intact() found already.
  void note_key(const Index::Found& f, KeySeen& seen);
  /// The write `seen` belongs to has written (or removed) its key: if the
  /// room made for it evicted the key's own record, that removal is
  /// reported, and counted, with `cause` (the one the write gives what it
  /// replaces or removes) instead of evicted. Its report is still queued:
  /// the lock was held from the eviction to here.
  void own_key_done(KeySeen& seen, RemovalCause cause) noexcept;
  /// Evicts until a record of `bytes` fits under the hard limit, the bytes
  /// of `own` (the record the write replaces, while it is there) counted
  /// as leaving.
  void make_room(std::uint64_t bytes, const KeySeen* own = nullptr) { cache_.make_room(*this, bytes, own); }
  void reserve_policy() { cache_.reserve_policy(*this); }
  bool evict_for_room(std::uint64_t bytes, std::uint64_t round) { return cache_.evict_for_room(*this, bytes, round); }
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
                        const ValueFill* fill = nullptr, const Index::Found* looked = nullptr);
  /// write()'s common case, taken before anything else: an upsert or a
  /// replace, without fill or deadline, of a key present in an anonymous
  /// store that updates in place, whose record has no deadline and a
  /// capacity the new value fits without a free remainder. Rewrites the
  /// value where it is (done); else changes nothing and says whether it
  /// looked the key up (`f`: what it found, for write_locked()).
  enum class InPlace { done, looked, not_looked };
  InPlace overwrite_in_place(std::string_view key, std::uint64_t h, std::string_view value, std::uint8_t type,
                             Index::Found& f);
  /// A fill write's value, written by `fill` into the slot just allocated
  /// for it; if fill throws, the slot is freed again and the exception goes on.
  std::string_view fill_slot(const Slot& s, std::size_t key_len, const ValueFill& fill);
  void cache_admitted(std::uint64_t slot, Location loc, std::uint64_t h) { cache_.cache_admitted(*this, slot, loc, h); }
  /// A cache's policy lets go of the record at `loc` (index slot `slot`)
  /// about to leave by a removal or an expiry; nothing in a store.
  void policy_forget(std::uint64_t slot, Location loc, std::uint64_t stamp, std::uint64_t h,
                     std::uint64_t bytes) {
    cache_.policy_forget(*this, slot, loc, stamp, h, bytes);
  }
  void cache_replaced(const eviction::Handle& before, std::uint64_t slot, Location loc,
                      std::uint64_t h, bool moved = false) {
    cache_.cache_replaced(*this, before, slot, loc, h, moved);
  }

  std::uint64_t next_stamp() noexcept {
    stamp_ += 2;
    return stamp_;
  }

  const Hash& hash_;
  WalkGate& walks_;
  Journal journal_;
  Index index_;
  FreeLists free_;
  // Set at construction and read by every reader and writer: kept off the
  // line that writers store to (below).
  std::uint32_t number_;
  bool durable_;
  bool verify_;
  std::uint32_t crc_seed_;
  // The writers' line: the lock and what every write updates, in one line
  // of 64 bytes apart from what readers load (the index's table and
  // generation, the journal's chunk table), so that writers on two cores
  // taking turns at the shard move one line between them, not three. (64
  // bytes with a lock of up to 4 bytes, as the library's policies have; a
  // larger lock of a policy of yours moves the last counters to the next
  // line: slower, not wrong.)
  alignas(64) mutable Lock lock_;
  mutable std::atomic<std::uint32_t> starving_readers_{0};
  std::uint64_t stamp_ = 0;  // the last stamp drawn; even
  std::atomic<std::uint64_t> records_{0};
  std::uint64_t key_value_bytes_ = 0;
  std::uint64_t live_bytes_ = 0;
  std::uint64_t puts_ = 0;
  std::uint64_t replaced_ = 0;  // records a write replaced
  std::uint64_t removes_ = 0;
  alignas(64) std::uint64_t writes_since_reclaim_ = 0;
  Handover handover_;  // the record evicted for the write under way (journal/space.hpp)
  // Syncs and what waits for them (files/durability.hpp).
  friend class ShardDurability<Shard>;
  ShardDurability<Shard> durability_;
  // Removed records waiting for the removal listener (cache/removal_reports.hpp).
  friend class RemovalReports<Shard>;
  RemovalReports<Shard> removals_;
  bool normalized_ = true;  // false after a read-only recovery: free space left as found
  mutable std::atomic<std::uint64_t> corrupt_{0};  // damaged records met (recovery, reads)
  std::uint64_t recovered_damage_ = 0;  // of which recovery turned into free space
  // The eviction policy, the readers' hits, the capacity (cache/cache_host.hpp).
  friend class CacheHost<Shard>;
  CacheHost<Shard> cache_;
  // Expiry (expiry/expiry_shard.hpp).
  const Clock* clock_;
  friend class ShardExpiry<Shard>;
  ShardExpiry<Shard> expiry_;  // the wheel, its sweeps, expirations (expiry/expiry_shard.hpp)
  std::atomic<std::uint64_t> next_due_{ExpiryWheel::kNever};  // see next_due()
  std::atomic<bool> spare_wanted_{false};  // see spare_chunk_wanted()
  std::atomic<bool> making_spare_{false};  // see make_spare_chunk()
  std::atomic<std::uint64_t> helped_moves_{~std::uint64_t{0}};  // Index::moves() at help_index_migration()
  // Memory back to the OS (compaction/page_release.hpp).
  friend class PageRelease<Shard>;
  PageRelease<Shard> pages_;
  // Compaction (compaction/compaction.hpp).
  friend class Compaction<Shard>;
  Compaction<Shard> compaction_;
};

}  // namespace offheap::detail

// The shard's writes, defined out of the class (shard/writes.hpp includes
// this header): whoever includes the shard gets them.
#include <offheap/detail/shard/writes.hpp>
