// SPDX-License-Identifier: Apache-2.0
// CRC32C (Castagnoli, reflected polynomial 0x82F63B78): the per-record
// checksum of file-backed stores, and of the files' own headers.
//
// Hardware where the CPU has it (the SSE4.2 crc32 instruction on x86-64,
// the CRC32 extension on AArch64), 8 bytes a step; elsewhere slicing-by-8
// over tables built at compile time. The x86-64 choice is made once, at run
// time, so one binary serves both kinds of CPU.
//
// crc32c(data) is the standard checksum (initial value and final XOR all
// ones): crc32c("123456789") == 0xE3069283. crc32c_extend continues one.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#elif defined(__aarch64__) && defined(__ARM_FEATURE_CRC32)
#include <arm_acle.h>
#endif

namespace offheap::detail {

namespace crc32c_impl {

inline constexpr std::uint32_t kPolynomial = 0x82F63B78u;

constexpr std::array<std::array<std::uint32_t, 256>, 8> make_tables() {
  std::array<std::array<std::uint32_t, 256>, 8> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ ((c & 1u) ? kPolynomial : 0u);
    t[0][i] = c;
  }
  for (std::uint32_t i = 0; i < 256; ++i) {
    for (std::size_t s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFFu];
  }
  return t;
}

inline constexpr auto kTables = make_tables();

/// Slicing-by-8 on a raw (not yet inverted) CRC.
inline std::uint32_t software(std::uint32_t crc, const unsigned char* p, std::size_t n) noexcept {
  for (; n >= 8; n -= 8, p += 8) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    w ^= crc;
    crc = kTables[7][w & 0xFF] ^ kTables[6][(w >> 8) & 0xFF] ^ kTables[5][(w >> 16) & 0xFF] ^
          kTables[4][(w >> 24) & 0xFF] ^ kTables[3][(w >> 32) & 0xFF] ^
          kTables[2][(w >> 40) & 0xFF] ^ kTables[1][(w >> 48) & 0xFF] ^ kTables[0][w >> 56];
  }
  for (; n > 0; --n, ++p) crc = (crc >> 8) ^ kTables[0][(crc ^ *p) & 0xFFu];
  return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) inline std::uint32_t hardware(std::uint32_t crc,
                                                                const unsigned char* p,
                                                                std::size_t n) noexcept {
  std::uint64_t c = crc;
  for (; n >= 8; n -= 8, p += 8) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    c = _mm_crc32_u64(c, w);
  }
  auto c32 = static_cast<std::uint32_t>(c);
  for (; n > 0; --n, ++p) c32 = _mm_crc32_u8(c32, *p);
  return c32;
}
inline bool have_hardware() noexcept {
  static const bool have = __builtin_cpu_supports("sse4.2");
  return have;
}
#elif defined(__aarch64__) && defined(__ARM_FEATURE_CRC32)
inline std::uint32_t hardware(std::uint32_t crc, const unsigned char* p, std::size_t n) noexcept {
  for (; n >= 8; n -= 8, p += 8) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    crc = __crc32cd(crc, w);
  }
  for (; n > 0; --n, ++p) crc = __crc32cb(crc, *p);
  return crc;
}
inline bool have_hardware() noexcept { return true; }
#else
inline std::uint32_t hardware(std::uint32_t crc, const unsigned char* p, std::size_t n) noexcept {
  return software(crc, p, n);
}
inline bool have_hardware() noexcept { return false; }
#endif

}  // namespace crc32c_impl

/// Whether this process computes CRC32C with a CPU instruction.
inline bool crc32c_in_hardware() noexcept { return crc32c_impl::have_hardware(); }

/// Continues the checksum `crc` (a value crc32c returned) over n more bytes.
inline std::uint32_t crc32c_extend(std::uint32_t crc, const void* data, std::size_t n) noexcept {
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  crc = crc32c_impl::have_hardware() ? crc32c_impl::hardware(crc, p, n)
                                     : crc32c_impl::software(crc, p, n);
  return ~crc;
}

/// The CRC32C of n bytes.
inline std::uint32_t crc32c(const void* data, std::size_t n) noexcept {
  return crc32c_extend(0, data, n);
}

/// Test-only: the table-driven path, whatever the CPU (tests compare the two).
inline std::uint32_t crc32c_software(const void* data, std::size_t n) noexcept {
  return ~crc32c_impl::software(~0u, static_cast<const unsigned char*>(data), n);
}

}  // namespace offheap::detail
