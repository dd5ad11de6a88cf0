// SPDX-License-Identifier: Apache-2.0
// The benchmark's inputs, all generated before any timing starts: key sets
// (fixed-width random, decimal text, UUID text), values, and the random
// streams of key indices (and get/put decisions) a timed loop walks.
//
// Keys of one set live in one flat buffer, so a timed loop pays one cache
// miss for the key bytes at most, the same for every subject. Everything is
// seeded with fixed numbers: two runs see the same inputs.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace offheap_bench {

/// N keys in one buffer: fixed width, or variable width with offsets.
class KeySet {
 public:
  std::uint64_t size() const noexcept { return count_; }

  std::string_view key(std::uint64_t i) const noexcept {
    if (width_ != 0) return {bytes_.data() + i * width_, width_};
    return {bytes_.data() + offsets_[i], static_cast<std::size_t>(offsets_[i + 1] - offsets_[i])};
  }

  /// Total key bytes, for reporting.
  std::uint64_t key_bytes() const noexcept { return bytes_.size(); }

  /// `n` distinct keys of `width` characters from [0-9a-z], random.
  static KeySet random_fixed(std::uint64_t n, std::size_t width, std::uint64_t seed) {
    static constexpr char kAlphabet[] = "0123456789abcdefghijklmnopqrstuvwxyz";
    KeySet s;
    s.count_ = n;
    s.width_ = width;
    s.bytes_.resize(n * width);
    std::mt19937_64 rng(seed);
    for (std::uint64_t i = 0; i < n; ++i) {
      char* k = s.bytes_.data() + i * width;
      // The odd positions spell i in base 36 (so keys are distinct), the
      // even ones are random characters.
      std::uint64_t v = i;
      for (std::size_t c = 0; c < width; ++c) {
        if (c % 2 == 1 && v != 0) {
          k[c] = kAlphabet[v % 36];
          v /= 36;
        } else if (c % 2 == 1) {
          k[c] = '0';
        } else {
          k[c] = kAlphabet[rng() % 36];
        }
      }
    }
    return s;
  }

  /// The decimal numbers 0 .. n-1 as text ("0", "1", ..., "1999999").
  static KeySet decimal(std::uint64_t n) {
    KeySet s;
    s.count_ = n;
    s.offsets_.resize(n + 1);
    s.bytes_.reserve(n * 8);
    char buf[24];
    for (std::uint64_t i = 0; i < n; ++i) {
      s.offsets_[i] = s.bytes_.size();
      const auto r = std::to_chars(buf, buf + sizeof buf, i);
      s.bytes_.append(buf, r.ptr);
    }
    s.offsets_[n] = s.bytes_.size();
    return s;
  }

  /// n random version-4 UUIDs, 36 characters each: 8-4-4-4-12 lowercase hex.
  static KeySet uuid(std::uint64_t n, std::uint64_t seed) {
    static constexpr char kHex[] = "0123456789abcdef";
    KeySet s;
    s.count_ = n;
    s.width_ = 36;
    s.bytes_.resize(n * 36);
    std::mt19937_64 rng(seed);
    for (std::uint64_t i = 0; i < n; ++i) {
      std::uint64_t hi = rng(), lo = rng();
      hi = (hi & ~0xF000ull) | 0x4000ull;                       // version 4
      lo = (lo & ~(0xC0ull << 56)) | (0x80ull << 56);           // variant 10
      char* k = s.bytes_.data() + i * 36;
      int nibble = 0;
      for (int c = 0; c < 36; ++c) {
        if (c == 8 || c == 13 || c == 18 || c == 23) {
          k[c] = '-';
          continue;
        }
        const std::uint64_t word = nibble < 16 ? hi : lo;
        const int shift = 60 - 4 * (nibble % 16);
        k[c] = kHex[(word >> shift) & 0xF];
        ++nibble;
      }
    }
    return s;
  }

 private:
  std::uint64_t count_ = 0;
  std::size_t width_ = 0;
  std::string bytes_;
  std::vector<std::uint64_t> offsets_;  // empty for fixed width
};

/// A stream of key indices in [0, n), uniform random, of 2^k entries so a
/// loop wraps with a mask. With put_per_mille > 0, bit 31 of an entry marks
/// a put (that many in a thousand, at random), else a get.
class IndexStream {
 public:
  static constexpr std::uint32_t kPutBit = 1u << 31;

  IndexStream(std::uint64_t n, unsigned log2_length, unsigned put_per_mille, std::uint64_t seed)
      : entries_(std::size_t{1} << log2_length), mask_(entries_.size() - 1) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<std::uint32_t> pick(0, static_cast<std::uint32_t>(n - 1));
    std::uniform_int_distribution<unsigned> mille(0, 999);
    for (auto& e : entries_) {
      e = pick(rng);
      if (put_per_mille != 0 && mille(rng) < put_per_mille) e |= kPutBit;
    }
  }

  std::uint32_t at(std::uint64_t pos) const noexcept { return entries_[pos & mask_]; }

 private:
  std::vector<std::uint32_t> entries_;
  std::uint64_t mask_;
};

/// 0 .. n-1 in random order (each index once).
inline std::vector<std::uint32_t> random_permutation(std::uint64_t n, std::uint64_t seed) {
  std::vector<std::uint32_t> p(n);
  std::iota(p.begin(), p.end(), 0u);
  std::mt19937_64 rng(seed);
  std::shuffle(p.begin(), p.end(), rng);
  return p;
}

/// The 8-byte value the scale run stores for key i (i, little-endian).
inline std::string_view scale_value(std::uint64_t i, char (&buf)[8]) noexcept {
  std::memcpy(buf, &i, 8);
  return {buf, 8};
}

/// `count` distinct values of `width` bytes (printable), to rotate through.
inline std::vector<std::string> value_variants(std::size_t count, std::size_t width) {
  std::vector<std::string> v(count);
  for (std::size_t i = 0; i < count; ++i) {
    v[i].resize(width);
    for (std::size_t c = 0; c < width; ++c) {
      v[i][c] = static_cast<char>('A' + (i * 7 + c) % 26);
    }
  }
  return v;
}

}  // namespace offheap_bench
