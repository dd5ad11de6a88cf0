// SPDX-License-Identifier: Apache-2.0
// The seeded 64-bit key hash.
//
// Built on the folded multiply: the 128-bit product of two 64-bit words,
// high half XOR low half. Each step folds two key words, each XORed with a
// secret derived from the store's seed, so an attacker who does not know
// the seed cannot aim keys at one bucket. Keys up to 16 bytes are read with
// at most two (overlapping) loads; longer keys fold 16 bytes a step, in two
// independent lanes above 32 bytes. The length enters the last fold, so keys
// that differ only by trailing zero bytes still hash apart.
//
// How the store uses the bits: the low bits pick the index group, bits 57-63
// are the tag byte kept beside each index slot, and bits 24-55 pick the shard.
#pragma once

#include <offheap/detail/memory/atomic_word.hpp>

#include <cstdint>
#include <string_view>

namespace offheap::detail {

__extension__ typedef unsigned __int128 uint128;  // __extension__: quiet under -Wpedantic

inline std::uint64_t fold_multiply(std::uint64_t a, std::uint64_t b) noexcept {
  const uint128 p = static_cast<uint128>(a) * b;
  return static_cast<std::uint64_t>(p) ^ static_cast<std::uint64_t>(p >> 64);
}

/// Spreads the bits of a 64-bit value (used to derive secrets from a seed).
constexpr std::uint64_t mix64(std::uint64_t x) noexcept {
  x ^= x >> 31;
  x *= 0x7FB5D329728EA185ull;
  x ^= x >> 27;
  x *= 0x81DADEF4BC2DD44Dull;
  x ^= x >> 33;
  return x;
}

}  // namespace offheap::detail

namespace offheap {

/// The default key hash: seeded, 64-bit, fast on short keys.
/// Thread safety: const calls may run concurrently.
class SeededHash {
 public:
  explicit SeededHash(std::uint64_t seed) noexcept
      : s0_(detail::mix64(seed ^ 0x243F6A8885A308D3ull)),
        s1_(detail::mix64(seed ^ 0x13198A2E03707344ull) | 1),
        s2_(detail::mix64(seed + 0xA4093822299F31D0ull) | 1) {}

  [[gnu::always_inline]] std::uint64_t operator()(std::string_view key) const noexcept {
    using detail::fold_multiply;
    using detail::load_u32;
    using detail::load_u64;
    const char* p = key.data();
    const std::size_t n = key.size();
    std::uint64_t a = 0, b = 0, s = s0_;
    if (n <= 16) {
      if (n >= 8) {
        a = load_u64(p);
        b = load_u64(p + n - 8);
      } else if (n >= 4) {
        a = load_u32(p);
        b = load_u32(p + n - 4);
      } else if (n > 0) {
        const auto byte = [p](std::size_t i) { return static_cast<std::uint64_t>(static_cast<unsigned char>(p[i])); };
        a = byte(0) << 16 | byte(n >> 1) << 8 | byte(n - 1);
      }
    } else {
      const char* q = p;
      std::size_t left = n;
      if (left > 32) {
        std::uint64_t t = s0_ ^ s2_;
        do {
          s = fold_multiply(load_u64(q) ^ s1_, load_u64(q + 8) ^ s);
          t = fold_multiply(load_u64(q + 16) ^ s2_, load_u64(q + 24) ^ t);
          q += 32;
          left -= 32;
        } while (left > 32);
        s ^= t;
      }
      if (left > 16) s = fold_multiply(load_u64(q) ^ s1_, load_u64(q + 8) ^ s);
      a = load_u64(p + n - 16);
      b = load_u64(p + n - 8);
    }
    const std::uint64_t h = fold_multiply(a ^ s1_, b ^ s);
    return fold_multiply(h ^ s2_, static_cast<std::uint64_t>(n) ^ 0x9E3779B97F4A7C15ull);
  }

 private:
  std::uint64_t s0_, s1_, s2_;
};

}  // namespace offheap
