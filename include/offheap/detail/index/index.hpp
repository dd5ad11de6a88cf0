// SPDX-License-Identifier: Apache-2.0
// The index: an open-addressing table from key hash to record Location.
//
// One mapped block per table: a 64-byte header, then one 64-byte line per
// group of 7 slots, a power-of-two number of groups:
//
//   line g:  +---------------+-------------+-------------+-----+-------------+
//            | control word  | location 0  | location 1  | ... | location 6  |
//            | 7 bytes + 0   | 8 bytes     | 8 bytes     |     | 8 bytes     |
//            +---------------+-------------+-------------+-----+-------------+
//
//   control byte: 0x00 empty, 0x01 tombstone, 0x80 | 7 hash bits: full;
//   the eighth byte of every control word is always 0x00 and never a slot.
//
// A slot is numbered 8 * group + i (i < 7): its location is word slot + 1
// of the lines. A lookup loads the group's control word and, on a tag
// match, the location beside it in the same cache line, then the record:
// two memory misses at scale. 64/7 = 9.1 bytes per slot; at the 7/8 load
// limit and after doubling, 10.4 to 20.9 bytes per entry. The index holds
// no key: a match of the 7 tag bits is confirmed by comparing the full key
// stored in the record.
//
// Probing visits whole groups on a triangular sequence of group numbers,
// which visits every group of a power-of-two table. A probe stops at a
// group with an empty slot, so a removal may leave an empty (not a
// tombstone) in a group that already has one. Growth doubles when live
// entries pass half the limit and otherwise rebuilds at the same size;
// either way tombstones are dropped.
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
#include <offheap/detail/memory/os.hpp>

#include <atomic>
#include <bit>
#include <cstdint>
#include <string>

namespace offheap::detail {

struct IndexTable {
  static constexpr unsigned kSlotsPerGroup = 7;

  std::uint64_t groups;        // a power of two >= 1
  std::uint64_t mapped_bytes;  // of the whole block
  IndexTable* next_retired;    // links tables waiting to be dropped or reused
  std::uint64_t retire_tag;    // the walk epoch it was replaced in (WalkGate::tag)
  std::uint64_t from_file;     // 1: mapped privately from a state file
  std::uint64_t reserved[3];   // the header fills the first line

  std::uint64_t capacity() const noexcept { return groups * kSlotsPerGroup; }
  /// The lines: word 8g is group g's control word, 8g + 1 + i its location i.
  std::uint64_t* words() noexcept { return reinterpret_cast<std::uint64_t*>(this + 1); }
  const std::uint64_t* words() const noexcept {
    return reinterpret_cast<const std::uint64_t*>(this + 1);
  }
  std::uint64_t* ctrl_word(std::uint64_t g) noexcept { return words() + 8 * g; }
  const std::uint64_t* ctrl_word(std::uint64_t g) const noexcept { return words() + 8 * g; }
  /// Slot 8g + i's location word.
  std::uint64_t* slot_word(std::uint64_t slot) noexcept { return words() + slot + 1; }
  const std::uint64_t* slot_word(std::uint64_t slot) const noexcept { return words() + slot + 1; }

  static std::uint64_t bytes_for(std::uint64_t groups) noexcept {
    return round_up(sizeof(IndexTable) + 64 * groups, page_size());
  }

  /// A table of `groups` groups, every slot empty: `spare` (a range kept
  /// from a replaced table of the same size, whose pages read as zeros) if
  /// given, else freshly mapped.
  static IndexTable* create(std::uint64_t groups, const StoreName& name,
                            IndexTable* spare = nullptr) {
    const std::uint64_t bytes = bytes_for(groups);
    IndexTable* t = spare;
    if (t == nullptr) {
      try {
        t = reinterpret_cast<IndexTable*>(map_anonymous(bytes, name, "an index table"));
      } catch (LimitReached& e) {
        e.evicting_helps = false;  // an eviction leaves a tombstone: the table is as full
        throw;
      }
    }
    t->groups = groups;  // the pages are zeros: every slot is empty
    t->mapped_bytes = bytes;
    t->next_retired = nullptr;
    t->retire_tag = 0;
    t->from_file = 0;
    return t;
  }
  static void destroy(IndexTable* t, const StoreName& name) noexcept {
    if (t) unmap(t, t->mapped_bytes, name);
  }
};
static_assert(sizeof(IndexTable) == 64);

/// The table as readers see it: its lines and group mask, from one word.
struct TableView {
  const std::uint64_t* words;
  std::uint64_t mask;  // groups - 1

  const std::uint64_t* ctrl_word(std::uint64_t g) const noexcept { return words + 8 * g; }
  /// The control word of the group that holds `slot` (a location word).
  static const std::uint64_t* ctrl_of(const std::uint64_t* slot) noexcept {
    return reinterpret_cast<const std::uint64_t*>(reinterpret_cast<std::uintptr_t>(slot) &
                                                  ~std::uintptr_t{63});
  }
  /// Which of its group's slots `slot` is (0-6).
  static unsigned index_of(const std::uint64_t* slot) noexcept {
    return static_cast<unsigned>((reinterpret_cast<std::uintptr_t>(slot) & 63) / 8 - 1);
  }
};

#if defined(OFFHEAP_TESTING_READ_HOOK)
/// Tests only (tests/hooks/): clear() empties the table in place (as when
/// no fresh table can be mapped), and calls the hook between its first
/// move of the generation and emptying the table, to hold the clearing
/// thread there.
inline bool testing_clear_in_place = false;
inline void (*testing_clear_after_bump)() = nullptr;
#endif

namespace ctrl {
inline constexpr std::uint8_t kEmpty = 0x00;
inline constexpr std::uint8_t kTombstone = 0x01;
inline constexpr std::uint64_t kLows = 0x0001010101010101ull;   // the 7 slot bytes
inline constexpr std::uint64_t kHighs = 0x0080808080808080ull;  // the 7 slot bytes

inline std::uint8_t tag_of(std::uint64_t hash) noexcept {
  return static_cast<std::uint8_t>(0x80 | (hash >> 57));
}
/// 0x80 in each slot byte of `w` equal to `tag`, exactly (no false
/// positives; the eighth byte, 0x00, never equals a tag).
inline std::uint64_t match(std::uint64_t w, std::uint8_t tag) noexcept {
  const std::uint64_t x = w ^ (0x0101010101010101ull * tag);
  return ~(((x & ~0x8080808080808080ull) + ~0x8080808080808080ull) | x) & kHighs;
}
/// 0x80 in each empty slot byte (control bytes are only 0x00, 0x01 or >= 0x80).
inline std::uint64_t match_empty(std::uint64_t w) noexcept { return ~w & ~(w << 7) & kHighs; }
/// 0x80 in each empty or tombstone slot byte.
inline std::uint64_t match_available(std::uint64_t w) noexcept { return ~w & kHighs; }
/// The slot within the group of the lowest set match bit.
inline unsigned first(std::uint64_t m) noexcept {
  return static_cast<unsigned>(std::countr_zero(m)) / 8;
}
inline std::uint8_t byte_of(std::uint64_t w, unsigned i) noexcept {
  return static_cast<std::uint8_t>(w >> (8 * i));
}
}  // namespace ctrl

/// The sequence of groups a probe for `hash` visits.
class ProbeSeq {
 public:
  ProbeSeq(std::uint64_t hash, std::uint64_t mask) noexcept : mask_(mask), group_(hash & mask_) {}
  std::uint64_t group() const noexcept { return group_; }
  /// False once every group was visited (only a reader inside a table
  /// being rebuilt in a reused range can get there).
  bool next() noexcept {
    ++step_;
    group_ = (group_ + step_) & mask_;
    return step_ <= mask_;
  }

 private:
  std::uint64_t mask_;
  std::uint64_t group_;
  std::uint64_t step_ = 0;
};

/// Walks (Store::for_each) in progress in a store. A walk goes on through a
/// table that growth replaced under it, so a replaced table is kept as it
/// was until every walk that may be inside it has ended (Index::drop_retired).
///
/// Two counts, by the parity of an epoch (a grace period for walks only;
/// lookups never touch the gate): a walk counts itself in the count of the
/// epoch it entered; a replaced table is tagged with the epoch current
/// after its successor was published; the epoch moves from E to E + 1 only
/// when no walk of E - 1 is left (their count, of E + 1's parity, is 0), so
/// at epoch E every walk of E - 2 or before has ended, and a table tagged r
/// may go at epoch r + 2. Walks that keep overlapping (the count of walks
/// in progress never 0) hold back only the tables replaced while they ran.
/// Every operation is seq_cst (walks and replacements are rare): one total
/// order, so a tag read after a walk's entry is at least that walk's epoch.
class WalkGate {
 public:
  /// Before the walk loads any table; returns the ticket to give leave().
  /// The fence pairs with the one in Index::retire(): either the writer's
  /// tag is at least this walk's epoch (read before this fence), or the
  /// walk sees the table the writer published before its fence.
  [[nodiscard]] unsigned enter() noexcept {
    std::uint64_t e = epoch_.load();
    for (;;) {
      active_[e & 1].fetch_add(1);
      // Counted in e's parity while the epoch was still e: flips past e + 1
      // wait for this walk. (A flip between the load and the count would
      // not have seen it: counted again, in the new epoch.)
      const std::uint64_t now = epoch_.load();
      if (now == e) break;
      active_[e & 1].fetch_sub(1);
      e = now;
    }
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return static_cast<unsigned>(e & 1);
  }
  /// Release (seq_cst): the walk's reads of tables happen before a writer
  /// that sees its count fall drops their pages.
  void leave(unsigned ticket) noexcept { active_[ticket].fetch_sub(1); }

  /// The epoch a table replaced now is tagged with. The caller published
  /// the replacement first; the fence pairs with the one in enter().
  std::uint64_t tag() const noexcept {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return epoch_.load();
  }
  /// Moves the epoch on as far as ended walks allow (at most twice) and
  /// says whether a table tagged `tag` may go: no walk of `tag` or before
  /// is still in progress.
  bool passed(std::uint64_t tag) noexcept {
    for (int i = 0; i < 2; ++i) {
      std::uint64_t e = epoch_.load();
      if (e >= tag + 2) return true;
      if (active_[(e + 1) & 1].load() != 0) return false;
      epoch_.compare_exchange_strong(e, e + 1);  // another writer may have moved it: fine
    }
    return epoch_.load() >= tag + 2;
  }

 private:
  std::atomic<std::uint64_t> epoch_{2};
  std::atomic<std::uint64_t> active_[2] = {};
};

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
    drop_all(retired_);
    drop_all(spares_);
    drop_all(lost_);
  }

  // ---- reader side ---------------------------------------------------------

  /// Load first, then the table. Acquire pairs with the release store in
  /// grow() (a reader that sees the new generation sees the new table) and
  /// in clear().
  std::uint64_t acquire_generation() const noexcept {
    return generation_.load(std::memory_order_acquire);
  }
  /// The table serial: moves (after the table word) whenever a table is
  /// published. Acquire pairs with publish()'s release: a reader that
  /// loads a serial and then the table word sees that serial's table or a
  /// later one.
  std::uint64_t acquire_serial() const noexcept { return serial_.load(std::memory_order_acquire); }
  /// The current table. Pairs with the release store in publish().
  TableView acquire_view() const noexcept {
    const std::uintptr_t w = word_.load(std::memory_order_acquire);
    return TableView{reinterpret_cast<const std::uint64_t*>(w & ~std::uintptr_t{63}),
                     (std::uint64_t{1} << (w & 63)) - 1};
  }
  /// True while no growth, clear() or invalidate_readers() happened since
  /// `generation` was loaded. Callers order their earlier loads before this
  /// one with an acquire fence (record::validate); it pairs with the release
  /// fences that follow a bump: clear()'s, invalidate_readers()'s, and the
  /// one every later writer issues when it takes the lock (Shard::WriteLock).
  bool unchanged_since(std::uint64_t generation) const noexcept {
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

  IndexTable* table() const noexcept { return table_; }

  struct Found {
    bool found = false;
    std::uint64_t slot = 0;         // the key's slot when found
    std::uint64_t insert_slot = 0;  // else the first available slot on its probe path
  };

  /// Finds the slot whose location `is_key(Location)` accepts among the
  /// slots tagged for `hash`.
  template <class IsKey>
  [[gnu::always_inline]] Found find(std::uint64_t hash, IsKey&& is_key) const {
    const IndexTable* t = table_;
    const std::uint8_t tag = ctrl::tag_of(hash);
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

  /// True when one more entry would pass the load limit.
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
    std::uint64_t* w = table_->slot_word(slot);
    store_release(w, loc.raw() | (load_relaxed(w) & Location::kSlotBits));
  }
  /// A full slot's policy bits (caches; 0 in a store).
  std::uint8_t bits(std::uint64_t slot) const noexcept {
    return static_cast<std::uint8_t>(load_relaxed(table_->slot_word(slot)) & Location::kSlotBits);
  }
  /// Sets a full slot's policy bits. A reader's compare-and-swap that
  /// raises them (Shard::lookup) may be overwritten: a lost count, nothing
  /// more, since both keep the location.
  void set_bits(std::uint64_t slot, std::uint8_t bits) noexcept {
    std::uint64_t* w = table_->slot_word(slot);
    store_relaxed(w, (load_relaxed(w) & ~Location::kSlotBits) | (bits & Location::kSlotBits));
  }

  /// Empties a full slot. Its location word says none first, so that a
  /// reader that loaded the slot's control word before this can no longer
  /// read it as leading to the key's record: the caller frees that record
  /// next (its release fence, in record::begin_write, orders this store
  /// before the free; a reader that sees any byte of the free, or of what
  /// later covers it, sees none here after its acquire fence).
  void erase(std::uint64_t slot) noexcept {
    IndexTable* t = table_;
    store_release(t->slot_word(slot), Location::none().raw());
    const bool group_has_empty = ctrl::match_empty(*t->ctrl_word(slot / 8)) != 0;
    set_ctrl(t, slot, group_has_empty ? ctrl::kEmpty : ctrl::kTombstone);
    if (!group_has_empty) ++tombstones_;
    --full_;
  }

  /// Calls fn(slot, location) for every full slot (writer side).
  template <class F>
  void for_each_full(F&& fn) const {
    const IndexTable* t = table_;
    for (std::uint64_t g = 0; g < t->groups; ++g) {
      for (std::uint64_t m = *t->ctrl_word(g) & ctrl::kHighs; m; m &= m - 1) {
        const std::uint64_t slot = g * 8 + ctrl::first(m);
        fn(slot, Location::from_slot(load_relaxed(t->slot_word(slot))));
      }
    }
  }

  Location location(std::uint64_t slot) const noexcept {
    return Location::from_slot(load_relaxed(table_->slot_word(slot)));
  }

  /// Rebuilds the table so that one more entry fits: twice the capacity when
  /// live entries pass half the limit, else the same capacity without
  /// tombstones. Under Options::memory_limit_bytes, when the larger table
  /// would pass the limit: the same capacity while live entries stay under
  /// three quarters of the limit (in the spare kept for it, keep_spare()).
  /// `hash_of(Location, std::uint64_t& hash)` recomputes an
  /// entry's hash from its record, or returns false to leave the entry out
  /// (a record a damaged file made unreadable). Publishes the new table and
  /// retires the old one (retire()). Throws Error(out_of_space) if the new
  /// table cannot be mapped (LimitReached: evicting_helps says whether
  /// fewer live entries would let a rebuild of the same capacity do); the
  /// index is unchanged then.
  template <class HashOf>
  void grow(HashOf&& hash_of, WalkGate& walks) {
    IndexTable* old = table_;
    std::uint64_t groups = old->groups;
    IndexTable* t = nullptr;
    if (full_ + 1 > limit_of(old->capacity()) / 2) {
      try {
        // Under a limit, twice the size only with room for its spare too
        // (keep_spare()): else a rebuild of the same size, in the spare.
        const std::uint64_t twice = IndexTable::bytes_for(groups * 2);
        if (name_.budget.limit() != 0 && name_.budget.available() / 2 < twice) {
          throw_limit_reached(name_, 2 * twice, "an index table twice the size and its spare");
        }
        t = create(groups * 2);
      } catch (LimitReached& e) {
        // Evicting helps a cache when live entries, not tombstones, fill
        // the table: with fewer, a rebuild of the same capacity does.
        e.evicting_helps = full_ + 1 > limit_of(old->capacity()) / 4 * 3;
        if (e.evicting_helps) throw;
      }
    }
    if (t == nullptr) t = create(groups);
    groups = t->groups;
    std::uint64_t kept = 0;
    for (std::uint64_t g = 0; g < old->groups; ++g) {
      const std::uint64_t w = *old->ctrl_word(g);
      for (std::uint64_t m = w & ctrl::kHighs; m; m &= m - 1) {
        const std::uint64_t slot = g * 8 + ctrl::first(m);
        const std::uint64_t word = load_relaxed(old->slot_word(slot));  // with its policy bits
        std::uint64_t h = 0;
        if (!hash_of(Location::from_slot(word), h)) continue;  // a damaged record: left out
        place(t, h, word);
        ++kept;
      }
    }
    full_ = kept;
    tombstones_ = 0;
    publish(t);
    // After the publish: a reader that sees this generation sees the new table.
    generation_.store(generation_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    retire(old, walks);
    keep_spare();
  }

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
    if (full_ == 0 && tombstones_ == 0) {
      // Already empty (every location a removal left is none): no table to
      // replace, but a reader's conclusions still go stale.
      invalidate_readers();
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
      return;
    }
    // The first move (its fence: a reader that sees any of the stores below
    // sees the new generation).
    invalidate_readers();
#if defined(OFFHEAP_TESTING_READ_HOOK)
    if (testing_clear_after_bump != nullptr) testing_clear_after_bump();
#endif
    for (std::uint64_t g = 0; g < old->groups; ++g) store_relaxed(old->ctrl_word(g), 0);
    // The second move: its release pairs with acquire_generation() (a reader
    // that loads it sees every control byte empty); its fence, with the
    // writer's, carries it to readers of anything written over the records.
    invalidate_readers();
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

  std::uint64_t size() const noexcept { return full_; }
  std::uint64_t tombstones() const noexcept { return tombstones_; }
  std::uint64_t capacity() const noexcept { return table_->capacity(); }
  std::uint64_t mapped_bytes() const noexcept { return table_->mapped_bytes; }
  /// Address space of replaced tables kept (none of it resident once dropped).
  std::uint64_t retired_bytes() const noexcept {
    return bytes_of(retired_) + bytes_of(spares_) + bytes_of(lost_);
  }
  std::uint64_t retired_tables() const noexcept {
    return count_of(retired_) + count_of(spares_) + count_of(lost_);
  }

 private:
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

  void publish(IndexTable* t) noexcept {
    table_ = t;
    // Pairs with acquire_view(): a reader that sees the new table sees it
    // whole. The group count (a power of two) goes in the low bits.
    word_.store(reinterpret_cast<std::uintptr_t>(t->words()) |
                    static_cast<std::uintptr_t>(std::countr_zero(t->groups)),
                std::memory_order_release);
    // After the table word: pairs with acquire_serial().
    serial_.store(serial_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
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
    const bool zeroed = t->from_file == 0 ? discard_pages(t, bytes) || zero_pages(t, bytes)
                                          : zero_pages(t, bytes);
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
  std::atomic<std::uintptr_t> word_{0};  // the table's lines | log2(groups)
  std::atomic<std::uint64_t> serial_{0};
  alignas(64) IndexTable* table_ = nullptr;
  std::uint64_t full_ = 0;
  std::uint64_t tombstones_ = 0;
  IndexTable* retired_ = nullptr;  // replaced, waiting for walks to end
  IndexTable* spares_ = nullptr;   // dropped, kept for reuse
  IndexTable* lost_ = nullptr;     // kept as they are until the index goes
};

}  // namespace offheap::detail
