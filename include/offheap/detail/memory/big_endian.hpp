// SPDX-License-Identifier: Apache-2.0
// Big-endian 64-bit words: the byte order in which keys compare as their
// numbers do (memcmp order = numeric order), used by the document,
// ordered-index and graph layers for ids and order-preserving keys.
#pragma once

#include <cstdint>
#include <string>

namespace offheap::detail {

inline void put_be64(char* p, std::uint64_t v) noexcept {
  for (int i = 7; i >= 0; --i, v >>= 8) p[i] = static_cast<char>(v & 0xFF);
}
inline std::uint64_t read_be64(const char* p) noexcept {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = v << 8 | static_cast<unsigned char>(p[i]);
  return v;
}
inline void append_be64(std::string& out, std::uint64_t v) {
  char b[8];
  put_be64(b, v);
  out.append(b, 8);
}

}  // namespace offheap::detail
