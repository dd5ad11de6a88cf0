// SPDX-License-Identifier: Apache-2.0
// Review 10: a reader inside an index table that growth replaced and
// zero_pages() dropped under it (mmap MAP_FIXED over the range). The reader
// (this thread) is held, after loading a slot, until another thread has
// grown the index; the two share no synchronization ThreadSanitizer can see
// (as two real threads need none: the reader orders itself by the
// generation). The reader then loads the slot again, from the zero pages.
// Whatever a ThreadSanitizer build says of that load is what the tsan suite
// would say, at random, of every reader that meets a dropped table: its
// mmap interceptor records the new mapping as a plain write by the thread
// that mapped it (ranges up to 64 KiB), which then "races" with the
// reader's atomic load.
#include <offheap/offheap.hpp>

#include <catch2/catch.hpp>

#include <atomic>
#include <string>
#include <thread>

namespace {
std::atomic<int> g_phase{0};  // relaxed only: invisible to ThreadSanitizer's happens-before
}

TEST_CASE("review10: a reader inside a table dropped under it reads zeros without a report",
          "[hooks][review10]") {
  offheap::Options o;
  o.shards = 1;
  o.hash_seed = 42;
  o.background_maintenance = false;
  offheap::Store s(o);
  const offheap::SeededHash hash(42);
  const auto tag = [&](const std::string& k) { return offheap::detail::ctrl::tag_of(hash(k)); };
  // Six keys fill the one group of the first table (its load limit).
  const std::string y = "y";
  s.put(y, "value of y");
  for (int i = 0; i < 5; ++i) s.put("k" + std::to_string(i), "v");
  REQUIRE(s.stats().index_capacity == 7);
  // An absent key whose tag is y's: its lookup loads y's slot.
  std::string x;
  for (int i = 0; x.empty(); ++i) {
    const std::string k = "x" + std::to_string(i);
    if (tag(k) == tag(y)) x = k;
  }
  g_phase.store(0, std::memory_order_relaxed);
  std::thread writer([&] {
    while (g_phase.load(std::memory_order_relaxed) != 1) std::this_thread::yield();
    s.put("grow", "g");  // the seventh key: the table is replaced, its pages dropped
    g_phase.store(2, std::memory_order_relaxed);
  });
  offheap::detail::testing_after_slot_load = [] {
    offheap::detail::testing_after_slot_load = nullptr;
    g_phase.store(1, std::memory_order_relaxed);
    while (g_phase.load(std::memory_order_relaxed) != 2) std::this_thread::yield();
  };
  const bool hit = s.contains(x);
  offheap::detail::testing_after_slot_load = nullptr;
  writer.join();
  CHECK(g_phase.load() == 2);
  CHECK_FALSE(hit);
  CHECK(s.stats().index_capacity == 14);
  CHECK(s.get(y) == std::optional<std::string>("value of y"));
}
