// SPDX-License-Identifier: Apache-2.0
// The on-disk format of a file-backed store. A store is a directory:
//
//   meta                 the store's identity (below), rewritten atomically
//                        (temporary file + rename) on open and on clean close
//   s0003-c00012.chunk   journal chunk 12 of shard 3: a 4 KiB header page,
//                        then the chunk's records exactly as in memory
//                        (record.hpp); created under a temporary name and
//                        renamed once whole, grown by posix_fallocate only
//   s0003.state          written at a clean close only: shard 3's counters,
//                        free-list table and index table, so that a clean
//                        reopen maps them instead of scanning the records
//
// Every field is little-endian (record.hpp refuses other machines). Every
// header carries a CRC32C of its fixed fields; the state files carry a
// 64-bit checksum of their tables as well.
//
// Format version. offheap::kFormatVersion (version.hpp) names this layout,
// apart from the library version: it changes (and a store written in another
// one is refused with Errc::format_version) whenever any byte of a file
// above, a record header, the record checksum, the meaning of a flag or the
// naming of files changes. Adding files that an older reader would ignore
// does not change it; a new version never reinterprets an old file silently.
#pragma once

#include <offheap/detail/journal/crc32c.hpp>
#include <offheap/detail/index/hash.hpp>
#include <offheap/version.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

namespace offheap::detail::format {

inline constexpr std::uint32_t kFormatVersion = offheap::kFormatVersion;
/// The header page before each chunk's records.
inline constexpr std::uint64_t kChunkHeaderBytes = 4096;

inline constexpr char kMetaMagic[8] = {'O', 'F', 'F', 'H', 'E', 'A', 'P', 'M'};
inline constexpr char kChunkMagic[8] = {'O', 'F', 'F', 'H', 'E', 'A', 'P', 'C'};
inline constexpr char kStateMagic[8] = {'O', 'F', 'F', 'H', 'E', 'A', 'P', 'S'};

/// The file "meta". Read whole; its size must be sizeof(Meta).
struct Meta {
  char magic[8];
  std::uint32_t format_version;
  std::uint32_t meta_bytes;  // sizeof(Meta)
  std::uint32_t policy_id;   // Policy::id of the store that created it
  std::uint32_t shards;
  std::uint64_t hash_seed;
  std::uint64_t store_id;    // random at creation; in every chunk and state file
  std::uint64_t generation;  // + 1 at every writable open
  std::uint32_t clean;       // 1: closed cleanly at `generation`; state files are valid
  std::uint32_t reserved0;
  std::uint64_t reserved[4];
  std::uint32_t reserved1;
  std::uint32_t checksum;  // CRC32C of every byte before it
};
static_assert(sizeof(Meta) == 96);

/// The first bytes of a chunk file's header page.
struct ChunkHeader {
  char magic[8];
  std::uint32_t format_version;
  std::uint32_t shard;
  std::uint32_t chunk;
  std::uint32_t reserved0;
  std::uint64_t data_bytes;  // the chunk's size: the file is kChunkHeaderBytes + data_bytes
  std::uint64_t store_id;
  std::uint32_t reserved1;
  std::uint32_t checksum;  // CRC32C of every byte before it
};
static_assert(sizeof(ChunkHeader) == 48);
/// Offset in the header page of the end word: bits 0-47 the offset where the
/// chunk's records end (the journal's tail in the tail chunk, the chunk's
/// size in the others), bits 48-63 a check of it (end_word). Stored with one
/// 8-byte store once the records up to the new end are written (a shrinking
/// end: first).
inline constexpr std::uint64_t kEndWordOffset = 64;
/// Chunk 0 only: the shard's live record count as last stored, updated with
/// every insert and removal. A hint that sizes the index a rebuild starts
/// with (so that it never rehashes); trusted for nothing else.
inline constexpr std::uint64_t kRecordsHintOffset = 72;
/// Chunk 0 only: the clear mark, clear_mark(salt) while a clear() of the
/// shard is under way (stored before the first end word changes, removed
/// once every chunk is zeroed), else 0. An open that finds it finishes the
/// clear (a read-only one sees an empty shard): a clear cut short by a crash
/// must not leave some chunks emptied and others not, which could bring
/// back a record whose removal (a dead marker) was in an emptied chunk, or
/// stale records under ends that later writes move forward. Any other
/// value is ignored (damage: the records stay).
inline constexpr std::uint64_t kClearMarkOffset = 80;
/// Every chunk: the emptied mark, emptied_mark(salt) while compaction has
/// emptied the chunk (compaction.hpp): its records were moved out, it holds
/// one free record (in pieces of at most 4 GiB) that no free list holds, and
/// the disk blocks inside were handed back (a hole). An open leaves such a
/// chunk alone: it takes no records from it and puts none of its space on a
/// free list, until a writer needs it and reserves its blocks again. Any
/// other value: not emptied.
inline constexpr std::uint64_t kEmptiedMarkOffset = 88;

/// StateHeader::flags: the shard may hold records with deadlines (set by
/// the first one written since the shard was created or cleared), so that
/// a clean open of a store that never used expiry reads no record.
inline constexpr std::uint32_t kStateDeadlines = 1;

/// Shard s's state file, written at a clean close: this header at offset 0,
/// the free-list table at free_table_offset, the index table (IndexTable and
/// its slots, as mapped) at index_offset, both page-aligned.
struct StateHeader {
  char magic[8];
  std::uint32_t format_version;
  std::uint32_t shard;
  std::uint64_t store_id;
  std::uint64_t generation;  // must equal the meta file's
  std::uint64_t chunks;
  std::uint64_t tail_chunk;
  std::uint64_t tail_offset;
  std::uint64_t stamp;
  std::uint64_t records;
  std::uint64_t key_value_bytes;
  std::uint64_t live_bytes;
  std::uint64_t puts;
  std::uint64_t removes;
  std::uint64_t free_records;
  std::uint64_t free_bytes;
  std::uint64_t index_capacity;
  std::uint64_t index_full;
  std::uint64_t index_tombstones;
  std::uint64_t free_table_offset;
  std::uint64_t free_table_bytes;
  std::uint64_t index_offset;
  std::uint64_t index_bytes;
  std::uint64_t body_hash;  // hash64 of the free-list table and the index table
  std::uint32_t flags;      // kStateDeadlines: records with deadlines may exist
  std::uint32_t checksum;  // CRC32C of every byte before it
};
static_assert(sizeof(StateHeader) == 192);

template <class T>
std::uint32_t header_checksum(const T& h) noexcept {
  return crc32c(&h, offsetof(T, checksum));
}
template <class T>
void seal(T& h) noexcept {
  h.checksum = header_checksum(h);
}

inline std::string chunk_file_name(std::uint32_t shard, std::uint32_t chunk) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "s%04u-c%05u.chunk", shard, chunk);
  return buf;
}
inline std::string state_file_name(std::uint32_t shard) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "s%04u.state", shard);
  return buf;
}
/// Parses a chunk file name; false for any other name.
inline bool parse_chunk_file_name(const std::string& name, std::uint32_t& shard,
                                  std::uint32_t& chunk) {
  unsigned s = 0, c = 0;
  int used = 0;
  if (name.size() != 18 || std::sscanf(name.c_str(), "s%4u-c%5u.chunk%n", &s, &c, &used) != 2 ||
      used != 18) {
    return false;
  }
  shard = s;
  chunk = c;
  return true;
}

/// The end word of a chunk: the end and 16 bits that depend on it, the
/// store, the shard and the chunk, so that a damaged word is noticed.
constexpr std::uint64_t end_word(std::uint64_t end, std::uint64_t salt) noexcept {
  return end | (detail::mix64(end ^ salt) & 0xFFFF000000000000ull);
}
constexpr bool end_word_valid(std::uint64_t word, std::uint64_t salt) noexcept {
  return end_word(word & 0x0000FFFFFFFFFFFFull, salt) == word;
}
constexpr std::uint64_t end_of(std::uint64_t word) noexcept { return word & 0x0000FFFFFFFFFFFFull; }
/// The clear mark of a shard whose chunk 0 end word has salt `salt`.
constexpr std::uint64_t clear_mark(std::uint64_t salt) noexcept {
  return detail::mix64(salt ^ 0x436C656172696E67ull) | 1;  // never 0
}

/// The emptied mark of a chunk whose end word has salt `salt`.
constexpr std::uint64_t emptied_mark(std::uint64_t salt) noexcept {
  return detail::mix64(salt ^ 0x456D707469656421ull) | 1;  // never 0
}

/// A fast 64-bit checksum of `words` 8-byte words (four independent lanes):
/// catches damage in the state files' tables at memory speed.
inline std::uint64_t hash64(const std::uint64_t* p, std::uint64_t words) noexcept {
  std::uint64_t a = 0x9E3779B97F4A7C15ull, b = 0xC2B2AE3D27D4EB4Full, c = 0x165667B19E3779F9ull,
                d = 0x27D4EB2F165667C5ull;
  constexpr std::uint64_t k = 0x9FB21C651E98DF25ull;
  std::uint64_t i = 0;
  for (; i + 4 <= words; i += 4) {
    a = (a ^ p[i]) * k;
    b = (b ^ p[i + 1]) * k;
    c = (c ^ p[i + 2]) * k;
    d = (d ^ p[i + 3]) * k;
    a ^= a >> 29;
    b ^= b >> 29;
    c ^= c >> 29;
    d ^= d >> 29;
  }
  for (; i < words; ++i) a = detail::mix64(a ^ p[i]);
  return detail::mix64(a ^ detail::mix64(b ^ detail::mix64(c ^ detail::mix64(d ^ words))));
}

}  // namespace offheap::detail::format
