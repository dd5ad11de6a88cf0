// SPDX-License-Identifier: Apache-2.0
#include <offheap/offheap.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <string>

namespace {
struct Pair {
  std::int32_t a;
  float b;
};
struct Tagged {
  std::int32_t a;
  float b;
};
enum class Color : std::uint16_t { red = 1, green = 2 };
struct Padded {  // 7 bytes of padding after `a`
  std::uint8_t a;
  std::uint64_t b;
};
struct Floats {  // no padding, but floats defeat has_unique_object_representations
  double x, y;
};
struct DeclaredFloats {  // the same, declared padding-free by its author
  double x, y;
};
}  // namespace

// Pair, Tagged and DeclaredFloats have no padding but hold floats: their
// authors say so (value_type.hpp).
template <>
struct offheap::ValueTypeTag<Pair> {
  static constexpr bool padding_free = true;
};
template <>
struct offheap::ValueTypeTag<Tagged> {
  static constexpr std::uint8_t value = 140;
  static constexpr bool padding_free = true;
};
template <>
struct offheap::ValueTypeTag<DeclaredFloats> {
  static constexpr bool padding_free = true;
};

namespace {
template <class T>
constexpr bool can_put_value = requires(offheap::Store& s, const T& v) { s.put_value("k", v); };
}  // namespace

using offheap::detail::value_type_tag;

TEST_CASE("arithmetic tags are fixed", "[value_type]") {
  STATIC_REQUIRE(value_type_tag<bool>() == 1);
  STATIC_REQUIRE(value_type_tag<char>() == 2);
  STATIC_REQUIRE(value_type_tag<std::int8_t>() == 3);
  STATIC_REQUIRE(value_type_tag<std::uint8_t>() == 4);
  STATIC_REQUIRE(value_type_tag<std::int16_t>() == 5);
  STATIC_REQUIRE(value_type_tag<std::uint16_t>() == 6);
  STATIC_REQUIRE(value_type_tag<std::int32_t>() == 7);
  STATIC_REQUIRE(value_type_tag<std::uint32_t>() == 8);
  STATIC_REQUIRE(value_type_tag<std::int64_t>() == 9);
  STATIC_REQUIRE(value_type_tag<std::uint64_t>() == 10);
  STATIC_REQUIRE(value_type_tag<float>() == 11);
  STATIC_REQUIRE(value_type_tag<double>() == 12);
  STATIC_REQUIRE(value_type_tag<long double>() == 13);
  STATIC_REQUIRE(value_type_tag<char32_t>() == value_type_tag<std::uint32_t>());
  STATIC_REQUIRE(value_type_tag<Color>() == value_type_tag<std::uint16_t>());
  STATIC_REQUIRE(value_type_tag<Pair>() == offheap::type_tag::object);
  STATIC_REQUIRE(value_type_tag<Tagged>() == 140);
}

TEST_CASE("structs round-trip, tags and sizes are checked", "[value_type]") {
  offheap::Store s;
  s.put_value("p", Pair{7, 1.5f});
  s.put_value("t", Tagged{8, 2.5f});
  s.put_value("c", Color::green);
  const Pair p = *s.get_value<Pair>("p");
  CHECK(p.a == 7);
  CHECK(p.b == 1.5f);
  CHECK(s.get_value<Tagged>("t")->a == 8);
  CHECK(s.get_value<Color>("c") == Color::green);
  CHECK(s.get_value<std::uint16_t>("c") == 2);  // an enum is its underlying type
  // Same size, other tag: refused.
  try {
    (void)s.get_value<Tagged>("p");
    FAIL("type mismatch accepted");
  } catch (const offheap::Error& e) {
    CHECK(e.code() == offheap::Errc::type_mismatch);
    const std::string what = e.what();
    CHECK(what.find("type tag 140") != std::string::npos);
    CHECK(what.find("type tag 64") != std::string::npos);
  }
  CHECK_THROWS_AS(s.get_value<std::uint64_t>("p"), offheap::Error);  // same size, other tag
  s.put("raw", std::string(sizeof(Pair), 'x'));
  CHECK_THROWS_AS(s.get_value<Pair>("raw"), offheap::Error);  // bytes are not a Pair
  CHECK(s.get_value<Pair>("missing") == std::nullopt);
}

TEST_CASE("put_value refuses types whose padding would reach the store", "[value_type]") {
  // Checked at compile time (put_value's requires clause); CHECK rather
  // than STATIC_REQUIRE so that a build that accepts them still runs and
  // reports which.
  CHECK_FALSE(can_put_value<Padded>);
  CHECK_FALSE(can_put_value<Floats>);  // not declared padding-free
  CHECK(can_put_value<DeclaredFloats>);
  CHECK(can_put_value<Pair>);
  CHECK(can_put_value<Tagged>);
  CHECK(can_put_value<Color>);
  CHECK(can_put_value<bool>);
  CHECK(can_put_value<char>);
  CHECK(can_put_value<std::uint64_t>);
  CHECK(can_put_value<float>);
  CHECK(can_put_value<double>);
  CHECK(can_put_value<long double>);
  // The tag stays "object" for a struct declared padding-free without a tag.
  STATIC_REQUIRE(value_type_tag<DeclaredFloats>() == offheap::type_tag::object);
  offheap::Store s;
  s.put_value("d", DeclaredFloats{0.5, -3.25});
  const DeclaredFloats d = *s.get_value<DeclaredFloats>("d");
  CHECK(d.x == 0.5);
  CHECK(d.y == -3.25);
}

TEST_CASE("a long double is stored with zeros where it has padding", "[value_type]") {
  // Storage full of 0xCD bytes, then a long double made in it: on x86 (x87
  // extended precision: 10 value bytes in 16) the last 6 bytes keep 0xCD.
  // (Volatile stores: the optimizer may not drop them as dead before the
  // new object's lifetime begins. The empty asm hides from it what *x
  // holds, so that put_value reads the object as it lies in memory.)
  alignas(long double) unsigned char storage[sizeof(long double)];
  volatile unsigned char* fill = storage;
  for (std::size_t i = 0; i < sizeof storage; ++i) fill[i] = 0xCD;
  volatile double seed = 1.0;  // a value the compiler cannot fold
  long double* x = ::new (static_cast<void*>(storage)) long double(static_cast<long double>(seed) / 3);
  asm volatile("" : "+r"(x) : : "memory");
  constexpr bool x87 = std::numeric_limits<long double>::digits == 64 && sizeof(long double) > 10;
  constexpr std::size_t value_bytes = x87 ? 10 : sizeof(long double);
  if (x87) CHECK(storage[sizeof(long double) - 1] == 0xCD);  // the premise holds

  offheap::Store s;
  s.put_value("ld", *x);
  const std::optional<std::string> raw = s.get("ld");
  REQUIRE(raw);
  REQUIRE(raw->size() == sizeof(long double));
  CHECK(std::memcmp(raw->data(), storage, value_bytes) == 0);
  for (std::size_t i = value_bytes; i < sizeof(long double); ++i) {
    INFO("byte " << i);
    CHECK(static_cast<int>(static_cast<unsigned char>((*raw)[i])) == 0);
  }
  CHECK(s.get_value<long double>("ld") == *x);
}

TEST_CASE("an error's code has a stable name", "[error]") {
  CHECK(offheap::to_string(offheap::Errc::key_too_large) == "key_too_large");
  CHECK(offheap::to_string(offheap::Errc::type_mismatch) == "type_mismatch");
  CHECK(offheap::to_string(offheap::Errc::stale_view) == "stale_view");
  const offheap::Error e(offheap::Errc::io_error, "store: disk on fire");
  CHECK(std::string(e.what()) == "offheap: store: disk on fire");
  CHECK(e.code() == offheap::Errc::io_error);
}
