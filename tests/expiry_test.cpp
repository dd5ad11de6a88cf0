// SPDX-License-Identifier: Apache-2.0
// Expiry (Ttl, Options::default_ttl, Options::clock): no read, walk or
// conditional write ever sees an entry past its deadline; the timing wheel
// removes each expired record when its deadline is reached and the
// listener hears of it once, as RemovalCause::expired; deadlines survive a
// close and a crash (what expired meanwhile is gone after the reopen, and
// reported); the maintenance thread wakes for a deadline earlier than it
// planned; stale wheel entries do not pile up.
#include <offheap/offheap.hpp>

#include "support/env.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using offheap::Options;
using offheap::RemovalCause;
using offheap::Store;
using offheap::Ttl;

namespace {

using offheap_test::kSanitized;

/// A clock the test moves.
struct FakeClock : offheap::Clock {
  std::atomic<std::uint64_t> t{1'700'000'000'000};
  std::uint64_t now_ms() const noexcept override { return t.load(std::memory_order_relaxed); }
  void advance(std::uint64_t ms) { t.fetch_add(ms, std::memory_order_relaxed); }
};

struct Heard {
  std::mutex m;
  std::vector<std::pair<std::string, RemovalCause>> calls;
  offheap::RemovalListener listener() {
    return [this](std::string_view k, std::string_view, RemovalCause c) {
      const std::lock_guard<std::mutex> g(m);
      calls.emplace_back(std::string(k), c);
    };
  }
  std::uint64_t count(RemovalCause c) {
    const std::lock_guard<std::mutex> g(m);
    return static_cast<std::uint64_t>(
        std::count_if(calls.begin(), calls.end(), [&](const auto& x) { return x.second == c; }));
  }
};

Options manual(FakeClock& clock, Heard* heard = nullptr) {
  Options o;
  o.shards = 4;
  o.clock = &clock;
  o.background_maintenance = false;
  if (heard != nullptr) o.on_removal = heard->listener();
  return o;
}

/// Every way to read `key`, each saying whether it found it.
template <class S>
std::vector<bool> every_read(const S& s, const std::string& key) {
  std::vector<bool> found;
  found.push_back(s.contains(key));
  found.push_back(s.get(key).has_value());
  std::string out;
  found.push_back(s.get(key, out));
  found.push_back(s.read(key, [](std::string_view) {}));
  found.push_back(static_cast<bool>(s.view(key)));
  bool walked = false;
  s.for_each([&](std::string_view k, std::string_view) { walked = walked || k == key; });
  found.push_back(walked);
  return found;
}

}  // namespace

TEST_CASE("An entry is read until its deadline and never after, by every read", "[expiry]") {
  FakeClock clock;
  Heard heard;
  Store s(manual(clock, &heard));
  s.put("short", "a", 10ms);  // a deadline 11 ms on: at least 10 ms after any moment of the write's
  s.put("forever", "b");
  s.put_value<std::uint64_t>("typed", 7, 10ms);
  clock.advance(10);
  CHECK(every_read(s, "short") == std::vector<bool>(6, true));
  CHECK(s.get_value<std::uint64_t>("typed") == std::optional<std::uint64_t>(7));
  const auto view = s.view("short");
  REQUIRE(view);
  clock.advance(1);  // the deadline: expired from this millisecond on
  CHECK(every_read(s, "short") == std::vector<bool>(6, false));
  CHECK_FALSE(s.get_value<std::uint64_t>("typed").has_value());
  CHECK(view.status() == offheap::ViewStatus::removed);
  CHECK(every_read(s, "forever") == std::vector<bool>(6, true));
  // Still resident until maintenance runs: a read does not remove it.
  CHECK(s.size() == 3);
  s.maintain();
  CHECK(s.size() == 1);
  CHECK(heard.count(RemovalCause::expired) == 2);
  CHECK(s.stats().expirations == 2);
  CHECK(s.verify().empty());
}

TEST_CASE("Writes treat an expired entry as absent", "[expiry]") {
  FakeClock clock;
  Heard heard;
  Store s(manual(clock, &heard));
  for (const char* k : {"ins", "rep", "cas", "rem", "put"}) s.put(k, "old", 5ms);
  clock.advance(5);
  CHECK(s.contains("ins"));
  clock.advance(1);
  CHECK(s.put_if_absent("ins", "new"));        // absent: written over
  CHECK_FALSE(s.replace("rep", "new"));        // absent: nothing replaced
  CHECK_FALSE(s.replace("cas", "old", "new"));  // absent: equals nothing
  CHECK_FALSE(s.remove("rem"));                // absent: removed as expired, returns false
  s.put("put", "new");
  CHECK(s.get("ins") == std::optional<std::string>("new"));
  CHECK(s.get("put") == std::optional<std::string>("new"));
  CHECK_FALSE(s.contains("rep"));
  CHECK_FALSE(s.contains("cas"));
  CHECK_FALSE(s.contains("rem"));
  s.maintain();
  // Each expired record left once, as expired: ins, put (written over),
  // rem (removed), rep and cas (by the wheel).
  CHECK(heard.count(RemovalCause::expired) == 5);
  CHECK(heard.count(RemovalCause::replaced) == 0);
  CHECK(heard.count(RemovalCause::explicit_remove) == 0);
  CHECK(s.size() == 2);
  const offheap::Stats st = s.stats();
  CHECK(st.expirations == 5);
  CHECK(st.removes == 0);
  CHECK(st.removals_replaced == 0);
  // The new values carry no deadline: they stay.
  clock.advance(1'000'000);
  s.maintain();
  CHECK(s.size() == 2);
  CHECK(s.verify().empty());
}

TEST_CASE("Ttl: default, never, a duration, an absolute deadline, zero and past deadlines", "[expiry]") {
  FakeClock clock;
  Heard heard;
  Options o = manual(clock, &heard);
  o.default_ttl = 100ms;
  Store s(o);
  const std::uint64_t t0 = clock.now_ms();
  s.put("default", "v");
  s.put("never", "v", Ttl::never());
  s.put("after", "v", 50ms);
  s.put("micro", "v", std::chrono::microseconds(1500));  // rounded up to 2 ms, + 1
  s.put("at", "v", Ttl::at_ms(t0 + 70));
  s.put("at_tp", "v", Ttl::at(std::chrono::system_clock::time_point(std::chrono::milliseconds(t0 + 80))));
  s.put("zero", "v", 0ms);
  s.put("past", "v", Ttl::at_ms(t0 - 1000));
  s.put("negative", "v", -5s);
  CHECK_FALSE(s.contains("zero"));
  CHECK_FALSE(s.contains("past"));
  CHECK_FALSE(s.contains("negative"));
  const auto alive = [&] {
    std::vector<std::string> names;
    for (const char* k : {"default", "never", "after", "micro", "at", "at_tp"}) {
      if (s.contains(k)) names.emplace_back(k);
    }
    return names;
  };
  using V = std::vector<std::string>;
  clock.t = t0 + 2;
  CHECK(alive() == V{"default", "never", "after", "micro", "at", "at_tp"});
  clock.t = t0 + 3;
  CHECK(alive() == V{"default", "never", "after", "at", "at_tp"});
  clock.t = t0 + 50;
  CHECK(alive() == V{"default", "never", "after", "at", "at_tp"});
  clock.t = t0 + 51;
  CHECK(alive() == V{"default", "never", "at", "at_tp"});
  clock.t = t0 + 69;
  CHECK(alive() == V{"default", "never", "at", "at_tp"});
  clock.t = t0 + 70;  // an absolute deadline: expired from its millisecond on
  CHECK(alive() == V{"default", "never", "at_tp"});
  clock.t = t0 + 80;
  CHECK(alive() == V{"default", "never"});
  clock.t = t0 + 100;
  CHECK(alive() == V{"default", "never"});
  clock.t = t0 + 101;
  CHECK(alive() == V{"never"});
  s.maintain();
  CHECK(s.size() == 1);
  CHECK(heard.count(RemovalCause::expired) == 8);
  // A rewrite takes its own deadline: the old one goes with the old value.
  s.put("never", "w", 10ms);
  clock.advance(11);
  CHECK_FALSE(s.contains("never"));
  s.put("never", "x");  // the default again
  clock.advance(100);
  CHECK(s.contains("never"));
  clock.advance(1);
  CHECK_FALSE(s.contains("never"));
  CHECK(s.verify().empty());
}

TEST_CASE("Options::default_ttl is checked", "[expiry]") {
  Options o;
  o.default_ttl = -1ms;
  CHECK_THROWS_AS(Store(o), offheap::Error);
  o.default_ttl = std::chrono::hours(24 * 365 * 101);
  CHECK_THROWS_AS(Store(o), offheap::Error);
  Options single;
  single.default_ttl = 1s;
  try {
    offheap::OffHeapStore<offheap::SingleWriterPolicy> s(single);
    FAIL("a single-writer store took a default TTL with background maintenance");
  } catch (const offheap::Error& e) {
    CHECK(e.code() == offheap::Errc::invalid_argument);
    CHECK_THAT(e.what(), Catch::Contains("default_ttl"));
  }
  single.background_maintenance = false;
  offheap::OffHeapStore<offheap::SingleWriterPolicy> s(single);
  s.put("k", "v");
  CHECK(s.contains("k"));
}

TEST_CASE("1M entries with TTLs from 1 ms to 30 days under a clock that jumps: resident = unexpired, each expiry heard once",
          "[expiry][property]") {
  const std::uint64_t n = offheap_test::env_u64("OFFHEAP_EXPIRY_ENTRIES", kSanitized ? 200'000 : 1'000'000);
  const std::uint64_t seed = offheap_test::env_u64("OFFHEAP_SEED", 20261202);
  INFO("seed " << seed << ", " << n << " entries");
  std::mt19937_64 rng(seed);
  FakeClock clock;
  const std::uint64_t t0 = clock.now_ms();
  // Keys are numbers; a value names the key's incarnation and its deadline,
  // so that the listener can check what it is told.
  std::vector<std::uint64_t> deadline(n);  // the current incarnation's
  std::vector<std::uint32_t> incarnation(n, 0);
  std::vector<std::uint32_t> heard_up_to(n, 0);  // the last incarnation heard expired, + 1
  std::atomic<std::uint64_t> heard_expired{0}, wrong{0};
  Options o = manual(clock);
  o.expected_entries = n;
  o.on_removal = [&](std::string_view k, std::string_view v, RemovalCause c) {
    if (c != RemovalCause::expired) return;
    const std::uint64_t i = std::stoull(std::string(k.substr(1)));
    const std::string value(v);
    const std::size_t colon = value.find(':');
    const std::uint32_t inc = static_cast<std::uint32_t>(std::stoul(value.substr(1, colon - 1)));
    const std::uint64_t d = std::stoull(value.substr(colon + 1));
    // Once per incarnation, only past its deadline.
    if (inc + 1 <= heard_up_to[i] || d > clock.now_ms()) wrong.fetch_add(1);
    heard_up_to[i] = inc + 1;
    heard_expired.fetch_add(1);
  };
  Store s(o);
  const auto ttl = [&] {
    std::uniform_real_distribution<double> u(0.0, std::log(30.0 * 86400e3));
    return std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::exp(u(rng))));
  };
  const auto write = [&](std::uint64_t i) {
    deadline[i] = clock.now_ms() + ttl();
    s.put("k" + std::to_string(i),
          "i" + std::to_string(incarnation[i]) + ":" + std::to_string(deadline[i]), Ttl::at_ms(deadline[i]));
  };
  for (std::uint64_t i = 0; i < n; ++i) write(i);
  std::uint64_t expired_total = 0;  // incarnations that ended by expiring
  std::vector<std::uint8_t> gone(n, 0);  // the current incarnation expired
  const auto settle = [&] {
    // The model after the clock moved: which incarnations expired.
    const std::uint64_t now = clock.now_ms();
    std::uint64_t resident = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
      if (!gone[i] && deadline[i] <= now) {
        gone[i] = 1;
        ++expired_total;
      }
      resident += gone[i] ? 0 : 1;
    }
    return resident;
  };
  std::uint64_t max_late = 0;
  for (int step = 0; step < 120; ++step) {
    std::uint64_t ms;
    switch (rng() % 10) {
      case 0: ms = rng() % (5ull * 86400 * 1000); break;  // a jump of days
      case 1:
      case 2: ms = rng() % (3600ull * 1000); break;
      default: ms = rng() % 40; break;
    }
    clock.advance(ms);
    s.maintain();
    const std::uint64_t now = clock.now_ms();
    const std::uint64_t unexpired = settle();
    // Resident: the unexpired entries, plus at most those that expired
    // within the last tick (1 ms).
    std::uint64_t within_tick = 0;
    for (std::uint64_t i = 0; i < n; ++i) within_tick += gone[i] && deadline[i] == now ? 1 : 0;
    INFO("step " << step << ", now t0+" << now - t0);
    REQUIRE(s.size() >= unexpired);
    REQUIRE(s.size() <= unexpired + within_tick);
    max_late = std::max(max_late, s.size() - unexpired);
    REQUIRE(heard_expired.load() == expired_total - (s.size() - unexpired));
    // No read returns an expired entry; every unexpired one is there.
    for (int r = 0; r < 2000; ++r) {
      const std::uint64_t i = rng() % n;
      REQUIRE(s.contains("k" + std::to_string(i)) == !gone[i]);
    }
    // Some keys get new incarnations (stale wheel entries for the old).
    for (int w = 0; w < 2000; ++w) {
      const std::uint64_t i = rng() % n;
      if (!gone[i]) {
        ++incarnation[i];  // replaces the live one (cause: replaced)
      } else {
        ++incarnation[i];
        gone[i] = 0;
      }
      write(i);
    }
    if (step == 60) REQUIRE(s.verify().empty());
  }
  // Past every deadline: nothing left, every expiry heard once.
  clock.advance(31ull * 86400 * 1000);
  s.maintain();
  settle();
  CHECK(s.size() == 0);
  CHECK(heard_expired.load() == expired_total);
  CHECK(wrong.load() == 0);
  CHECK(s.stats().expirations == expired_total);
  CHECK(s.verify().empty());
  std::printf("expiry property: %llu entries, %llu expirations, resident past the deadline at most %llu\n",
              static_cast<unsigned long long>(n), static_cast<unsigned long long>(expired_total),
              static_cast<unsigned long long>(max_late));
}

TEST_CASE("Deadlines survive a close and a crash, what expired meanwhile is gone and reported", "[expiry][files]") {
  for (const bool crash : {false, true}) {
    INFO((crash ? "crash" : "clean close"));
    offheap_test::TempDir dir;
    FakeClock clock;
    Options o = manual(clock);
    o.path = dir / "store";
    o.on_removal = [](std::string_view, std::string_view, RemovalCause) {};
    const std::uint64_t t0 = clock.now_ms();
    const auto fill = [&] {
      Store s(o);
      for (int i = 0; i < 300; ++i) {
        const std::string k = "k" + std::to_string(i);
        if (i % 3 == 0) s.put(k, "none");                              // no deadline
        if (i % 3 == 1) s.put(k, "early", Ttl::at_ms(t0 + 100 + i));  // expires while closed
        if (i % 3 == 2) s.put(k, "late", Ttl::at_ms(t0 + 10'000 + i));  // after the reopen
      }
      if (crash) ::_exit(0);  // no close
    };
    if (crash) {
      const pid_t pid = ::fork();
      REQUIRE(pid >= 0);
      if (pid == 0) {
        try {
          fill();
        } catch (...) {
          ::_exit(3);
        }
      }
      int status = 0;
      ::waitpid(pid, &status, 0);
      REQUIRE(WIFEXITED(status));
      REQUIRE(WEXITSTATUS(status) == 0);
    } else {
      fill();
    }
    clock.t = t0 + 5'000;  // the store was closed for 5 s
    Heard heard;
    o.on_removal = heard.listener();
    Store s(o);
    CHECK(s.stats().rebuilt == crash);
    CHECK(s.size() == 200);  // gone at the open, before any maintenance
    for (int i = 0; i < 300; ++i) CHECK(s.contains("k" + std::to_string(i)) == (i % 3 != 1));
    s.maintain();
    CHECK(heard.count(RemovalCause::expired) == 100);
    CHECK(s.verify().empty());
    // The later deadlines came back with their records.
    clock.t = t0 + 10'000 + 149;
    CHECK(s.contains("k149") == false);
    CHECK(s.contains("k152") == true);
    s.maintain();
    clock.t = t0 + 20'000;
    s.maintain();
    CHECK(s.size() == 100);
    CHECK(heard.count(RemovalCause::expired) == 200);
    CHECK(s.verify().empty());
  }
}

TEST_CASE("A cache with TTLs: expired records leave the policy too, audit holds", "[expiry][cache]") {
  FakeClock clock;
  Heard heard;
  Options o = manual(clock, &heard);
  o.capacity_bytes = 64 * 1024;
  offheap::Cache c(o);
  for (int i = 0; i < 5000; ++i) c.put("k" + std::to_string(i), std::string(40, 'v'), std::chrono::milliseconds(1 + i % 50));
  c.maintain();
  CHECK(c.verify().empty());
  clock.advance(25);
  c.maintain();
  CHECK(c.verify().empty());
  clock.advance(26);
  c.maintain();
  CHECK(c.size() == 0);
  CHECK(c.stats().live_bytes == 0);
  CHECK(heard.count(RemovalCause::expired) == c.stats().expirations);
  CHECK(heard.count(RemovalCause::expired) + heard.count(RemovalCause::evicted) == 5000);
  CHECK(c.verify().empty());
}

TEST_CASE("The maintenance thread wakes for a deadline earlier than it planned", "[expiry][maintenance]") {
  Options o;
  o.shards = 2;
  o.sync_interval = std::chrono::hours(1);  // a plain store's thread would sleep an hour
  Store s(o);
  std::this_thread::sleep_for(20ms);  // the thread has planned its sleep
  const auto start = std::chrono::steady_clock::now();
  s.put("k", "v", 20ms);
  while (s.size() != 0 && std::chrono::steady_clock::now() - start < 60s) std::this_thread::sleep_for(1ms);
  CHECK(s.size() == 0);
  CHECK(s.stats().expirations == 1);
  // Far sooner than the 10 s the thread of a store without other work
  // sleeps at a time: the write woke it.
  CHECK(std::chrono::steady_clock::now() - start < 5s);
  std::printf("expiry: removed %.1f ms after a 20 ms TTL\n",
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() - 20);
}

TEST_CASE("Records rewritten with TTLs faster than they expire leave no pile of stale wheel entries", "[expiry]") {
  FakeClock clock;
  Store s(manual(clock));
  for (int round = 0; round < 300; ++round) {
    for (int i = 0; i < 100; ++i) s.put("k" + std::to_string(i), "v", 24h);
    s.maintain();
  }
  // 30,000 entries were scheduled for 100 records: sweeps keep the wheels
  // near what is live.
  for (int i = 0; i < 20; ++i) s.maintain();
  const offheap::Stats st = s.stats();
  CHECK(st.records == 100);
  CHECK(st.expiry_entries <= 4 * 1100);  // per shard: 2 x its records + 1024 before a sweep
  CHECK(s.verify().empty());
  clock.advance(24 * 3600 * 1000 + 1);
  s.maintain();
  CHECK(s.size() == 0);
  CHECK(s.stats().expiry_entries == 0);
}

TEST_CASE("Readers racing writers never see a value past its deadline", "[expiry][concurrency]") {
  // The default clock; every value says its own deadline.
  Store s(Options{});
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> reads{0}, hits{0}, late{0};
  const auto now = [] { return offheap::detail::default_now_ms(); };
  std::thread writer([&] {
    std::mt19937_64 rng(5);
    while (!stop.load()) {
      const std::uint64_t d = now() + rng() % 5;
      s.put("k" + std::to_string(rng() % 64), std::to_string(d), Ttl::at_ms(d));
    }
  });
  std::thread reader([&] {
    std::mt19937_64 rng(6);
    std::string out;
    while (!stop.load()) {
      const std::uint64_t before = now();
      if (s.get("k" + std::to_string(rng() % 64), out)) {
        hits.fetch_add(1);
        if (std::stoull(out) <= before) late.fetch_add(1);
      }
      reads.fetch_add(1);
    }
  });
  std::this_thread::sleep_for(kSanitized ? 1500ms : 500ms);
  stop = true;
  writer.join();
  reader.join();
  INFO(reads.load() << " reads, " << hits.load() << " hits");
  CHECK(late.load() == 0);
  CHECK(hits.load() > 0);
  CHECK(reads.load() > hits.load());  // some were expired
  CHECK(s.verify().empty());
}

TEST_CASE("A reader preempted while the key is refreshed before its deadline still finds the key", "[expiry][concurrency]") {
  // The reader's clock read (after it validated the old record) runs the
  // writer: the key is refreshed at T0+5, before its deadline at T0+11, and
  // the reader resumes at T0+20, after the old deadline. The key was
  // present at every moment: the read must find v2 (the old record it
  // validated was replaced, so its deadline concludes nothing).
  struct HookClock : offheap::Clock {
    mutable std::atomic<std::uint64_t> t{1'700'000'000'000};
    mutable bool armed = false, inside = false;
    offheap::Store* store = nullptr;
    std::uint64_t now_ms() const noexcept override {
      if (armed && !inside) {
        armed = false;
        inside = true;
        t = t + 5;
        store->put("k", "v2", 100ms);
        inside = false;
        t = t + 15;
      }
      return t;
    }
  } clock;
  for (int how = 0; how < 3; ++how) {
    Options o;
    o.shards = 1;
    o.clock = &clock;
    o.background_maintenance = false;
    Store s(o);
    clock.store = &s;
    s.put("k", "v1", 10ms);
    clock.armed = true;
    std::string out;
    if (how == 0) {
      CHECK(s.get("k", out));
      CHECK(out == "v2");
    } else if (how == 1) {
      CHECK(s.contains("k"));
    } else {
      std::string seen;
      s.for_each([&](std::string_view k, std::string_view v) {
        if (k == "k") seen = v;
      });
      CHECK(seen == "v2");
    }
    CHECK_FALSE(clock.armed);  // the hook ran
  }
}
