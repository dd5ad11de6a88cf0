// SPDX-License-Identifier: Apache-2.0
// The frequency sketch of WTinyLfu: a count-min sketch of 4-bit counters,
// depth 4, in mapped memory, that forgets by halving.
//
// Layout: 64-byte blocks, one cache line each; a key hash picks one block
// and, in each of the block's four rows, one of 32 counters (so one access
// touches one line, not four):
//
//   block (64 bytes) = 8 words of 16 counters of 4 bits
//   word:  0     1  |  2     3  |  4     5  |  6     7
//   row:   0        |  1        |  2        |  3
//   counter c of a row: word 2*row + c/16, bits 4*(c%16) .. +3
//
//   mixed hash x = mix64(hash ^ kSalt):
//     block  = x & (blocks - 1)
//     row r  = counter (x >> (44 + 5r)) & 31      (bits 44-63)
//
// A row is blocks * 32 counters wide (a power of two). The sketch is sized
// for a number of records R: rows of 4 * R counters rounded up to a power
// of two (at least a page of blocks), 8-16 bytes per record (and a bit a
// block for the halving, below, in the last page). A count is the
// least of the key's four counters (too high only when all four collide).
// An increment raises only the counters that hold that least count
// (conservative update: a collision in one row no longer inflates the
// others) and stops at 15. Increments that raise nothing (a saturated key)
// are not counted: after 10 * R counted increments every counter is halved
// (a "reset") and the count starts over, so old popularity fades. Not
// counting saturated keys keeps the period from shrinking under a skewed
// workload, where the few hottest keys take most accesses.
//
// The halving is spread over the increments that follow, kHalveBlocks
// blocks each, in block order (a whole pass would hold the shard's lock
// for time in proportion to the sketch: 256 MiB for 25M records a shard).
// A bit per block (after the table, in the same mapping) says whether the
// block was halved in the pass under way: equal to the sketch's parity,
// which each pass flips. While a pass runs, frequency() reads a block not
// yet halved at half its counts, and an increment halves its block first
// if it waits (then the pass skips it): every read and every increment
// sees what an immediate halving would have left. A pass takes at most
// R / 8 increments, an 80th of the sample, once the sketch is past its
// floor of a page of blocks (the bits it skips were set by increments, one
// each); a sketch at its floor for a few records may fill a sample before
// its pass ends, and the next pass then finishes the last one first.
//
// The trade-off of the blocked layout: two keys in one block share all
// four rows' 32-counter ranges, a little more overestimation than four
// independent rows, for one cache miss an access instead of four.
//
// Single-threaded: the owner serializes every call.
#pragma once

#include <offheap/detail/index/hash.hpp>
#include <offheap/detail/memory/os.hpp>
#include <offheap/error.hpp>

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>

namespace offheap::detail {

class CountMin {
 public:
  static constexpr unsigned kMaxCount = 15;
  static constexpr unsigned kDepth = 4;
  static constexpr std::uint64_t kSamplePerRecord = 10;

  CountMin(const StoreName& store, const char* what) : store_(store), what_(what) {}
  CountMin(const CountMin&) = delete;
  CountMin& operator=(const CountMin&) = delete;
  ~CountMin() { release(); }

  /// A sketch for about `records` records, every count zero (what it
  /// counted is forgotten). Throws Error(out_of_space), nothing changed, if
  /// the memory cannot be mapped.
  void resize(std::uint64_t records) {
    if (records == 0) records = 1;
    if (records > kMaxRecords) records = kMaxRecords;
    const std::uint64_t counters = std::bit_ceil(records * 4) * kDepth;
    std::uint64_t blocks = counters / kCountersPerBlock;
    if (blocks < page_size() / kBlockBytes) blocks = page_size() / kBlockBytes;
    auto* t = reinterpret_cast<std::uint64_t*>(map_optional(bytes_for(blocks), store_, what_));
    release();
    table_ = t;
    blocks_ = blocks;
    halved_ = t + blocks * 8;  // all 0: the parity
    records_ = records;
    sample_ = records * kSamplePerRecord;
    additions_ = 0;
  }

  /// Counts one access of `hash`: raises those of its four counters that
  /// hold its least count (conservative update), unless that is 15. Halves
  /// every counter once the sample is full. Does nothing while no table is
  /// mapped.
  void increment(std::uint64_t hash) noexcept {
    if (table_ == nullptr) return;
    const std::uint64_t x = mix64(hash ^ kSalt);
    if (halving_) {
      halve_some();
      if (waits(x & (blocks_ - 1))) halve_block(x & (blocks_ - 1));  // (then the pass skips it)
    }
    std::uint64_t* b = block(x);
    unsigned v[kDepth];
    unsigned least = kMaxCount;
    for (unsigned r = 0; r < kDepth; ++r) {
      const unsigned c = counter(x, r);
      v[r] = static_cast<unsigned>((b[2 * r + c / 16] >> (4 * (c % 16))) & 15);
      if (v[r] < least) least = v[r];
    }
    if (least == kMaxCount) return;  // saturated: not counted in the sample
    for (unsigned r = 0; r < kDepth; ++r) {
      if (v[r] != least) continue;
      const unsigned c = counter(x, r);
      b[2 * r + c / 16] += std::uint64_t{1} << (4 * (c % 16));
    }
    if (++additions_ >= sample_) begin_halving();
  }

  /// The estimated count of `hash` (0-15); 0 while no table is mapped.
  unsigned frequency(std::uint64_t hash) const noexcept {
    if (table_ == nullptr) return 0;
    const std::uint64_t x = mix64(hash ^ kSalt);
    const std::uint64_t* b = block(x);
    unsigned least = kMaxCount;
    for (unsigned r = 0; r < kDepth; ++r) {
      const unsigned c = counter(x, r);
      const unsigned v = static_cast<unsigned>((b[2 * r + c / 16] >> (4 * (c % 16))) & 15);
      if (v < least) least = v;
    }
    return halving_ && waits(x & (blocks_ - 1)) ? least >> 1 : least;  // (what the pass will leave)
  }

  /// Every count zero, the sample restarted; the table stays mapped.
  void zero() noexcept {
    halving_ = false;
    parity_ = 0;  // (the marks are zeroed with the counts)
    if (table_ == nullptr) return;
    if (!discard_pages(table_, bytes_for(blocks_))) std::memset(table_, 0, bytes_for(blocks_));
    additions_ = 0;
  }
  /// Unmaps the table: counts nothing until the next resize().
  void release() noexcept {
    unmap_optional(table_, bytes_for(blocks_), store_);
    table_ = nullptr;
    halved_ = nullptr;
    halving_ = false;
    parity_ = 0;
    blocks_ = 0;
    records_ = 0;
    sample_ = 0;
    additions_ = 0;
  }

  bool mapped() const noexcept { return table_ != nullptr; }
  std::uint64_t sized_for() const noexcept { return records_; }  // R
  std::uint64_t width() const noexcept { return blocks_ * kCountersPerRow; }
  std::uint64_t sample_size() const noexcept { return sample_; }  // 10 * R
  std::uint64_t additions() const noexcept { return additions_; }  // counted since the last halving
  std::uint64_t resets() const noexcept { return resets_; }  // halvings ever (begun)
  bool halving() const noexcept { return halving_; }  // a halving's pass is under way
  /// Halves every block the pass under way has left (tests compare a
  /// sketch settled after each call with one left to its increments).
  void finish_halving() noexcept {
    while (halving_) halve_some();
  }
  std::uint64_t mapped_bytes() const noexcept { return bytes_for(blocks_); }

 private:
  static constexpr std::uint64_t kBlockBytes = 64;
  static constexpr std::uint64_t kCountersPerBlock = kBlockBytes * 2;
  static constexpr std::uint64_t kCountersPerRow = kCountersPerBlock / kDepth;  // 32 per block
  static constexpr std::uint64_t kMaxRecords = std::uint64_t{1} << 40;  // 8 TiB of sketch
  static constexpr std::uint64_t kSalt = 0x6A09E667F3BCC908ull;  // apart from the index's use of the hash
  static constexpr std::uint64_t kLowBits = 0x7777777777777777ull;

  std::uint64_t* block(std::uint64_t x) const noexcept { return table_ + (x & (blocks_ - 1)) * 8; }
  static unsigned counter(std::uint64_t x, unsigned row) noexcept {
    return static_cast<unsigned>((x >> (44 + 5 * row)) & 31);
  }
  /// Blocks halved per increment while a pass runs.
  static constexpr std::uint64_t kHalveBlocks = 2;

  /// The table and, after it, a bit a block, in whole pages.
  static std::uint64_t bytes_for(std::uint64_t blocks) noexcept {
    return blocks == 0 ? 0 : round_up(blocks * kBlockBytes + (blocks + 63) / 64 * 8, page_size());
  }
  /// Block i was not halved yet in the pass under way (its mark is not
  /// the parity). Only meaningful while halving_.
  bool waits(std::uint64_t i) const noexcept { return ((halved_[i / 64] >> (i % 64)) & 1) != parity_; }
  void halve_block(std::uint64_t i) noexcept {
    for (std::uint64_t w = i * 8; w < i * 8 + 8; ++w) table_[w] = (table_[w] >> 1) & kLowBits;
    halved_[i / 64] ^= std::uint64_t{1} << (i % 64);  // now the parity
  }
  /// Every counter halved: the pass starts (every block waits: the parity
  /// flips), carried on by the increments that follow.
  void begin_halving() noexcept {
    finish_halving();  // (a pass outlasting a sample: a sketch at its floor)
    parity_ ^= 1;
    halving_ = true;
    cursor_ = 0;
    additions_ = 0;
    ++resets_;
  }
  /// The pass's next kHalveBlocks blocks that wait.
  void halve_some() noexcept {
    for (std::uint64_t n = 0; n < kHalveBlocks && cursor_ < blocks_; ++cursor_) {
      if (waits(cursor_)) {
        halve_block(cursor_);
        ++n;
      }
    }
    if (cursor_ == blocks_) halving_ = false;
  }

  const StoreName& store_;
  const char* what_;
  std::uint64_t* table_ = nullptr;
  std::uint64_t blocks_ = 0;     // a power of two
  std::uint64_t records_ = 0;
  std::uint64_t sample_ = 0;
  std::uint64_t additions_ = 0;
  std::uint64_t resets_ = 0;
  std::uint64_t* halved_ = nullptr;  // after the table: a bit a block, the parity once halved
  bool halving_ = false;     // a pass is under way (blocks whose mark is not parity_ wait)
  std::uint64_t parity_ = 0;
  std::uint64_t cursor_ = 0; // the pass's next block
};

}  // namespace offheap::detail
