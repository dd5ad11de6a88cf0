// SPDX-License-Identifier: Apache-2.0
// S3-FIFO's ghost: the hashes of the keys most recently evicted from the
// small queue, at most `capacity` of them, forgotten oldest first; in mapped
// memory, never the heap.
//
// No queue is kept: each entry carries the sequence number of its insert,
// and an entry is in the set only while fewer than `capacity` inserts have
// followed it, so that the oldest entries drop out on their own, FIFO, and
// a change of capacity applies at once. Entries live in buckets of eight
// 8-byte words (one cache line) chosen by the hash's low bits:
//
//   word: | 24 bits of the hash (bits 40-63) | 40-bit insert sequence |
//
// 0 is an empty word (sequences start at 1). An insert takes a word in its
// bucket that is empty, out of the window or holds the same hash, else the
// oldest (a bucket that overflows forgets early: rare at the load kept,
// at most 6 entries per bucket on average). A match needs 24 equal bits
// among at most 8 words: a false "was in the ghost" about once in 2 million
// lookups, which only admits a key to the main queue early.
//
// Growth never stops the world: a larger table is mapped empty and takes
// every insert from then on, while lookups also search the old one until
// `capacity` inserts have passed, when everything in it has left the window
// and it is unmapped. (A second growth inside that time drops the old table
// early: it happens only while a cache first fills, when the ghost matters
// least.) Sequences are 40 bits: an entry left untouched for 2^40 inserts
// may come back as a false match, once, in a bucket search.
#pragma once

#include <offheap/detail/memory/os.hpp>

#include <bit>
#include <cstdint>
#include <string>

namespace offheap::detail {

class GhostSet {
 public:
  explicit GhostSet(const StoreName& store) : store_(store) {}
  GhostSet(const GhostSet&) = delete;
  GhostSet& operator=(const GhostSet&) = delete;
  ~GhostSet() {
    drop(cur_);
    drop(old_);
  }

  /// How many of the latest inserts the set remembers (S3-FIFO: the main
  /// queue's entry count). Maps a larger table if the current one would
  /// hold more than 6 per bucket; throws Error(out_of_space) if it cannot
  /// (the set unchanged).
  void set_capacity(std::uint64_t capacity) {
    if (capacity > cur_.buckets * kLoad) grow(capacity);
    capacity_ = capacity;
  }
  std::uint64_t capacity() const noexcept { return capacity_; }
  /// The largest capacity set_capacity() takes without mapping.
  std::uint64_t table_holds() const noexcept { return cur_.buckets * kLoad; }

  /// Remembers `hash` as the newest entry.
  void insert(std::uint64_t hash) noexcept {
    if (cur_.buckets == 0 || capacity_ == 0) return;
    if (old_.buckets != 0 && seq_ - old_since_ >= capacity_) drop(old_);
    const std::uint64_t seq = ++seq_;
    std::uint64_t* b = bucket(cur_, hash);
    const std::uint64_t tag = hash >> 40;
    int pick = -1;
    std::uint64_t oldest = ~std::uint64_t{0};
    for (int i = 0; i < 8; ++i) {
      const std::uint64_t w = b[i];
      if (w == 0 || !alive(w) || (w >> 40) == tag) {
        pick = i;
        break;
      }
      const std::uint64_t age = (seq_ - (w & kSeqMask)) & kSeqMask;
      if (oldest == ~std::uint64_t{0} || age > oldest) {
        oldest = age;
        pick = i;
      }
    }
    b[pick] = (tag << 40) | (seq & kSeqMask);
  }

  /// Whether `hash` is among the remembered entries; if so it is forgotten
  /// (a key found in the ghost goes to the main queue, once).
  bool take(std::uint64_t hash) noexcept {
    return take_from(cur_, hash) || (old_.buckets != 0 && take_from(old_, hash));
  }

  void clear() noexcept {
    drop(old_);
    if (cur_.buckets != 0) discard_pages(cur_.words, bytes_of(cur_.buckets));
    seq_ = 0;
  }

  /// Entries that can still match: min(inserts so far, capacity).
  std::uint64_t entries() const noexcept { return seq_ < capacity_ ? seq_ : capacity_; }
  std::uint64_t mapped_bytes() const noexcept {
    return bytes_of(cur_.buckets) + bytes_of(old_.buckets);
  }

 private:
  static constexpr std::uint64_t kLoad = 6;  // entries per bucket of 8, at most, on average
  static constexpr std::uint64_t kSeqMask = (std::uint64_t{1} << 40) - 1;

  struct Table {
    std::uint64_t* words = nullptr;
    std::uint64_t buckets = 0;  // a power of two
  };

  static std::uint64_t bytes_of(std::uint64_t buckets) noexcept {
    return buckets == 0 ? 0 : round_up(buckets * 64, page_size());
  }
  static std::uint64_t* bucket(const Table& t, std::uint64_t hash) noexcept {
    return t.words + 8 * (hash & (t.buckets - 1));
  }
  /// Fewer than capacity_ inserts since the word's.
  bool alive(std::uint64_t w) const noexcept {
    return w != 0 && ((seq_ - (w & kSeqMask)) & kSeqMask) < capacity_;
  }
  bool take_from(const Table& t, std::uint64_t hash) noexcept {
    if (t.buckets == 0) return false;
    std::uint64_t* b = bucket(t, hash);
    const std::uint64_t tag = hash >> 40;
    for (int i = 0; i < 8; ++i) {
      if ((b[i] >> 40) == tag && alive(b[i])) {
        b[i] = 0;
        return true;
      }
    }
    return false;
  }
  void grow(std::uint64_t capacity) {
    const std::uint64_t want = std::bit_ceil((capacity + kLoad - 1) / kLoad);
    Table t;
    t.words = reinterpret_cast<std::uint64_t*>(map_optional(bytes_of(want), store_, "the S3-FIFO ghost"));
    t.buckets = want;
    drop(old_);
    old_ = cur_;
    old_since_ = seq_;
    cur_ = t;
  }
  void drop(Table& t) noexcept {
    unmap_optional(t.words, bytes_of(t.buckets), store_);
    t = Table{};
  }

  const StoreName& store_;
  Table cur_;
  Table old_;                  // searched until capacity_ inserts have passed
  std::uint64_t old_since_ = 0;  // seq_ when old_ stopped taking inserts
  std::uint64_t seq_ = 0;
  std::uint64_t capacity_ = 0;
};

}  // namespace offheap::detail
