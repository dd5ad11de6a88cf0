// SPDX-License-Identifier: Apache-2.0
// compute() and its kin: atomic per key (threads incrementing the same keys
// lose nothing, in every kind of store), what the function sees and may
// return, what it may not call, expiry, errors, the memory limit, and the
// removal listener.
#include <offheap/offheap.hpp>

#include "support/temp_dir.hpp"

#include "support/manual_clock.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

using offheap::Computed;
using offheap_test::ManualClock;

/// Threads increment the same few keys, by compute_value<uint64_t> on some
/// keys and by merge() of decimal text on others: every increment counts.
template <class S>
void increments_lose_nothing(S& s) {
  constexpr int kThreads = 4, kKeys = 8, kRounds = 4000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&s, t] {
      char text[24];
      for (int i = 0; i < kRounds; ++i) {
        const std::string k = std::to_string((i + t) % kKeys);
        s.template compute_value<std::uint64_t>("n" + k, [](std::optional<std::uint64_t> n) {
          return std::optional<std::uint64_t>(n.value_or(0) + 1);
        });
        s.merge("t" + k, "1", [&](std::string_view old, std::string_view) {
          const std::uint64_t n = std::stoull(std::string(old)) + 1;
          const int len = std::snprintf(text, sizeof text, "%llu", static_cast<unsigned long long>(n));
          return std::optional<std::string_view>(std::string_view(text, static_cast<std::size_t>(len)));
        });
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int k = 0; k < kKeys; ++k) {
    INFO("key " << k);
    REQUIRE(s.template get_value<std::uint64_t>("n" + std::to_string(k)) == kThreads * kRounds / kKeys);
    REQUIRE(s.get("t" + std::to_string(k)) == std::to_string(kThreads * kRounds / kKeys));
  }
}

}  // namespace

TEST_CASE("compute: threads incrementing the same keys lose nothing", "[compute]") {
  offheap_test::TempDir dir;
  SECTION("in memory") {
    offheap::Store s{offheap::Options{}};
    increments_lose_nothing(s);
  }
  SECTION("a cache") {
    offheap::Options o;
    o.capacity_bytes = 64 << 20;
    offheap::Cache c(o);
    increments_lose_nothing(c);
  }
  SECTION("files, periodic, then reopened") {
    offheap::Options o;
    o.path = (dir / "s").string();
    o.durability = offheap::Durability::periodic;
    o.sync_interval = std::chrono::milliseconds(1);
    {
      offheap::Store s(o);
      increments_lose_nothing(s);
    }
    offheap::Store s(o);
    REQUIRE(s.get_value<std::uint64_t>("n3") == 2000);
  }
}

TEST_CASE("compute: what it says it did, and what the function sees", "[compute]") {
  offheap::Store s{offheap::Options{}};
  int calls = 0;
  auto append = [&](std::optional<std::string_view> old) {
    ++calls;
    return std::optional<std::string>(old ? std::string(*old) + "+" : std::string("a"));
  };
  REQUIRE(s.compute("k", append) == Computed::inserted);
  REQUIRE(s.compute("k", append) == Computed::updated);
  REQUIRE(s.get("k") == "a+");
  REQUIRE(calls == 2);
  // The old value itself, or part of it (a view into the record, which the
  // write may replace in place or free first).
  REQUIRE(s.compute("k", [](std::optional<std::string_view> old) { return old; }) == Computed::unchanged);
  s.put("long", std::string(100, 'x') + "tail");
  REQUIRE(s.compute("long", [](std::optional<std::string_view> old) {
    return std::optional<std::string_view>(old->substr(100));
  }) == Computed::updated);
  REQUIRE(s.get("long") == "tail");
  REQUIRE(s.compute("long", [](std::optional<std::string_view> old) {
    return std::optional<std::string_view>(old->substr(1, 2));
  }) == Computed::updated);
  REQUIRE(s.get("long") == "ai");
  // Removal, and nothing to remove.
  REQUIRE(s.compute("k", [](std::optional<std::string_view>) { return std::optional<std::string_view>(); }) ==
          Computed::removed);
  REQUIRE_FALSE(s.contains("k"));
  REQUIRE(s.compute("k", [](std::optional<std::string_view> old) {
    REQUIRE_FALSE(old.has_value());
    return std::optional<std::string_view>();
  }) == Computed::unchanged);
  // The if-absent / if-present forms call their function only when they apply.
  calls = 0;
  auto make = [&] {
    ++calls;
    return std::string("made");
  };
  REQUIRE(s.compute_if_absent("m", make) == Computed::inserted);
  REQUIRE(s.compute_if_absent("m", make) == Computed::unchanged);
  REQUIRE(calls == 1);
  REQUIRE(s.get("m") == "made");
  REQUIRE(s.compute_if_present("absent", [&](std::string_view) {
    ++calls;
    return std::optional<std::string_view>("x");
  }) == Computed::unchanged);
  REQUIRE(calls == 1);
  REQUIRE_FALSE(s.contains("absent"));
  REQUIRE(s.compute_if_present("m", [](std::string_view old) { return std::optional<std::string>(std::string(old) + "!"); }) ==
          Computed::updated);
  REQUIRE(s.get("m") == "made!");
  // merge: the value when absent, combine(old, value) when present.
  auto concat = [](std::string_view a, std::string_view b) { return std::optional<std::string>(std::string(a) + "," + std::string(b)); };
  REQUIRE(s.merge("list", "1", concat) == Computed::inserted);
  REQUIRE(s.merge("list", "2", concat) == Computed::updated);
  REQUIRE(s.get("list") == "1,2");
  REQUIRE(s.merge("list", "3", [](std::string_view, std::string_view) { return std::optional<std::string>(); }) ==
          Computed::removed);
  REQUIRE_FALSE(s.contains("list"));
  REQUIRE(offheap::to_string(Computed::inserted) == "inserted");
  REQUIRE(offheap::wrote(Computed::updated));
  REQUIRE_FALSE(offheap::wrote(Computed::removed));
}

TEST_CASE("compute: typed forms keep and check the type tag", "[compute]") {
  offheap::Store s{offheap::Options{}};
  auto add = [](std::int64_t d) {
    return [d](std::optional<std::int64_t> n) { return std::optional<std::int64_t>(n.value_or(0) + d); };
  };
  REQUIRE(s.compute_value<std::int64_t>("n", add(5)) == Computed::inserted);
  REQUIRE(s.compute_value<std::int64_t>("n", add(-7)) == Computed::updated);
  REQUIRE(s.get_value<std::int64_t>("n") == -2);
  REQUIRE(s.compute_value<std::int64_t>("n", add(0)) == Computed::unchanged);
  // Another type: refused before the function runs, the value kept.
  bool called = false;
  try {
    s.compute_value<double>("n", [&](std::optional<double> d) {
      called = true;
      return d;
    });
    FAIL("compute_value<double> on an int64 did not throw");
  } catch (const offheap::Error& e) {
    REQUIRE(e.code() == offheap::Errc::type_mismatch);
  }
  REQUIRE_FALSE(called);
  REQUIRE_THROWS_AS(s.replace_value<double>("n", 1.0), offheap::Error);
  REQUIRE_THROWS_AS(s.put_value_if_absent<std::uint64_t>("n", 1), offheap::Error);
  s.put("bytes", "12345678");  // untyped: the size of a uint64, not its tag
  REQUIRE_THROWS_AS(s.compute_value<std::uint64_t>("bytes", [](std::optional<std::uint64_t> n) { return n; }),
                    offheap::Error);
  REQUIRE(s.get("bytes") == "12345678");
  REQUIRE(s.get_value<std::int64_t>("n") == -2);
  // replace_value: only a present T; put_value_if_absent: only an absent key.
  REQUIRE_FALSE(s.replace_value<std::int64_t>("none", 3));
  REQUIRE_FALSE(s.contains("none"));
  REQUIRE(s.replace_value<std::int64_t>("n", 3));
  REQUIRE(s.get_value<std::int64_t>("n") == 3);
  REQUIRE(s.put_value_if_absent<std::int64_t>("fresh", 9));
  REQUIRE_FALSE(s.put_value_if_absent<std::int64_t>("fresh", 10));
  REQUIRE(s.get_value<std::int64_t>("fresh") == 9);
  // Removal from a typed compute.
  REQUIRE(s.compute_value<std::int64_t>("fresh", [](std::optional<std::int64_t>) { return std::optional<std::int64_t>(); }) ==
          Computed::removed);
  REQUIRE_FALSE(s.contains("fresh"));
}

TEST_CASE("compute: the function may read the store, and gets a clear error for what would deadlock", "[compute]") {
  offheap::Store s{offheap::Options{}};
  offheap::Store other{offheap::Options{}};
  s.put("a", "1");
  s.put("b", "2");
  std::vector<std::string> refused;
  const auto result = s.compute("a", [&](std::optional<std::string_view> old) {
    // Reads take no lock: fine, on any key (the same shard's too).
    const std::optional<std::string> b = s.get("b");
    REQUIRE(b == "2");
    REQUIRE(s.contains("a"));
    // Another store: fine.
    other.put("x", "from inside");
    auto expect_refused = [&](const char* what, auto&& call) {
      try {
        call();
        refused.push_back(std::string(what) + ": not refused");
      } catch (const offheap::Error& e) {
        if (e.code() != offheap::Errc::invalid_argument ||
            std::string(e.what()).find("inside a compute() or fill function") == std::string::npos) {
          refused.push_back(std::string(what) + ": " + e.what());
        }
      }
    };
    expect_refused("put", [&] { s.put("c", "3"); });
    expect_refused("put_if_absent", [&] { s.put_if_absent("c", "3"); });
    expect_refused("remove", [&] { s.remove("b"); });
    expect_refused("put_value", [&] { s.put_value("c", 1); });
    expect_refused("compute", [&] { s.compute("c", [](std::optional<std::string_view> o) { return o; }); });
    expect_refused("clear", [&] { s.clear(); });
    expect_refused("maintain", [&] { s.maintain(); });
    expect_refused("sync", [&] { s.sync(); });
    expect_refused("stats", [&] { (void)s.stats(); });
    expect_refused("verify", [&] { (void)s.verify(); });
    expect_refused("close", [&] { s.close(); });
    return std::optional<std::string>(std::string(*old) + *b);
  });
  INFO([&] {
    std::string all;
    for (const auto& r : refused) all += r + "\n";
    return all;
  }());
  REQUIRE(refused.empty());
  REQUIRE(result == Computed::updated);
  REQUIRE(s.get("a") == "12");
  REQUIRE(s.get("b") == "2");
  REQUIRE_FALSE(s.contains("c"));
  REQUIRE(other.get("x") == "from inside");
  // After it, every call works again.
  s.put("c", "3");
  REQUIRE(s.stats().records == 3);
}

TEST_CASE("compute: a function that throws changes nothing, an oversized value is refused", "[compute]") {
  offheap::Options o;
  o.max_chunk_bytes = 1 << 20;
  offheap::Store s(o);
  s.put("k", "v");
  REQUIRE_THROWS_AS(s.compute("k", [](std::optional<std::string_view>) -> std::optional<std::string_view> {
    throw std::runtime_error("no");
  }), std::runtime_error);
  REQUIRE(s.get("k") == "v");
  const std::string huge(2 << 20, 'h');
  try {
    s.compute("k", [&](std::optional<std::string_view>) { return std::optional<std::string_view>(huge); });
    FAIL("an oversized computed value was not refused");
  } catch (const offheap::Error& e) {
    REQUIRE(e.code() == offheap::Errc::value_too_large);
  }
  REQUIRE(s.get("k") == "v");
  REQUIRE_THROWS_AS(s.compute(std::string(70000, 'k'), [](std::optional<std::string_view> v) { return v; }),
                    offheap::Error);
  s.put("k", "w");  // the shard's lock was let go
  REQUIRE(s.get("k") == "w");
  REQUIRE(s.verify().empty());
}

TEST_CASE("compute: an expired entry is absent to the function", "[compute][expiry]") {
  ManualClock clock;
  offheap::Options o;
  o.clock = &clock;
  o.background_maintenance = false;
  offheap::Store s(o);
  s.put("k", "old", offheap::Ttl(std::chrono::milliseconds(10)));
  clock.advance(11);
  REQUIRE(s.compute("k", [](std::optional<std::string_view> old) {
    REQUIRE_FALSE(old.has_value());
    return std::optional<std::string_view>("new");
  }) == Computed::inserted);
  REQUIRE(s.get("k") == "new");
  // A TTL on the computed value; an equal value writes nothing (the deadline stays).
  REQUIRE(s.compute("t", [](std::optional<std::string_view>) { return std::optional<std::string_view>("v"); },
                    offheap::Ttl(std::chrono::milliseconds(10))) == Computed::inserted);
  REQUIRE(s.compute("t", [](std::optional<std::string_view> old) { return old; },
                    offheap::Ttl(std::chrono::hours(1))) == Computed::unchanged);
  clock.advance(11);
  REQUIRE_FALSE(s.contains("t"));
  REQUIRE(s.compute_if_absent("t", [] { return std::string_view("again"); }) == Computed::inserted);
  REQUIRE(s.get("t") == "again");
}

TEST_CASE("compute: the removal listener hears what compute replaced and removed", "[compute]") {
  std::mutex m;
  std::map<offheap::RemovalCause, std::vector<std::string>> heard;
  offheap::Options o;
  o.background_maintenance = false;
  o.on_removal = [&](std::string_view, std::string_view value, offheap::RemovalCause cause) {
    const std::lock_guard<std::mutex> g(m);
    heard[cause].emplace_back(value);
  };
  offheap::Store s(o);
  s.compute("k", [](std::optional<std::string_view>) { return std::optional<std::string_view>("one"); });
  s.compute("k", [](std::optional<std::string_view>) { return std::optional<std::string_view>("two"); });
  s.compute("k", [](std::optional<std::string_view>) { return std::optional<std::string_view>(); });
  s.maintain();  // reports what waits
  REQUIRE(heard[offheap::RemovalCause::replaced] == std::vector<std::string>{"one"});
  REQUIRE(heard[offheap::RemovalCause::explicit_remove] == std::vector<std::string>{"two"});
}

TEST_CASE("compute: a cache at its memory limit calls the function once while it evicts", "[compute][memory_limit]") {
  offheap::Options o;
  o.memory_limit_bytes = 8 << 20;
  o.capacity_bytes = 8 << 20;
  o.shards = 2;
  o.max_chunk_bytes = 1 << 20;
  o.background_maintenance = false;
  offheap::Cache c(o);
  std::uint64_t calls = 0, inserted = 0;
  const std::string value(500, 'v');
  for (std::uint32_t i = 0; i < 60000; ++i) {  // about 4x what the limit holds
    const Computed r = c.compute_if_absent("key-" + std::to_string(i), [&] {
      ++calls;
      return std::string_view(value);
    });
    inserted += r == Computed::inserted;
  }
  REQUIRE(calls == 60000);
  REQUIRE(inserted == 60000);
  const offheap::Stats st = c.stats();
  REQUIRE(st.limit_evictions > 0);
  REQUIRE(st.memory_mapped_bytes <= o.memory_limit_bytes);
  REQUIRE(c.get("key-59999") == value);
  REQUIRE(c.verify().empty());
}
