// SPDX-License-Identifier: Apache-2.0
// get_all(), put_all(), remove_all(): the answers and counts for keys
// spread over shards (repeated keys included), a cache that evicts while a
// batch writes at its memory limit, files that keep what a batch wrote, and
// get_all() (its index lines and records prefetched ahead of the lookups)
// beside a writer that grows, migrates, removes and clears.
#include <offheap/offheap.hpp>

#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
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

TEST_CASE("get_all beside a writer that grows the index, removes and clears returns no wrong value",
          "[batch][threads]") {
  offheap::Options o;
  o.shards = 2;  // small tables: many growths, migrations and clears
  offheap::Store s(o);
  constexpr std::uint64_t kKeys = 60000;
  constexpr int kRounds = 3;
  const auto key_of = [](std::uint64_t i) { return "key-" + std::to_string(i); };
  // The round is in the value: a reader may see any round's, whole.
  const auto value_of = [](std::uint64_t i, int round) {
    return "value-" + std::to_string(i) + "-" + std::to_string(round) + std::string(i % 90, 'v');
  };
  const auto is_value_of = [&](const std::string& v, std::uint64_t i) {
    for (int r = 0; r < kRounds; ++r) {
      if (v == value_of(i, r)) return true;
    }
    return false;
  };
  std::atomic<bool> stop{false}, reading{false};
  std::atomic<std::uint64_t> wrong{0}, found{0};
  std::thread reader([&] {
    std::mt19937_64 rng(9);
    std::vector<std::string> keys(64);
    std::vector<std::uint64_t> ids(64);
    std::vector<std::string_view> views(64);
    std::vector<std::optional<std::string>> values(64);
    while (!stop.load(std::memory_order_relaxed)) {
      for (std::size_t j = 0; j < keys.size(); ++j) {
        ids[j] = rng() % kKeys;
        keys[j] = key_of(ids[j]);
        views[j] = keys[j];
      }
      const std::size_t n = s.get_all(views, values);
      std::size_t present = 0;
      for (std::size_t j = 0; j < keys.size(); ++j) {
        if (!values[j]) continue;
        ++present;
        if (!is_value_of(*values[j], ids[j])) wrong.fetch_add(1, std::memory_order_relaxed);
      }
      if (present != n) wrong.fetch_add(1, std::memory_order_relaxed);
      found.fetch_add(n, std::memory_order_relaxed);
      reading.store(true, std::memory_order_relaxed);
    }
  });
  while (!reading.load(std::memory_order_relaxed)) std::this_thread::yield();  // overlap for sure
  for (int round = 0; round < kRounds; ++round) {
    for (std::uint64_t i = 0; i < kKeys; ++i) {
      s.put(key_of(i), value_of(i, round));
      if (i % 7 == 0) s.remove(key_of(i / 2));
    }
    if (round < kRounds - 1) s.clear();
  }
  stop.store(true);
  reader.join();
  CHECK(wrong.load() == 0);
  CHECK(found.load() > 0);
  CHECK(s.stats().index_migrations > 0);
  CHECK(s.verify() == "");
  // Quiet now: every key's answer is known (the last round's writes and
  // removals), and get_all gives exactly it, as get() does.
  std::vector<std::string> keys(kKeys);
  std::vector<std::string_view> views(kKeys);
  std::vector<std::optional<std::string>> values(kKeys);
  for (std::uint64_t i = 0; i < kKeys; ++i) {
    keys[i] = key_of(i);
    views[i] = keys[i];
  }
  std::vector<bool> removed(kKeys, false);
  for (std::uint64_t i = 0; i < kKeys; ++i) {
    removed[i] = false;  // put, then maybe removed by a later i
    if (i % 7 == 0) removed[i / 2] = true;
  }
  std::size_t expected = 0;
  for (std::uint64_t i = 0; i < kKeys; ++i) expected += removed[i] ? 0 : 1;
  CHECK(s.get_all(views, values) == expected);
  std::uint64_t mismatches = 0;
  for (std::uint64_t i = 0; i < kKeys; ++i) {
    const std::optional<std::string> single = s.get(keys[i]);
    if (values[i] != single || values[i].has_value() == removed[i]) ++mismatches;
    if (values[i] && *values[i] != value_of(i, kRounds - 1)) ++mismatches;
  }
  CHECK(mismatches == 0);
}
