// SPDX-License-Identifier: Apache-2.0
// The text form of values and documents: JSON-like, for people (logs,
// test failures, debugging), not a format to parse back.
//
//   {"name": "Alice", "age": 42, "ratio": 0.5, "ok": true, "raw": b"00ff",
//    "tags": ["a", 1], "x": null}
//
// Fields in the document's order, ", " between items, ": " after names.
//   null, true, false   as written
//   integer             decimal: 42, -7
//   real                the shortest decimal that reads back as the same
//                       double, always with a '.' or an exponent so that it
//                       cannot be mistaken for an integer: 0.5, 1.0, -0.0,
//                       1e+300; and nan, inf, -inf (every NaN prints "nan")
//   string              in double quotes. \" \\ \n \r \t \b \f escaped as in
//                       JSON, other control bytes (and 0x7F) as \u00XX;
//                       well-formed UTF-8 passes through, and any byte that
//                       is not part of well-formed UTF-8 prints as \xNN (so
//                       the text of any string is valid UTF-8)
//   bytes               b"..." with two lowercase hex digits per byte
//   list                [a, b, c]
// Field names are quoted like strings.
//
// Thread safety and memory: to_text() returns a new std::string; it reads
// the value or view it is given and keeps nothing.
#pragma once

#include <offheap/document/value.hpp>

#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>

namespace offheap::detail::doc {

inline constexpr char kHexDigits[] = "0123456789abcdef";

inline void append_hex_byte(unsigned char b, std::string& out) {
  out += kHexDigits[b >> 4];
  out += kHexDigits[b & 0x0F];
}

/// How many bytes of well-formed UTF-8 start at s[i] (a multi-byte
/// sequence: 2 to 4), or 0 if s[i] does not start one. Overlong forms,
/// surrogates and code points above U+10FFFF are not well-formed.
inline std::size_t utf8_sequence(std::string_view s, std::size_t i) noexcept {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char lead = byte(i);
  std::size_t n = 0;
  unsigned char lo = 0x80;
  unsigned char hi = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    n = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    n = 3;
    if (lead == 0xE0) lo = 0xA0;  // overlong below U+0800
    if (lead == 0xED) hi = 0x9F;  // UTF-16 surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    n = 4;
    if (lead == 0xF0) lo = 0x90;  // overlong below U+10000
    if (lead == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (s.size() - i < n) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return n;
}

/// s in double quotes, escaped as the file comment says.
inline void append_quoted(std::string_view s, std::string& out) {
  out += '"';
  for (std::size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b >= 0x80) {
      const std::size_t n = utf8_sequence(s, i);
      if (n == 0) {
        out += "\\x";
        append_hex_byte(b, out);
        ++i;
      } else {
        out.append(s.substr(i, n));
        i += n;
      }
      continue;
    }
    switch (b) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (b < 0x20 || b == 0x7F) {
          out += "\\u00";
          append_hex_byte(b, out);
        } else {
          out += static_cast<char>(b);
        }
    }
    ++i;
  }
  out += '"';
}

inline void append_integer(std::int64_t v, std::string& out) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

inline void append_real(double d, std::string& out) {
  if (std::isnan(d)) {
    out += "nan";
    return;
  }
  if (std::isinf(d)) {
    out += d < 0 ? "-inf" : "inf";
    return;
  }
  char buf[32];  // the shortest round-trip form of a double is at most 24 chars
  const auto r = std::to_chars(buf, buf + sizeof buf, d);
  const std::string_view text(buf, static_cast<std::size_t>(r.ptr - buf));
  out += text;
  if (text.find_first_of(".e") == std::string_view::npos) out += ".0";
}

/// The text of anything shaped like a Value (Value, ValueView).
template <class V>
void append_text(const V& v, std::string& out) {
  switch (v.type()) {
    case FieldType::null: out += "null"; return;
    case FieldType::boolean: out += v.as_bool() ? "true" : "false"; return;
    case FieldType::integer: append_integer(v.as_int(), out); return;
    case FieldType::real: append_real(v.as_double(), out); return;
    case FieldType::string: append_quoted(std::string_view(v.as_string()), out); return;
    case FieldType::bytes: {
      out += "b\"";
      for (const char c : std::string_view(v.as_bytes())) {
        append_hex_byte(static_cast<unsigned char>(c), out);
      }
      out += '"';
      return;
    }
    case FieldType::list: {
      out += '[';
      bool first = true;
      for (auto&& element : v.as_list()) {
        if (!first) out += ", ";
        first = false;
        append_text(element, out);
      }
      out += ']';
      return;
    }
  }
}

/// One `"name": value` item of a document's text, with the ", " before
/// every item but the first.
template <class V>
void append_field_text(std::string_view name, const V& v, bool first, std::string& out) {
  if (!first) out += ", ";
  append_quoted(name, out);
  out += ": ";
  append_text(v, out);
}

}  // namespace offheap::detail::doc

namespace offheap {

/// The text form of one value (see the top of this file).
inline std::string to_text(const Value& v) {
  std::string out;
  detail::doc::append_text(v, out);
  return out;
}

}  // namespace offheap
