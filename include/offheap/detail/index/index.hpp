// SPDX-License-Identifier: Apache-2.0
// The index: an open-addressing table from key hash to record Location.
//
// The tables' layout (lines of a control word and 7 locations, tags,
// probing) is table.hpp's. A slot number names a slot of the current
// table, or with kOldSlot of the table a migration drains.
//
// Probing visits whole groups on a triangular sequence of group numbers,
// which visits every group of a power-of-two table. A probe stops at a
// group with an empty slot, so a removal may leave an empty (not a
// tombstone) in a group that already has one. Growth doubles when live
// entries pass half the limit and otherwise rebuilds at the same size;
// either way tombstones are dropped.
//
// Growth without a pause (migration). A table of up to kRebuildGroups
// groups is rebuilt at once. A larger one is not: the new table is
// published empty beside it (the old one stays on the readers' second
// word, old_word_), inserts go to the new table, and every write first
// moves the next kMoveGroups groups of the old one (migrate()), each entry
// rehashed from its record's key (the slot keeps 7 hash bits: one record
// read per moved entry, the records of a step prefetched together, as
// many reads in all as a rebuild, spread over the writes). A write thus
// waits for at most two groups' moves, never for the shard. A key is in
// one of the two tables, never both: a move stores the entry in the new
// table (release) before its old slot says none and its control byte
// turns tombstone (release), and readers probe the old table first, then
// the new one, so a reader that finds the old slot emptied finds the entry
// in the new table. The generation moves when a migration begins (a
// reader that loaded the single old table concludes nothing once entries
// leave it) and when it ends (the old table retired); a step moves none
// (every record stays where it was). No entry moves while a walk is in
// progress (the seq_cst handshake of migrate() and wait_moves()): a walk
// sees the old table, then the new one, each entry once. Walks that keep
// overlapping until the new table fills make the next write rebuild both
// tables into one at once (the one pause proportional to the shard left,
// and only then). The maintenance thread moves the rest of a migration
// that writes stopped in the middle of (Shard::help_index_migration), and
// a clean close finishes it (the state file holds one table, as before).
// The fast read path takes the slow one while a migration is under way
// (one relaxed load tells it, on the line it loads anyway).
//
// Concurrency: only the writer (holding the shard lock) changes a table. It
// stores a slot's location with release before the control word that makes
// the slot full (release), so a reader that loads the control word with
// acquire and then the location with acquire sees the record the location
// leads to. A new table is published with a release store of the table
// word (the lines' address with log2 of the group count in its low bits, so
// that a reader needs no load from the table's header) after it is
// complete; the old one goes to the caller to retire.
//
// Readers hold nothing, and write nothing but, in an S3-FIFO cache, the
// low 2 bits of a slot word they validated (one compare-and-swap that
// raises a frequency; CacheHost::raise_frequency), which is why writers load
// slot words atomically too. A table that growth or clear()
// replaced is never unmapped while the index lives. Once every walk
// (for_each) that may be inside it has ended (WalkGate) its pages go back
// to the OS (zero pages for a reader still inside: every control byte
// reads empty, every location 0) and its address range is kept for a
// later table of the same size (a reader still inside then reads that
// table's slots). Either way a stale reader stays inside the range it
// loaded, since the group mask came with the table word, and concludes
// nothing from what it reads there: see the generation below. Ranges
// kept, none of them resident: with no walk in progress at most two per
// size (one a same-size rebuild or clear() left, which the next one takes
// back, and one growth left), so at most four times the current table's
// address space per shard; plus as many as were replaced at once while
// walks held them (taken again by later tables of their size: they do not
// pile up from one walk to the next).
//
// A generation counter says when readers' conclusions from a table went
// stale: growth bumps it after publishing the new table (an old table is
// frozen from then on), clear() bumps it after publishing a fresh empty
// table (or before and after emptying the table in place), and a merge of
// free records or a retreat of the journal's tail bumps it before that
// space can be reused (invalidate_readers(): a location a
// reader holds may then lie inside another record's value bytes). A reader
// loads the generation before the table and accepts a hit or a miss only
// if the generation has not moved. It is a 64-bit count, so unlike a table address it never comes
// back; so is the table serial, which moves only when a table is published
// (still_current() in shard.hpp: the reader's table is still the current
// one even if its range was reused). A removal stores none in its slot's
// location before its record is freed, so a slot whose key went away never
// leads to a record again.
//
// Load limit 7/8: a key displaced to the next group costs a branch
// misprediction (0.25 per W1 get, against absl's 0.02). A 3/4 limit cut
// them to 0.03 per get with no measurable change in speed, so the limit
// stayed at 7/8, which keeps less memory.
#pragma once

#include <offheap/detail/memory/atomic_word.hpp>
#include <offheap/detail/index/location.hpp>
#include <offheap/detail/index/table.hpp>
#include <offheap/detail/index/walk_gate.hpp>
#include <offheap/detail/memory/os.hpp>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cassert>
#include <cstdint>
#include <string>
#include <thread>

namespace offheap::detail {

#if defined(OFFHEAP_TESTING_READ_HOOK)
/// Tests only (tests/hooks/): clear() empties the table in place (as when
/// no fresh table can be mapped), and calls the hook between its first
/// move of the generation and emptying the table, to hold the clearing
/// thread there.
inline bool testing_clear_in_place = false;
inline void (*testing_clear_after_bump)() = nullptr;
#endif

#if defined(OFFHEAP_TESTING_MIGRATION_HOOK)
/// Tests only (tests/hooks/migration_order_test.cpp): called by a
/// migration step (on the writer's thread, under the shard's lock) between
/// the two stores of each move, where a lock-free reader must still find
/// the entry. OFFHEAP_TESTING_MIGRATION_ERASE_FIRST (the twin) makes the
/// move empty the old slot first: the entry is then in neither table here.
inline void (*testing_between_move_stores)() = nullptr;
#endif


class Index {
 public:
  /// The capacity, in slots, that holds `entries` under the load limit.
  static std::uint64_t capacity_for(std::uint64_t entries) noexcept {
    return groups_for(entries) * IndexTable::kSlotsPerGroup;
  }
  static std::uint64_t groups_for(std::uint64_t entries) noexcept {
    std::uint64_t groups = 1;
    while (limit_of(groups * IndexTable::kSlotsPerGroup) < entries) groups *= 2;
    return groups;
  }
  /// 7/8 of the slots, rounded down, and always at least one slot left
  /// empty (a probe ends at an empty slot).
  static constexpr std::uint64_t limit_of(std::uint64_t capacity) noexcept {
    return capacity - (capacity + 7) / 8;
  }

  Index(std::uint64_t expected_entries, const StoreName& name) : name_(name) {
    publish(IndexTable::create(groups_for(expected_entries), name_));
    keep_spare();
  }
  Index(const Index&) = delete;
  Index& operator=(const Index&) = delete;
  ~Index() {
    IndexTable::destroy(table_, name_);
    IndexTable::destroy(old_, name_);
    drop_all(retired_);
    drop_all(spares_);
    drop_all(lost_);
  }

  // ---- reader side ---------------------------------------------------------
  // (The fast path's calls are forced inline: in a large translation unit,
  // as a benchmark's with several stores, GCC left them calls, 20
  // instructions a get.)

  /// Load first, then the table. Acquire pairs with the release store in
  /// grow() (a reader that sees the new generation sees the new table) and
  /// in clear().
  [[gnu::always_inline]] std::uint64_t acquire_generation() const noexcept {
    return generation_.load(std::memory_order_acquire);
  }
  /// The table serial: moves (after the table word) whenever a table is
  /// published. Acquire pairs with publish()'s release: a reader that
  /// loads a serial and then the table word sees that serial's table or a
  /// later one.
  [[gnu::always_inline]] std::uint64_t acquire_serial() const noexcept { return serial_.load(std::memory_order_acquire); }
  /// The current table. Pairs with the release store in publish().
  [[gnu::always_inline]] TableView acquire_view() const noexcept { return view_of(word_.load(std::memory_order_acquire)); }
  /// The table a migration drains (words null when none). Alone, for
  /// live_table(); readers take it with the current one (acquire_pair()).
  /// Acquire: pairs with the release stores of old_word_.
  TableView acquire_old_view() const noexcept { return view_of(old_word_.load(std::memory_order_acquire)); }

  /// The current table and the one a migration drains (words null when
  /// none), published together (publish()'s seqlock on the serial), and
  /// the serial they were published under (as acquire_serial()). Load the
  /// generation first. Waits out a publish in progress (a few stores).
  std::uint64_t acquire_pair(TableView& current, TableView& drained) const noexcept {
    for (;;) {
      const std::uint64_t s = serial_.load(std::memory_order_acquire);
      const std::uintptr_t w = word_.load(std::memory_order_acquire);
      const std::uintptr_t o = old_word_.load(std::memory_order_acquire);
      // The words' loads before the second load of the serial (pairs with
      // publish()'s release fence).
      std::atomic_thread_fence(std::memory_order_acquire);
      if ((s & 1) == 0 && serial_.load(std::memory_order_relaxed) == s) {
        current = view_of(w);
        drained = view_of(o);
        return s;
      }
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
  }
  /// The fast path's pair check: true when the serial `s` loaded before
  /// the table word is even and still the serial after it and after the
  /// drained table's word, which was 0 (one table: the fast path's case).
  [[gnu::always_inline]] bool single_table_since(std::uint64_t s) const noexcept {
    if (old_word_.load(std::memory_order_acquire) != 0) return false;
    std::atomic_thread_fence(std::memory_order_acquire);  // as in acquire_pair()
    return (s & 1) == 0 && serial_.load(std::memory_order_relaxed) == s;
  }
  /// Whether a migration is under way (lock-free; for the maintenance
  /// thread and stats). Acquire: a reader that sees the end of a migration
  /// (0) sees every entry it moved (pairs with end_migration()'s release).
  bool migrating_now() const noexcept { return old_word_.load(std::memory_order_acquire) != 0; }
  /// Whether `words` is a table writers still change: the current one or
  /// the one a migration drains (else a replaced, frozen one).
  bool live_table(const std::uint64_t* words) const noexcept {
    return acquire_view().words == words || acquire_old_view().words == words;
  }
  /// For a walk, after it entered the WalkGate and before it loads a table:
  /// waits out a migration step that started before the walk was counted
  /// (a few groups moved under the lock; no later step starts while the
  /// walk is in progress). Seq_cst: the handshake with migrate().
  void wait_moves() const noexcept {
    for (unsigned i = 0; moving_.load() != 0; ++i) {
      if (i < 64) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
      } else {
        std::this_thread::yield();
      }
    }
  }
  /// How many migration steps moved entries (for scan steps: entries moved
  /// between two calls may come again). Read inside the WalkGate, after
  /// wait_moves().
  std::uint64_t moves() const noexcept { return moves_.load(std::memory_order_relaxed); }

  /// True while no growth, clear() or invalidate_readers() happened since
  /// `generation` was loaded. Callers order their earlier loads before this
  /// one with an acquire fence (record::validate); it pairs with the release
  /// fences that follow a bump: clear()'s, invalidate_readers()'s, and the
  /// one every later writer issues when it takes the lock (Shard::WriteLock).
  [[gnu::always_inline]] bool unchanged_since(std::uint64_t generation) const noexcept {
    return generation_.load(std::memory_order_relaxed) == generation;
  }
  /// Whether `slot` (a location word of a table) is full: clear() in place
  /// empties control bytes and leaves location words as they were, and
  /// erase() stores none in the location first. Acquire: pairs with
  /// set_ctrl()'s release stores. (A caller that loaded, with acquire, the
  /// generation that clear()'s second move stored sees the bytes empty.)
  static bool slot_full(const std::uint64_t* slot) noexcept {
    return (ctrl::byte_of(load_acquire(TableView::ctrl_of(slot)), TableView::index_of(slot)) &
            0x80) != 0;
  }

  // ---- writer side (the shard's lock is held) ------------------------------

  /// The current table (where inserts go). A clean close saves it after
  /// finish_migration(), so it is then the only one.
  IndexTable* table() const noexcept { return table_; }
  /// The table a migration drains, or null.
  const IndexTable* old_table() const noexcept { return old_; }
  bool migrating() const noexcept { return old_ != nullptr; }

  /// A slot number names a slot of the current table (8 * group + i), or,
  /// with this bit, of the table a migration drains. Valid until the next
  /// migration step or growth (the shard takes none between a find and
  /// the write it serves).
  static constexpr std::uint64_t kOldSlot = std::uint64_t{1} << 63;

  struct Found {
    bool found = false;
    std::uint64_t slot = 0;         // the key's slot when found
    std::uint64_t insert_slot = 0;  // else the first available slot on its probe path (current table)
  };

  /// Finds the slot whose location `is_key(Location)` accepts among the
  /// slots tagged for `hash`: in the table a migration drains first, then
  /// in the current one (a key is in one of them, never both).
  template <class IsKey>
  [[gnu::always_inline]] Found find(std::uint64_t hash, IsKey&& is_key) const {
    const std::uint8_t tag = ctrl::tag_of(hash);
    if (old_ != nullptr) [[unlikely]] {
      const IndexTable* o = old_;
      for (ProbeSeq seq(hash, o->groups - 1);; seq.next()) {
        const std::uint64_t g = seq.group();
        const std::uint64_t w = *o->ctrl_word(g);
        for (std::uint64_t m = ctrl::match(w, tag); m; m &= m - 1) {
          const std::uint64_t slot = g * 8 + ctrl::first(m);
          if (is_key(Location::from_slot(load_relaxed(o->slot_word(slot))))) {
            return Found{true, slot | kOldSlot, 0};
          }
        }
        if (ctrl::match_empty(w)) break;
      }
    }
    const IndexTable* t = table_;
    Found f;
    bool have_insert = false;
    for (ProbeSeq seq(hash, t->groups - 1);; seq.next()) {
      const std::uint64_t g = seq.group();
      const std::uint64_t w = *t->ctrl_word(g);
      for (std::uint64_t m = ctrl::match(w, tag); m; m &= m - 1) {
        const std::uint64_t slot = g * 8 + ctrl::first(m);
        // Relaxed: a cache's readers may raise the word's policy bits
        // (CacheHost::raise_frequency) meanwhile.
        if (is_key(Location::from_slot(load_relaxed(t->slot_word(slot))))) {
          f.found = true;
          f.slot = slot;
          return f;
        }
      }
      if (!have_insert) {
        if (const std::uint64_t a = ctrl::match_available(w)) {
          f.insert_slot = g * 8 + ctrl::first(a);
          have_insert = true;
        }
      }
      if (ctrl::match_empty(w)) return f;
    }
  }

  /// True when one more entry would pass the current table's load limit.
  bool needs_room() const noexcept {
    return full_ + tombstones_ + 1 > limit_of(table_->capacity());
  }

  /// Fills `slot` (from find().insert_slot) with `loc`.
  void insert(std::uint64_t slot, std::uint64_t hash, Location loc) noexcept {
    IndexTable* t = table_;
    if (ctrl::byte_of(*t->ctrl_word(slot / 8), slot % 8) == ctrl::kTombstone) --tombstones_;
    // Location first, then the control byte that makes the slot visible:
    // both release, paired with the reader's acquire loads.
    store_release(t->slot_word(slot), loc.raw());
    set_ctrl(t, slot, ctrl::tag_of(hash));
    ++full_;
  }

  /// Points a full slot at a new record, keeping its policy bits. Release:
  /// pairs with the reader's acquire load of the location, so the new
  /// record's words are visible.
  void update(std::uint64_t slot, Location loc) noexcept {
    std::uint64_t* w = slot_word_of(slot);
    store_release(w, loc.raw() | (load_relaxed(w) & Location::kSlotBits));
  }
  /// A full slot's policy bits (caches; 0 in a store).
  std::uint8_t bits(std::uint64_t slot) const noexcept {
    return static_cast<std::uint8_t>(load_relaxed(slot_word_of(slot)) & Location::kSlotBits);
  }
  /// Sets a full slot's policy bits. A reader's compare-and-swap that
  /// raises them (Shard::lookup) may be overwritten: a lost count, nothing
  /// more, since both keep the location.
  void set_bits(std::uint64_t slot, std::uint8_t bits) noexcept {
    std::uint64_t* w = slot_word_of(slot);
    store_relaxed(w, (load_relaxed(w) & ~Location::kSlotBits) | (bits & Location::kSlotBits));
  }

  /// Empties a full slot. Its location word says none first, so that a
  /// reader that loaded the slot's control word before this can no longer
  /// read it as leading to the key's record: the caller frees that record
  /// next (its release fence, in record::begin_write, orders this store
  /// before the free; a reader that sees any byte of the free, or of what
  /// later covers it, sees none here after its acquire fence).
  void erase(std::uint64_t slot) noexcept {
    const bool in_old = (slot & kOldSlot) != 0;
    IndexTable* t = in_old ? old_ : table_;
    slot &= ~kOldSlot;
    store_release(t->slot_word(slot), Location::none().raw());
    const bool group_has_empty = ctrl::match_empty(*t->ctrl_word(slot / 8)) != 0;
    set_ctrl(t, slot, group_has_empty ? ctrl::kEmpty : ctrl::kTombstone);
    if (in_old) {
      --old_full_;  // (the drained table's tombstones go with it)
      return;
    }
    if (!group_has_empty) ++tombstones_;
    --full_;
  }

  /// Calls fn(slot, location) for every full slot (writer side): the
  /// drained table's first (slot numbers with kOldSlot), then the current one's.
  template <class F>
  void for_each_full(F&& fn) const {
    if (old_ != nullptr) for_each_full_of(old_, kOldSlot, fn);
    for_each_full_of(table_, 0, fn);
  }

  Location location(std::uint64_t slot) const noexcept {
    return Location::from_slot(load_relaxed(slot_word_of(slot)));
  }

  /// Makes room for one more entry: a table twice the capacity when live
  /// entries pass half the limit, else one of the same capacity without
  /// tombstones. Under Options::memory_limit_bytes, when the larger table
  /// would pass the limit: the same capacity while live entries stay under
  /// three quarters of the limit (in the spare kept for it, keep_spare()).
  /// Throws Error(out_of_space) if the new table cannot be mapped
  /// (LimitReached: evicting_helps says whether fewer live entries would
  /// let a rebuild of the same capacity do); the index is unchanged then.
  ///
  /// A table of more than kRebuildGroups groups is not rebuilt at once: the
  /// new one is published empty beside it and a migration begins, which
  /// migrate() carries on a few groups per write (inserts go to the new
  /// table; readers probe the old one, then the new one). A small table,
  /// or both tables of a migration a walk held back until the new one
  /// filled (migrate() moves nothing under a walk), are rebuilt into one at
  /// once, as before migrations: the one pause proportional to the shard,
  /// and only while walks keep overlapping. `hash_of(Location,
  /// std::uint64_t& hash)` recomputes an entry's hash from its record, or
  /// returns false to leave the entry out (a record a damaged file made
  /// unreadable). The old table (or both) is retired (retire()).
  template <class HashOf>
  void grow(HashOf&& hash_of, WalkGate& walks);

  /// Groups of the table a migration drains that one write moves. A
  /// doubling leaves the new table room for 7/8 of the old capacity in
  /// inserts (a rebuild of the same size, 7/16 of it), and only inserts
  /// fill it: with two groups per write the old table is drained before
  /// the new one could fill.
  static constexpr std::uint64_t kMoveGroups = 2;
  /// Tables up to this many groups (448 slots) are rebuilt at once: a
  /// migration would save no measurable pause.
  static constexpr std::uint64_t kRebuildGroups = 64;

  /// One step of a migration (under the lock, before the write's lookup):
  /// moves the entries of the next `max_groups` groups of the drained table
  /// into the current one (`hash_of` as for grow(); `prefetch(Location)`
  /// brings a record in ahead of its hash), and ends the migration after
  /// the last group. A moved entry is stored in the current table before
  /// its old slot says none (release both): a reader probes the drained
  /// table first, so one that sees the old slot emptied finds the entry in
  /// the current table. No generation moves for a step: every record an
  /// entry led to stays where it was. Moves nothing while a walk is in
  /// progress (a walk that had passed an entry would meet it again in the
  /// current table): the handshake with wait_moves() is seq_cst on both
  /// sides, so either this step sees the walk counted, or the walk waits
  /// until the step's moves are done and sees all of them.
  template <class HashOf, class Prefetch>
  void migrate(HashOf&& hash_of, Prefetch&& prefetch, WalkGate& walks,
               std::uint64_t max_groups = kMoveGroups) noexcept;

  /// Ends a migration now (recovery and a clean close, with no reader or
  /// walk of their own in progress): the rest of the drained table moves,
  /// walks or not.
  template <class HashOf>
  void finish_migration(HashOf&& hash_of, WalkGate& walks) noexcept;

  /// The group a migration moves next, of how many (tests, stats).
  std::uint64_t migration_cursor() const noexcept { return cursor_; }
  /// Live entries still in the drained table.
  std::uint64_t old_size() const noexcept { return old_full_; }
  /// Migrations begun.
  std::uint64_t migrations() const noexcept { return migrations_; }

  /// Under Options::memory_limit_bytes: keeps a range of the current
  /// table's size among the spares, so that the next rebuild of the same
  /// capacity (tombstones dropped) or clear() maps nothing: a store at its
  /// limit still rebuilds, a cache still replaces entries. Best effort: with
  /// no room for it, none is kept (the rebuild then maps, or fails).
  ///
  /// A spare of another size that no reader ever saw (one kept this way
  /// for a smaller table, or the constructor's before a reopen adopted a
  /// larger table) is unmapped: tables never shrink while a limit holds
  /// them. (A replaced table stays mapped: a stale reader may be in it.)
  void keep_spare() noexcept {
    if (name_.budget.limit() == 0) return;
    const std::uint64_t bytes = table_->mapped_bytes;
    drop_unpublished_spares(bytes);
    for (IndexTable* s = spares_; s != nullptr; s = s->next_retired) {
      if (s->mapped_bytes == bytes) return;
    }
    for (IndexTable* s = retired_; s != nullptr; s = s->next_retired) {
      if (s->mapped_bytes == bytes) return;  // a spare once walks have left it
    }
    try {
      IndexTable* s = IndexTable::create(table_->groups, name_);
      s->retire_tag = kNeverPublished;
      s->next_retired = spares_;
      spares_ = s;
    } catch (const Error&) {
    }
  }
  /// Unmaps the spares no reader ever saw (keep_spare()'s) but one of
  /// `keep_bytes`: all of them before a clean open maps its saved table,
  /// so that it needs no third table's room.
  void drop_unpublished_spares(std::uint64_t keep_bytes = 0) noexcept {
    for (IndexTable** link = &spares_; *link != nullptr;) {
      IndexTable* s = *link;
      if (s->retire_tag == kNeverPublished && s->mapped_bytes != keep_bytes) {
        *link = s->next_retired;
        IndexTable::destroy(s, name_);
        continue;
      }
      link = &s->next_retired;
    }
  }
  /// The retire tag of a spare keep_spare() mapped (WalkGate's tags count
  /// up from 0 and never reach it).
  static constexpr std::uint64_t kNeverPublished = ~std::uint64_t{0};

  /// Tells readers inside the table that the bytes at locations they hold
  /// may have stopped being records: a freed record merged into a free
  /// neighbour, or the journal's tail moved back over it, so that its start
  /// (and the starts it absorbed) will be covered by another record's
  /// bytes, which a writer may shape like a header. Called after the slots that led to those records were changed
  /// (update, erase) and before any byte is written over them. Readers
  /// accept a conclusion only while the generation they loaded before the
  /// slot stays (probe, copy_record); so a reader either loaded this
  /// generation, and then also sees the slot stores made before it, or
  /// loaded an older one and sees this one once it has read anything
  /// written over the destroyed starts.
  void invalidate_readers() noexcept {
    // Release: pairs with acquire_generation(); a reader that loads this
    // generation sees the slot stores made before it.
    generation_.store(generation_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    // Pairs with the reader's acquire fence (record::validate) before it
    // checks unchanged_since(): stores made after this fence, by this thread
    // or (after its own fence, see Shard::WriteLock) by a later writer,
    // carry the new generation to a reader that reads them.
    std::atomic_thread_fence(std::memory_order_release);
  }

  /// Empties the index. A fresh empty table of the same capacity replaces
  /// the current one, which is retired as after growth: readers inside it
  /// find it no longer current and trust nothing they read there. If no
  /// fresh table can be mapped, the table is emptied in place instead: the
  /// generation moves before (readers inside conclude nothing from what
  /// they read) and again after (a reader that loaded it mid-clear and saw
  /// a slot still full must not accept what it finds once the records'
  /// space is reused); location words are left as they were (a reader that
  /// reloads one checks slot_full() first), never discarded, which could
  /// make them read as another record's location (0, or a private file
  /// mapping's old word).
  void clear(WalkGate& walks) noexcept {
    IndexTable* old = table_;
    // A migration's drained table goes as a replaced one: off the readers'
    // word before the generation moves (a reader that loads the new
    // generation no longer probes it), retired after.
    IndexTable* drained = old_;
    if (drained != nullptr) {
      old_ = nullptr;
      old_full_ = 0;
      cursor_ = 0;
    }
    // With no fresh table below, the drained one leaves the pair alone (the
    // current table is then emptied in place; the serial stays): a reader
    // that loaded it concludes nothing, the generation moves after this.
    const auto drop_drained_word = [&] {
      if (drained != nullptr) old_word_.store(0, std::memory_order_release);
    };
    if (full_ == 0 && tombstones_ == 0) {
      // Already empty (every location a removal left is none): no table to
      // replace, but a reader's conclusions still go stale.
      drop_drained_word();
      invalidate_readers();
      if (drained != nullptr) retire(drained, walks);
      return;
    }
    IndexTable* fresh = nullptr;
    try {
      fresh = create(old->groups);
    } catch (...) {
      fresh = nullptr;  // out of memory: emptied in place below
    }
#if defined(OFFHEAP_TESTING_READ_HOOK)
    if (testing_clear_in_place && fresh != nullptr) {
      give_back(fresh);
      fresh = nullptr;
    }
#endif
    full_ = 0;
    tombstones_ = 0;
    if (fresh != nullptr) {
      publish(fresh);
      // As in grow(): a reader that sees this generation sees the new table.
      invalidate_readers();
      retire(old, walks);
      if (drained != nullptr) retire(drained, walks);
      return;
    }
    // The first move (its fence: a reader that sees any of the stores below
    // sees the new generation).
    drop_drained_word();
    invalidate_readers();
#if defined(OFFHEAP_TESTING_READ_HOOK)
    if (testing_clear_after_bump != nullptr) testing_clear_after_bump();
#endif
    for (std::uint64_t g = 0; g < old->groups; ++g) store_relaxed(old->ctrl_word(g), 0);
    // The second move: its release pairs with acquire_generation() (a reader
    // that loads it sees every control byte empty); its fence, with the
    // writer's, carries it to readers of anything written over the records.
    invalidate_readers();
    if (drained != nullptr) retire(drained, walks);
  }

  /// Drops the pages of retired tables once no walk can be inside them
  /// (their ranges are kept for reuse, see the top of this file).
  void drop_retired(WalkGate& walks) noexcept {
    if (retired_ == nullptr) return;
    for (IndexTable** link = &retired_; *link != nullptr;) {
      IndexTable* t = *link;
#if defined(OFFHEAP_TESTING_IGNORE_WALKS)
      // Test-only build (tests/reclaim_test.cpp): drops them under a walk, to
      // prove the walk test sees a walk that reads a dropped table.
      const bool may_go = true;
      (void)walks;
#else
      const bool may_go = walks.passed(t->retire_tag);
#endif
      if (!may_go) {
        link = &t->next_retired;
        continue;
      }
      *link = t->next_retired;
      give_back(t);
    }
  }

  /// Replaces the (empty, unpublished to readers) table with `t`, which
  /// holds `full` entries and `tombstones` tombstones: a clean reopen's
  /// table, mapped from its state file. No reader may be inside.
  void adopt(IndexTable* t, std::uint64_t full, std::uint64_t tombstones) noexcept {
    assert(old_ == nullptr);
    IndexTable::destroy(table_, name_);
    publish(t);
    full_ = full;
    tombstones_ = tombstones;
    keep_spare();
  }

  /// Whether the control words of `t` (a table read from a file) hold only
  /// empty, tombstone or full slot bytes and a zero eighth byte, and count
  /// `full` full slots and `tombstones` tombstones: with counts under the
  /// load limit, every probe then meets an empty slot and ends.
  static bool control_bytes_sound(const IndexTable* t, std::uint64_t full,
                                  std::uint64_t tombstones) noexcept {
    std::uint64_t f = 0, d = 0;
    for (std::uint64_t g = 0; g < t->groups; ++g) {
      const std::uint64_t w = *t->ctrl_word(g);
      if ((w >> 56) != 0) return false;
      const std::uint64_t full_bits = w & ctrl::kHighs;
      const std::uint64_t not_full = ~(full_bits >> 7) & ctrl::kLows;  // low bit of each other byte
      if ((w & 0x7E7E7E7E7E7E7E7Eull & (not_full * 0x7E)) != 0) return false;  // 0x02-0x7F
      f += static_cast<std::uint64_t>(std::popcount(full_bits));
      d += static_cast<std::uint64_t>(std::popcount(w & not_full));
    }
    return f == full && d == tombstones && full + tombstones < t->capacity();
  }

  /// Starts an empty index over with room for `entries` (recovery, before
  /// any reader). Throws Error(out_of_space); the index is unchanged then.
  void reserve_empty(std::uint64_t entries) {
    if (full_ != 0 || groups_for(entries) <= table_->groups) return;
    adopt(IndexTable::create(groups_for(entries), name_), 0, 0);
  }

  /// Brings the line a probe for `hash` starts at into the cache.
  void prefetch(std::uint64_t hash) const noexcept {
    const IndexTable* t = table_;
    __builtin_prefetch(t->ctrl_word(hash & (t->groups - 1)));
  }

  /// Live entries, in both tables of a migration.
  std::uint64_t size() const noexcept { return full_ + old_full_; }
  std::uint64_t tombstones() const noexcept { return tombstones_; }
  std::uint64_t capacity() const noexcept { return table_->capacity(); }
  std::uint64_t mapped_bytes() const noexcept {
    return table_->mapped_bytes + (old_ != nullptr ? old_->mapped_bytes : 0);
  }
  /// Address space of replaced tables kept (none of it resident once dropped).
  std::uint64_t retired_bytes() const noexcept {
    return bytes_of(retired_) + bytes_of(spares_) + bytes_of(lost_);
  }
  std::uint64_t retired_tables() const noexcept {
    return count_of(retired_) + count_of(spares_) + count_of(lost_);
  }

 private:
  std::uint64_t* slot_word_of(std::uint64_t slot) const noexcept {
    IndexTable* t = (slot & kOldSlot) != 0 ? old_ : table_;
    return t->slot_word(slot & ~kOldSlot);
  }

  template <class F>
  static void for_each_full_in_group(const IndexTable* t, std::uint64_t g, F&& fn) {
    for (std::uint64_t m = load_relaxed(t->ctrl_word(g)) & ctrl::kHighs; m; m &= m - 1) {
      fn(g * 8 + ctrl::first(m));
    }
  }
  template <class F>
  static void for_each_full_of(const IndexTable* t, std::uint64_t flag, F&& fn) {
    for (std::uint64_t g = 0; g < t->groups; ++g) {
      for_each_full_in_group(t, g, [&](std::uint64_t slot) {
        fn(slot | flag, Location::from_slot(load_relaxed(t->slot_word(slot))));
      });
    }
  }

  /// Publishes `t` (empty) as the current table beside the full one, which
  /// a migration then drains (migrate()). The generation moves after the
  /// publish: a reader that loaded the single table before can no longer
  /// conclude a miss there once entries start to move out of it.
  void begin_migration(IndexTable* t) noexcept;

  /// After the last group moved: the drained table is retired (as a
  /// replaced one: a reader still inside it may read zeros or, later, a
  /// reused range) and the generation moves, so that a reader that loaded
  /// the pair concludes nothing from the old one. The table serial stays:
  /// the current table is the same, and scan positions in it hold.
  void end_migration(WalkGate& walks) noexcept;

  /// Moves every entry of group `g` of the drained table `o` into the
  /// current one: each stored there (release) before its old slot says
  /// none (release), then the group's control word with those slots
  /// tombstones (release: a reader that sees one sees the entry in the
  /// current table). Tombstones, never empty: a probe for an entry of a
  /// later group that passed through here must go on.
  template <class HashOf>
  void move_group(IndexTable* o, std::uint64_t g, HashOf& hash_of) noexcept;
  /// Moves the drained table's groups from the cursor to `end` and counts
  /// the step (moves()); the caller holds moving_.
  template <class HashOf>
  void move_groups(std::uint64_t end, HashOf& hash_of) noexcept;

  /// Inserts a moved entry into the current table, which readers see:
  /// the location word first, then the control byte (release both).
  void place_live(std::uint64_t hash, std::uint64_t word) noexcept;

  [[gnu::always_inline]] static TableView view_of(std::uintptr_t w) noexcept {
    if (w == 0) return TableView{nullptr, 0};
    return TableView{reinterpret_cast<const std::uint64_t*>(w & ~std::uintptr_t{63}),
                     (std::uint64_t{1} << (w & 63)) - 1};
  }
  static std::uintptr_t word_of(const IndexTable* t) noexcept {
    return reinterpret_cast<std::uintptr_t>(t->words()) |
           static_cast<std::uintptr_t>(std::countr_zero(t->groups));
  }

  static void set_ctrl(IndexTable* t, std::uint64_t slot, std::uint8_t value) noexcept {
    std::uint64_t* w = t->ctrl_word(slot / 8);
    const unsigned shift = 8 * (slot % 8);
    const std::uint64_t next = (*w & ~(std::uint64_t{0xFF} << shift)) | std::uint64_t{value} << shift;
    // Pairs with the reader's acquire load of the control word.
    store_release(w, next);
  }

  /// Inserts into a table no reader can see yet (but a stale reader may be
  /// inside its range, if it is reused: atomic stores).
  static void place(IndexTable* t, std::uint64_t hash, std::uint64_t word) noexcept {
    for (ProbeSeq seq(hash, t->groups - 1);; seq.next()) {
      const std::uint64_t g = seq.group();
      std::uint64_t* cw = t->ctrl_word(g);
      if (const std::uint64_t a = ctrl::match_available(*cw)) {
        const std::uint64_t slot = g * 8 + ctrl::first(a);
        store_relaxed(t->slot_word(slot), word);
        const unsigned shift = 8 * (slot % 8);
        store_relaxed(cw, *cw | std::uint64_t{ctrl::tag_of(hash)} << shift);
        return;
      }
    }
  }

  /// A table of `groups` groups, from a kept range of its size if any.
  IndexTable* create(std::uint64_t groups) {
    const std::uint64_t bytes = IndexTable::bytes_for(groups);
    for (IndexTable** link = &spares_; *link != nullptr; link = &(*link)->next_retired) {
      IndexTable* t = *link;
      if (t->mapped_bytes == bytes) {
        *link = t->next_retired;
        return IndexTable::create(groups, name_, t);
      }
    }
    return IndexTable::create(groups, name_);
  }

  /// Publishes `t` as the current table and `drained` (0, or a table's
  /// word_of()) as the table a migration drains: a pair readers load as one
  /// (acquire_pair()), under the serial as a seqlock. The serial goes odd,
  /// the words change, the serial goes even: a reader that loaded an even
  /// serial, both words, and the same serial again holds a pair that was
  /// published together (never a new table beside no drained one while its
  /// entries are still in the drained one, nor one table twice).
  void publish(IndexTable* t, std::uintptr_t drained = 0) noexcept {
    table_ = t;
    const std::uint64_t s = serial_.load(std::memory_order_relaxed);
    serial_.store(s + 1, std::memory_order_relaxed);
    // Orders the odd serial before the words (pairs with the reader's
    // acquire fence before its second load of the serial).
    std::atomic_thread_fence(std::memory_order_release);
    // Release: a reader that sees the new table sees it whole (and the
    // drained one). The group count (a power of two) goes in the low bits.
    old_word_.store(drained, std::memory_order_release);
    word_.store(word_of(t), std::memory_order_release);
    // After the words: pairs with acquire_serial() / acquire_pair().
    serial_.store(s + 2, std::memory_order_release);
  }

  /// Takes a replaced table (after the new one was published and the
  /// generation moved): dropped now if no walk is in progress, else when
  /// the last one ends.
  void retire(IndexTable* t, WalkGate& walks) noexcept {
    t->retire_tag = walks.tag();  // after the publish: see WalkGate::enter()
    t->next_retired = retired_;
    retired_ = t;
    drop_retired(walks);
  }

  /// Gives a replaced table's pages back to the OS and keeps its range for
  /// reuse; readers may still be inside it.
  void give_back(IndexTable* t) noexcept {
    const std::uint64_t bytes = t->mapped_bytes;
#if defined(OFFHEAP_TESTING_NO_GRACE_PERIOD)
    // Test-only build (tests/reclaim_test.cpp): the range is given up at
    // once, as if readers held nothing, to prove the test sees a reader
    // inside a table that is gone.
    asan_poison_or_unmap(t, bytes, name_);
    return;
#endif
    // Anonymous: MADV_DONTNEED (zeros on the next touch; no new mapping,
    // which could fail or split mappings). A private file mapping (a
    // table a clean open adopted) would read back the file's bytes: a
    // fresh anonymous mapping goes over it instead. Either can fail (locked
    // pages, no memory for a mapping): the range is then kept as it is,
    // resident, never reused, and unmapped with the index.
    const bool huge = name_.huge_pages;
    const bool zeroed = t->from_file == 0 ? discard_pages(t, bytes) || zero_pages(t, bytes, huge)
                                          : zero_pages(t, bytes, huge);
    if (!zeroed) {
      t->next_retired = lost_;
      lost_ = t;
      return;
    }
    // The header read zeros too: write it again (no reader reads it).
    t->mapped_bytes = bytes;
    // Kept for a later table of its size, however many there are: ranges
    // kept apart would pile up with every walk that holds back several
    // replacements of one size (no stale reader lets a range be unmapped).
    t->next_retired = spares_;
    spares_ = t;
  }

  static std::uint64_t bytes_of(const IndexTable* t) noexcept {
    std::uint64_t b = 0;
    for (; t != nullptr; t = t->next_retired) b += t->mapped_bytes;
    return b;
  }
  static std::uint64_t count_of(const IndexTable* t) noexcept {
    std::uint64_t n = 0;
    for (; t != nullptr; t = t->next_retired) ++n;
    return n;
  }
  void drop_all(IndexTable* t) const noexcept {
    while (t != nullptr) {
      IndexTable* next = t->next_retired;
      IndexTable::destroy(t, name_);
      t = next;
    }
  }

  const StoreName& name_;  // the store's name, which outlives the index
  // What readers load, on a line of its own: the writer's fields below
  // change with every insert and would otherwise evict it from readers.
  alignas(64) std::atomic<std::uint64_t> generation_{1};
  std::atomic<std::uintptr_t> word_{0};      // the table's lines | log2(groups)
  std::atomic<std::uintptr_t> old_word_{0};  // the drained table's, as word_; 0: no migration
  std::atomic<std::uint64_t> serial_{0};
  alignas(64) IndexTable* table_ = nullptr;
  std::uint64_t full_ = 0;        // live entries in table_
  std::uint64_t tombstones_ = 0;  // in table_
  IndexTable* old_ = nullptr;     // the table a migration drains
  std::uint64_t old_full_ = 0;    // live entries still in old_
  std::uint64_t cursor_ = 0;      // old_'s next group to move
  std::uint64_t migrations_ = 0;  // begun
  // Walks read these (wait_moves(), moves()), writers write them per step:
  // on the writers' line, not the readers'.
  std::atomic<std::uint32_t> moving_{0};
  std::atomic<std::uint64_t> moves_{0};
  IndexTable* retired_ = nullptr;  // replaced, waiting for walks to end
  IndexTable* spares_ = nullptr;   // dropped, kept for reuse
  IndexTable* lost_ = nullptr;     // kept as they are until the index goes
};

}  // namespace offheap::detail
