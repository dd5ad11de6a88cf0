// SPDX-License-Identifier: Apache-2.0
// The caches (Cache: S3-FIFO, LruCache, TinyLfuCache): the capacity held
// (by writers past the slack, by maintenance down to the share), values
// always right, hot records kept, accounting exact, options checked, warm
// reopen of a file-backed cache. Each test runs on every policy.
#include <offheap/offheap.hpp>

#include "support/cache_options.hpp"
#include "support/chunk_walk.hpp"
#include "support/file_io.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

using offheap::Cache;
using offheap::Errc;
using offheap::LruCache;
using offheap::TinyLfuCache;
using offheap::Options;
using offheap::Store;

namespace {

std::string key_of(std::uint64_t i) { return "key-" + std::to_string(i); }
std::string value_of(std::uint64_t i) { return "value-" + std::to_string(i) + std::string(60, 'x'); }

using offheap_test::cache_options;

/// The most live bytes a cache of `o` may hold: the capacity plus the
/// writers' slack (1/16 of each shard's share, at least 4 KiB).
std::uint64_t hard_limit(const Options& o) {
  const std::uint64_t share = o.capacity_bytes / o.shards;
  return o.shards * (share + std::max<std::uint64_t>(share / 16, 4096));
}

}  // namespace

TEST_CASE("A cache needs a capacity and a store refuses one", "[cache]") {
  Options o;
  o.background_maintenance = false;
  try {
    Cache c(o);
    FAIL("opened");
  } catch (const offheap::Error& e) {
    CHECK(e.code() == Errc::invalid_argument);
    CHECK_THAT(e.what(), Catch::Contains("capacity_bytes"));
  }
  o.capacity_bytes = 1 << 20;
  try {
    Store s(o);
    FAIL("opened");
  } catch (const offheap::Error& e) {
    CHECK(e.code() == Errc::invalid_argument);
    CHECK_THAT(e.what(), Catch::Contains("evicts nothing"));
  }
}

TEMPLATE_TEST_CASE("A value larger than a cache shard is refused, and the cache keeps what it had", "[cache]",
                   Cache, LruCache, TinyLfuCache) {
  TestType c(cache_options(64 << 10, 2));
  c.put("small", "v");
  try {
    c.put("big", std::string(40 << 10, 'b'));
    FAIL("stored");
  } catch (const offheap::Error& e) {
    CHECK(e.code() == Errc::value_too_large);
    CHECK_THAT(e.what(), Catch::Contains("cannot fit in a cache shard"));
  }
  CHECK(c.get("small") == std::optional<std::string>("v"));
  CHECK_FALSE(c.contains("big"));
  c.put("fits", std::string(20 << 10, 'f'));
  CHECK(c.contains("fits"));
}

TEMPLATE_TEST_CASE("A cache holds its capacity: writers past the slack, maintain() down to it", "[cache]",
                   Cache, LruCache, TinyLfuCache) {
  const Options o = cache_options(1 << 20);
  TestType c(o);
  const std::uint64_t n = 200000;  // about 20 MiB of records through a 1 MiB cache
  std::uint64_t most = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    c.put(key_of(i), value_of(i));
    if (i % 97 == 0) {
      const auto s = c.stats();
      most = std::max(most, s.live_bytes);
      REQUIRE(s.live_bytes <= hard_limit(o));
    }
  }
  c.maintain();
  const auto s = c.stats();
  INFO("most live bytes seen " << most << ", hard limit " << hard_limit(o));
  CHECK(s.live_bytes <= o.capacity_bytes);
  CHECK(s.live_bytes > o.capacity_bytes * 9 / 10);
  CHECK(s.capacity_bytes == o.capacity_bytes);
  CHECK(s.records + s.evictions == n);
  CHECK(s.records == c.size());
  // What is left reads back right, and is the newest part of the stream
  // (S3-FIFO with no reads: first in, first out).
  std::uint64_t present = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    const auto v = c.get(key_of(i));
    if (!v) continue;
    ++present;
    REQUIRE(*v == value_of(i));
  }
  CHECK(present == s.records);
  if constexpr (!std::is_same_v<TestType, TinyLfuCache>) {
    // First in, first out when nothing is read (W-TinyLFU admits a new
    // record only if the sketch counts it more often than its victim).
    for (std::uint64_t i = n - s.records / 2; i < n; ++i) CHECK(c.contains(key_of(i)));
  }
  CHECK(c.verify() == "");
}

TEMPLATE_TEST_CASE("A cache keeps a hot set that is read while a scan streams through", "[cache]", Cache,
                   LruCache, TinyLfuCache) {
  TestType c(cache_options(1 << 20, 1));
  const std::uint64_t hot = 1000;  // about 100 KiB: a tenth of the cache
  for (std::uint64_t i = 0; i < hot; ++i) c.put(key_of(i), value_of(i));
  std::string out;
  std::uint64_t hot_hits = 0, hot_reads = 0;
  for (std::uint64_t i = hot; i < 100000; ++i) {
    c.put(key_of(i), value_of(i));  // each scanned key once
    const std::uint64_t k = i % hot;
    ++hot_reads;
    if (c.get(key_of(k), out)) {
      ++hot_hits;
      REQUIRE(out == value_of(k));
    } else {
      c.put(key_of(k), value_of(k));
    }
    if (i % 1000 == 0) c.maintain();
  }
  INFO(hot_hits << " of " << hot_reads << " hot reads hit");
  CHECK(hot_hits > hot_reads * 95 / 100);
  const auto s = c.stats();
  CHECK(s.policy_main_bytes > 0);
  CHECK(s.evictions > 85000);
}

TEMPLATE_TEST_CASE("Overwrites and removals keep a cache's accounting exact", "[cache]", Cache, LruCache,
                   TinyLfuCache) {
  const Options o = cache_options(256 << 10, 2);
  TestType c(o);
  std::mt19937_64 rng(11);
  for (int step = 0; step < 300000; ++step) {
    const std::uint64_t k = rng() % 20000;
    const auto op = rng() % 10;
    if (op < 6) {
      c.put(key_of(k), std::string(static_cast<std::size_t>(rng() % 300), static_cast<char>('a' + k % 26)));
    } else if (op < 8) {
      c.remove(key_of(k));
    } else {
      std::string v;
      if (c.get(key_of(k), v)) {
        REQUIRE(v == std::string(v.size(), static_cast<char>('a' + k % 26)));
      }
    }
    if (step % 5000 == 0) {
      REQUIRE(c.stats().live_bytes <= hard_limit(o));
      c.maintain();
    }
  }
  c.maintain();
  const auto s = c.stats();
  CHECK(s.live_bytes <= o.capacity_bytes);
  CHECK(s.policy_small_bytes + s.policy_main_bytes == s.live_bytes);
  CHECK(c.verify() == "");
  c.clear();
  CHECK(c.stats().policy_small_bytes + c.stats().policy_main_bytes == 0);
  c.put("after", "clear");
  CHECK(c.get("after") == std::optional<std::string>("clear"));
}

TEMPLATE_TEST_CASE("A cache's background maintenance evicts down to capacity while two writers write",
                   "[cache]", Cache, LruCache, TinyLfuCache) {
  Options o = cache_options(2 << 20, 4);
  o.background_maintenance = true;
  TestType c(o);
  std::atomic<std::uint64_t> most{0};
  std::atomic<bool> stop{false};
  std::thread watcher([&] {
    while (!stop.load()) {
      const std::uint64_t live = c.stats().live_bytes;
      std::uint64_t m = most.load();
      while (live > m && !most.compare_exchange_weak(m, live)) {
      }
    }
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < 2; ++t) {
    writers.emplace_back([&c, t] {
      for (std::uint64_t i = 0; i < 150000; ++i) c.put(key_of(i * 2 + t), value_of(i * 2 + t));
    });
  }
  for (auto& w : writers) w.join();
  // The thread brings it down to the capacity within a few rounds.
  for (int i = 0; i < 200 && c.stats().live_bytes > o.capacity_bytes; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  stop.store(true);
  watcher.join();
  const auto s = c.stats();
  INFO("most live bytes seen " << most.load() << ", hard limit " << hard_limit(o));
  CHECK(most.load() <= hard_limit(o));
  CHECK(s.live_bytes <= o.capacity_bytes);
  CHECK(s.records + s.evictions == 300000);
}

TEMPLATE_TEST_CASE("A file-backed cache reopens warm and holds its capacity from the first write",
                   "[cache][files]", Cache, LruCache, TinyLfuCache) {
  offheap_test::TempDir dir;
  Options o = cache_options(512 << 10, 2);
  o.path = dir / "cache";
  std::uint64_t kept = 0;
  {
    TestType c(o);
    for (std::uint64_t i = 0; i < 50000; ++i) c.put(key_of(i), value_of(i));
    c.maintain();
    kept = c.size();
    CHECK(c.stats().live_bytes <= o.capacity_bytes);
  }
  TestType c(o);
  CHECK(c.size() == kept);
  CHECK(c.stats().policy_small_bytes + c.stats().policy_main_bytes == c.stats().live_bytes);
  // Read through a walk: reads by key count as hits (S3-FIFO would then keep
  // what was read twice over what is written next).
  std::uint64_t present = 0, newest_half = 0;
  c.for_each([&](std::string_view k, std::string_view v) {
    const std::uint64_t i = std::stoull(std::string(k.substr(4)));
    ++present;
    REQUIRE(v == value_of(i));
    newest_half += i >= 50000 - kept / 2;
  });
  CHECK(present == kept);
  constexpr bool fifo_order = !std::is_same_v<TestType, TinyLfuCache>;  // (see above)
  if constexpr (fifo_order) {
    // The newest half is there (each shard evicted its oldest first).
    CHECK(newest_half == kept / 2);
  }
  // The capacity holds from the first write after the reopen.
  for (std::uint64_t i = 50000; i < 50000 + kept / 2; ++i) {
    c.put(key_of(i), value_of(i));
    REQUIRE(c.stats().live_bytes <= hard_limit(o));
  }
  c.maintain();
  CHECK(c.stats().live_bytes <= o.capacity_bytes);
  if constexpr (fifo_order) {
    // New writes evicted the oldest first.
    for (std::uint64_t i = 50000 - kept / 4; i < 50000 + kept / 2; ++i) CHECK(c.contains(key_of(i)));
    std::uint64_t oldest_left = 0;
    for (std::uint64_t i = 50000 - kept; i < 50000 - kept / 2; ++i) oldest_left += c.contains(key_of(i));
    CHECK(oldest_left < kept / 10);
  }
  CHECK(c.verify() == "");
}

// ---- found by review: each failed before its fix ------------------------------

TEST_CASE("maintain() after close() leaves a closed file-backed cache's files alone",
          "[cache][files]") {
  offheap_test::TempDir dir;
  Options o = cache_options(256 << 10, 1);
  o.path = dir / "cache";
  std::vector<std::string> keys;
  {
    Cache c(o);
    // Just past the capacity: the write that passes it evicts nothing
    // (the next one would).
    for (std::uint64_t i = 0; c.stats().live_bytes <= o.capacity_bytes; ++i) {
      c.put(key_of(i), value_of(i));
      keys.push_back(key_of(i));
    }
    REQUIRE(c.stats().evictions == 0);
    c.close();  // saved clean: the next open maps this index
    c.maintain();  // must not evict (free records in the files) behind the saved state
    CHECK(c.stats().evictions == 0);
  }
  Cache c(o);
  CHECK_FALSE(c.stats().rebuilt);
  CHECK(c.verify() == "");
  std::uint64_t missing = 0;
  for (std::uint64_t i = 0; i < keys.size(); ++i) {
    const auto v = c.get(keys[i]);
    if (!v) {
      ++missing;
    } else {
      REQUIRE(*v == value_of(i));
    }
  }
  CHECK(missing == 0);
  CHECK(c.size() == keys.size() - missing);
}

TEST_CASE("an eviction that fails (periodic, disk full) loses no record from the policy",
          "[cache][files]") {
  struct rlimit old {};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &old) == 0);
  void (*old_handler)(int) = std::signal(SIGXFSZ, SIG_IGN);
  bool any_failed_eviction = false;
  for (std::size_t vlen = 60; vlen < 80 && !any_failed_eviction; vlen += 3) {
    offheap_test::TempDir dir;
    Options o = cache_options(64 << 10, 1);
    o.path = dir / "cache";
    o.durability = offheap::Durability::periodic;
    o.sync_interval = std::chrono::milliseconds(3600 * 1000);  // no sync: evicted records stay deferred
    Cache c(o);
    struct rlimit low = old;
    low.rlim_cur = 1 << 20;  // no chunk file may pass 1 MiB
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &low) == 0);
    bool failed = false;
    try {
      for (std::uint64_t i = 0; i < 100000; ++i) c.put(key_of(i), std::string(vlen, 'v'));
    } catch (const offheap::Error& e) {
      failed = e.code() == Errc::out_of_space;
    }
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &old) == 0);
    REQUIRE(failed);
    const auto s = c.stats();
    INFO("value length " << vlen << ": live " << s.live_bytes << ", policy small " << s.policy_small_bytes
                         << " + main " << s.policy_main_bytes);
    any_failed_eviction = s.policy_small_bytes + s.policy_main_bytes != s.live_bytes;
    CHECK(s.policy_small_bytes + s.policy_main_bytes == s.live_bytes);
  }
  std::signal(SIGXFSZ, old_handler);
}

TEST_CASE("a file-backed cache (checksums verified on reads, the default) counts readers' hits",
          "[cache][files]") {
  for (const bool file_backed : {false, true}) {
    INFO((file_backed ? "file-backed" : "anonymous"));
    offheap_test::TempDir dir;
    Options o = cache_options(256 << 10, 1);
    if (file_backed) o.path = dir / "cache";
    Cache c(o);
    c.put("hot", std::string(60, 'h'));
    std::uint64_t misses = 0;
    for (std::uint64_t i = 0; i < 20000; ++i) {
      c.put(key_of(i), value_of(i));
      if (i % 50 == 0) {
        if (!c.contains("hot")) {
          ++misses;
          c.put("hot", std::string(60, 'h'));
        }
      }
      if (i % 500 == 0) c.maintain();
    }
    CHECK(misses == 0);
  }
}

namespace {
/// A cache for one writing thread: no writer lock.
template <class E, std::uint8_t Id>
struct SingleWriterCacheOf : offheap::SingleWriterPolicy {
  using Eviction = E;
  static constexpr std::uint8_t id = Id;
};
using SingleWriterCachePolicy = SingleWriterCacheOf<offheap::eviction::S3Fifo, 3>;
}  // namespace

TEST_CASE("a cache without a writer lock refuses a maintenance thread (a second writer)",
          "[cache]") {
  Options o = cache_options(1 << 20, 1);
  o.background_maintenance = true;
  try {
    offheap::OffHeapStore<SingleWriterCachePolicy> c(o);
    FAIL("opened with a maintenance thread that evicts beside the one writer, with no lock");
  } catch (const offheap::Error& e) {
    CHECK(e.code() == Errc::invalid_argument);
  }
}

TEST_CASE("readers beside writers and the maintenance thread (for TSan: readers' slot CAS)",
          "[cache][threads]") {
  for (const bool file_backed : {false, true}) {
    offheap_test::TempDir dir;
    Options o = cache_options(64 << 10, 1);
    o.background_maintenance = true;
    if (file_backed) o.path = dir / "cache";
    Cache c(o);
    for (int i = 0; i < 200; ++i) c.put(key_of(i), value_of(i));
    std::atomic<bool> stop{false};
    std::atomic<std::uint64_t> wrong{0};
    std::thread reader([&] {
      std::string out;
      while (!stop.load()) {
        for (int i = 0; i < 400; ++i) {
          if (c.get(key_of(i), out) && out.substr(0, 6) != "value-") wrong.fetch_add(1);
        }
      }
    });
    for (int n = 0; n < 20000; ++n) c.put(key_of(n % 600), value_of(n % 600) + std::string(n % 50, 'w'));
    stop.store(true);
    reader.join();
    CHECK(wrong.load() == 0);
    CHECK(c.verify() == "");
  }
}

TEST_CASE("a file-backed cache killed mid-run (periodic) reopens consistent and holds its capacity",
          "[cache][files][crash]") {
  for (int round = 0; round < 3; ++round) {
    offheap_test::TempDir dir;
    Options o = cache_options(128 << 10, 2);
    o.path = dir / "cache";
    o.durability = offheap::Durability::periodic;
    o.sync_interval = std::chrono::milliseconds(3);
    o.background_maintenance = true;
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      try {
        Cache c(o);
        std::mt19937_64 rng(static_cast<std::uint64_t>(round));
        std::string out;
        for (std::uint64_t n = 0;; ++n) {
          const std::uint64_t k = rng() % 5000;
          const auto op = rng() % 10;
          if (op < 5) {
            c.put(key_of(k), value_of(k) + std::string(static_cast<std::size_t>(rng() % 200), 'p'));
          } else if (op < 6) {
            c.remove(key_of(k));
          } else {
            c.get(key_of(k), out);
          }
        }
      } catch (...) {
        ::_exit(3);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200 + 100 * round));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    REQUIRE((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL));
    o.background_maintenance = false;
    Cache c(o);
    CHECK(c.stats().rebuilt);
    CHECK(c.verify() == "");
    auto s = c.stats();
    CHECK(s.policy_small_bytes + s.policy_main_bytes == s.live_bytes);
    std::uint64_t present = 0;
    c.for_each([&](std::string_view k, std::string_view v) {
      const std::uint64_t i = std::stoull(std::string(k.substr(4)));
      ++present;
      REQUIRE(v.substr(0, value_of(i).size()) == value_of(i));
    });
    CHECK(present == c.size());
    for (std::uint64_t i = 0; i < 3000; ++i) {
      c.put("after-" + std::to_string(i), value_of(i));
      REQUIRE(c.stats().live_bytes <= hard_limit(o));
    }
    c.maintain();
    s = c.stats();
    CHECK(s.live_bytes <= o.capacity_bytes);
    CHECK(s.policy_small_bytes + s.policy_main_bytes == s.live_bytes);
    CHECK(c.verify() == "");
  }
}

TEST_CASE("a record damaged after a clean close is never evicted by its damaged length",
          "[cache][files][damage]") {
  offheap_test::TempDir dir;
  Options o = cache_options(32 << 10, 1);
  o.path = dir / "cache";
  std::uint64_t n = 0;
  {
    Cache c(o);
    while (c.stats().live_bytes + 120 < o.capacity_bytes) {
      c.put(key_of(n), value_of(n));
      ++n;
    }
    REQUIRE(c.stats().evictions == 0);
  }
  // The oldest record (the first to go) now says its value runs over the
  // next few records (keys 1-4, which readers keep hot).
  const auto chunk = dir / "cache" / offheap::detail::format::chunk_file_name(0, 0);
  const auto walk = offheap_test::chunk_walk::walk(offheap_test::read_file(chunk), chunk.filename().string());
  REQUIRE(walk.records.size() > 6);
  const auto& first = walk.records.front();
  REQUIRE(first.state() == offheap_test::chunk_walk::State::live);
  REQUIRE(offheap_test::chunk_walk::key_of(offheap_test::read_file(chunk), first) == key_of(0));
  const std::uint32_t longer = first.value_len + 3 * 112;
  offheap_test::write_bytes(chunk, first.value_len_at(), &longer, sizeof longer);

  Cache c(o);
  // Hot before the first eviction (a write past the capacity evicts at
  // once): each read a few times, as S3-FIFO keeps what was read more than once.
  for (int pass = 0; pass < 3; ++pass) {
    for (std::uint64_t k = 1; k <= 4; ++k) REQUIRE(c.get(key_of(k)) == value_of(k));
  }
  std::uint64_t lost = 0, corrupt = 0;
  for (std::uint64_t i = n; i < n + 3000; ++i) {
    c.put(key_of(i), value_of(i));  // evicts the oldest first: the damaged one
    if (i % 10 == 0) {
      for (std::uint64_t k = 1; k <= 4; ++k) {  // hot: kept by S3-FIFO
        try {
          const auto v = c.get(key_of(k));
          lost += !v || *v != value_of(k);
        } catch (const offheap::Error& e) {
          corrupt += e.code() == Errc::corrupt_file;
        }
      }
    }
  }
  const auto st = c.stats();
  INFO("evictions " << st.evictions << ", corrupt records " << st.corrupt_records << ", keys written " << n);
  CHECK(lost == 0);
  CHECK(corrupt == 0);
}

TEMPLATE_TEST_CASE("readers' hits reach LRU and W-TinyLFU through their rings: drained by a reader "
                   "without a maintenance thread, dropped and counted with one",
                   "[cache]", LruCache, TinyLfuCache) {
  constexpr std::uint64_t kRing = 32;  // entries per thread and shard (hit_buffers.hpp)
  constexpr std::uint64_t kKeys = 200, kReads = 200000;
  Options o = cache_options(1 << 20, 1);
  SECTION("without a maintenance thread, a reader whose ring is full drains it itself") {
    TestType c(o);
    for (std::uint64_t i = 0; i < kKeys; ++i) c.put(key_of(i), value_of(i));
    for (std::uint64_t i = 0; i < kReads; ++i) REQUIRE(c.contains(key_of(i % kKeys)));
    const auto s = c.stats();
    // Every hit reached the policy but those still in the ring; none dropped.
    CHECK(s.policy_hits_dropped == 0);
    CHECK(s.policy_hits_applied <= kReads);
    CHECK(s.policy_hits_applied + kRing >= kReads);
    c.maintain();  // drains the rest
    CHECK(c.stats().policy_hits_applied == kReads);
    CHECK(!c.stats().maintenance_running);
    CHECK(c.stats().maintenance_rounds == 0);
  }
  SECTION("with one, a reader never drains: a hit that finds its ring full is dropped") {
    o.background_maintenance = true;
    TestType c(o);
    for (std::uint64_t i = 0; i < kKeys; ++i) c.put(key_of(i), value_of(i));
    const std::uint64_t rounds_before = c.stats().maintenance_rounds;
    for (std::uint64_t i = 0; i < kReads; ++i) REQUIRE(c.contains(key_of(i % kKeys)));
    const auto s = c.stats();
    // Each round drains at most two rings (one thread, one shard: the
    // drain before it evicts, and the one in Shard::maintain(); the reader
    // may fill its ring again between them, as it did under ThreadSanitizer
    // on CI), plus the round that may be running as stats() reads: far
    // fewer than the reads, which a reader that drained would apply.
    INFO("applied " << s.policy_hits_applied << ", dropped " << s.policy_hits_dropped << ", rounds "
                    << s.maintenance_rounds - rounds_before);
    CHECK(s.policy_hits_applied <= 2 * kRing * (s.maintenance_rounds - rounds_before + 2));
    CHECK(s.policy_hits_applied + s.policy_hits_dropped <= kReads);
    CHECK(s.policy_hits_applied + s.policy_hits_dropped + kRing >= kReads);
    CHECK(s.policy_hits_dropped > 0);
    CHECK(s.maintenance_running);
    CHECK(c.verify() == "");
  }
  SECTION("with one, a cache that is only read keeps its 1 ms rounds (no backing off to 16 ms)") {
    o.background_maintenance = true;
    TestType c(o);
    for (std::uint64_t i = 0; i < kKeys; ++i) c.put(key_of(i), value_of(i));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // rounds back off: nothing to do
    const std::uint64_t rounds_before = c.stats().maintenance_rounds;
    const auto start = std::chrono::steady_clock::now();
    std::uint64_t i = 0;
    while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(600)) {
      for (int j = 0; j < 1000; ++j, ++i) REQUIRE(c.contains(key_of(i % kKeys)));
    }
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    const std::uint64_t rounds = c.stats().maintenance_rounds - rounds_before;
    // Backed off, a round every 16 ms: ms / 16 + 1. Kept short, one every
    // millisecond or so; a loaded machine stretches the sleeps, so the
    // bound asks only for a round every ~10 ms on average.
    INFO("rounds " << rounds << " in " << ms << " ms of reads, " << c.stats().policy_hits_applied
                   << " hits applied");
    CHECK(static_cast<double>(rounds) >= 1.5 * (ms / 16 + 1));
  }
  SECTION("clear() forgets the hits buffered before it (they name records that are gone)") {
    TestType c(o);
    for (std::uint64_t i = 0; i < kKeys; ++i) c.put(key_of(i), value_of(i));
    c.maintain();
    const std::uint64_t applied = c.stats().policy_hits_applied;
    for (std::uint64_t i = 0; i < kRing / 2; ++i) REQUIRE(c.contains(key_of(i)));
    c.clear();
    c.maintain();
    CHECK(c.stats().policy_hits_applied == applied);
    CHECK(c.stats().records == 0);
    CHECK(c.verify() == "");
    // The rings work on after it.
    c.put(key_of(1), value_of(1));
    for (std::uint64_t i = 0; i < 3; ++i) REQUIRE(c.contains(key_of(1)));
    c.maintain();
    CHECK(c.stats().policy_hits_applied == applied + 3);
  }
}

namespace {
/// An LRU cache for one writing thread: no writer lock, so a reader whose
/// ring is full cannot drain it (it cannot tell whether the writer is in).
using SingleWriterLruPolicy = SingleWriterCacheOf<offheap::eviction::Lru, 4>;
}  // namespace

TEST_CASE("a cache without a writer lock drops the hits its full rings cannot hold, counted",
          "[cache]") {
  constexpr std::uint64_t kRing = 32, kReads = 100;
  offheap::OffHeapStore<SingleWriterLruPolicy> c(cache_options(1 << 20, 1));
  c.put("k", "v");
  for (std::uint64_t i = 0; i < kReads; ++i) REQUIRE(c.contains("k"));
  CHECK(c.stats().policy_hits_applied == 0);
  CHECK(c.stats().policy_hits_dropped == kReads - kRing);
  c.maintain();
  CHECK(c.stats().policy_hits_applied == kRing);
  CHECK(c.verify() == "");
}

TEST_CASE("stats() shows the maintenance thread's rounds and lag and what is left to evict", "[cache]") {
  SECTION("maintain() on the program's thread: the bytes above capacity until it runs") {
    const Options o = cache_options(64 << 10, 1);
    Cache c(o);
    std::uint64_t i = 0;
    while (c.stats().live_bytes <= o.capacity_bytes) c.put(key_of(i), value_of(i)), ++i;
    const auto s = c.stats();
    CHECK(s.maintenance_backlog_bytes == s.live_bytes - o.capacity_bytes);
    CHECK(s.maintenance_backlog_bytes > 0);
    CHECK(!s.maintenance_running);
    c.maintain();
    CHECK(c.stats().maintenance_backlog_bytes == 0);
    CHECK(c.stats().live_bytes <= o.capacity_bytes);
  }
  SECTION("a maintenance thread runs rounds, at least one every 16 ms when idle") {
    Options o = cache_options(64 << 10, 1);
    o.background_maintenance = true;
    Cache c(o);
    const std::uint64_t before = c.stats().maintenance_rounds;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (c.stats().maintenance_rounds < before + 3 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    const auto s = c.stats();
    CHECK(s.maintenance_running);
    CHECK(s.maintenance_rounds >= before + 3);
    CHECK(s.maintenance_lag_seconds >= 0);
    CHECK(s.maintenance_lag_seconds < 10);  // a loose bound: the machine may stall the thread
    CHECK(s.maintenance_backlog_bytes == 0);
  }
  SECTION("close() stops it, and stats() says so") {
    offheap_test::TempDir dir;
    Options o = cache_options(64 << 10, 1);
    o.background_maintenance = true;
    o.path = dir / "cache";
    Cache c(o);
    CHECK(c.stats().maintenance_running);
    c.close();
    CHECK(!c.stats().maintenance_running);
  }
  SECTION("a store without one reports none") {
    // (Every store with a writer lock runs one, for its deadlines: a
    // single-writer store runs none unless its options need one.)
    offheap::OffHeapStore<offheap::SingleWriterPolicy> st(Options{});
    CHECK(!st.stats().maintenance_running);
    CHECK(st.stats().maintenance_rounds == 0);
    CHECK(st.stats().maintenance_lag_seconds == 0);
  }
}
