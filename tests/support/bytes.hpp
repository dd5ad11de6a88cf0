// SPDX-License-Identifier: Apache-2.0
// Bytes as tests compare and print them: a value's object representation,
// and short printable or hex renderings of keys and values for messages.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <string>
#include <string_view>

namespace offheap_test {

/// The bytes of `v` (what put_value<T> stores for a T without padding).
template <class T>
std::string bytes_of(const T& v) {
  const auto a = std::bit_cast<std::array<char, sizeof(T)>>(v);
  return std::string(a.data(), a.size());
}

/// The first `n` bytes of `s` in hex, "..." if there are more.
inline std::string hex_prefix(std::string_view s, std::size_t n = 24) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < s.size() && i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  if (s.size() > n) out += "...";
  return out;
}

/// The first `n` bytes of `s`, '.' for each unprintable one, and the length
/// if there are more.
inline std::string printable(std::string_view s, std::size_t n = 40) {
  std::string out;
  for (std::size_t i = 0; i < s.size() && i < n; ++i) {
    out += s[i] >= 32 && s[i] < 127 ? s[i] : '.';
  }
  if (s.size() > n) out += "...(" + std::to_string(s.size()) + " bytes)";
  return out;
}

}  // namespace offheap_test
