// SPDX-License-Identifier: Apache-2.0
// get_all(), put_all(), remove_all(): the answers and counts for keys
// spread over shards (repeated keys included), a cache that evicts while a
// batch writes at its memory limit, and files that keep what a batch wrote.
#include <offheap/offheap.hpp>

#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace {

struct Batch {
  std::vector<std::string> keys, values;
  std::vector<std::pair<std::string_view, std::string_view>> entries;
  std::vector<std::string_view> key_views;
  Batch(std::size_t n, std::size_t from, const std::string& tag, std::size_t value_bytes = 40) {
    for (std::size_t i = 0; i < n; ++i) {
      keys.push_back("key-" + std::to_string(from + i));
      values.push_back(tag + "-" + std::to_string(from + i) + std::string(value_bytes, 'v'));
    }
    for (std::size_t i = 0; i < n; ++i) {
      entries.emplace_back(keys[i], values[i]);
      key_views.push_back(keys[i]);
    }
  }
};

}  // namespace

TEST_CASE("put_all, get_all and remove_all answer as the single calls would", "[batch]") {
  offheap::Options o;
  o.shards = 8;
  offheap::Store s(o);
  const Batch a(1000, 0, "a");
  REQUIRE(s.put_all(a.entries) == 1000);
  const Batch b(1000, 500, "b");  // half over a's keys
  REQUIRE(s.put_all(b.entries) == 500);
  REQUIRE(s.size() == 1500);
  // A key twice in one call: inserted once, its last value kept.
  std::vector<std::pair<std::string_view, std::string_view>> twice = {{"dup", "1"}, {"x", "x"}, {"dup", "2"}};
  REQUIRE(s.put_all(twice) == 2);
  REQUIRE(s.get("dup") == "2");
  // get_all over present and absent keys, into reused buffers.
  std::vector<std::string_view> keys = a.key_views;
  keys.push_back("absent");
  std::vector<std::optional<std::string>> values(keys.size(), std::string("stale"));
  REQUIRE(s.get_all(keys, values) == 1000);
  for (std::size_t i = 0; i < 1000; ++i) {
    INFO(i);
    REQUIRE(values[i] == (i < 500 ? a.values[i] : b.values[i - 500]));
  }
  REQUIRE_FALSE(values[1000].has_value());
  std::vector<std::optional<std::string>> short_values(3);
  REQUIRE_THROWS_AS(s.get_all(keys, short_values), offheap::Error);
  // remove_all: counts what was there.
  REQUIRE(s.remove_all(a.key_views) == 1000);
  REQUIRE(s.remove_all(a.key_views) == 0);
  REQUIRE(s.size() == 502);  // b's upper half, dup and x
  REQUIRE(s.get("key-1499") == b.values[999]);
  // Checked before anything is written.
  const std::string long_key(70000, 'k');
  std::vector<std::pair<std::string_view, std::string_view>> bad = {{"ok", "1"}, {long_key, "2"}};
  REQUIRE_THROWS_AS(s.put_all(bad), offheap::Error);
  REQUIRE_FALSE(s.contains("ok"));
  REQUIRE(s.verify().empty());
}

TEST_CASE("put_all into a cache at its memory limit evicts as put does", "[batch][memory_limit]") {
  offheap::Options o;
  o.memory_limit_bytes = 8 << 20;
  o.capacity_bytes = 8 << 20;
  o.shards = 2;
  o.max_chunk_bytes = 1 << 20;
  o.background_maintenance = false;
  offheap::Cache c(o);
  std::size_t inserted = 0;
  for (std::size_t round = 0; round < 40; ++round) {  // about 4x what the limit holds
    const Batch batch(1000, round * 1000, "r", 500);
    inserted += c.put_all(batch.entries);
    REQUIRE(c.stats().memory_mapped_bytes <= o.memory_limit_bytes);
  }
  REQUIRE(inserted == 40000);
  REQUIRE(c.stats().limit_evictions > 0);
  REQUIRE(c.get("key-39999").has_value());
  REQUIRE(c.verify().empty());
}

TEST_CASE("what put_all and remove_all wrote is in the files after a reopen", "[batch][files]") {
  offheap_test::TempDir dir;
  offheap::Options o;
  o.path = (dir / "s").string();
  o.durability = offheap::Durability::periodic;
  const Batch a(3000, 0, "a");
  {
    offheap::Store s(o);
    REQUIRE(s.put_all(a.entries) == 3000);
    REQUIRE(s.remove_all(std::span<const std::string_view>(a.key_views).subspan(0, 1000)) == 1000);
  }
  offheap::Store s(o);
  REQUIRE(s.size() == 2000);
  REQUIRE_FALSE(s.contains("key-999"));
  REQUIRE(s.get("key-1000") == a.values[1000]);
}
