// SPDX-License-Identifier: Apache-2.0
// Numbers in memcached's text protocol, read as memcached 1.6 reads them.
//
// memcached parses its command arguments with the C library's strtol and
// strtoul family (util.c: safe_strtol, safe_strtoul, safe_strtoull), and
// a server that means to answer byte for byte as memcached does must
// accept and refuse the same strings and arrive at the same values. The
// rules those functions make, which the readers below follow (they never
// allocate and read nothing past the token):
//   - leading white space (space, \t, \n, \v, \f, \r) is skipped, then an
//     optional '+' or '-', then decimal digits: at least one, else refused;
//   - the digits end the number at the token's end or at a white-space
//     character, after which anything is ignored ("5\tx" reads 5); any
//     other character after them refuses the token ("5x");
//   - a value past the 64-bit range of the function is refused (ERANGE);
//   - unsigned readers take a '-' as C does (the magnitude negated modulo
//     2^64); memcached then refuses a result of 2^63 or more if the token
//     holds a '-' anywhere ("-0" reads 0, "-1" is refused, and so is
//     "18446744073709551615\t-");
//   - 32-bit results keep the low 32 bits of the 64-bit value, as the C
//     assignment does: flags "4294967296" read 0, exptime "4294967295" reads
//     -1, and a length of "4294967297" reads 1.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace offheap::memcache {

namespace numbers_detail {

constexpr bool is_c_space(char c) noexcept {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/// The sign, the magnitude (saturated: `overflow` past 2^64 - 1) and
/// whether the token is a well-formed number by the rules above.
struct Scan {
  bool ok = false;
  bool negative = false;
  bool overflow = false;
  std::uint64_t magnitude = 0;
};

constexpr Scan scan(std::string_view s) noexcept {
  Scan r;
  std::size_t i = 0;
  while (i < s.size() && is_c_space(s[i])) ++i;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) r.negative = s[i++] == '-';
  const std::size_t digits = i;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
    const auto d = static_cast<std::uint64_t>(s[i] - '0');
    if (r.magnitude > (~std::uint64_t{0} - d) / 10) r.overflow = true;
    if (!r.overflow) r.magnitude = r.magnitude * 10 + d;
  }
  if (i == digits) return r;                  // no digit
  if (i < s.size() && !is_c_space(s[i])) return r;  // "5x"
  r.ok = true;
  return r;
}

}  // namespace numbers_detail

/// strtoull's reading (safe_strtoull): cas uniques and incr/decr deltas.
constexpr std::optional<std::uint64_t> read_u64(std::string_view s) noexcept {
  const numbers_detail::Scan r = numbers_detail::scan(s);
  if (!r.ok || r.overflow) return std::nullopt;
  const std::uint64_t v = r.negative ? std::uint64_t{0} - r.magnitude : r.magnitude;
  // memcached refuses a value of 2^63 or more if a '-' is anywhere in the
  // token, also in the ignored part after a white space.
  if (static_cast<std::int64_t>(v) < 0 && s.find('-') != std::string_view::npos) return std::nullopt;
  return v;
}

/// strtoul's reading into 32 bits (safe_strtoul): client flags, verbosity.
constexpr std::optional<std::uint32_t> read_u32(std::string_view s) noexcept {
  const std::optional<std::uint64_t> v = read_u64(s);
  if (!v) return std::nullopt;
  return static_cast<std::uint32_t>(*v);
}

/// strtol's reading into 32 bits (safe_strtol): exptimes, data lengths.
constexpr std::optional<std::int32_t> read_i32(std::string_view s) noexcept {
  const numbers_detail::Scan r = numbers_detail::scan(s);
  if (!r.ok || r.overflow) return std::nullopt;
  constexpr std::uint64_t kMaxPositive = std::uint64_t{1} << 63;  // magnitudes of long's range: < this, or = for -2^63
  if (r.magnitude > kMaxPositive || (!r.negative && r.magnitude == kMaxPositive)) return std::nullopt;
  const std::uint64_t v = r.negative ? std::uint64_t{0} - r.magnitude : r.magnitude;
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(v));  // the low 32 bits, as C's assignment
}

}  // namespace offheap::memcache
