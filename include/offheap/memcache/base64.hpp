// SPDX-License-Identifier: Apache-2.0
// Base64 as the meta protocol's keys use it (the b flag), read and written
// as memcached 1.6.18 does, so that a key that one server accepts the
// other accepts too, with the same bytes:
//   decode  characters outside the alphabet (A-Z a-z 0-9 + / and '=') are
//           skipped; the others must come in groups of four, at least one;
//           a '=' counts as a zero digit and as padding: a group with one
//           '=' gives two bytes, with two one byte, with more the input is
//           refused, and decoding stops after the first padded group
//           (what follows it is not read); nothing decoded is a refusal.
//   encode  standard, padded with '='.
// No allocation: the caller's buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace offheap::memcache {

namespace base64_detail {

inline constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
/// A character's digit; 64 for '=' (a zero that pads); -1 outside.
constexpr int digit(unsigned char c) noexcept {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  if (c == '=') return 64;
  return -1;
}

}  // namespace base64_detail

/// The characters base64_encode() appends for n bytes.
constexpr std::size_t encoded_size(std::size_t n) noexcept { return (n + 2) / 3 * 4; }

/// Decodes `in` into `out` (room for in.size() / 4 * 3 bytes); returns the
/// decoded length, or nullopt for input refused by the rules above.
inline std::optional<std::size_t> base64_decode(std::string_view in, char* out, std::size_t room) noexcept {
  using base64_detail::digit;
  std::size_t valid = 0;
  for (const char c : in) valid += digit(static_cast<unsigned char>(c)) >= 0 ? 1 : 0;
  if (valid == 0 || valid % 4 != 0 || valid / 4 * 3 > room) return std::nullopt;
  std::size_t n = 0, in_group = 0, pads = 0;
  std::uint32_t group = 0;
  for (const char c : in) {
    const int d = digit(static_cast<unsigned char>(c));
    if (d < 0) continue;
    if (d == 64) ++pads;
    group = (group << 6) | static_cast<std::uint32_t>(d == 64 ? 0 : d);
    if (++in_group < 4) continue;
    out[n++] = static_cast<char>(group >> 16);
    out[n++] = static_cast<char>(group >> 8);
    out[n++] = static_cast<char>(group);
    in_group = 0;
    group = 0;
    if (pads != 0) {
      if (pads > 2) return std::nullopt;
      n -= pads;
      break;
    }
  }
  if (n == 0) return std::nullopt;
  return n;
}

/// Appends `in` in base64 to `out` (a std::string or alike).
template <class Out>
void base64_encode(std::string_view in, Out& out) {
  using base64_detail::kAlphabet;
  std::size_t i = 0;
  const auto byte = [&in](std::size_t at) { return static_cast<std::uint32_t>(static_cast<unsigned char>(in[at])); };
  for (; i + 3 <= in.size(); i += 3) {
    const std::uint32_t g = byte(i) << 16 | byte(i + 1) << 8 | byte(i + 2);
    out += kAlphabet[g >> 18];
    out += kAlphabet[(g >> 12) & 63];
    out += kAlphabet[(g >> 6) & 63];
    out += kAlphabet[g & 63];
  }
  if (i == in.size()) return;
  const bool two = in.size() - i == 2;
  const std::uint32_t g = byte(i) << 16 | (two ? byte(i + 1) << 8 : 0);
  out += kAlphabet[g >> 18];
  out += kAlphabet[(g >> 12) & 63];
  out += two ? kAlphabet[(g >> 6) & 63] : '=';
  out += '=';
}

}  // namespace offheap::memcache
