// SPDX-License-Identifier: Apache-2.0
// The timing wheel (detail/expiry/wheel.hpp) against a plain model: every entry
// is handed out exactly once, by the first advance() whose time reaches its
// deadline, never earlier; a stop in the middle keeps the entry; sweep()
// drops exactly the stale entries; deadlines beyond the wheel's levels wait
// in the heap and still come out on time.
#include <offheap/detail/expiry/wheel.hpp>

#include "support/store_name.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

using offheap::detail::ExpiryWheel;

namespace {
const offheap::detail::StoreName& kName = offheap_test::store_name("wheel test");

/// A deadline `now` + a log-uniform delay of 0 ms to `max_ms`.
std::uint64_t log_uniform(std::mt19937_64& rng, std::uint64_t now, double max_ms) {
  std::uniform_real_distribution<double> u(0.0, std::log(max_ms + 1));
  return now + static_cast<std::uint64_t>(std::exp(u(rng))) - 1;
}
}  // namespace

TEST_CASE("ExpiryWheel hands out every entry once, when its deadline is reached, never before", "[detail][expiry]") {
  const std::uint64_t seed = GENERATE(1u, 2u, 3u);
  std::mt19937_64 rng(seed);
  const std::uint64_t start = 1'700'000'000'000 + seed * 977;  // a wall-clock-like time
  ExpiryWheel wheel(kName, start);
  std::map<std::uint64_t, std::uint64_t> pending;  // loc -> deadline
  std::uint64_t now = start, next_loc = 8;
  std::uint64_t handed = 0;
  for (int step = 0; step < 3000; ++step) {
    // Schedule a few, from the past to ~3 years out (some in the heap).
    const int adds = static_cast<int>(rng() % 40);
    for (int i = 0; i < adds; ++i) {
      std::uint64_t d;
      switch (rng() % 8) {
        case 0: d = now - rng() % 100; break;                     // already due
        case 1: d = log_uniform(rng, now, 3.0 * 365 * 86400e3); break;  // up to 3 years
        default: d = log_uniform(rng, now, 30.0 * 86400e3); break;      // up to 30 days
      }
      if (d == 0) d = 1;
      wheel.reserve_one();
      wheel.schedule(d, next_loc, 2);
      pending[next_loc] = d;
      next_loc += 8;
    }
    // Advance by a small step, a larger one, or a jump of days to years.
    std::uint64_t step_ms;
    switch (rng() % 10) {
      case 0: step_ms = rng() % (400ull * 86400 * 1000); break;
      case 1: step_ms = rng() % (3ull * 3600 * 1000); break;
      case 2: step_ms = 0; break;
      default: step_ms = rng() % 200; break;
    }
    const std::uint64_t to = now + step_ms;
    std::uint64_t last = 0;
    const std::uint64_t from = now;
    wheel.advance(to, [&](const ExpiryWheel::Entry& e) {
      const auto it = pending.find(e.loc);
      REQUIRE(it != pending.end());  // once
      REQUIRE(e.deadline == it->second);
      REQUIRE(e.deadline <= to);       // never before its time
      // Earliest first (the ones already due at the start, at once).
      const std::uint64_t when = std::max(e.deadline, from);
      REQUIRE(when >= last);
      last = when;
      pending.erase(it);
      ++handed;
      return true;
    });
    now = to;
    REQUIRE(wheel.now() == now);
    // Everything due was handed out; nothing else was.
    for (const auto& [loc, d] : pending) REQUIRE(d > now);
    REQUIRE(wheel.size() == pending.size());
    const std::uint64_t next = wheel.next_event();
    if (pending.empty()) {
      REQUIRE(next == ExpiryWheel::kNever);
    } else {
      std::uint64_t earliest = ExpiryWheel::kNever;
      for (const auto& [loc, d] : pending) earliest = std::min(earliest, d);
      REQUIRE(next > now);
      REQUIRE(next <= earliest);  // an expiry, or entries moving down before it
    }
  }
  CHECK(handed > 10000);
  CHECK(wheel.heap_size() <= pending.size());
}

TEST_CASE("ExpiryWheel: a stop keeps the entry, an exception too, and the next advance starts with it", "[detail][expiry]") {
  ExpiryWheel wheel(kName, 1000);
  for (std::uint64_t i = 0; i < 10; ++i) {
    wheel.reserve_one();
    wheel.schedule(1005, 8 * (i + 1), 2);
  }
  int calls = 0;
  CHECK(wheel.advance(2000, [&](const ExpiryWheel::Entry&) { return ++calls <= 3; }) == 3);
  CHECK(wheel.size() == 7);
  CHECK(wheel.now() == 1005);  // stopped at the entries' time
  CHECK_THROWS(wheel.advance(2000, [&](const ExpiryWheel::Entry&) -> bool { throw 1; }));
  CHECK(wheel.size() == 7);
  std::set<std::uint64_t> seen;
  CHECK(wheel.advance(2000, [&](const ExpiryWheel::Entry& e) { return seen.insert(e.loc).second; }) == 7);
  CHECK(seen.size() == 7);
  CHECK(wheel.size() == 0);
  CHECK(wheel.now() == 2000);
  // Time never goes back.
  wheel.advance(10, [](const ExpiryWheel::Entry&) { return true; });
  CHECK(wheel.now() == 2000);
}

TEST_CASE("ExpiryWheel::sweep drops exactly the stale entries, wheel and heap", "[detail][expiry]") {
  std::mt19937_64 rng(7);
  ExpiryWheel wheel(kName, 5000);
  std::map<std::uint64_t, std::uint64_t> live;  // loc -> deadline
  for (std::uint64_t i = 0; i < 20000; ++i) {
    const std::uint64_t d = i % 10 == 0 ? 5000 + (std::uint64_t{5} << 40) + i : log_uniform(rng, 5001, 1e9);
    wheel.reserve_one();
    wheel.schedule(d, 8 * (i + 1), i % 3 == 0 ? 4 : 2);  // stamp 4: stale
    if (i % 3 != 0) live[8 * (i + 1)] = d;
  }
  const auto stale = [](std::uint64_t, std::uint64_t stamp) { return stamp == 4; };
  bool done = false;
  int calls = 0;
  while (!done) {
    done = wheel.sweep(1000, stale);
    ++calls;
  }
  CHECK(calls >= 20);
  CHECK(wheel.size() == live.size());
  std::uint64_t n = 0;
  wheel.for_each([&](const ExpiryWheel::Entry& e) {
    ++n;
    CHECK(e.stamp == 2);
    CHECK(live.at(e.loc) == e.deadline);
  });
  CHECK(n == live.size());
  // What is left still comes out on time.
  wheel.advance(ExpiryWheel::kMaxDeadline, [&](const ExpiryWheel::Entry& e) {
    CHECK(live.erase(e.loc) == 1);
    return true;
  });
  CHECK(live.empty());
  CHECK(wheel.size() == 0);
}
