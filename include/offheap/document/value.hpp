// SPDX-License-Identifier: Apache-2.0
// Value: what one field of a Document holds (null, a boolean, a 64-bit
// integer, a double, a string, raw bytes, or a list of Values), and the
// one total order every part of the document layer agrees on.
//
// The order is what ordered indexes sort by, and ordered_key.hpp turns it
// into keys that memcmp sorts the same way, so it has to be total and
// consistent with equality (a == b exactly when (a <=> b) == 0):
//
//   1. Type first, in FieldType order: null < boolean < integer < real <
//      string < bytes < list. Integers and reals are different types: the
//      integer 2 sorts before the real 0.5, and 1 != 1.0. (Mixing them would
//      make the order depend on rounding; a schema that wants one numeric
//      order stores one of the two.)
//   2. Then the value. booleans: false < true. integers: as int64. reals:
//      numerically, with -0.0 equal to 0.0 and every NaN equal to every
//      other NaN and greater than every other double (+inf included), so
//      that NaN, which compares unordered under IEEE rules, still has a
//      place. strings and bytes: bytewise, as unsigned bytes, a prefix
//      before what it prefixes. lists: lexicographically by element, a
//      prefix first.
//
// The order is std::weak_ordering because equal values may still differ:
// -0.0 and 0.0, or two NaNs with different payloads, are equal here and
// keep their bits through an encoding.
//
// A Value owns what it holds; it is a regular value type (copy, move,
// compare). Lists nest without limit in memory, but only 32 deep can be
// encoded (format.hpp), and comparing or destroying a list recurses once
// per level.
//
// Thread safety: as a standard container: concurrent const calls are safe;
// a call that modifies needs exclusive access. Memory: the references a
// Value's accessors return (as_string(), the list's elements, ...) are
// into the Value, valid until it is modified or destroyed.
#pragma once

#include <offheap/error.hpp>

#include <compare>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace offheap {

/// The kinds of value a document field holds. The numbers are the type
/// bytes of the encoding (format.hpp) and the order of types in the value
/// order (above): never renumber them.
enum class FieldType : std::uint8_t {
  null = 0,
  boolean = 1,
  integer = 2,
  real = 3,
  string = 4,
  bytes = 5,
  list = 6,
};

/// A short, stable name for a FieldType ("null", "boolean", ...).
constexpr std::string_view to_string(FieldType t) noexcept {
  switch (t) {
    case FieldType::null: return "null";
    case FieldType::boolean: return "boolean";
    case FieldType::integer: return "integer";
    case FieldType::real: return "real";
    case FieldType::string: return "string";
    case FieldType::bytes: return "bytes";
    case FieldType::list: return "list";
  }
  return "unknown";
}

/// Raw bytes, as opposed to text: a Value made from Bytes has type bytes,
/// one made from a std::string has type string. The two never compare
/// equal, and the text form shows bytes as hex.
struct Bytes {
  std::string data;
  friend bool operator==(const Bytes&, const Bytes&) = default;
};

namespace detail::doc {

/// "an integer", "a string", ...: the type as a message names it.
constexpr std::string_view with_article(FieldType t) noexcept {
  switch (t) {
    case FieldType::null: return "null";
    case FieldType::boolean: return "a boolean";
    case FieldType::integer: return "an integer";
    case FieldType::real: return "a real";
    case FieldType::string: return "a string";
    case FieldType::bytes: return "bytes";
    case FieldType::list: return "a list";
  }
  return "an unknown type";
}

[[noreturn]] inline void throw_type_mismatch(FieldType held, FieldType asked) {
  throw Error(Errc::type_mismatch, "document value: holds " + std::string(with_article(held)) +
                                       ", asked for " + std::string(with_article(asked)));
}

/// The real order above: -0.0 == 0.0, NaNs equal and above everything.
inline std::weak_ordering compare_reals(double a, double b) noexcept {
  const bool a_nan = a != a;
  const bool b_nan = b != b;
  if (a_nan || b_nan) {
    return a_nan == b_nan ? std::weak_ordering::equivalent
           : a_nan        ? std::weak_ordering::greater
                          : std::weak_ordering::less;
  }
  if (a < b) return std::weak_ordering::less;
  if (b < a) return std::weak_ordering::greater;
  return std::weak_ordering::equivalent;
}

/// Bytewise as unsigned bytes, a prefix first (memcmp compares unsigned
/// bytes whatever the signedness of char).
inline std::weak_ordering compare_bytes(std::string_view a, std::string_view b) noexcept {
  const std::size_t common = a.size() < b.size() ? a.size() : b.size();
  const int c = common == 0 ? 0 : std::memcmp(a.data(), b.data(), common);
  if (c != 0) return c < 0 ? std::weak_ordering::less : std::weak_ordering::greater;
  if (a.size() == b.size()) return std::weak_ordering::equivalent;
  return a.size() < b.size() ? std::weak_ordering::less : std::weak_ordering::greater;
}

/// The value order over anything shaped like a Value (Value, ValueView):
/// type(), the as_* accessors, and as_list() a range of such things. One
/// definition, so that Value, ValueView and their mixtures cannot drift
/// apart.
template <class A, class B>
std::weak_ordering compare_values(const A& a, const B& b) {
  const FieldType ta = a.type();
  const FieldType tb = b.type();
  if (ta != tb) return ta < tb ? std::weak_ordering::less : std::weak_ordering::greater;
  switch (ta) {
    case FieldType::null: return std::weak_ordering::equivalent;
    case FieldType::boolean: {
      const bool x = a.as_bool();
      const bool y = b.as_bool();
      return x == y ? std::weak_ordering::equivalent
             : x    ? std::weak_ordering::greater
                    : std::weak_ordering::less;
    }
    case FieldType::integer: return a.as_int() <=> b.as_int();
    case FieldType::real: return compare_reals(a.as_double(), b.as_double());
    case FieldType::string:
      return compare_bytes(std::string_view(a.as_string()), std::string_view(b.as_string()));
    case FieldType::bytes:
      return compare_bytes(std::string_view(a.as_bytes()), std::string_view(b.as_bytes()));
    case FieldType::list: {
      auto&& la = a.as_list();
      auto&& lb = b.as_list();
      auto ia = la.begin();
      auto ib = lb.begin();
      const auto ea = la.end();
      const auto eb = lb.end();
      for (; ia != ea && ib != eb; ++ia, ++ib) {
        const std::weak_ordering c = compare_values(*ia, *ib);
        if (c != 0) return c;
      }
      if (ia != ea) return std::weak_ordering::greater;
      if (ib != eb) return std::weak_ordering::less;
      return std::weak_ordering::equivalent;
    }
  }
  return std::weak_ordering::equivalent;
}

}  // namespace detail::doc

/// One field's value, owned. Constructors are implicit so that
/// `doc.set("age", 42)` and `Value::list({1, "a"})` read naturally.
class Value {
 public:
  /// A list of values (a Value of type list holds one).
  using List = std::vector<Value>;

 private:
  // The alternatives in FieldType order: index() is the type.
  using Data = std::variant<std::monostate, bool, std::int64_t, double, std::string, Bytes, List>;

 public:

  /// null.
  Value() noexcept = default;
  /// null.
  Value(std::nullptr_t) noexcept {}
  /// A boolean.
  Value(bool b) noexcept : data_(std::in_place_index<1>, b) {}
  /// An integer, stored as int64. Any integral type but bool (which is a
  /// boolean); char types count as integers too.
  /// Throws: Error(invalid_argument) for a value outside the int64 range
  /// (an unsigned above 2^63-1).
  template <std::integral I>
    requires(!std::same_as<I, bool>)
  Value(I i) : data_(std::in_place_index<2>, checked_int(i)) {}
  /// A real (a float is widened to double exactly).
  Value(double d) noexcept : data_(std::in_place_index<3>, d) {}
  /// A string, copied. Throws: Error(invalid_argument) for a null pointer.
  Value(const char* s) : data_(std::in_place_index<4>, checked_c_string(s)) {}
  /// A string.
  Value(std::string s) noexcept : data_(std::in_place_index<4>, std::move(s)) {}
  /// A string, copied.
  Value(std::string_view s) : data_(std::in_place_index<4>, s) {}
  /// Bytes.
  Value(Bytes b) noexcept : data_(std::in_place_index<5>, std::move(b)) {}
  /// A list; elements may be lists themselves.
  Value(List list) noexcept : data_(std::in_place_index<6>, std::move(list)) {}

  /// A list of the given values: `Value::list({1, "a", nullptr})`. (A
  /// named function rather than an initializer_list constructor, so that
  /// `Value{42}` stays the integer 42.)
  static Value list(std::initializer_list<Value> items) { return Value(List(items)); }

  /// Which kind of value this is.
  FieldType type() const noexcept { return static_cast<FieldType>(data_.index()); }
  bool is_null() const noexcept { return data_.index() == 0; }

  /// The value as the type it holds. Returned references are valid until
  /// this Value is assigned to or destroyed.
  /// Throws: Error(type_mismatch), naming both types, if it holds another
  /// type (there are no conversions: as_double() on an integer throws).
  bool as_bool() const { return alternative<1>(FieldType::boolean); }
  std::int64_t as_int() const { return alternative<2>(FieldType::integer); }
  double as_double() const { return alternative<3>(FieldType::real); }
  const std::string& as_string() const { return alternative<4>(FieldType::string); }
  const std::string& as_bytes() const { return alternative<5>(FieldType::bytes).data; }
  const List& as_list() const { return alternative<6>(FieldType::list); }

  /// Equality and order as described at the top of this file.
  friend bool operator==(const Value& a, const Value& b) {
    return detail::doc::compare_values(a, b) == 0;
  }
  friend std::weak_ordering operator<=>(const Value& a, const Value& b) {
    return detail::doc::compare_values(a, b);
  }

 private:
  template <std::size_t Index>
  const std::variant_alternative_t<Index, Data>& alternative(FieldType asked) const {
    const auto* held = std::get_if<Index>(&data_);
    if (held == nullptr) detail::doc::throw_type_mismatch(type(), asked);
    return *held;
  }

  template <class I>
  static std::int64_t checked_int(I i) {
    constexpr auto kMax = std::numeric_limits<std::int64_t>::max();
    constexpr auto kMin = std::numeric_limits<std::int64_t>::min();
    if constexpr (std::is_unsigned_v<I>) {
      if (i > static_cast<std::make_unsigned_t<std::int64_t>>(kMax)) {
        throw Error(Errc::invalid_argument, "document value: the unsigned integer " +
                                                std::to_string(static_cast<unsigned long long>(i)) +
                                                " is above the largest integer a Value holds, " +
                                                std::to_string(kMax));
      }
    } else if constexpr (sizeof(I) > sizeof(std::int64_t)) {
      if (i > kMax || i < kMin) {
        throw Error(Errc::invalid_argument,
                    "document value: an integer outside the int64 range a Value holds");
      }
    }
    return static_cast<std::int64_t>(i);
  }

  static std::string_view checked_c_string(const char* s) {
    if (s == nullptr) {
      throw Error(Errc::invalid_argument,
                  "document value: a null const char* (use nullptr_t or Value() for null)");
    }
    return s;
  }

  Data data_;

  static_assert(std::variant_size_v<Data> == static_cast<std::size_t>(FieldType::list) + 1,
                "Value's alternatives must follow FieldType one for one");
};

}  // namespace offheap
