// SPDX-License-Identifier: Apache-2.0
// The index: an open-addressing table from key hash to record Location.
//
// One mapped block per table, power-of-two capacity, slots in groups of 8:
//
//   +--------------------+---------------------------+-----------------------------+
//   | capacity, bytes,   | control bytes, 1 per slot | locations, 8 bytes per slot |
//   | retirement: 32 B   | (capacity)                | (8 x capacity)              |
//   +--------------------+---------------------------+-----------------------------+
//
//   control byte: 0x00 empty, 0x01 tombstone, 0x80 | 7 hash bits: full
//
// 9 bytes per slot; at the 7/8 load limit and after doubling, 10.3 to 20.6
// bytes per entry. The index holds no key: a match of the 7 tag bits is
// confirmed by comparing the full key stored in the record.
//
// Probing visits whole groups (8 control bytes read as one word) on a
// triangular sequence of group numbers, which visits every group of a
// power-of-two table. A probe stops at a group with an empty slot, so a
// removal may leave an empty (not a tombstone) in a group that already has
// one. Growth doubles when live entries pass half the limit and otherwise
// rebuilds at the same size; either way tombstones are dropped.
//
// Concurrency: only the writer (holding the shard lock) changes a table. It
// stores a slot's location with release before the control word that makes
// the slot full (release), so a reader that loads the control word with
// acquire and then the location with acquire sees the record the location
// leads to. A new table is published with a release store of the table
// pointer after it is complete; the old one goes to the caller to retire.
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
// back. A removal stores none in its slot's location before its record is
// freed, so a slot whose key went away never leads to a record again.
#pragma once

#include <offheap/detail/atomic_word.hpp>
#include <offheap/detail/location.hpp>
#include <offheap/detail/os.hpp>

#include <atomic>
#include <bit>
#include <cstdint>
#include <string>

namespace offheap::detail {

struct IndexTable {
  std::uint64_t capacity;       // slots, a power of two >= 8
  std::uint64_t mapped_bytes;   // of the whole block
  IndexTable* next_retired;     // links tables waiting to be freed
  std::uint64_t retire_epoch;   // the epoch they were retired in

  std::uint64_t groups() const noexcept { return capacity / 8; }
  std::uint64_t* ctrl_words() noexcept { return reinterpret_cast<std::uint64_t*>(this + 1); }
  const std::uint64_t* ctrl_words() const noexcept {
    return reinterpret_cast<const std::uint64_t*>(this + 1);
  }
  std::uint64_t* locations() noexcept { return ctrl_words() + groups(); }
  const std::uint64_t* locations() const noexcept { return ctrl_words() + groups(); }

  static IndexTable* create(std::uint64_t capacity, const std::string& name) {
    const std::uint64_t bytes =
        round_up(sizeof(IndexTable) + capacity + capacity * 8, page_size());
    auto* t = reinterpret_cast<IndexTable*>(map_anonymous(bytes, name, "an index table"));
    t->capacity = capacity;  // mapped memory is zeroed: every slot is empty
    t->mapped_bytes = bytes;
    return t;
  }
  static void destroy(IndexTable* t) noexcept {
    if (t) unmap(t, t->mapped_bytes);
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
inline constexpr std::uint64_t kLows = 0x0101010101010101ull;
inline constexpr std::uint64_t kHighs = 0x8080808080808080ull;

inline std::uint8_t tag_of(std::uint64_t hash) noexcept {
  return static_cast<std::uint8_t>(0x80 | (hash >> 57));
}
/// 0x80 in each byte of `w` equal to `tag`, exactly (no false positives).
inline std::uint64_t match(std::uint64_t w, std::uint8_t tag) noexcept {
  const std::uint64_t x = w ^ (kLows * tag);
  return ~(((x & ~kHighs) + ~kHighs) | x) & kHighs;
}
/// 0x80 in each empty byte (control bytes are only 0x00, 0x01 or >= 0x80).
inline std::uint64_t match_empty(std::uint64_t w) noexcept { return ~w & ~(w << 7) & kHighs; }
/// 0x80 in each empty or tombstone byte.
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
  ProbeSeq(std::uint64_t hash, std::uint64_t groups) noexcept
      : mask_(groups - 1), group_(hash & mask_) {}
  std::uint64_t group() const noexcept { return group_; }
  void next() noexcept {
    ++step_;
    group_ = (group_ + step_) & mask_;
  }

 private:
  std::uint64_t mask_;
  std::uint64_t group_;
  std::uint64_t step_ = 0;
};

class Index {
 public:
  static constexpr std::uint64_t kMinCapacity = 8;

  /// The capacity that holds `entries` under the load limit.
  static std::uint64_t capacity_for(std::uint64_t entries) noexcept {
    std::uint64_t cap = kMinCapacity;
    while (limit_of(cap) < entries) cap *= 2;
    return cap;
  }
  static constexpr std::uint64_t limit_of(std::uint64_t capacity) noexcept {
    return capacity - capacity / 8;
  }

  Index(std::uint64_t expected_entries, const std::string& name)
      : name_(name) {
    table_.store(IndexTable::create(capacity_for(expected_entries), name_),
                 std::memory_order_relaxed);
  }
  Index(const Index&) = delete;
  Index& operator=(const Index&) = delete;
  ~Index() { IndexTable::destroy(table_.load(std::memory_order_relaxed)); }

  // ---- reader side ---------------------------------------------------------

  /// Load first, then the table. Acquire pairs with the release store in
  /// grow() (a reader that sees the new generation sees the new table) and
  /// in clear().
  std::uint64_t acquire_generation() const noexcept {
    return generation_.load(std::memory_order_acquire);
  }
  /// The current table. Pairs with the release store in publish().
  const IndexTable* acquire_table() const noexcept { return table_.load(std::memory_order_acquire); }
  /// True while no growth, clear() or invalidate_readers() happened since
  /// `generation` was loaded. Callers order their earlier loads before this
  /// one with an acquire fence (record::validate); it pairs with the release
  /// fences that follow a bump: clear()'s, invalidate_readers()'s, and the
  /// one every later writer issues when it takes the lock (Shard::WriteLock).
  bool unchanged_since(std::uint64_t generation) const noexcept {
    return generation_.load(std::memory_order_relaxed) == generation;
  }
  /// Whether `slot` (one of t's location words) is full: clear() in place
  /// empties control bytes and leaves location words as they were, and
  /// erase() stores none in the location first. Acquire: pairs with
  /// set_ctrl()'s release stores. (A caller that loaded, with acquire, the
  /// generation that clear()'s second move stored sees the bytes empty.)
  static bool slot_full(const IndexTable* t, const std::uint64_t* slot) noexcept {
    const auto i = static_cast<std::uint64_t>(slot - t->locations());
    return (ctrl::byte_of(load_acquire(t->ctrl_words() + i / 8), static_cast<unsigned>(i % 8)) &
            0x80) != 0;
  }

  // ---- writer side (the shard's lock is held) ------------------------------

  IndexTable* table() const noexcept { return table_.load(std::memory_order_relaxed); }

  struct Found {
    bool found = false;
    std::uint64_t slot = 0;         // the key's slot when found
    std::uint64_t insert_slot = 0;  // else the first available slot on its probe path
  };

  /// Finds the slot whose location `is_key(Location)` accepts among the
  /// slots tagged for `hash`.
  template <class IsKey>
  [[gnu::always_inline]] Found find(std::uint64_t hash, IsKey&& is_key) const {
    const IndexTable* t = table();
    const std::uint8_t tag = ctrl::tag_of(hash);
    Found f;
    bool have_insert = false;
    for (ProbeSeq seq(hash, t->groups());; seq.next()) {
      const std::uint64_t g = seq.group();
      const std::uint64_t w = t->ctrl_words()[g];
      for (std::uint64_t m = ctrl::match(w, tag); m; m &= m - 1) {
        const std::uint64_t slot = g * 8 + ctrl::first(m);
        if (is_key(Location::from_raw(t->locations()[slot]))) {
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
  bool needs_room() const noexcept { return full_ + tombstones_ + 1 > limit_of(table()->capacity); }

  /// Fills `slot` (from find().insert_slot) with `loc`.
  void insert(std::uint64_t slot, std::uint64_t hash, Location loc) noexcept {
    IndexTable* t = table();
    if (ctrl::byte_of(t->ctrl_words()[slot / 8], slot % 8) == ctrl::kTombstone) --tombstones_;
    // Location first, then the control byte that makes the slot visible:
    // both release, paired with the reader's acquire loads.
    store_release(t->locations() + slot, loc.raw());
    set_ctrl(t, slot, ctrl::tag_of(hash));
    ++full_;
  }

  /// Points a full slot at a new record. Release: pairs with the reader's
  /// acquire load of the location, so the new record's words are visible.
  void update(std::uint64_t slot, Location loc) noexcept {
    store_release(table()->locations() + slot, loc.raw());
  }

  /// Empties a full slot. Its location word says none first, so that a
  /// reader that loaded the slot's control word before this can no longer
  /// read it as leading to the key's record: the caller frees that record
  /// next (its release fence, in record::begin_write, orders this store
  /// before the free; a reader that sees any byte of the free, or of what
  /// later covers it, sees none here after its acquire fence).
  void erase(std::uint64_t slot) noexcept {
    IndexTable* t = table();
    store_release(t->locations() + slot, Location::none().raw());
    const bool group_has_empty = ctrl::match_empty(t->ctrl_words()[slot / 8]) != 0;
    set_ctrl(t, slot, group_has_empty ? ctrl::kEmpty : ctrl::kTombstone);
    if (!group_has_empty) ++tombstones_;
    --full_;
  }

  Location location(std::uint64_t slot) const noexcept {
    return Location::from_raw(table()->locations()[slot]);
  }

  /// Rebuilds the table so that one more entry fits: twice the capacity when
  /// live entries pass half the limit, else the same capacity without
  /// tombstones. `hash_of(Location, std::uint64_t& hash)` recomputes an
  /// entry's hash from its record, or returns false to leave the entry out
  /// (a record a damaged file made unreadable). Publishes the new table and returns the old one, which the
  /// caller frees once no reader can hold it. Throws Error(out_of_space) if
  /// the new table cannot be mapped; the index is unchanged then.
  template <class HashOf>
  IndexTable* grow(HashOf&& hash_of) {
    IndexTable* old = table();
    std::uint64_t cap = old->capacity;
    if (full_ + 1 > limit_of(cap) / 2) cap *= 2;
    IndexTable* t = IndexTable::create(cap, name_);
    std::uint64_t kept = 0;
    for (std::uint64_t g = 0; g < old->groups(); ++g) {
      const std::uint64_t w = old->ctrl_words()[g];
      for (std::uint64_t m = w & ctrl::kHighs; m; m &= m - 1) {
        const std::uint64_t slot = g * 8 + ctrl::first(m);
        const Location loc = Location::from_raw(old->locations()[slot]);
        std::uint64_t h = 0;
        if (!hash_of(loc, h)) continue;  // a damaged record: left out
        place(t, h, loc);
        ++kept;
      }
    }
    full_ = kept;
    tombstones_ = 0;
    publish(t);
    // After the publish: a reader that sees this generation sees the new table.
    generation_.store(generation_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    return old;
  }

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
  /// the current one, which is returned for the caller to retire as after
  /// growth: readers inside it find it frozen (no longer current) and trust
  /// nothing they read there, and its memory goes back to the OS once they
  /// have left. If the fresh table cannot be mapped, the table is emptied
  /// in place instead (nullptr is returned): the generation moves before
  /// (readers inside conclude nothing from what they read) and again after
  /// (a reader that loaded it mid-clear and saw a slot still full must not
  /// accept what it finds once the records' space is reused); location
  /// words are left as they were (a reader that reloads one checks
  /// slot_full() first), never discarded, which could make them read as
  /// another record's location (0, or a private file mapping's old word).
  IndexTable* clear() noexcept {
    IndexTable* old = table();
    if (full_ == 0 && tombstones_ == 0) {
      // Already empty (every location a removal left is none): no table to
      // replace, but a reader's conclusions still go stale.
      invalidate_readers();
      return nullptr;
    }
    IndexTable* fresh = nullptr;
    try {
      fresh = IndexTable::create(old->capacity, name_);
    } catch (...) {
      fresh = nullptr;  // out of memory: emptied in place below
    }
#if defined(OFFHEAP_TESTING_READ_HOOK)
    if (testing_clear_in_place && fresh != nullptr) {
      IndexTable::destroy(fresh);
      fresh = nullptr;
    }
#endif
    full_ = 0;
    tombstones_ = 0;
    if (fresh != nullptr) {
      publish(fresh);
      // As in grow(): a reader that sees this generation sees the new table.
      invalidate_readers();
      return old;
    }
    // The first move (its fence: a reader that sees any of the stores below
    // sees the new generation).
    invalidate_readers();
#if defined(OFFHEAP_TESTING_READ_HOOK)
    if (testing_clear_after_bump != nullptr) testing_clear_after_bump();
#endif
    for (std::uint64_t g = 0; g < old->groups(); ++g) store_relaxed(old->ctrl_words() + g, 0);
    // The second move: its release pairs with acquire_generation() (a reader
    // that loads it sees every control byte empty); its fence, with the
    // writer's, carries it to readers of anything written over the records.
    invalidate_readers();
    return nullptr;
  }

  /// Replaces the (empty, unpublished to readers) table with `t`, which
  /// holds `full` entries and `tombstones` tombstones: a clean reopen's
  /// table, mapped from its state file. No reader may be inside.
  void adopt(IndexTable* t, std::uint64_t full, std::uint64_t tombstones) noexcept {
    IndexTable::destroy(table());
    publish(t);
    full_ = full;
    tombstones_ = tombstones;
  }

  /// Whether the control bytes of `t` (a table read from a file) are each
  /// empty, tombstone or full, and count `full` full slots and `tombstones`
  /// tombstones: with counts under the load limit, every probe then meets
  /// an empty slot and ends.
  static bool control_bytes_sound(const IndexTable* t, std::uint64_t full,
                                  std::uint64_t tombstones) noexcept {
    std::uint64_t f = 0, d = 0;
    for (std::uint64_t g = 0; g < t->groups(); ++g) {
      const std::uint64_t w = t->ctrl_words()[g];
      const std::uint64_t full_bits = w & ctrl::kHighs;
      const std::uint64_t not_full = ~(full_bits >> 7) & ctrl::kLows;  // low bit of each other byte
      if ((w & 0x7E7E7E7E7E7E7E7Eull & (not_full * 0x7E)) != 0) return false;  // 0x02-0x7F
      f += static_cast<std::uint64_t>(std::popcount(full_bits));
      d += static_cast<std::uint64_t>(std::popcount(w & not_full));
    }
    return f == full && d == tombstones && full + tombstones < t->capacity;
  }

  /// Starts an empty index over with room for `entries` (recovery, before
  /// any reader). Throws Error(out_of_space); the index is unchanged then.
  void reserve_empty(std::uint64_t entries) {
    if (full_ != 0 || capacity_for(entries) <= table()->capacity) return;
    adopt(IndexTable::create(capacity_for(entries), name_), 0, 0);
  }

  /// Brings the group a probe for `hash` starts at into the cache.
  void prefetch(std::uint64_t hash) const noexcept {
    const IndexTable* t = table();
    const std::uint64_t g = hash & (t->groups() - 1);
    __builtin_prefetch(t->ctrl_words() + g);
    __builtin_prefetch(t->locations() + g * 8);
  }

  std::uint64_t size() const noexcept { return full_; }
  std::uint64_t tombstones() const noexcept { return tombstones_; }
  std::uint64_t capacity() const noexcept { return table()->capacity; }
  std::uint64_t mapped_bytes() const noexcept { return table()->mapped_bytes; }

 private:
  static void set_ctrl(IndexTable* t, std::uint64_t slot, std::uint8_t value) noexcept {
    std::uint64_t* w = t->ctrl_words() + slot / 8;
    const unsigned shift = 8 * (slot % 8);
    const std::uint64_t next = (*w & ~(std::uint64_t{0xFF} << shift)) | std::uint64_t{value} << shift;
    // Pairs with the reader's acquire load of the control word.
    store_release(w, next);
  }

  /// Inserts into a table no reader can see yet.
  static void place(IndexTable* t, std::uint64_t hash, Location loc) noexcept {
    for (ProbeSeq seq(hash, t->groups());; seq.next()) {
      const std::uint64_t g = seq.group();
      if (const std::uint64_t a = ctrl::match_available(t->ctrl_words()[g])) {
        const std::uint64_t slot = g * 8 + ctrl::first(a);
        t->locations()[slot] = loc.raw();
        const unsigned shift = 8 * (slot % 8);
        t->ctrl_words()[g] |= std::uint64_t{ctrl::tag_of(hash)} << shift;
        return;
      }
    }
  }

  void publish(IndexTable* t) noexcept {
    // Pairs with acquire_table(): a reader that sees the new table sees it whole.
    table_.store(t, std::memory_order_release);
  }

  const std::string& name_;  // the store's name, which outlives the index
  // What readers load, on a line of its own: the writer's counters below
  // change with every insert and would otherwise evict it from readers.
  alignas(64) std::atomic<IndexTable*> table_{nullptr};
  std::atomic<std::uint64_t> generation_{1};
  alignas(64) std::uint64_t full_ = 0;
  std::uint64_t tombstones_ = 0;
};

}  // namespace offheap::detail
