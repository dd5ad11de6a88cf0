// SPDX-License-Identifier: Apache-2.0
// Type tags for typed values (put_value<T> / get_value<T>), and which types
// put_value accepts.
//
// A record carries one type byte. put() stores tag 0 (bytes). put_value<T>
// stores the tag of T, and get_value<T> refuses a record whose tag or size is
// not T's with Errc::type_mismatch. Tags of arithmetic types are fixed here
// and persist in files:
//
//   1 bool   2 char   3 int8   4 uint8   5 int16   6 uint16   7 int32
//   8 uint32   9 int64   10 uint64   11 float   12 double   13 long double
//   64 any other trivially copyable type (checked by size only)
//   128-255 free for users: specialize ValueTypeTag<T> to tell their own
//   trivially copyable types apart.
//
// Character types other than char take the tag of the integer of their size
// and signedness; enums take the tag of their underlying type.
//
// put_value<T> stores T's bytes as they are in memory, so it takes only
// types with no padding (PaddingFreeValue): a padding byte's value is
// indeterminate, and would reach the store's memory and files (copying it is
// undefined behaviour besides). Accepted are the types whose every byte is
// part of the value (std::has_unique_object_representations_v: integers,
// enums, bool, and structs and arrays of them without gaps); float, double
// and long double (x87's 80-bit long double fills 10 of its 16 bytes:
// put_value stores zeros in the other 6); and structs whose authors declare
// them padding-free, which the compiler cannot prove for a struct holding a
// float or a double:
//
//   struct Point { double x, y; };           // no padding, but floats
//   template <>
//   struct offheap::ValueTypeTag<Point> {
//     static constexpr bool padding_free = true;   // optional: a tag too
//   };
//   static_assert(offheap::PaddingFreeValue<Point>);
//
// Declare only what holds: no gap between members or after the last one
// (sizeof equals the sum of the members' sizes), and no long double member.
// A struct with padding gets explicit members in its place instead, which
// the program sets (to zero), or is stored field by field.
//
// Thread safety and memory: compile-time tags and traits only; get_value<T>
// returns a copy of the T.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>

namespace offheap {

namespace type_tag {
inline constexpr std::uint8_t bytes = 0;
inline constexpr std::uint8_t object = 64;
inline constexpr std::uint8_t first_user = 128;
}  // namespace type_tag

/// Specialize for a trivially copyable type of yours, with either or both:
///   `static constexpr std::uint8_t value = N;` (N >= 128): a tag of its own,
///     so that get_value tells it from other types of its size;
///   `static constexpr bool padding_free = true;`: the type has no padding
///     although it holds floating-point members (see PaddingFreeValue).
template <class T>
struct ValueTypeTag;

namespace detail {

/// ValueTypeTag<T>::padding_free is declared and true.
template <class T>
concept DeclaredPaddingFree = requires {
  requires ValueTypeTag<T>::padding_free;
};

}  // namespace detail

/// The types put_value<T> stores: trivially copyable, with no padding
/// byte whose indeterminate value would be stored.
template <class T>
concept PaddingFreeValue =
    std::is_trivially_copyable_v<T> &&
    (std::has_unique_object_representations_v<T> ||  // every byte is value: no padding
     std::is_floating_point_v<T> ||            // float, double, long double (x87 padding zeroed)
     detail::DeclaredPaddingFree<T>);          // ValueTypeTag<T>::padding_free = true: see above

namespace detail {

/// The bytes of long double that hold its value: the first 10 for x87's
/// 80-bit format (digits 64, stored in 12 or 16 bytes), all of them for the
/// binary64 and binary128 formats and for double-double.
inline constexpr std::size_t kLongDoubleValueBytes =
    std::numeric_limits<long double>::digits == 64 ? 10 : sizeof(long double);
static_assert(std::numeric_limits<long double>::digits != 64 ||
                  (std::endian::native == std::endian::little && sizeof(long double) >= 10),
              "an 80-bit long double is expected in x87's layout: 10 value bytes first");

/// Copies `value`'s bytes to out[0, sizeof(T)) as put_value stores them:
/// the object representation, with the padding of an 80-bit long double as
/// zeros.
template <PaddingFreeValue T>
void value_bytes(const T& value, std::byte* out) noexcept {
  if constexpr (std::is_same_v<std::remove_cv_t<T>, long double> &&
                kLongDoubleValueBytes < sizeof(long double)) {
    std::memcpy(out, std::addressof(value), kLongDoubleValueBytes);
    std::memset(out + kLongDoubleValueBytes, 0, sizeof(long double) - kLongDoubleValueBytes);
  } else {
    std::memcpy(out, std::addressof(value), sizeof(T));
  }
}

template <class T>
constexpr std::uint8_t arithmetic_tag() {
  if constexpr (std::is_same_v<T, bool>) {
    return 1;
  } else if constexpr (std::is_same_v<T, char>) {
    return 2;
  } else if constexpr (std::is_integral_v<T>) {
    constexpr std::uint8_t base = sizeof(T) == 1 ? 3 : sizeof(T) == 2 ? 5 : sizeof(T) == 4 ? 7 : 9;
    static_assert(sizeof(T) <= 8, "integers wider than 64 bits have no value type tag");
    return std::is_signed_v<T> ? base : static_cast<std::uint8_t>(base + 1);
  } else if constexpr (std::is_same_v<T, float>) {
    return 11;
  } else if constexpr (std::is_same_v<T, double>) {
    return 12;
  } else {
    static_assert(std::is_same_v<T, long double>);
    return 13;
  }
}

template <class T>
constexpr std::uint8_t value_type_tag() {
  static_assert(std::is_trivially_copyable_v<T>,
                "put_value/get_value store T's bytes: T must be trivially copyable");
  static_assert(!std::is_pointer_v<T> && !std::is_member_pointer_v<T>,
                "a pointer stored off-heap would dangle in another process or after "
                "a restart; store the pointee instead");
  if constexpr (requires { ValueTypeTag<T>::value; }) {
    static_assert(ValueTypeTag<T>::value >= type_tag::first_user,
                  "user type tags are 128-255; lower tags are reserved");
    return ValueTypeTag<T>::value;
  } else if constexpr (std::is_enum_v<T>) {
    return arithmetic_tag<std::underlying_type_t<T>>();
  } else if constexpr (std::is_arithmetic_v<T>) {
    return arithmetic_tag<T>();
  } else {
    return type_tag::object;
  }
}

}  // namespace detail
}  // namespace offheap
