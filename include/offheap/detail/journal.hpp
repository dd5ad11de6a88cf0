// SPDX-License-Identifier: Apache-2.0
// The journal: a shard's records, in chunks of mapped memory, appended at a
// tail. Growth adds a chunk (each twice the last, from the size the first
// record needed up to a maximum) and never copies or moves a record, so a
// Location stays valid for as long as the store lives.
//
// The chunk table has two levels so that a small journal maps nothing for
// it: 256 blocks of 256 entries {base, size}; the first block (chunks 0-255,
// enough for any journal whose chunks reach the default 1 GiB) lives in the
// Journal object, the others are mapped pages, mapped when their first chunk
// is added and kept until the journal goes. Readers resolve a location through it without a
// lock:
//
//   blocks_[c / 256] --> entry c % 256:  +--------------------+--------------------+
//                                        | base address (u64) | size in bytes (u64)|
//                                        +--------------------+--------------------+
//                                        base 0: no chunk
//
// The writer publishes a block with release before its first entry, stores
// an entry's size, then publishes its base with release; a reader loads the
// block and the base with acquire, then the size, and bounds-checks every
// offset it follows against that size.
#pragma once

#include <offheap/detail/atomic_word.hpp>
#include <offheap/detail/location.hpp>
#include <offheap/detail/os.hpp>
#include <offheap/detail/record.hpp>
#include <offheap/error.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace offheap::detail {

struct JournalConfig {
  std::uint64_t min_chunk_bytes = 64 * 1024;
  std::uint64_t max_chunk_bytes = std::uint64_t{1} << 30;
};

class Journal {
 public:
  Journal(const JournalConfig& config, const std::string& name)
      : config_(config), name_(name) {}
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;
  ~Journal() {
    for (std::uint32_t c = 0; c < chunks_; ++c) unmap(chunk_base(c), chunk_size(c));
    for (auto& b : blocks_) unmap(b.load(std::memory_order_relaxed), kBlockBytes);
  }

  // ---- reader side (no lock) -----------------------------------------------

  /// The record at `loc` if at least `bytes` bytes from its start lie inside
  /// its chunk; nullptr otherwise. `avail` receives the bytes from the
  /// record's start to the end of its chunk.
  const std::byte* resolve(Location loc, std::uint64_t bytes,
                           std::uint64_t& avail) const noexcept {
    // The acquire loads pair with the release stores in add_chunk().
    const std::uint32_t c = loc.chunk();
    const std::uint64_t* entry;
    if (c < kBlockEntries) [[likely]] {
      entry = first_block_ + 2 * c;
    } else {
      const std::uint64_t* block = blocks_[c / kBlockEntries].load(std::memory_order_acquire);
      if (block == nullptr) return nullptr;
      entry = block + 2 * (c % kBlockEntries);
    }
    const std::uint64_t base = load_acquire(entry);
    if (base == 0) return nullptr;
    const std::uint64_t size = load_relaxed(entry + 1);
    const std::uint64_t off = loc.offset();
    if (off >= size || size - off < bytes) return nullptr;
    avail = size - off;
    return reinterpret_cast<const std::byte*>(base + off);
  }

  // ---- writer side (the shard's lock is held) -------------------------------

  /// The record at a location the writer itself produced.
  std::byte* at(Location loc) const noexcept { return chunk_base(loc.chunk()) + loc.offset(); }

  /// Reserves `bytes` (a multiple of 8, at least kMinRecord) at the tail and
  /// returns its location. Space the tail skips (the end of a chunk too short
  /// for the record, or a chunk kept by reset() that is too small) is passed
  /// to `on_leftover(Location, std::byte*, bytes)` when it can hold a free
  /// record. Throws Error(value_too_large) when no chunk can hold `bytes` and
  /// Error(out_of_space) when the OS refuses memory or chunk numbers run out;
  /// nothing changes then.
  template <class OnLeftover>
  Location append(std::uint64_t bytes, OnLeftover&& on_leftover) {
    if (tail_chunk_ < chunks_ && chunk_size(tail_chunk_) - tail_offset_ >= bytes) {
      const Location loc = Location::make(tail_chunk_, tail_offset_);
      tail_offset_ += bytes;
      used_bytes_ += bytes;
      return loc;
    }
    check_fits(bytes);
    const bool had_tail = tail_chunk_ < chunks_;
    const std::uint32_t first_kept = had_tail ? tail_chunk_ + 1 : 0;
    std::uint32_t target = first_kept;
    while (target < chunks_ && chunk_size(target) < bytes) ++target;
    if (target == chunks_) target = add_chunk(bytes);  // the only step that throws
    // From here on nothing throws.
    if (had_tail) give_back(tail_chunk_, tail_offset_, on_leftover);
    for (std::uint32_t c = first_kept; c < target; ++c) give_back(c, 0, on_leftover);
    tail_chunk_ = target;
    tail_offset_ = bytes;
    used_bytes_ += bytes;
    return Location::make(target, 0);
  }

  /// The record that follows the `bytes` starting at `loc` in the same chunk,
  /// or nullptr at the end of the chunk's records.
  std::byte* record_after(Location loc, std::uint64_t bytes) const noexcept {
    const std::uint32_t c = loc.chunk();
    const std::uint64_t off = loc.offset() + bytes;
    const std::uint64_t end = c == tail_chunk_ ? tail_offset_ : chunk_size(c);
    if (off + record::kMinRecord > end) return nullptr;
    return chunk_base(c) + off;
  }

  /// If the `bytes` at `loc` end at the tail, moves the tail back to `loc`
  /// and returns true.
  bool retract_tail(Location loc, std::uint64_t bytes) noexcept {
    if (loc.chunk() != tail_chunk_ || loc.offset() + bytes != tail_offset_) return false;
    tail_offset_ = loc.offset();
    used_bytes_ -= bytes;
    return true;
  }

  /// Throws unless a record of `bytes` fits the largest chunk.
  void check_fits(std::uint64_t bytes) const {
    if (bytes > config_.max_chunk_bytes) {
      throw Error(Errc::value_too_large,
                  name_ + ": a record of " + std::to_string(bytes) +
                      " bytes exceeds the largest chunk (" +
                      std::to_string(config_.max_chunk_bytes) +
                      " bytes, Options::max_chunk_bytes)");
    }
  }

  /// Empties the journal: every chunk's pages go back to the OS and read as
  /// zeros (a stamp no reader accepts); the chunks stay mapped for reuse.
  void reset() noexcept {
    for (std::uint32_t c = 0; c < chunks_; ++c) discard_pages(chunk_base(c), chunk_size(c));
    tail_chunk_ = chunks_;  // none: the next append starts at chunk 0
    tail_offset_ = 0;
    used_bytes_ = 0;
  }

  std::uint32_t chunks() const noexcept { return chunks_; }
  std::uint64_t chunk_size(std::uint32_t c) const noexcept { return entry(c)[1]; }
  /// Chunks plus the chunk table's blocks.
  std::uint64_t mapped_bytes() const noexcept { return mapped_bytes_; }
  /// Bytes from the start of every chunk up to its end or the tail: records
  /// and free records, live or not.
  std::uint64_t used_bytes() const noexcept { return used_bytes_; }
  const JournalConfig& config() const noexcept { return config_; }

 private:
  template <class OnLeftover>
  void give_back(std::uint32_t c, std::uint64_t from, OnLeftover& on_leftover) noexcept {
    const std::uint64_t rest = chunk_size(c) - from;
    if (rest >= record::kMinRecord) {
      const Location loc = Location::make(c, from);
      used_bytes_ += rest;
      on_leftover(loc, at(loc), rest);
    }
  }

  static constexpr std::uint32_t kBlockEntries = 256;
  static constexpr std::uint64_t kBlockBytes = kBlockEntries * 16;
  static constexpr std::uint32_t kBlocks = Location::kMaxChunks / kBlockEntries;

  std::uint64_t* entry(std::uint32_t c) const noexcept {
    if (c < kBlockEntries) return const_cast<std::uint64_t*>(first_block_) + 2 * c;
    return blocks_[c / kBlockEntries].load(std::memory_order_relaxed) + 2 * (c % kBlockEntries);
  }
  std::byte* chunk_base(std::uint32_t c) const noexcept {
    return reinterpret_cast<std::byte*>(entry(c)[0]);
  }

  std::uint32_t add_chunk(std::uint64_t need) {
    if (chunks_ == Location::kMaxChunks) {
      throw Error(Errc::out_of_space, name_ + ": all " + std::to_string(Location::kMaxChunks) +
                                          " chunk numbers of a shard are in use");
    }
    std::uint64_t size = chunks_ == 0 ? config_.min_chunk_bytes : chunk_size(chunks_ - 1) * 2;
    if (size < need) size = need;
    size = round_up(size, page_size());
    if (size > config_.max_chunk_bytes) size = config_.max_chunk_bytes;
    const std::uint32_t c = chunks_;
    std::atomic<std::uint64_t*>& block = blocks_[c / kBlockEntries];
    if (c >= kBlockEntries && block.load(std::memory_order_relaxed) == nullptr) {
      auto* b = reinterpret_cast<std::uint64_t*>(map_anonymous(kBlockBytes, name_, "the chunk table"));
      // Pairs with the acquire load of the block in resolve().
      block.store(b, std::memory_order_release);
      mapped_bytes_ += kBlockBytes;
    }
    std::byte* base = map_anonymous(size, name_, "a journal chunk");
    store_relaxed(entry(c) + 1, size);
    // Pairs with the acquire load of the base in resolve().
    store_release(entry(c), reinterpret_cast<std::uint64_t>(base));
    ++chunks_;
    mapped_bytes_ += size;
    return c;
  }

  JournalConfig config_;
  const std::string& name_;  // the store's name, which outlives the journal
  // Chunks 0-255 resolve through the first block, kept in this object so
  // that the common case is one load off the location's critical path; the
  // other blocks are mapped as needed.
  std::uint64_t first_block_[2 * kBlockEntries] = {};
  std::atomic<std::uint64_t*> blocks_[kBlocks] = {};  // blocks_[0] unused
  std::uint32_t chunks_ = 0;
  std::uint32_t tail_chunk_ = 0;  // == chunks_: no tail yet
  std::uint64_t tail_offset_ = 0;
  std::uint64_t mapped_bytes_ = 0;
  std::uint64_t used_bytes_ = 0;
};

}  // namespace offheap::detail
