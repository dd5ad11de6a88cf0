// SPDX-License-Identifier: Apache-2.0
// Walks the records of a chunk file the way the engine lays them out, so
// that a test can aim damage at particular records: a free record's
// capacity, links and footer, a live record's key length or prev-free bit.
//
// Written from the format, not from the engine's code (a test that decoded
// records with the engine's own functions would share its mistakes):
//
//   chunk file   a 4 KiB header page (detail/files/format.hpp: ChunkHeader, the
//                end word at offset 64: bits 0-47 where the chunk's records
//                end), then the chunk's records exactly as in memory
//   record       (detail/journal/record.hpp) word 0 stamp; word 1 value length u32,
//                key length u16, flags u8 (bits 0-1 state: 1 live, 2 free,
//                3 dead; bits 2-4 slack words; bit 5 prev-free), type u8;
//                word 2 checksum and expiry; then the payload
//   capacity     free: the value-length field; live and dead:
//                payload_for(key, value) + 8 * slack, where payload_for is
//                key + value rounded up to 8, at least 16
//   free payload word 0 the next free record of its size class, word 1 the
//                previous (Locations: chunk << 48 | offset, all ones for
//                none); the last word (capacity << 1) | 1 when the capacity
//                is over 16
//
// Offsets: `file_offset` counts from the start of the chunk file (what a
// damage writes at), `offset` from the start of the chunk's records (what a
// Location holds): file_offset = offset + 4096.
#pragma once

#include <offheap/detail/files/format.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace offheap_test::chunk_walk {

inline constexpr std::uint64_t kHeaderPage = 4096;
inline constexpr std::uint64_t kEndWordOffset = 64;
inline constexpr std::uint64_t kDataBytesOffset = 24;
inline constexpr std::uint64_t kRecordHeader = 24;
inline constexpr std::uint64_t kMinPayload = 16;
inline constexpr std::uint64_t kMinRecord = kRecordHeader + kMinPayload;
inline constexpr std::uint64_t kNone = ~std::uint64_t{0};

// Field offsets inside a record.
inline constexpr std::uint64_t kValueLenField = 8;  ///< u32; a free record's capacity
inline constexpr std::uint64_t kKeyLenField = 12;   ///< u16
inline constexpr std::uint64_t kFlagsField = 14;    ///< u8
inline constexpr std::uint8_t kPrevFreeBit = 1u << 5;

enum class State : std::uint8_t { none = 0, live = 1, free = 2, dead = 3 };

inline const char* state_name(State s) {
  switch (s) {
    case State::none: return "none";
    case State::live: return "live";
    case State::free: return "free";
    case State::dead: return "dead";
  }
  return "?";
}

constexpr std::uint64_t payload_for(std::uint64_t key_len, std::uint64_t value_len) noexcept {
  const std::uint64_t n = (key_len + value_len + 7) & ~std::uint64_t{7};
  return n < kMinPayload ? kMinPayload : n;
}
/// A free record's footer word for this capacity.
constexpr std::uint64_t footer_for(std::uint64_t capacity) noexcept { return capacity << 1 | 1; }
/// A Location word.
constexpr std::uint64_t location(std::uint32_t chunk, std::uint64_t offset) noexcept {
  return std::uint64_t{chunk} << 48 | offset;
}
/// The free-list size class of a capacity (detail/journal/free_lists.hpp: one class
/// per 8 bytes up to 4 KiB, then one per power of two). Only for grouping:
/// two records of one class are interchangeable to the allocator.
constexpr unsigned size_class(std::uint64_t capacity) noexcept {
  if (capacity <= 4096) return static_cast<unsigned>(capacity / 8) - 1;
  unsigned bits = 0;
  while ((capacity >> bits) > 1) ++bits;
  return 512 + bits - 12;
}

inline std::uint64_t load_u64(std::string_view b, std::uint64_t off) noexcept {
  std::uint64_t w = 0;
  if (off + 8 <= b.size()) std::memcpy(&w, b.data() + off, 8);
  return w;
}

struct Record {
  std::uint64_t file_offset = 0;  ///< of the stamp, in the chunk file
  std::uint64_t offset = 0;       ///< in the chunk (a Location's offset)
  std::uint64_t stamp = 0;
  std::uint32_t value_len = 0;  ///< a free record's capacity
  std::uint16_t key_len = 0;
  std::uint8_t flags = 0;
  std::uint8_t type = 0;
  std::uint64_t capacity = 0;  ///< payload bytes

  State state() const noexcept { return static_cast<State>(flags & 3u); }
  bool prev_free() const noexcept { return (flags & kPrevFreeBit) != 0; }
  std::uint64_t bytes() const noexcept { return kRecordHeader + capacity; }
  std::uint64_t end() const noexcept { return offset + bytes(); }  ///< in the chunk

  // File offsets of the fields a damage aims at.
  std::uint64_t value_len_at() const noexcept { return file_offset + kValueLenField; }
  std::uint64_t key_len_at() const noexcept { return file_offset + kKeyLenField; }
  std::uint64_t flags_at() const noexcept { return file_offset + kFlagsField; }
  std::uint64_t payload_at() const noexcept { return file_offset + kRecordHeader; }
  std::uint64_t next_link_at() const noexcept { return payload_at(); }
  std::uint64_t prev_link_at() const noexcept { return payload_at() + 8; }
  /// The footer (free records over 16 bytes; in a 16-byte one, the prev link).
  std::uint64_t footer_at() const noexcept { return payload_at() + capacity - 8; }
};

struct Chunk {
  std::string name;  ///< the file's name
  std::uint32_t shard = 0, chunk = 0;  ///< from the name; 0 if it does not parse
  std::uint64_t data_bytes = 0;        ///< the chunk's size: the file's size - 4096
  std::uint64_t end = 0;               ///< where its records end (the end word)
  std::vector<Record> records;         ///< in file order
  std::string stopped;  ///< why the walk stopped before `end` ("" if it did not)

  std::uint64_t location_of(const Record& r) const noexcept { return location(chunk, r.offset); }
  /// The record before `i` in the chunk, or null.
  const Record* before(std::size_t i) const noexcept {
    return i == 0 || i > records.size() ? nullptr : &records[i - 1];
  }
  const Record* after(std::size_t i) const noexcept {
    return i + 1 < records.size() ? &records[i + 1] : nullptr;
  }
};

/// Walks the records of the chunk file whose bytes are `file` (named `name`):
/// from the first record to the end word, each record's size taken from its
/// header. Stops early (saying why in `stopped`) at a zero stamp, a record
/// with no state, or one that would run past the end: the walk lists what
/// an undamaged file holds, and as much of a damaged one as it can.
inline Chunk walk(std::string_view file, const std::string& name = {}) {
  Chunk c;
  c.name = name;
  offheap::detail::format::parse_chunk_file_name(name, c.shard, c.chunk);
  if (file.size() < kHeaderPage) {
    c.stopped = "shorter than its header page";
    return c;
  }
  c.data_bytes = file.size() - kHeaderPage;
  c.end = load_u64(file, kEndWordOffset) & 0x0000FFFFFFFFFFFFull;
  if (c.end > c.data_bytes) {
    c.stopped = "the end word is past the chunk";
    c.end = c.data_bytes;
  }
  const std::string_view data = file.substr(kHeaderPage);
  std::uint64_t off = 0;
  while (off + kMinRecord <= c.end) {
    Record r;
    r.offset = off;
    r.file_offset = kHeaderPage + off;
    r.stamp = load_u64(data, off);
    const std::uint64_t w1 = load_u64(data, off + 8);
    r.value_len = static_cast<std::uint32_t>(w1);
    r.key_len = static_cast<std::uint16_t>(w1 >> 32);
    r.flags = static_cast<std::uint8_t>(w1 >> 48);
    r.type = static_cast<std::uint8_t>(w1 >> 56);
    if (r.stamp == 0) {
      c.stopped = "zero stamp at offset " + std::to_string(off);
      return c;
    }
    if (r.state() == State::none) {
      c.stopped = "no state at offset " + std::to_string(off);
      return c;
    }
    r.capacity = r.state() == State::free
                     ? r.value_len
                     : payload_for(r.key_len, r.value_len) + 8 * ((r.flags >> 2) & 7u);
    if (r.capacity < kMinPayload || r.capacity % 8 != 0 || r.end() > c.end) {
      c.stopped = "a bad capacity at offset " + std::to_string(off);
      return c;
    }
    c.records.push_back(r);
    off = r.end();
  }
  return c;
}

/// The key bytes of the live or dead record `r` of the chunk file `file`.
inline std::string key_of(std::string_view file, const Record& r) {
  if (r.payload_at() + r.key_len > file.size()) return {};
  return std::string(file.substr(r.payload_at(), r.key_len));
}

inline std::uint64_t link_next(std::string_view file, const Record& r) {
  return load_u64(file, r.next_link_at());
}
inline std::uint64_t link_prev(std::string_view file, const Record& r) {
  return load_u64(file, r.prev_link_at());
}
inline std::uint64_t footer(std::string_view file, const Record& r) {
  return load_u64(file, r.footer_at());
}

}  // namespace offheap_test::chunk_walk
