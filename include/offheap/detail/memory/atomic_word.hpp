// SPDX-License-Identifier: Apache-2.0
// Word-sized atomic access to mapped memory through std::atomic_ref.
//
// Every word that a reader may load while a writer stores to it (record
// stamps, headers and payloads, index control words and locations, chunk
// table entries) is touched only through these helpers, so that, but for
// the one exception below, the program has no data race in the C++ sense
// and ThreadSanitizer sees what we mean.
// On x86-64 a relaxed or acquire load is a plain mov and a relaxed or release
// store is a plain mov: the helpers cost nothing there but compiler ordering.
// One exception, on the reader's side: the bytes of a value (or a key) that
// a read copies out (record::copy_out) or hands to a callback in place are
// read with plain loads, 16 bytes at a time, and count only once the stamp
// validated them; ThreadSanitizer builds ignore those loads
// (TsanIgnoreAccesses, memory/os.hpp).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace offheap::detail {

static_assert(std::atomic_ref<std::uint64_t>::is_always_lock_free,
              "offheap needs lock-free 64-bit atomics");
static_assert(std::atomic_ref<std::uint64_t>::required_alignment == 8,
              "offheap lays out 64-bit atomic words on 8-byte boundaries");

inline std::uint64_t load_relaxed(const std::uint64_t* p) noexcept {
  return std::atomic_ref<std::uint64_t>(*const_cast<std::uint64_t*>(p))
      .load(std::memory_order_relaxed);
}
inline std::uint64_t load_acquire(const std::uint64_t* p) noexcept {
  return std::atomic_ref<std::uint64_t>(*const_cast<std::uint64_t*>(p))
      .load(std::memory_order_acquire);
}
inline void store_relaxed(std::uint64_t* p, std::uint64_t v) noexcept {
  std::atomic_ref<std::uint64_t>(*p).store(v, std::memory_order_relaxed);
}
inline void store_release(std::uint64_t* p, std::uint64_t v) noexcept {
  std::atomic_ref<std::uint64_t>(*p).store(v, std::memory_order_release);
}

/// The 8-byte word at `p`, which must be 8-byte aligned.
inline std::uint64_t* word_at(std::byte* p) noexcept {
  return reinterpret_cast<std::uint64_t*>(p);
}
inline const std::uint64_t* word_at(const std::byte* p) noexcept {
  return reinterpret_cast<const std::uint64_t*>(p);
}

/// Unaligned loads from caller-owned buffers (never shared memory).
inline std::uint64_t load_u64(const char* p) noexcept {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline std::uint32_t load_u32(const char* p) noexcept {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

/// The n bytes at p (0 <= n <= 8) as the low bytes of a word, the rest zero,
/// without reading outside [p, p + n) and without a call to memcpy.
inline std::uint64_t load_partial(const char* p, std::size_t n) noexcept {
  if (n >= 4) {
    // Two overlapping 4-byte loads; overlapping bytes are equal, so OR is exact.
    return std::uint64_t{load_u32(p)} | std::uint64_t{load_u32(p + n - 4)} << (8 * (n - 4));
  }
  if (n == 0) return 0;
  const auto byte = [p](std::size_t i) {
    return std::uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
  };
  return byte(0) | byte(n / 2) | byte(n - 1);
}

/// Stores the low n bytes of w (0 <= n <= 8) at p.
inline void store_partial(char* p, std::uint64_t w, std::size_t n) noexcept {
  if (n >= 4) {
    const auto lo = static_cast<std::uint32_t>(w);
    const auto hi = static_cast<std::uint32_t>(w >> (8 * (n - 4)));
    std::memcpy(p, &lo, 4);
    std::memcpy(p + n - 4, &hi, 4);
    return;
  }
  for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<char>(w >> (8 * i));
}

/// Byte equality of caller-owned or writer-owned memory, inline for short runs.
inline bool equal_bytes(const char* a, const char* b, std::size_t n) noexcept {
  if (n >= 8 && n <= 16) {
    // Two words that overlap when n < 16: no loop, no partial loads.
    return ((load_u64(a) ^ load_u64(b)) | (load_u64(a + n - 8) ^ load_u64(b + n - 8))) == 0;
  }
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    if (load_u64(a + i) != load_u64(b + i)) return false;
  }
  return load_partial(a + i, n - i) == load_partial(b + i, n - i);
}

}  // namespace offheap::detail
