// SPDX-License-Identifier: Apache-2.0
// An index table's layout: its mapped block, its control bytes and their
// matching, and the probe sequence (index.hpp: the Index that owns the tables).
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
#pragma once

#include <offheap/detail/index/location.hpp>
#include <offheap/detail/memory/atomic_word.hpp>
#include <offheap/detail/memory/os.hpp>

#include <bit>
#include <cstdint>

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
        t = reinterpret_cast<IndexTable*>(map_anonymous(bytes, name, "an index table", true));
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

}  // namespace offheap::detail
