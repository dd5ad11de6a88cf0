// SPDX-License-Identifier: Apache-2.0
// A cache at Options::memory_limit_bytes whose evictions free their space
// only once the removal listener has heard of them, reported by the
// maintenance thread: a writer that the limit refuses waits for those
// reports while they go on (Upkeep::free_waiting_removals, detail/store/upkeep.hpp), however
// slow one listener call is, and gives up, with a clear error, only on a
// listener that stalls (5 s without a report) — never a deadlock.
#include <offheap/offheap.hpp>

#include "support/env.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

namespace {

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;

std::string key_of(std::uint32_t id) { return "wait-" + std::to_string(id); }

/// 1 KiB, its first bytes naming the key and version.
std::string value_of(std::uint32_t id, std::uint32_t version) {
  std::string v = std::to_string(id) + "/" + std::to_string(version) + ":";
  v.resize(1024, static_cast<char>('a' + id % 26));
  return v;
}

offheap::Options limited_options() {
  offheap::Options o;
  o.memory_limit_bytes = 8 * kMiB;
  o.capacity_bytes = 8 * kMiB;
  o.shards = 1;
  o.max_chunk_bytes = 1 * kMiB;
  o.background_maintenance = true;  // the listener runs there only
  return o;
}

}  // namespace

TEST_CASE("A writer at the memory limit waits for a listener that is slow on the maintenance thread",
          "[memory_limit]") {
  // One listener call in 3000 takes 800 ms: long enough for the writer to
  // fill the limit with records that wait for it (a wait that gave up
  // after a fixed 200 ms without a report refused writes here).
  std::atomic<std::uint64_t> calls{0}, slow_calls{0};
  offheap::Options o = limited_options();
  o.on_removal = [&](std::string_view, std::string_view, offheap::RemovalCause) {
    if (calls.fetch_add(1, std::memory_order_relaxed) % 3000 == 2999) {
      slow_calls.fetch_add(1, std::memory_order_relaxed);
      std::this_thread::sleep_for(std::chrono::milliseconds(800));
    }
  };
  offheap::LruCache c(o);
  constexpr std::uint32_t kKeys = 24000;  // 3x the limit in 1 KiB values
  for (std::uint32_t id = 0; id < kKeys; ++id) {
    try {
      c.put(key_of(id), value_of(id, 1));
    } catch (const offheap::Error& e) {
      FAIL("write " << id << " refused: " << e.what());
    }
  }
  const offheap::Stats st = c.stats();
  INFO("listener calls " << calls.load() << ", slow ones " << slow_calls.load() << ", limit evictions "
                         << st.limit_evictions << ", mapped " << st.memory_mapped_bytes);
  CHECK(slow_calls.load() >= 2);
  CHECK(st.limit_evictions > 0);
  CHECK(st.memory_mapped_bytes <= o.memory_limit_bytes);
  // The latest keys are there, whole.
  for (std::uint32_t id = kKeys - 100; id < kKeys; ++id) REQUIRE(c.get(key_of(id)) == value_of(id, 1));
  c.maintain();
  REQUIRE(c.verify().empty());
  REQUIRE(c.stats().removals_pending == 0);
}

TEST_CASE("A writer at the memory limit refuses the write when the listener stalls, and goes on after it",
          "[memory_limit]") {
  // The listener blocks (as one waiting for a lock the writer holds would)
  // until the writer has had its refusal: out_of_space after 5 s without a
  // report, once for the whole write (not per retry), then writes go on.
  std::atomic<bool> armed{false}, released{false};
  std::atomic<std::uint64_t> blocked{0};
  offheap::Options o = limited_options();
  o.on_removal = [&](std::string_view, std::string_view, offheap::RemovalCause) {
    if (!armed.load(std::memory_order_acquire)) return;  // pairs with the release below
    blocked.fetch_add(1, std::memory_order_relaxed);
    while (!released.load(std::memory_order_acquire)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  offheap::LruCache c(o);
  std::uint32_t id = 0;
  for (; id < 4000; ++id) c.put(key_of(id), value_of(id, 1));  // half the limit
  armed.store(true, std::memory_order_release);
  bool refused = false;
  double refused_after = 0;
  for (; id < 40000 && !refused; ++id) {
    const auto start = std::chrono::steady_clock::now();
    try {
      c.put(key_of(id), value_of(id, 1));
    } catch (const offheap::Error& e) {
      refused_after = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      INFO(e.what());
      REQUIRE(e.code() == offheap::Errc::out_of_space);
      REQUIRE(std::string(e.what()).find("memory_limit_bytes") != std::string::npos);
      refused = true;
    }
  }
  // Counted before the release: once released, the maintenance thread
  // goes on through the waiting removals and each call counts again.
  const std::uint64_t blocked_at_refusal = blocked.load(std::memory_order_relaxed);
  armed.store(false, std::memory_order_release);
  released.store(true, std::memory_order_release);  // pairs with the listener's acquire
  INFO("refused after " << refused_after << " s; listener calls blocked " << blocked_at_refusal);
  REQUIRE(refused);
  REQUIRE(blocked_at_refusal == 1);
  // 5 s without a report, then the later retries of that write only look.
  CHECK(refused_after >= 5.0);
  CHECK(refused_after < 30.0);
  // Nothing lost or torn, and the writes go on once the listener does.
  const std::uint32_t refused_id = id - 1;
  REQUIRE_FALSE(c.contains(key_of(refused_id)));
  for (std::uint32_t more = 0; more < 4000; ++more, ++id) c.put(key_of(id), value_of(id, 2));
  for (std::uint32_t k = id - 100; k < id; ++k) REQUIRE(c.get(key_of(k)) == value_of(k, 2));
  c.maintain();
  REQUIRE(c.verify().empty());
  REQUIRE(c.stats().memory_mapped_bytes <= o.memory_limit_bytes);
}
