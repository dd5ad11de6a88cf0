// SPDX-License-Identifier: Apache-2.0
// Ordered keys: a byte string per value such that memcmp order of keys is
// the value order of value.hpp, for ordered secondary indexes.
//
// Properties (tests/document checks both on random values):
//   - memcmp(key(a), key(b)) has the sign of a <=> b, and key(a) == key(b)
//     exactly when a == b (-0.0 and 0.0 get one key, every NaN another).
//   - Keys are prefix-free: no key is a proper prefix of another, so
//     key(a) + x and key(b) + y compare as a and b whenever a != b. An
//     index appends a document id and still sorts by value first.
//
// Layout: a key byte first, the FieldType plus one (0x01 null ... 0x07
// list), so that 0x00 stays free for the end of a list; then
//   null     nothing
//   boolean  0x00 false, 0x01 true
//   integer  8 bytes big-endian of the int64 with its sign bit flipped
//            (INT64_MIN -> 00..00, -1 -> 7F FF.., 0 -> 80 00..)
//   real     8 bytes big-endian of the IEEE bits, transformed: a negative
//            number has all bits flipped, any other has its sign bit
//            flipped. -0.0 is first made 0.0 and every NaN the one quiet
//            NaN 0x7FF8000000000000, which lands above +inf.
//   string   the bytes with each 0x00 written 0x00 0xFF, then the
//   bytes    terminator 0x00 0x01. The terminator sorts below every byte
//            that can follow it in a longer string (0x00 0xFF, or a byte
//            >= 0x01), so a prefix sorts first; 0x00 0x01 never occurs in
//            the escaped bytes, so a key ends where its terminator is.
//   list     each element's key in turn, then 0x00: below every key byte,
//            so a prefix list sorts first.
//
// The same value gives the same key whether it comes from a Value or a
// ValueView. Keys are not meant to be decoded (they lose -0.0 and NaN
// payloads) and are not stable across format changes of this header any
// more than the encoding is: an index built with them is rebuilt when it
// changes.
//
// Thread safety: pure functions; a key is returned (or appended) as bytes
// the caller owns.
#pragma once

#include <offheap/detail/memory/big_endian.hpp>
#include <offheap/document/format.hpp>
#include <offheap/document/value.hpp>
#include <offheap/document/value_view.hpp>
#include <offheap/error.hpp>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace offheap {

namespace detail::doc {

inline constexpr char kKeyListEnd = 0x00;

inline std::uint64_t ordered_real_bits(double d) noexcept {
  if (d != d) return 0x7FF8'0000'0000'0000u ^ 0x8000'0000'0000'0000u;
  if (d == 0) d = 0.0;  // -0.0 too
  const auto bits = std::bit_cast<std::uint64_t>(d);
  return (bits >> 63) != 0 ? ~bits : bits ^ 0x8000'0000'0000'0000u;
}

inline void append_escaped(std::string_view s, std::string& out) {
  for (const char c : s) {
    out += c;
    if (c == '\0') out += '\xFF';
  }
  out += '\0';
  out += '\x01';
}

/// The key of anything shaped like a Value, inside `depth` lists.
template <class V>
void append_key(const V& v, std::size_t depth, std::string& out) {
  out += static_cast<char>(static_cast<unsigned char>(v.type()) + 1);
  switch (v.type()) {
    case FieldType::null: return;
    case FieldType::boolean: out += v.as_bool() ? '\x01' : '\x00'; return;
    case FieldType::integer:
      append_be64(out, static_cast<std::uint64_t>(v.as_int()) ^ 0x8000'0000'0000'0000u);
      return;
    case FieldType::real: append_be64(out, ordered_real_bits(v.as_double())); return;
    case FieldType::string: append_escaped(std::string_view(v.as_string()), out); return;
    case FieldType::bytes: append_escaped(std::string_view(v.as_bytes()), out); return;
    case FieldType::list:
      if (depth >= kMaxDepth) {
        throw Error(Errc::invalid_argument, "ordered key: lists nested deeper than " +
                                                std::to_string(kMaxDepth) +
                                                ", the document format's limit");
      }
      for (auto&& element : v.as_list()) append_key(element, depth + 1, out);
      out += kKeyListEnd;
      return;
  }
}

template <class V>
void append_key_or_nothing(const V& v, std::string& out) {
  const std::size_t mark = out.size();
  try {
    append_key(v, 0, out);
  } catch (...) {
    out.resize(mark);
    throw;
  }
}

}  // namespace detail::doc

/// Effects: appends v's ordered key (see the top of this file) to out.
/// Throws: Error(invalid_argument) for lists nested more than 32 deep
/// (only a Value can be; out is then left as it was); std::bad_alloc.
inline void append_ordered_key(const Value& v, std::string& out) {
  detail::doc::append_key_or_nothing(v, out);
}

/// Effects: appends v's ordered key, the same bytes as for v.to_value().
inline void append_ordered_key(const ValueView& v, std::string& out) {
  detail::doc::append_key_or_nothing(v, out);
}

/// Returns: v's ordered key. Throws: as append_ordered_key().
inline std::string ordered_key(const Value& v) {
  std::string out;
  append_ordered_key(v, out);
  return out;
}

/// Returns: v's ordered key.
inline std::string ordered_key(const ValueView& v) {
  std::string out;
  append_ordered_key(v, out);
  return out;
}

}  // namespace offheap
