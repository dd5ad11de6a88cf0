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
  offheap::Options o;
  o.shards = 1;  // victim and thief in one journal
  offheap::Store s(o);
  s.put("victim", std::string(40, 'v'));
  const std::uint64_t used = s.stats().journal_bytes;
  const auto v = s.view("victim");
  s.remove("victim");
  s.put("thief", std::string(40, 't'));  // a record of the same size, where victim's was
  // The thief's record took the victim's place (the only record, at the
  // journal's start: the tail moved back over the victim's, and forward again).
  REQUIRE(s.stats().journal_bytes == used);
  REQUIRE(s.stats().free_records == 0);
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

namespace {
/// What an empty view must say: falsy, removed, no key, read throws,
/// refresh gives another empty view.
void check_empty(const offheap::Store::View& v) {
  CHECK_FALSE(v);
  CHECK(v.key().empty());
  CHECK(v.size() == 0);
  CHECK(v.status() == ViewStatus::removed);
  CHECK_THROWS_AS(v.read([](std::string_view) {}), offheap::StaleView);
  CHECK_FALSE(v.refresh());
}

std::string read_all(const offheap::Store::View& v) {
  return v.read([](std::string_view b) { return std::string(b); });
}
}  // namespace

TEST_CASE("a moved-from view is empty, whatever its key's length", "[view]") {
  offheap::Store s;
  s.put("other", "other's value");
  // 64 bytes fit the view's inline buffer, 65 and 1000 go to the heap.
  for (const std::size_t len : {std::size_t{0}, std::size_t{64}, std::size_t{65}, std::size_t{1000}}) {
    INFO("key of " << len << " bytes");
    std::string key(len, 'k');
    for (std::size_t i = 0; i < len; ++i) key[i] = static_cast<char>('a' + i % 26);
    const std::string value = "value of a " + std::to_string(len) + "-byte key";
    s.put(key, value);

    // Move construction.
    offheap::Store::View a = s.view(key);
    REQUIRE(a);
    offheap::Store::View b = std::move(a);
    check_empty(a);  // NOLINT(bugprone-use-after-move): the point of the test
    REQUIRE(b);
    CHECK(b.key() == key);
    CHECK(b.status() == ViewStatus::live);
    CHECK(read_all(b) == value);
    CHECK(read_all(b.refresh()) == value);

    // Move assignment, into a view of another key (short) and into an empty one.
    offheap::Store::View c = s.view("other");
    c = std::move(b);
    check_empty(b);  // NOLINT(bugprone-use-after-move)
    CHECK(c.key() == key);
    CHECK(read_all(c) == value);
    offheap::Store::View d;
    d = std::move(c);
    check_empty(c);  // NOLINT(bugprone-use-after-move)
    CHECK(d.key() == key);
    CHECK(read_all(d) == value);
    // A moved-from view can be assigned again and works.
    c = s.view(key);
    CHECK(c.key() == key);
    CHECK(read_all(c) == value);
    // Moving an empty view over a live one empties it.
    offheap::Store::View e;
    d = std::move(e);
    check_empty(d);
    check_empty(e);  // NOLINT(bugprone-use-after-move)
    // Copies of a moved-from view are empty too.
    const offheap::Store::View f = b;
    check_empty(f);

    // Self-move leaves the view as it was.
    offheap::Store::View g = s.view(key);
    offheap::Store::View& alias = g;
    g = std::move(alias);
    REQUIRE(g);
    CHECK(g.key() == key);
    CHECK(g.status() == ViewStatus::live);
    CHECK(read_all(g) == value);
  }
}
