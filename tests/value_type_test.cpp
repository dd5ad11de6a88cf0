// SPDX-License-Identifier: Apache-2.0
#include <offheap/offheap.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
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
}  // namespace

template <>
struct offheap::ValueTypeTag<Tagged> {
  static constexpr std::uint8_t value = 140;
};

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

TEST_CASE("structs round-trip; tags and sizes are checked", "[value_type]") {
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

TEST_CASE("an error's code has a stable name", "[error]") {
  CHECK(offheap::to_string(offheap::Errc::key_too_large) == "key_too_large");
  CHECK(offheap::to_string(offheap::Errc::type_mismatch) == "type_mismatch");
  CHECK(offheap::to_string(offheap::Errc::stale_view) == "stale_view");
  const offheap::Error e(offheap::Errc::io_error, "store: disk on fire");
  CHECK(std::string(e.what()) == "offheap: store: disk on fire");
  CHECK(e.code() == offheap::Errc::io_error);
}
