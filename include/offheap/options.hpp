// SPDX-License-Identifier: Apache-2.0
// What a user configures when creating a store.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace offheap {

struct Options {
  /// Names the store in error messages and Stats. Empty: "anonymous store".
  std::string name;

  /// Pre-sizes the index for this many entries, so that a store filled up to
  /// it never rehashes (and new keys allocate nothing). 0: start small.
  std::uint64_t expected_entries = 0;

  /// Shards, each with its own index, journal, free lists, stamp counter and
  /// writer lock: writers to different shards never wait for each other.
  /// 0: four per hardware thread, rounded up to a power of two, at most 64.
  /// Range 0-1024.
  std::uint32_t shards = 0;

  /// Seed of the key hash. Unset: a random seed per store (recommended: keys
  /// chosen by an attacker cannot be aimed at one bucket).
  std::optional<std::uint64_t> hash_seed;

  /// The first journal chunk maps max(min_chunk_bytes, the first record);
  /// each later chunk twice the previous, up to max_chunk_bytes. Both are
  /// rounded up to the page size. A record (24-byte header + key + value,
  /// padded to 8) larger than max_chunk_bytes is refused with
  /// Errc::value_too_large. Ranges: 4 KiB <= min <= max <= 2^48.
  std::uint64_t min_chunk_bytes = std::uint64_t{64} << 10;
  std::uint64_t max_chunk_bytes = std::uint64_t{1} << 30;
};

}  // namespace offheap
