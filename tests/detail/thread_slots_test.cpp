// SPDX-License-Identifier: Apache-2.0
#include <offheap/detail/thread_slots.hpp>

#include <catch2/catch.hpp>

#include <set>
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
  const std::string name = "counters";
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
