// SPDX-License-Identifier: Apache-2.0
// Where a record lives: a chunk number and a byte offset packed into one
// 64-bit word, so that an index slot or a free-list link is a single
// naturally aligned word that readers load atomically.
//
//   63            48 47                                               0
//  +----------------+--------------------------------------------------+
//  |  chunk (16)    |  offset within the chunk (48), a multiple of 8   |
//  +----------------+--------------------------------------------------+
//
// 65,536 chunks of up to 256 TiB each. Offsets are multiples of 8 because
// every record starts on an 8-byte boundary; the all-ones word is therefore
// never a real location and serves as "none". This header is the only code
// that touches the bits: everything else goes through Location.
#pragma once

#include <cassert>
#include <cstdint>

namespace offheap::detail {

class Location {
 public:
  static constexpr unsigned kOffsetBits = 48;
  static constexpr std::uint64_t kOffsetMask = (std::uint64_t{1} << kOffsetBits) - 1;
  static constexpr std::uint32_t kMaxChunks = 1u << 16;
  /// The largest offset a record may start at.
  static constexpr std::uint64_t kMaxOffset = kOffsetMask & ~std::uint64_t{7};

  constexpr Location() noexcept = default;

  /// Requires: chunk < kMaxChunks, offset <= kMaxOffset and a multiple of 8.
  static constexpr Location make(std::uint32_t chunk, std::uint64_t offset) noexcept {
    assert(chunk < kMaxChunks);
    assert(offset <= kMaxOffset && offset % 8 == 0);
    return Location((std::uint64_t{chunk} << kOffsetBits) | offset);
  }
  static constexpr Location none() noexcept { return Location(~std::uint64_t{0}); }
  /// The low bits of a location, always 0, where a cache's index slot keeps
  /// the record's eviction-policy bits (none is all ones, and no location
  /// is none with bits: offset kMaxOffset in chunk 65535 holds no record).
  static constexpr std::uint64_t kSlotBits = 7;
  /// The location in an index slot's word: the policy bits dropped.
  static constexpr Location from_slot(std::uint64_t w) noexcept {
    return Location((w | kSlotBits) == ~std::uint64_t{0} ? w : w & ~kSlotBits);
  }
  static constexpr Location from_raw(std::uint64_t raw) noexcept { return Location(raw); }

  constexpr std::uint32_t chunk() const noexcept {
    return static_cast<std::uint32_t>(raw_ >> kOffsetBits);
  }
  /// Always a multiple of 8: the low three bits of a raw word (zero in any
  /// location this library makes) are ignored, so a word read from a
  /// damaged file can lead only to an aligned word.
  constexpr std::uint64_t offset() const noexcept { return raw_ & kMaxOffset; }
  constexpr std::uint64_t raw() const noexcept { return raw_; }
  constexpr bool is_none() const noexcept { return raw_ == ~std::uint64_t{0}; }

  friend constexpr bool operator==(Location, Location) noexcept = default;

 private:
  constexpr explicit Location(std::uint64_t raw) noexcept : raw_(raw) {}
  std::uint64_t raw_ = ~std::uint64_t{0};
};

}  // namespace offheap::detail
