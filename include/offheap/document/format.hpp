// SPDX-License-Identifier: Apache-2.0
// The document encoding, byte by byte, and the one validator that decides
// whether bytes are a document. Document::decode (which throws what it
// found) and DocumentView::parse (which returns nullopt) both run it, so
// they never disagree; everything else reads bytes it has accepted.
//
// Format 1:
//
//   document := tag field-count field*
//     tag          1 byte, 0xD1: document format 1. Tags 0xD0-0xDF are
//                  reserved for document formats: a reader of format 1
//                  refuses the others with Errc::format_version, and any
//                  other first byte with Errc::corrupt_file.
//     field-count  varint, 0 to 2^32-1: how many fields follow.
//   field := name-length name value
//     name-length  varint, 1 to 65,535.
//     name         that many bytes (any bytes; UTF-8 by convention). No two
//                  fields of a document have the same name.
//   value := type payload
//     type         1 byte, the FieldType: 0 null, 1 boolean, 2 integer,
//                  3 real, 4 string, 5 bytes, 6 list. 7-255 are refused.
//     payload      null     nothing
//                  boolean  1 byte: 0x00 false, 0x01 true (others refused)
//                  integer  varint of the zigzag form of the int64,
//                           (n << 1) ^ (n >> 63): 1 byte for -64..63,
//                           10 for the extremes
//                  real     8 bytes: the IEEE-754 binary64 bits,
//                           little-endian, as they are (-0.0 and NaN
//                           payloads survive a round trip)
//                  string   varint byte length, then the bytes
//                  bytes    the same as string
//                  list     varint element count, then that many values
//                           (type and payload each)
//   varint := unsigned LEB128: 7 bits a byte, the low group first, the high
//             bit set on every byte but the last; at most 10 bytes (the
//             10th at most 0x01: no bits beyond 64), and in its shortest
//             form (a last byte of 0x00 is refused unless it is the only
//             byte).
//
// Nesting: a list that is a field's value is at depth 1, a list inside it
// at depth 2; depth 32 is the deepest. Encoding a deeper list throws
// Errc::invalid_argument, as do a name of 0 or more than 65,535 bytes and
// more than 2^32-1 fields; decoding refuses them (corrupt_file).
//
// Example: {"a": 1, "b": [true, "x"]} is the 14 bytes
//
//   D1          tag: format 1
//   02          2 fields
//   01 61       name "a"
//   02 02         integer, zigzag(1) = 2
//   01 62       name "b"
//   06 02         list of 2
//   01 01           boolean true
//   04 01 78        string "x"
//
// One encoding per document: decode refuses every byte string that encode
// would not write (trailing bytes, non-shortest varints, booleans other
// than 0/1, duplicate names), so re-encoding what decode returns gives back
// the same bytes. Field order is kept: equal documents whose fields were
// set in different orders encode differently. A document carries no
// checksum of its own: integrity is its container's job (a store record's
// CRC32C in a file-backed store).
//
// Versions: any change to the bytes encode writes for some document needs a
// new tag (0xD2 for format 2); tests/document pins format 1 with a golden
// vector. The library version and this format version move independently.
//
// Validation cost: one pass over the bytes, recursion at most 33 calls
// deep, every loop bounded by the bytes left (each field takes at least 3
// bytes, each list element 1), so it is safe on any bytes, damaged or torn.
// Duplicate names are found by sorting the names: in an array on the stack
// for up to 64 fields, in a heap vector beyond (the only allocation).
//
// Thread safety: the encoder and the validator are pure functions of their
// input; they keep no state and may run on any number of threads.
#pragma once

#include <offheap/document/text.hpp>
#include <offheap/document/value.hpp>
#include <offheap/error.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace offheap::detail::doc {

inline constexpr unsigned char kFormatTag = 0xD1;
inline constexpr unsigned char kFormatFamily = 0xD0;  // 0xD0-0xDF: document formats
inline constexpr std::size_t kMaxNameBytes = 65535;
inline constexpr std::size_t kMaxDepth = 32;
inline constexpr std::uint64_t kMaxFields = 0xFFFF'FFFFu;
inline constexpr std::size_t kMaxVarintBytes = 10;
inline constexpr std::size_t kStackNames = 64;

inline const unsigned char* as_uchars(const char* p) noexcept {
  return reinterpret_cast<const unsigned char*>(p);
}

constexpr std::uint64_t zigzag(std::int64_t n) noexcept {
  return (static_cast<std::uint64_t>(n) << 1) ^ static_cast<std::uint64_t>(n >> 63);
}

constexpr std::int64_t unzigzag(std::uint64_t u) noexcept {
  return static_cast<std::int64_t>(u >> 1) ^ -static_cast<std::int64_t>(u & 1);
}

constexpr std::size_t varint_size(std::uint64_t v) noexcept {
  const auto bits = static_cast<std::size_t>(std::bit_width(v));
  return bits == 0 ? 1 : (bits + 6) / 7;
}

inline unsigned char* store_varint(unsigned char* p, std::uint64_t v) noexcept {
  while (v >= 0x80) {
    *p++ = static_cast<unsigned char>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<unsigned char>(v);
  return p;
}

/// A varint from bytes the validator accepted.
inline std::uint64_t load_varint(const unsigned char*& p) noexcept {
  std::uint64_t v = 0;
  for (unsigned shift = 0;; shift += 7) {
    const unsigned char b = *p++;
    v |= static_cast<std::uint64_t>(b & 0x7F) << shift;
    if ((b & 0x80) == 0) return v;
  }
}

inline void store_le64(unsigned char* p, std::uint64_t v) noexcept {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}

inline std::uint64_t load_le64(const unsigned char* p) noexcept {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return v;
}

/// Past the value (type byte and payload) at p, in bytes the validator
/// accepted. A loop with a count of values still to pass, not recursion.
inline const unsigned char* skip_value(const unsigned char* p) noexcept {
  std::uint64_t pending = 1;
  while (pending > 0) {
    --pending;
    switch (static_cast<FieldType>(*p++)) {
      case FieldType::null: break;
      case FieldType::boolean: ++p; break;
      case FieldType::integer: (void)load_varint(p); break;
      case FieldType::real: p += 8; break;
      case FieldType::string:
      case FieldType::bytes: {
        const std::uint64_t n = load_varint(p);
        p += n;
        break;
      }
      case FieldType::list: pending += load_varint(p); break;
    }
  }
  return p;
}

/// What the validator found wrong.
enum class Fault : std::uint8_t {
  none,
  empty,            // no bytes at all
  not_a_document,   // a first byte outside 0xD0-0xDF
  other_format,     // a document format other than 1 (number: the tag)
  truncated,        // the bytes end inside the item at offset
  bad_varint,       // too long, beyond 64 bits, or not in shortest form
  past_end,         // a length or count (number) larger than the bytes left
  too_many_fields,  // a field count (number) above 2^32-1
  bad_name_length,  // a name length (number) of 0 or above 65,535
  bad_type,         // an unknown type byte (number)
  bad_boolean,      // a boolean byte (number) other than 0 or 1
  too_deep,         // a list at depth 33
  duplicate_name,   // name appears twice
  trailing_bytes,   // number bytes after the last field
};

struct Problem {
  Fault fault = Fault::none;
  std::size_t offset = 0;    // where the offending item starts
  std::uint64_t number = 0;  // the offending length, count or byte
  std::string_view name{};   // duplicate_name: the name (points into the bytes)
};

/// The one pass described at the top of this file.
class Validator {
 public:
  explicit Validator(std::string_view bytes) noexcept
      : begin_(as_uchars(bytes.data())), p_(begin_), end_(begin_ + bytes.size()) {}

  /// True, with the field count, if the bytes are one whole document;
  /// false with problem() set otherwise.
  /// Throws: std::bad_alloc only (more than 64 fields need a heap array).
  bool run(std::uint64_t& field_count) {
    if (p_ == end_) return fail(Fault::empty, p_);
    if (*p_ != kFormatTag) {
      const Fault f = (*p_ & 0xF0) == kFormatFamily ? Fault::other_format : Fault::not_a_document;
      return fail(f, p_, *p_);
    }
    ++p_;
    const unsigned char* at = p_;
    std::uint64_t n = 0;
    if (!varint(n)) return false;
    if (n > kMaxFields) return fail(Fault::too_many_fields, at, n);
    if (n > left() / 3) return fail(Fault::past_end, at, n);  // a field takes >= 3 bytes

    std::array<std::string_view, kStackNames> stack_names;
    std::vector<std::string_view> heap_names;
    if (n > kStackNames) heap_names.resize(static_cast<std::size_t>(n));
    const std::span<std::string_view> names =
        n > kStackNames
            ? std::span<std::string_view>(heap_names)
            : std::span<std::string_view>(stack_names).first(static_cast<std::size_t>(n));
    for (auto& name : names) {
      at = p_;
      std::uint64_t length = 0;
      if (!varint(length)) return false;
      if (length == 0 || length > kMaxNameBytes) return fail(Fault::bad_name_length, at, length);
      if (length > left()) return fail(Fault::past_end, at, length);
      name = std::string_view(reinterpret_cast<const char*>(p_), static_cast<std::size_t>(length));
      p_ += length;
      if (!value(0)) return false;
    }
    if (p_ != end_) return fail(Fault::trailing_bytes, p_, left());

    std::sort(names.begin(), names.end());
    const auto dup = std::adjacent_find(names.begin(), names.end());
    if (dup != names.end()) {
      // Report the later of the two (sorting lost the order).
      fail(Fault::duplicate_name, as_uchars(std::max(dup[0].data(), dup[1].data())));
      problem_.name = *dup;
      return false;
    }
    field_count = n;
    return true;
  }

  const Problem& problem() const noexcept { return problem_; }

 private:
  std::size_t left() const noexcept { return static_cast<std::size_t>(end_ - p_); }

  bool fail(Fault f, const unsigned char* at, std::uint64_t number = 0) noexcept {
    problem_ = Problem{f, static_cast<std::size_t>(at - begin_), number, {}};
    return false;
  }

  bool varint(std::uint64_t& out) noexcept {
    const unsigned char* at = p_;
    std::uint64_t v = 0;
    for (std::size_t i = 0;; ++i) {
      if (p_ == end_) return fail(Fault::truncated, at);
      const unsigned char b = *p_++;
      // The 10th byte holds bit 63 alone; more, or a continuation, is too long.
      if (i == kMaxVarintBytes - 1 && b > 1) return fail(Fault::bad_varint, at);
      v |= static_cast<std::uint64_t>(b & 0x7F) << (7 * i);
      if ((b & 0x80) == 0) {
        if (b == 0 && i > 0) return fail(Fault::bad_varint, at);
        out = v;
        return true;
      }
    }
  }

  // The value at p_, inside `depth` lists (0 for a field's own value).
  bool value(std::size_t depth) noexcept {
    const unsigned char* at = p_;
    if (p_ == end_) return fail(Fault::truncated, at);
    const unsigned char type = *p_++;
    switch (type) {
      case static_cast<unsigned char>(FieldType::null): return true;
      case static_cast<unsigned char>(FieldType::boolean):
        if (p_ == end_) return fail(Fault::truncated, at);
        if (*p_ > 1) return fail(Fault::bad_boolean, p_, *p_);
        ++p_;
        return true;
      case static_cast<unsigned char>(FieldType::integer): {
        std::uint64_t ignored = 0;
        return varint(ignored);
      }
      case static_cast<unsigned char>(FieldType::real):
        if (left() < 8) return fail(Fault::truncated, at);
        p_ += 8;
        return true;
      case static_cast<unsigned char>(FieldType::string):
      case static_cast<unsigned char>(FieldType::bytes): {
        std::uint64_t length = 0;
        if (!varint(length)) return false;
        if (length > left()) return fail(Fault::past_end, at, length);
        p_ += length;
        return true;
      }
      case static_cast<unsigned char>(FieldType::list): {
        if (depth >= kMaxDepth) return fail(Fault::too_deep, at);
        std::uint64_t count = 0;
        if (!varint(count)) return false;
        if (count > left()) return fail(Fault::past_end, at, count);  // an element takes >= 1 byte
        for (std::uint64_t i = 0; i < count; ++i) {
          if (!value(depth + 1)) return false;
        }
        return true;
      }
      default: return fail(Fault::bad_type, at, type);
    }
  }

  const unsigned char* begin_;
  const unsigned char* p_;
  const unsigned char* end_;
  Problem problem_{};
};

/// The Errc a problem is reported with.
inline Errc errc_of(const Problem& p) noexcept {
  return p.fault == Fault::other_format ? Errc::format_version : Errc::corrupt_file;
}

inline std::string hex_byte_text(std::uint64_t b) {
  std::string out = "0x";
  append_hex_byte(static_cast<unsigned char>(b), out);
  return out;
}

/// A name for a message: quoted, and cut to 40 bytes.
inline std::string name_text(std::string_view name) {
  std::string out;
  append_quoted(name.substr(0, 40), out);
  if (name.size() > 40) out += "...";
  return out;
}

/// The message Document::decode throws for a problem in `size` bytes.
inline std::string describe(const Problem& p, std::size_t size) {
  using std::to_string;
  const std::string at = " at offset " + to_string(p.offset);
  const std::string of = " of the " + to_string(size) + "-byte document";
  std::string m = "document: ";
  switch (p.fault) {
    case Fault::none: return m + "no problem";
    case Fault::empty:
      return m + "no bytes; an encoded document starts with its format tag " +
             hex_byte_text(kFormatTag);
    case Fault::not_a_document:
      return m + "the first byte is " + hex_byte_text(p.number) +
             ", not a document format tag (" + hex_byte_text(kFormatTag) + " for format 1)";
    case Fault::other_format:
      return m + "format tag " + hex_byte_text(p.number) + " is document format " +
             to_string(p.number - kFormatFamily) + "; this build reads format 1 (tag " +
             hex_byte_text(kFormatTag) + ")";
    case Fault::truncated:
      return m + "truncated: the bytes end inside the item that starts" + at + of;
    case Fault::bad_varint:
      return m + "the varint" + at + of +
             " is longer than 10 bytes, beyond 64 bits, or not in its shortest form";
    case Fault::past_end:
      return m + "the length or count " + to_string(p.number) + at + " reaches past the end" + of;
    case Fault::too_many_fields:
      return m + to_string(p.number) + " fields" + at + "; a document has at most " +
             to_string(kMaxFields);
    case Fault::bad_name_length:
      return m + "a field name of " + to_string(p.number) + " bytes" + at +
             "; names are 1 to " + to_string(kMaxNameBytes) + " bytes";
    case Fault::bad_type:
      return m + "unknown type byte " + hex_byte_text(p.number) + at + of;
    case Fault::bad_boolean:
      return m + "the boolean byte " + hex_byte_text(p.number) + at + " is neither 0x00 nor 0x01";
    case Fault::too_deep:
      return m + "the list" + at + " is nested deeper than " + to_string(kMaxDepth) + " lists";
    case Fault::duplicate_name:
      return m + "the field name " + name_text(p.name) + " appears more than once (again" + at +
             ")";
    case Fault::trailing_bytes:
      return m + to_string(p.number) + " trailing byte(s) after the last field" + at + of;
  }
  return m + "unknown problem";
}

}  // namespace offheap::detail::doc
