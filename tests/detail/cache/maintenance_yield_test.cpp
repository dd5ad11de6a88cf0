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

TEST_CASE("Hit rings drain up to a stop; the hits left come next time, in order, none twice",
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
