// SPDX-License-Identifier: Apache-2.0
#include <offheap/detail/memory/thread_slots.hpp>
#include <offheap/offheap.hpp>

#include "support/store_name.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

using offheap::detail::ReadCounters;
using offheap::detail::ThreadNumbers;

TEST_CASE("live threads hold distinct numbers, reused after exit", "[thread_slots]") {
  const std::uint32_t mine = ThreadNumbers::current();
  CHECK(ThreadNumbers::current() == mine);  // stable for the thread
  std::vector<std::uint32_t> numbers(8);
  std::vector<std::thread> threads;
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      numbers[static_cast<std::size_t>(i)] = ThreadNumbers::current();
      ready.fetch_add(1);
      while (!go.load()) std::this_thread::yield();  // all alive at once
    });
  }
  while (ready.load() < 8) std::this_thread::yield();
  go.store(true);
  for (auto& t : threads) t.join();
  std::set<std::uint32_t> distinct(numbers.begin(), numbers.end());
  distinct.insert(mine);
  CHECK(distinct.size() == 9);
  // After they exit, a new thread takes one of the returned numbers.
  std::uint32_t later = 0;
  std::thread([&] { later = ThreadNumbers::current(); }).join();
  CHECK(std::find(numbers.begin(), numbers.end(), later) != numbers.end());
}

TEST_CASE("per-thread counters add up across threads", "[thread_slots]") {
  const offheap::detail::StoreName& name = offheap_test::store_name("counters");
  ReadCounters c(name);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const std::uint32_t n = ThreadNumbers::current();
      for (int i = 0; i < 10000; ++i) c.count(n, i % (t + 2) == 0);
    });
  }
  for (auto& t : threads) t.join();
  std::uint64_t hits = 0, misses = 0;
  c.sum(hits, misses);
  std::uint64_t want_hits = 0;
  for (int t = 0; t < 4; ++t) {
    for (int i = 0; i < 10000; ++i) want_hits += (i % (t + 2) == 0);
  }
  CHECK(hits == want_hits);
  CHECK(hits + misses == 40000);
}

namespace {

/// A thread_local object whose destructor reads a store. Made before the
/// thread's first read, it is destroyed after the thread's number was
/// given back (thread_local objects go in reverse order of construction).
/// Function-local: GCC registers a translation unit's namespace-scope
/// thread_locals together, in declaration order, at the first touch of any,
/// which would put ThreadNumbers' own (declared in the header) first.
struct LateReader {
  const offheap::Store* store = nullptr;
  std::atomic<int>* right = nullptr;      // late reads that returned the value
  std::atomic<int>* numbered = nullptr;   // late reads that ran under a number
  ~LateReader() {
    if (store == nullptr) return;
    if (store->get("late") == std::optional<std::string>("value")) right->fetch_add(1);
    if (ThreadNumbers::current() != offheap::detail::kMaxThreads) numbered->fetch_add(1);
  }
};
LateReader& late_reader() {
  thread_local LateReader reader;
  return reader;
}

}  // namespace

TEST_CASE("a read from a thread_local destructor after the thread's number went back takes none",
          "[thread_slots]") {
  offheap::Options o;
  o.record_stats = true;  // reads count on their thread's line: they take a number
  offheap::Store store(o);
  store.put("late", "value");
  std::atomic<int> right{0}, numbered{0}, early{0};
  // More threads than there are numbers: one leaked number each would leave
  // none for later threads.
  constexpr int kThreads = 1100;
  for (int i = 0; i < kThreads; ++i) {
    std::thread([&] {
      LateReader& late = late_reader();  // constructed now: destroyed after the number's owner
      late.store = &store;
      late.right = &right;
      late.numbered = &numbered;
      if (store.contains("late")) early.fetch_add(1);  // takes a number
    }).join();
  }
  CHECK(early.load() == kThreads);
  CHECK(right.load() == kThreads);  // the late reads still read right
  CHECK(numbered.load() == 0);      // on the shared overflow path, taking no number
  std::uint32_t fresh = offheap::detail::kMaxThreads;
  std::thread([&] { fresh = ThreadNumbers::current(); }).join();
  CHECK(fresh < offheap::detail::kMaxThreads);
}
