// SPDX-License-Identifier: Apache-2.0
// Type tags for typed values (put_value<T> / get_value<T>).
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
#pragma once

#include <cstdint>
#include <type_traits>

namespace offheap {

namespace type_tag {
inline constexpr std::uint8_t bytes = 0;
inline constexpr std::uint8_t object = 64;
inline constexpr std::uint8_t first_user = 128;
}  // namespace type_tag

/// Specialize with `static constexpr std::uint8_t value = N;` (N >= 128) to
/// give a trivially copyable type of yours a tag of its own.
template <class T>
struct ValueTypeTag;

namespace detail {

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
