// SPDX-License-Identifier: Apache-2.0
#include <offheap/offheap.hpp>

#include <catch2/catch.hpp>

#include <string>

using offheap::ViewStatus;

TEST_CASE("a view reads its record in place until the record changes", "[view]") {
  offheap::Store s;
  s.put("k", "first");
  const offheap::Store::View v = s.view("k");
  REQUIRE(v);
  CHECK(v.key() == "k");
  CHECK(v.size() == 5);
  CHECK(v.type() == offheap::type_tag::bytes);
  CHECK(v.status() == ViewStatus::live);
  CHECK(v.read([](std::string_view b) { return std::string(b); }) == "first");
  s.put("other", "x");  // another key: the view stays live
  CHECK(v.status() == ViewStatus::live);
  s.put("k", "again");  // same size: rewritten in place, the stamp still changes
  CHECK(v.status() == ViewStatus::updated);
  CHECK_THROWS_AS(v.read([](std::string_view) {}), offheap::StaleView);
  const offheap::Store::View fresh = v.refresh();
  CHECK(fresh.status() == ViewStatus::live);
  CHECK(fresh.read([](std::string_view b) { return std::string(b); }) == "again");
  s.remove("k");
  CHECK(v.status() == ViewStatus::removed);
  CHECK(fresh.status() == ViewStatus::removed);
  CHECK_FALSE(fresh.refresh());
}

TEST_CASE("a view never reads another key's record from a reused slot", "[view]") {
  offheap::Store s;
  s.put("victim", std::string(40, 'v'));
  const auto v = s.view("victim");
  s.remove("victim");
  s.put("thief", std::string(40, 't'));  // lands in the freed slot
  CHECK(v.status() == ViewStatus::removed);
  try {
    v.read([](std::string_view) {});
    FAIL("stale read accepted");
  } catch (const offheap::StaleView& e) {
    CHECK(e.code() == offheap::Errc::stale_view);
    CHECK(std::string(e.what()).find("6 bytes") != std::string::npos);  // the key's length
  }
}

TEST_CASE("an empty view is falsy, removed, and throws on read", "[view]") {
  offheap::Store s;
  const auto v = s.view("missing");
  CHECK_FALSE(v);
  CHECK(v.status() == ViewStatus::removed);
  CHECK_THROWS_AS(v.read([](std::string_view) {}), offheap::StaleView);
  CHECK_FALSE(v.refresh());
  const offheap::Store::View d;
  CHECK_FALSE(d);
  CHECK(d.status() == ViewStatus::removed);
}

TEST_CASE("views copy and move, with short and long keys", "[view]") {
  offheap::Store s;
  const std::string long_key(300, 'L');
  s.put("short", "s");
  s.put(long_key, "l");
  offheap::Store::View a = s.view("short"), b = s.view(long_key);
  offheap::Store::View a2 = a, b2 = b;  // copies
  CHECK(a2.key() == "short");
  CHECK(b2.key() == long_key);
  offheap::Store::View b3 = std::move(b);
  CHECK(b3.key() == long_key);
  CHECK(b3.read([](std::string_view x) { return std::string(x); }) == "l");
  a2 = b2;
  CHECK(a2.key() == long_key);
  b2 = a;
  CHECK(b2.key() == "short");
  s.put(long_key, "changed");
  CHECK(b3.status() == ViewStatus::updated);
  CHECK(b3.refresh().read([](std::string_view x) { return std::string(x); }) == "changed");
}

TEST_CASE("a view outlives clear() safely", "[view]") {
  offheap::Store s;
  s.put("k", "v");
  const auto v = s.view("k");
  s.clear();
  CHECK(v.status() == ViewStatus::removed);
  s.put("k", "v");  // same key, same value, same slot: still a different stamp
  CHECK(v.status() == ViewStatus::updated);
  CHECK_THROWS_AS(v.read([](std::string_view) {}), offheap::StaleView);
}
