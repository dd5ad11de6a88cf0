// SPDX-License-Identifier: Apache-2.0
// The chunk table: where each of a shard's journal chunks is mapped and how
// large it is, for the writer and for readers that resolve a location
// without a lock. Two levels, so that a small journal maps nothing for it:
// 256 blocks of 256 entries {base, size}; the first block (chunks 0-255,
// enough for any journal whose chunks reach the default 1 GiB) lives in the
// table object, the others are mapped pages, mapped when their first chunk
// is added and kept until the table goes.
//
//   blocks_[c / 256] --> entry c % 256:  +--------------------+--------------------+
//                                        | base address (u64) | size in bytes (u64)|
//                                        +--------------------+--------------------+
//                                        base 0: no chunk
//
// The writer (the shard's lock held) publishes a block with release before
// its first entry, stores an entry's size, then publishes its base with
// release; a reader loads the block and the base with acquire, then the
// size, and bounds-checks every offset it follows against that size.
#pragma once

#include <offheap/detail/index/location.hpp>
#include <offheap/detail/memory/atomic_word.hpp>
#include <offheap/detail/memory/memory_budget.hpp>
#include <offheap/detail/memory/os.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace offheap::detail {

class ChunkTable {
 public:
  static constexpr std::uint32_t kBlockEntries = 256;
  static constexpr std::uint64_t kBlockBytes = kBlockEntries * 16;
  static constexpr std::uint32_t kBlocks = Location::kMaxChunks / kBlockEntries;

  explicit ChunkTable(const StoreName& name) noexcept : name_(name) {}
  ChunkTable(const ChunkTable&) = delete;
  ChunkTable& operator=(const ChunkTable&) = delete;
  /// Unmaps the blocks (the chunks are their owner's).
  ~ChunkTable() {
    for (auto& b : blocks_) unmap(b.load(std::memory_order_relaxed), kBlockBytes, name_);
  }

  /// Readers (no lock): the record at `loc` if at least `bytes` bytes from
  /// its start lie inside its chunk; nullptr otherwise. `avail` receives
  /// the bytes from the record's start to the end of its chunk.
  [[gnu::always_inline]] const std::byte* resolve(Location loc, std::uint64_t bytes,
                                                  std::uint64_t& avail) const noexcept {
    // The acquire loads pair with the release stores in reserve_block()
    // and publish().
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

  // ---- the writer's (the shard's lock held) ----------------------------------

  /// Chunks published.
  std::uint32_t count() const noexcept { return count_; }
  /// Chunk c's first byte and size (c < count()).
  std::byte* base(std::uint32_t c) const noexcept { return reinterpret_cast<std::byte*>(entry(c)[0]); }
  std::uint64_t size(std::uint32_t c) const noexcept { return entry(c)[1]; }
  /// Whether publishing the next chunk maps a block first (reserve_block()).
  bool needs_block() const noexcept {
    return count_ >= kBlockEntries && blocks_[count_ / kBlockEntries].load(std::memory_order_relaxed) == nullptr;
  }
  /// Maps the block the next chunk's entry lies in, if not mapped yet.
  /// Throws (LimitReached, Error(out_of_space)) before anything changes.
  void reserve_block() {
    if (!needs_block()) return;
    auto* b = reinterpret_cast<std::uint64_t*>(map_anonymous(kBlockBytes, name_, "the chunk table"));
    // Pairs with the acquire load of the block in resolve().
    blocks_[count_ / kBlockEntries].store(b, std::memory_order_release);
    block_bytes_ += kBlockBytes;
  }
  /// Makes chunk count() resolve to [base, base + size). Requires:
  /// reserve_block() for it.
  void publish(std::byte* base, std::uint64_t size) noexcept {
    std::uint64_t* e = entry(count_);
    store_relaxed(e + 1, size);
    // Pairs with the acquire load of the base in resolve().
    store_release(e, reinterpret_cast<std::uint64_t>(base));
    ++count_;
  }
  /// The blocks' bytes (the first lives in this object).
  std::uint64_t mapped_bytes() const noexcept { return block_bytes_; }

 private:
  std::uint64_t* entry(std::uint32_t c) const noexcept {
    if (c < kBlockEntries) return const_cast<std::uint64_t*>(first_block_) + 2 * c;
    return blocks_[c / kBlockEntries].load(std::memory_order_relaxed) + 2 * (c % kBlockEntries);
  }

  const StoreName& name_;
  // Chunks 0-255 resolve through the first block, kept in this object so
  // that the common case is one load off the location's critical path.
  std::uint64_t first_block_[2 * kBlockEntries] = {};
  std::atomic<std::uint64_t*> blocks_[kBlocks] = {};  // blocks_[0] unused
  std::uint32_t count_ = 0;
  std::uint64_t block_bytes_ = 0;
};

}  // namespace offheap::detail
