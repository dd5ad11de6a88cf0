// SPDX-License-Identifier: Apache-2.0
// Free records, kept in lists inside the free records themselves.
//
// Size classes by payload capacity: one class per 8-byte step up to 4 KiB
// (classes 0-511 hold capacities 8, 16, ..., 4096 exactly), then one class
// per power of two (class 512 + k - 12 holds capacities in [2^k, 2^(k+1)),
// k = 12..47). Within an exact class every record fits a request of that
// class; in a power-of-two class only the head is examined, since finding a
// fitting record further down would mean following links through dead
// records scattered across the journal.
//
// Lists are doubly linked, so that a free record can leave its list from the
// middle when a neighbour being freed absorbs it (Shard::release). The only
// state outside the journal is one mapped table, the same size for a store
// of any size:
//
//   heads[548]    u64  Location of the first free record of each class
//   nonempty[9]   u64  bit c set <=> class c has a free record
//   bytes[36]     u64  payload bytes per power-of-two class (an exact
//                      class's bytes are its records times its capacity)
//   records[548]  u32  free records per class
//                      (6,936 bytes: two pages)
//
// Each free record's first two payload words link to the next and previous
// records of its class (record::write_free). Only writers touch free lists;
// readers never do. In a file-backed store reopened from its state files the
// free records were never read, so every record a list leads to is checked
// (sound(): free, of the class, inside its chunk, its footer; links that
// lead back) before it is followed or written to; a list that fails is
// dropped, counted, never written through.

#pragma once

#include <offheap/detail/journal/journal.hpp>
#include <offheap/detail/index/location.hpp>
#include <offheap/detail/memory/mapped_array.hpp>
#include <offheap/detail/memory/os.hpp>
#include <offheap/detail/journal/record.hpp>

#include <atomic>
#include <bit>
#include <cassert>
#include <cstdint>
#include <cstring>
#include <string>

namespace offheap::detail {

class FreeLists {
 public:
  static constexpr unsigned kExactClasses = 512;
  static constexpr std::uint64_t kExactLimit = 4096;
  static constexpr unsigned kClasses = kExactClasses + (48 - 12);  // 548
  static constexpr unsigned kBitmapWords = (kClasses + 63) / 64;

  /// The class a free record of this payload capacity belongs to.
  static constexpr unsigned class_of(std::uint64_t capacity) noexcept {
    if (capacity <= kExactLimit) return static_cast<unsigned>(capacity / 8 - 1);
    return kExactClasses + static_cast<unsigned>(std::bit_width(capacity) - 1 - 12);
  }
  /// The smallest capacity a record of class `c` can have.
  static constexpr std::uint64_t class_min_capacity(unsigned c) noexcept {
    if (c < kExactClasses) return (std::uint64_t{c} + 1) * 8;
    const std::uint64_t p = std::uint64_t{1} << (c - kExactClasses + 12);
    return c == kExactClasses ? kExactLimit + 8 : p;
  }

  /// `check`: the free records may come from files, which a damage may
  /// have changed: every record a list leads to is checked before it is
  /// followed. Otherwise (anonymous memory, written only by this code) the
  /// same checks are assertions.
  FreeLists(const Journal& journal, const StoreName& name, bool check = true)
      : journal_(journal), store_(name), check_(check), chunk_free_(name, "the free-space-per-chunk table") {
    table_ = reinterpret_cast<std::uint64_t*>(
        map_anonymous(round_up(kTableBytes, page_size()), name, "the free-list table"));
    clear();
  }
  FreeLists(const FreeLists&) = delete;
  FreeLists& operator=(const FreeLists&) = delete;
  /// What a shard's lists map before its first record: the table (the
  /// per-chunk counts come with the first chunk) (memory_floor.hpp).
  static std::uint64_t table_mapped_bytes() noexcept { return round_up(kTableBytes, page_size()); }
  ~FreeLists() { unmap(table_, round_up(kTableBytes, page_size()), store_); }

  /// Whether `capacity` can be a free record's: whole words, at least the
  /// two links, within the 32-bit field.
  static constexpr bool valid_capacity(std::uint64_t capacity) noexcept {
    return capacity >= record::kMinPayload && capacity % 8 == 0 &&
           capacity <= record::kMaxFreeCapacity;
  }

  /// Whether `loc` holds what a list of class `c` may hold: inside the
  /// journal's records (below the tail), a free record whose capacity is of
  /// class c and fits there,
  /// and (above 16 bytes) the footer that repeats it. Everything a list
  /// leads to is checked so before it is followed or written to: in a store
  /// reopened from its state files, the free records were never read, and
  /// a damaged file may hold anything there.
  bool sound(Location loc, unsigned c) const noexcept {
    // (An emptied chunk's free pieces are on no list: a list that leads
    // there is a damaged file's.)
    if (loc.is_none() || loc.chunk() >= journal_.chunks() || journal_.emptied(loc.chunk())) return false;
    const std::uint64_t size = journal_.records_end(loc.chunk());  // never past the tail
    if (loc.offset() > size || size - loc.offset() < record::kMinRecord) return false;
    const std::byte* rec = journal_.at(loc);
    const record::Meta m = record::read_meta(rec);
    const std::uint64_t cap = m.value_len;
    if (m.state() != record::State::free || m.key_len != 0 || !valid_capacity(cap) ||
        class_of(cap) != c || size - loc.offset() - record::kHeaderBytes < cap) {
      return false;
    }
    return cap == record::kMinPayload ||
           load_relaxed(record::payload_words(rec) + cap / 8 - 1) == (cap << 1 | 1);
  }

  /// Whether the record at `loc` sits in a sound doubly linked list of
  /// class c between `prev` and `next` (its own links).
  bool links_sound(Location loc, unsigned c, Location next, Location prev) const noexcept {
    const bool next_ok = next.is_none() || (next != loc && sound(next, c) &&
                                            record::free_prev(journal_.at(next)) == loc);
    const bool prev_ok = prev.is_none() ? heads()[c] == loc.raw()
                                        : prev != loc && sound(prev, c) &&
                                              record::free_next(journal_.at(prev)) == loc;
    return next_ok && prev_ok && records()[c] != 0;
  }

  /// sound(), where lists are checked; else asserted and taken as true.
  bool may_follow(Location loc, unsigned c) const noexcept {
    if (check_) return sound(loc, c);
    assert(sound(loc, c));
    return true;
  }

  /// Turns the slot at `loc` into a free record of `capacity` (a valid
  /// capacity) payload bytes stamped `stamp` (its prev-free bit given), and
  /// pushes it on its class.
  void push(std::byte* rec, Location loc, std::uint64_t capacity, std::uint64_t stamp,
            bool prev_free) noexcept {
    assert(valid_capacity(capacity));
    const unsigned c = class_of(capacity);
    Location head = Location::from_raw(heads()[c]);
    if (!head.is_none() && !(may_follow(head, c) && record::free_prev(journal_.at(head)).is_none())) {
      drop_class(c);  // a damaged list: forgotten, never written through
      head = Location::none();
    }
    record::write_free(rec, stamp, capacity, head, Location::none(), prev_free);
    if (!head.is_none()) record::set_free_prev(journal_.at(head), loc);
    heads()[c] = loc.raw();
    records()[c] += 1;
    if (c >= kExactClasses) big_bytes()[c - kExactClasses] += capacity;
    nonempty()[c / 64] |= std::uint64_t{1} << (c % 64);
    ++total_records_;
    total_bytes_ += capacity;
    count_in_chunk(loc.chunk(), record::kHeaderBytes + capacity, true);
  }

  /// Takes the free record at `loc`, of `capacity` (the caller has checked
  /// sound(loc, class_of(capacity))), off its list. Returns false, with
  /// nothing written and the class's list dropped (counted), if the links
  /// are not those of a sound doubly linked list: a neighbour that is not a
  /// free record of the class, or does not link back, or a record without
  /// a predecessor that is not the head.
  bool unlink(Location loc, std::uint64_t capacity) noexcept {
    const unsigned c = class_of(capacity);
    std::byte* rec = journal_.at(loc);
    const Location next = record::free_next(rec);
    const Location prev = record::free_prev(rec);
    if (check_) {
      if (!links_sound(loc, c, next, prev)) {
        drop_class(c);
        return false;
      }
    } else {
      assert(links_sound(loc, c, next, prev));
    }
    if (prev.is_none()) {
      heads()[c] = next.raw();
    } else {
      record::set_free_next(journal_.at(prev), next);
    }
    if (!next.is_none()) record::set_free_prev(journal_.at(next), prev);
    records()[c] -= 1;
    if (c >= kExactClasses) {
      std::uint64_t& b = big_bytes()[c - kExactClasses];
      b -= capacity <= b ? capacity : b;
    }
    if (records()[c] == 0) nonempty()[c / 64] &= ~(std::uint64_t{1} << (c % 64));
    total_records_ -= total_records_ != 0 ? 1 : 0;
    total_bytes_ -= capacity <= total_bytes_ ? capacity : total_bytes_;
    count_in_chunk(loc.chunk(), record::kHeaderBytes + capacity, false);
    return true;
  }

  struct Taken {
    Location loc = Location::none();
    std::byte* rec = nullptr;
    std::uint64_t capacity = 0;
  };

  /// Pops a free record whose capacity is at least `need` (a multiple of 8),
  /// from the smallest class that has one. Returns a none location if there
  /// is none.
  Taken take(std::uint64_t need) noexcept {
    Taken t;
    for (unsigned c = next_nonempty(class_of(need)); c < kClasses; c = next_nonempty(c + 1)) {
      const Location head = Location::from_raw(heads()[c]);
      if (!may_follow(head, c) || !record::free_prev(journal_.at(head)).is_none()) {
        drop_class(c);  // a damaged file's list: forgotten (its space with it)
        continue;
      }
      std::byte* rec = journal_.at(head);
      const std::uint64_t cap = record::read_meta(rec).value_len;
      if (cap < need) continue;  // only in a power-of-two class
      if (!unlink(head, cap)) continue;
      t.loc = head;
      t.rec = rec;
      t.capacity = cap;
      return t;
    }
    return t;
  }

  /// Forgets every free record (the journal is being reset).
  void clear() noexcept {
    for (unsigned c = 0; c < kClasses; ++c) {
      heads()[c] = Location::none().raw();
      records()[c] = 0;
    }
    for (unsigned c = 0; c < kClasses - kExactClasses; ++c) big_bytes()[c] = 0;
    for (unsigned w = 0; w < kBitmapWords; ++w) nonempty()[w] = 0;
    total_records_ = 0;
    total_bytes_ = 0;
    for (std::uint64_t i = 0; i < chunk_free_.size(); ++i) chunk_free_[i] = 0;
    chunk_free_known_ = true;
  }

  // ---- free space per chunk (compaction.hpp picks the emptiest) ---------------

  /// Makes room to count the free space of chunks 0..n-1. Throws
  /// Error(out_of_space), nothing changed, if it cannot.
  void reserve_chunks(std::uint32_t n) {
    while (chunk_free_.size() < n) chunk_free_.push_back(0);
  }
  /// Whether chunk_free() is exact: false after a load() or a dropped list,
  /// until recount_chunks().
  bool chunks_known() const noexcept { return chunk_free_known_; }
  /// Bytes (headers included) of the listed free records in chunk c.
  std::uint64_t chunk_free(std::uint32_t c) const noexcept {
    return c < chunk_free_.size() ? chunk_free_[c] & kBytesMask : 0;
  }
  /// How many listed free records chunk c holds (65535: that many or more).
  std::uint64_t chunk_free_records(std::uint32_t c) const noexcept {
    return c < chunk_free_.size() ? chunk_free_[c] >> 48 : 0;
  }
  /// Counts chunk_free() afresh from the lists (sound links only). Throws
  /// as reserve_chunks().
  void recount_chunks() {
    reserve_chunks(journal_.chunks());
    for (std::uint64_t i = 0; i < chunk_free_.size(); ++i) chunk_free_[i] = 0;
    for_each_at_least(0, [&](Location loc, std::uint64_t cap) {
      count_in_chunk(loc.chunk(), record::kHeaderBytes + cap, true);
    });
    chunk_free_known_ = true;
  }

  std::uint64_t class_records(unsigned c) const noexcept { return records()[c]; }
  std::uint64_t class_bytes(unsigned c) const noexcept {
    return c < kExactClasses ? records()[c] * class_min_capacity(c)
                             : big_bytes()[c - kExactClasses];
  }
  /// The table as bytes, for a clean close's state file.
  const void* table_bytes() const noexcept { return table_; }
  static constexpr std::uint64_t table_size() noexcept { return kTableBytes; }
  /// Replaces the table with `bytes` (table_size() of them) from a state
  /// file, with the totals it goes with.
  void load(const void* bytes, std::uint64_t total_records, std::uint64_t total_bytes) noexcept {
    std::memcpy(table_, bytes, kTableBytes);
    total_records_ = total_records;
    total_bytes_ = total_bytes;
    chunk_free_known_ = false;  // recount_chunks() when compaction wants it
  }
  /// Whether a location the table holds is none or inside the journal: the
  /// check a state file's free-list heads must pass.
  bool heads_in_bounds() const noexcept {
    for (unsigned c = 0; c < kClasses; ++c) {
      const Location h = Location::from_raw(heads()[c]);
      if (h.is_none()) {
        if (records()[c] != 0) return false;
        continue;
      }
      if (records()[c] == 0 || h.chunk() >= journal_.chunks() ||
          h.offset() + record::kMinRecord > journal_.chunk_size(h.chunk())) {
        return false;
      }
    }
    return true;
  }

  /// Calls fn(Location, capacity) for the free records of every class that
  /// may hold a capacity of `min_capacity` or more, following sound links
  /// only (a damaged list is walked up to its first unsound record).
  template <class F>
  void for_each_at_least(std::uint64_t min_capacity, F&& fn) const {
    for (unsigned c = 0; c < kClasses; ++c) {
      if (c + 1 < kClasses && class_min_capacity(c + 1) <= min_capacity) continue;
      Location loc = Location::from_raw(heads()[c]);
      for (std::uint64_t n = records()[c]; n != 0 && !loc.is_none() && sound(loc, c); --n) {
        const std::byte* rec = journal_.at(loc);
        const std::uint64_t cap = record::read_meta(rec).value_len;
        const Location next = record::free_next(rec);
        if (cap >= min_capacity) fn(loc, cap);
        loc = next;
      }
    }
  }

  /// Lists found damaged and dropped (free records a file said were there).
  std::uint64_t damaged() const noexcept { return damaged_.load(std::memory_order_relaxed); }
  std::uint64_t total_records() const noexcept { return total_records_; }
  std::uint64_t total_bytes() const noexcept { return total_bytes_; }
  std::uint64_t mapped_bytes() const noexcept {
    return round_up(kTableBytes, page_size()) + chunk_free_.mapped_bytes();
  }

 private:
  static constexpr unsigned kBigClasses = kClasses - kExactClasses;
  static constexpr std::uint64_t kTableBytes =
      (kClasses + kBitmapWords + kBigClasses) * 8 + kClasses * 4;

  std::uint64_t* heads() const noexcept { return table_; }
  std::uint64_t* nonempty() const noexcept { return table_ + kClasses; }
  std::uint64_t* big_bytes() const noexcept { return table_ + kClasses + kBitmapWords; }
  std::uint32_t* records() const noexcept {
    return reinterpret_cast<std::uint32_t*>(table_ + kClasses + kBitmapWords + kBigClasses);
  }

  /// Forgets class c's list (only ever for a damaged file's): its records
  /// stay free in the journal, unused until the store is rebuilt (a store
  /// that met damage is not saved clean: its next open recovers).
  void drop_class(unsigned c) noexcept {
    damaged_.fetch_add(1, std::memory_order_relaxed);
    chunk_free_known_ = false;
    const std::uint64_t bytes = class_bytes(c);
    total_records_ -= records()[c] <= total_records_ ? records()[c] : total_records_;
    total_bytes_ -= bytes <= total_bytes_ ? bytes : total_bytes_;
    heads()[c] = Location::none().raw();
    records()[c] = 0;
    if (c >= kExactClasses) big_bytes()[c - kExactClasses] = 0;
    nonempty()[c / 64] &= ~(std::uint64_t{1} << (c % 64));
  }

  void count_in_chunk(std::uint32_t c, std::uint64_t bytes, bool add) noexcept {
    if (c >= chunk_free_.size()) {
      chunk_free_known_ = false;  // (room was not reserved: recounted when wanted)
      return;
    }
    // Bytes in the low 48 bits, records in the high 16 (saturating: a
    // count of "many" is all compaction asks).
    std::uint64_t& w = chunk_free_[c];
    std::uint64_t n = w & kBytesMask, r = w >> 48;
    if (add) {
      n += bytes;
      r += r < 0xFFFF ? 1 : 0;
    } else {
      n -= bytes <= n ? bytes : n;
      r -= r != 0 ? 1 : 0;  // (from a saturated count too: an estimate of "many")
    }
    w = (n & kBytesMask) | r << 48;
  }
  static constexpr std::uint64_t kBytesMask = (std::uint64_t{1} << 48) - 1;

  /// The first non-empty class >= c, or kClasses.
  unsigned next_nonempty(unsigned c) const noexcept {
    while (c < kClasses) {
      const std::uint64_t bits = nonempty()[c / 64] >> (c % 64);
      if (bits != 0) return c + static_cast<unsigned>(std::countr_zero(bits));
      c = (c / 64 + 1) * 64;
    }
    return kClasses;
  }

  const Journal& journal_;
  const StoreName& store_;
  bool check_;
  std::uint64_t* table_ = nullptr;
  std::uint64_t total_records_ = 0;
  std::uint64_t total_bytes_ = 0;
  std::atomic<std::uint64_t> damaged_{0};  // read by stats() without the lock
  MappedArray<std::uint64_t> chunk_free_;  // chunk_free(c)
  bool chunk_free_known_ = true;
};

}  // namespace offheap::detail
