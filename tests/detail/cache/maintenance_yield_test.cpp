// SPDX-License-Identifier: Apache-2.0
// How the maintenance thread keeps out of writers' way: WriterLock says
// whether a thread waits for it; the readers' hit rings drain up to a stop
// (the rest left, in order, for the next drain); and a round leaves the
// evictions of a shard being written to its writers (upkeep.hpp).
#include <offheap/detail/cache/hit_buffers.hpp>
#include <offheap/offheap.hpp>

#include "support/cache_options.hpp"
#include "support/store_name.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <string>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

using offheap::detail::HitBuffers;

namespace {
// A writer lock that can be told to report a waiting writer (contended())
// whether one waits or not.
std::atomic<bool> g_report_waiting{false};
struct ReportingLock {
  offheap::WriterLock lock_;
  void lock() noexcept { lock_.lock(); }
  bool try_lock() noexcept { return lock_.try_lock(); }
  void unlock() noexcept { lock_.unlock(); }
  bool contended() const noexcept { return g_report_waiting.load() || lock_.contended(); }
};
struct ReportingLruPolicy : offheap::LruCachePolicy {
  using Lock = ReportingLock;
};

std::string key_of(std::uint64_t i) { return "yield-key-" + std::to_string(i); }
std::string value_of(std::uint64_t i) { return std::string(40 + i % 50, static_cast<char>('a' + i % 26)); }
}  // namespace

TEST_CASE("WriterLock says whether a thread waits for it, from its first failed try until it has it",
          "[maintenance][lock]") {
  offheap::WriterLock lock;
  CHECK_FALSE(lock.contended());
  lock.lock();
  CHECK_FALSE(lock.contended());  // held, nobody waiting
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    lock.lock();
    got.store(true);
    lock.unlock();
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!lock.contended() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  REQUIRE(lock.contended());
  CHECK_FALSE(got.load());  // still waiting while the hint says so
  lock.unlock();
  waiter.join();
  CHECK(got.load());
  CHECK_FALSE(lock.contended());  // the waiter took it and counted itself out
  CHECK(lock.try_lock());
  CHECK_FALSE(lock.contended());  // a try that fails does not count as waiting
  std::thread trier([&] { CHECK_FALSE(lock.try_lock()); });
  trier.join();
  CHECK_FALSE(lock.contended());
  lock.unlock();
}

TEST_CASE("Hit rings drain up to a stop, and the hits left come next time, in order, none twice",
          "[maintenance][hits]") {
  const offheap::detail::StoreName& name = offheap_test::store_name("hit rings test");
  HitBuffers rings(name);
  std::vector<std::uint64_t> seen;
  const auto take = [&](std::uint64_t loc, std::uint64_t stamp, std::uint64_t hash) {
    CHECK(stamp == loc + 1000);
    CHECK(hash == loc * 7);
    seen.push_back(loc);
  };
  for (std::uint64_t i = 0; i < 20; ++i) REQUIRE(rings.record(i, i + 1000, i * 7, true));
  // Stopped after each hit: one at a time, from the oldest.
  for (std::uint64_t i = 0; i < 5; ++i) {
    CHECK(rings.drain(take, [] { return true; }) == 1);
    REQUIRE(seen.size() == i + 1);
    CHECK(seen.back() == i);
  }
  // Stopped after three more.
  int left = 3;
  CHECK(rings.drain(take, [&] { return --left == 0; }) == 3);
  CHECK(seen.size() == 8);
  // The ring has room again for what was drained: 32 entries, 12 held.
  for (std::uint64_t i = 20; i < 40; ++i) REQUIRE(rings.record(i, i + 1000, i * 7, true));
  CHECK_FALSE(rings.record(40, 1040, 280, true));  // full: 32 held
  // The rest, unstopped: every hit once, in the order recorded.
  CHECK(rings.drain(take) == 32);
  REQUIRE(seen.size() == 40);
  for (std::uint64_t i = 0; i < 40; ++i) CHECK(seen[i] == i);
  CHECK(rings.drain(take) == 0);
}

TEST_CASE("A drain stopped in one thread's ring begins there next time: every ring is reached in turn",
          "[maintenance][hits]") {
  const offheap::detail::StoreName& name = offheap_test::store_name("hit rings test");
  HitBuffers rings(name);
  // Three threads' rings (each thread records its own), 10 hits each:
  // thread t's hits are t * 100 + i.
  for (std::uint64_t t = 0; t < 3; ++t) {
    std::thread([&, t] {
      for (std::uint64_t i = 0; i < 10; ++i) REQUIRE(rings.record(t * 100 + i, 0, 0, true));
    }).join();
  }
  std::vector<std::uint64_t> seen;
  const auto take = [&](std::uint64_t loc, std::uint64_t, std::uint64_t) { seen.push_back(loc); };
  // Drains of one hit each: whichever ring comes first keeps being drained
  // (it is where the last one stopped) until it is empty, then the next;
  // all 30 hits come in 30 such drains, each ring's in order.
  for (int d = 0; d < 30; ++d) CHECK(rings.drain(take, [] { return true; }) == 1);
  REQUIRE(seen.size() == 30);
  std::vector<std::uint64_t> next(3, 0);
  for (const std::uint64_t loc : seen) {
    const std::uint64_t t = loc / 100;
    REQUIRE(t < 3);
    CHECK(loc % 100 == next[t]);  // each ring's hits in order, none twice
    ++next[t];
  }
  CHECK(next == std::vector<std::uint64_t>{10, 10, 10});
  CHECK(rings.drain(take) == 0);

  // This thread's ring (1000 + i) and another's (2000 + i): drained a hit
  // at a time until the second ring's first hit; then this thread records
  // more, and the next drain still comes from the ring the last one
  // stopped in (a ring drained first every time would starve the others
  // while writers keep stopping the drains).
  for (std::uint64_t i = 0; i < 5; ++i) REQUIRE(rings.record(1000 + i, 0, 0, true));
  std::thread([&] {
    for (std::uint64_t i = 0; i < 5; ++i) REQUIRE(rings.record(2000 + i, 0, 0, true));
  }).join();
  seen.clear();
  std::uint64_t first_ring = 0;
  for (int d = 0; d < 10; ++d) {
    REQUIRE(rings.drain(take, [] { return true; }) == 1);
    if (first_ring == 0) first_ring = seen.back() / 1000;
    if (seen.back() / 1000 != first_ring) break;
  }
  const std::uint64_t stopped_in = seen.back() / 1000;
  REQUIRE(stopped_in != first_ring);
  for (std::uint64_t i = 5; i < 10; ++i) REQUIRE(rings.record(1000 + i, 0, 0, true));
  REQUIRE(rings.drain(take, [] { return true; }) == 1);
  CHECK(seen.back() / 1000 == stopped_in);
  CHECK(seen.back() % 1000 == 1);  // that ring's next hit
}

TEST_CASE("A maintenance round leaves a shard being written to its writers and evicts it to its "
          "share once the writes stop",
          "[maintenance][cache]") {
  offheap::Options o = offheap_test::cache_options(1 << 20, 1);
  o.background_maintenance = true;
  offheap::Cache c(o);
  // Writes past the capacity: each write evicts what the ones before it
  // added, so the shard stays within a record of its share.
  for (std::uint64_t i = 0; i < 40000; ++i) c.put(key_of(i), value_of(i));
  const offheap::Stats during = c.stats();
  CHECK(during.live_bytes <= during.capacity_bytes + 4096);
  // Once they stop, a round (the second after the last write) evicts the
  // last record over the share.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (c.stats().live_bytes > c.stats().capacity_bytes && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const offheap::Stats after = c.stats();
  INFO("live " << after.live_bytes << ", capacity " << after.capacity_bytes << ", evictions "
               << after.evictions << ", rounds " << after.maintenance_rounds);
  CHECK(after.live_bytes <= after.capacity_bytes);
  CHECK(after.evictions > 0);
  CHECK(c.verify() == "");
}

TEST_CASE("A maintenance round evicts nothing while a writer waits for the shard's lock, and evicts "
          "once none does",
          "[maintenance][cache]") {
  offheap::Options o = offheap_test::cache_options(1 << 20, 1);
  o.background_maintenance = true;
  offheap::OffHeapStore<ReportingLruPolicy> c(o);
  g_report_waiting.store(true);
  // Past the capacity, until a write leaves the shard over its share (a
  // write evicts what the ones before it added, then adds its record).
  std::uint64_t i = 0;
  for (; i < 40000 || (c.stats().live_bytes <= c.stats().capacity_bytes && i < 41000); ++i) {
    c.put(key_of(i), value_of(i));
  }
  const offheap::Stats written = c.stats();
  REQUIRE(written.live_bytes > written.capacity_bytes);
  // Rounds come and go; each lets the lock go before its first eviction.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (c.stats().maintenance_rounds < written.maintenance_rounds + 5 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const offheap::Stats yielded = c.stats();
  INFO("rounds " << written.maintenance_rounds << " -> " << yielded.maintenance_rounds);
  REQUIRE(yielded.maintenance_rounds >= written.maintenance_rounds + 5);
  CHECK(yielded.evictions == written.evictions);
  CHECK(yielded.live_bytes == written.live_bytes);
  // No writer waits: a round evicts the shard down to its share.
  g_report_waiting.store(false);
  while (c.stats().live_bytes > c.stats().capacity_bytes && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  CHECK(c.stats().live_bytes <= c.stats().capacity_bytes);
  CHECK(c.stats().evictions > yielded.evictions);
  CHECK(c.verify() == "");
}
