// SPDX-License-Identifier: Apache-2.0
// A removed key stays removed, even when a writer shapes values like its
// record. The bytes of a freed record may become part of another record's
// value once the freed record merges with a free neighbour; a reader that
// still holds the removed key's old location must never take those bytes
// for the key's record (DESIGN.md §3). Two tests: for_each, whose callback
// removes a key the walk has not reached yet and writes a value that forges
// it where its record was (deterministic), and a stress in which a writer
// removes whole runs of adjacent records and covers them with one value
// that forges every one of them, while readers hunt for the removed keys
// with every read call. tests/hooks/ makes the single-read case
// deterministic.
#include <offheap/offheap.hpp>

#include "support/forge.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using offheap_test::MergeScenario;
using namespace std::chrono_literals;

offheap::Options one_shard() {
  offheap::Options o;
  o.shards = 1;
  o.hash_seed = 7;
  return o;
}

}  // namespace

TEMPLATE_TEST_CASE("for_each never visits a key removed during the walk with forged bytes",
                   "[forgery]", offheap::StorePolicy, offheap::SingleWriterPolicy) {
  using Store = offheap::OffHeapStore<TestType>;
  Store s(one_shard());
  MergeScenario::build(s);
  REQUIRE(s.stats().free_records == 1);
  const std::string forged = offheap_test::forged_record(MergeScenario::B, "EVIL!");
  bool attacked = false;
  std::size_t wrong = 0, visits = 0;
  s.for_each([&](std::string_view k, std::string_view v) {
    ++visits;
    if (!attacked) {
      // The first record visited is A (slot 0); B (slot 2) comes later.
      CHECK(k == MergeScenario::A);
      attacked = true;
      MergeScenario::attack(s, forged);
      return;
    }
    const bool right = (k == MergeScenario::B && v == MergeScenario::b_value()) ||
                       (k == MergeScenario::Y && v == MergeScenario::y_value) ||
                       (k == MergeScenario::C && v == MergeScenario::cover_value(forged));
    if (!right) {
      ++wrong;
      UNSCOPED_INFO("visited " << k << " -> " << v);
    }
  });
  REQUIRE(attacked);
  // The attack landed as planned: C took the merged record whole.
  CHECK(s.stats().free_records == 0);
  CHECK(s.verify().empty());
  CHECK(wrong == 0);
  CHECK(visits >= 2);
  CHECK_FALSE(s.contains(MergeScenario::B));
}

namespace {

// The stress: one shard, groups of kRun adjacent records of kRecord bytes.
constexpr unsigned kGroups = 4;
constexpr unsigned kRun = 8;
constexpr std::size_t kKeyBytes = 16;
constexpr std::size_t kValueBytes = 40;
constexpr std::size_t kRecord =
    offheap::detail::record::kHeaderBytes + offheap::detail::record::payload_for(kKeyBytes, kValueBytes);
static_assert(kRecord == 80);

std::string key_of(unsigned g, unsigned k) {
  char b[kKeyBytes + 1];
  std::snprintf(b, sizeof b, "grp%04u-key%04u.", g, k);
  return std::string(b, kKeyBytes);
}
std::string cover_key(unsigned g) {
  char b[kKeyBytes + 1];
  std::snprintf(b, sizeof b, "cover%04u.......", g);
  return std::string(b, kKeyBytes);
}
std::string genuine(const std::string& key, std::uint64_t n) {
  std::string v = "genuine:" + key + ":" + std::to_string(n);
  v.resize(kValueBytes, '.');
  return v;
}
/// One value covering a whole group's records, forging each of them (but
/// the first, where the covering record itself starts) with the stamp the
/// key's record had, so that a reader that checks only stamps is fooled.
/// Every fourth group forges odd stamps: a reader that takes them for a
/// write in progress would wait on them.
std::string cover_value(unsigned g, const std::uint64_t* stamps) {
  const std::size_t payload = kRun * kRecord - offheap::detail::record::kHeaderBytes;
  std::string v(payload - kKeyBytes, '#');
  for (unsigned k = 1; k < kRun; ++k) {
    std::string fv = "FORGED!:" + key_of(g, k);
    fv.resize(kValueBytes, '!');
    const std::uint64_t stamp = stamps[k] + (g % 4 == 3 ? 1 : 0);
    const std::string rec = offheap_test::forged_record(key_of(g, k), fv, stamp);
    const std::size_t at = k * kRecord - offheap::detail::record::kHeaderBytes - kKeyBytes;
    v.replace(at, rec.size(), rec);
  }
  return v;
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr auto kStressFor = 4s;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr auto kStressFor = 4s;
#else
constexpr auto kStressFor = 3s;
#endif
#else
constexpr auto kStressFor = 3s;
#endif

}  // namespace

TEST_CASE("readers never take forged bytes for a removed key, and never stall on them",
          "[forgery][concurrency]") {
  offheap::Options o = one_shard();
  o.expected_entries = 4096;  // no index growth: the generation stays put
  o.min_chunk_bytes = 1 << 20;
  offheap::Store s(o);
  for (unsigned g = 0; g < kGroups; ++g) {
    for (unsigned k = 0; k < kRun; ++k) s.put(key_of(g, k), genuine(key_of(g, k), 0));
  }
  s.put("sentinel", "after the last group");
  const offheap::Stats before = s.stats();
  REQUIRE(before.free_records == 0);

  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> cycles{0}, forged{0}, wrong{0}, hits{0}, misses{0};
  // More readers than cores: the scheduler then preempts readers at every
  // point of their reads, some between loading a slot and reading its
  // record, while the writer moves on; the writer holds each state (keys
  // present, keys covered) for a while, so that a reader resumes in the
  // other one.
  constexpr unsigned kReaders = 8;
  const auto hold = [&] {
    const auto until = std::chrono::steady_clock::now() + 20us;
    while (std::chrono::steady_clock::now() < until) {
    }
  };
  std::atomic<std::uint64_t> progress[kReaders] = {};
  std::atomic<bool> reader_done[kReaders] = {};
  std::atomic<std::size_t> finished{0};
  std::vector<std::thread> threads;
  threads.emplace_back([&] {
    std::uint64_t n = 1;
    for (unsigned g = 0; !stop.load(std::memory_order_relaxed); g = (g + 1) % kGroups, ++n) {
      // The stamps the records have (read where they lie: the test peeks).
      std::uint64_t stamps[kRun] = {};
      for (unsigned k = 0; k < kRun; ++k) {
        s.read(key_of(g, k), [&](std::string_view v) {
          std::memcpy(&stamps[k], v.data() - offheap::detail::record::kHeaderBytes - kKeyBytes, 8);
        });
      }
      for (unsigned k = 0; k < kRun; ++k) s.remove(key_of(g, k));
      s.put(cover_key(g), cover_value(g, stamps));  // takes the merged run whole
      hold();
      s.remove(cover_key(g));
      for (unsigned k = 0; k < kRun; ++k) s.put(key_of(g, k), genuine(key_of(g, k), n));
      hold();
      cycles.fetch_add(1, std::memory_order_relaxed);
    }
    finished.fetch_add(1);
  });
  for (unsigned r = 0; r < kReaders; ++r) {
    threads.emplace_back([&, r] {
      std::mt19937_64 rng(r + 1);
      std::string out;
      while (!stop.load(std::memory_order_relaxed)) {
        const unsigned g = static_cast<unsigned>(rng() % kGroups);
        const unsigned k = 1 + static_cast<unsigned>(rng() % (kRun - 1));
        const std::string key = key_of(g, k);
        bool hit = false;
        switch (rng() % 4) {
          case 0: hit = s.get(key, out); break;
          case 1: hit = s.read(key, [&](std::string_view v) { out.assign(v); }); break;
          case 2: {
            const auto v = s.view(key);
            hit = static_cast<bool>(v);
            if (hit) {
              try {
                v.read([&](std::string_view b) { out.assign(b); });
              } catch (const offheap::StaleView&) {
                hit = false;
              }
            }
            break;
          }
          default:
            hit = s.contains(key);
            out = genuine(key, 0);  // contains() returns no bytes
            break;
        }
        if (hit) {
          hits.fetch_add(1, std::memory_order_relaxed);
          if (out.rfind("FORGED", 0) == 0) {
            forged.fetch_add(1, std::memory_order_relaxed);
          } else if (out.rfind("genuine:" + key + ":", 0) != 0) {
            wrong.fetch_add(1, std::memory_order_relaxed);
          }
        } else {
          misses.fetch_add(1, std::memory_order_relaxed);
        }
        progress[r].fetch_add(1, std::memory_order_relaxed);
      }
      reader_done[r] = true;
      finished.fetch_add(1);
    });
  }
  // Watchdog: a reader that makes no progress for 5 s (while it should run)
  // is stalled, waiting on bytes that are no stamp; it may hold the writer
  // lock while it waits, so that nothing could be joined: abort with the
  // reason. The same after stop, until every thread has finished.
  using Clock = std::chrono::steady_clock;
  std::uint64_t last[kReaders] = {};
  Clock::time_point moved[kReaders];
  const auto start = Clock::now();
  for (auto& t : moved) t = start;
  const auto stall_limit = 5s;
  while (finished.load() != threads.size()) {
    std::this_thread::sleep_for(20ms);
    const auto now = Clock::now();
    if (now - start >= kStressFor) stop = true;
    for (unsigned r = 0; r < kReaders; ++r) {
      const std::uint64_t p = progress[r].load(std::memory_order_relaxed);
      if (p != last[r] || reader_done[r].load()) {
        last[r] = p;
        moved[r] = now;
      } else if (now - moved[r] > stall_limit) {
        std::fprintf(stderr,
                     "forgery stress: reader %u made no progress for 5 s (stalled on forged "
                     "bytes); %llu forged values seen so far\n",
                     r, static_cast<unsigned long long>(forged.load()));
        std::abort();
      }
    }
    if (stop && now - start > kStressFor + stall_limit) {
      std::fprintf(stderr, "forgery stress: the writer did not finish within 5 s of stop\n");
      std::abort();
    }
  }
  for (std::thread& t : threads) t.join();
  INFO("cycles " << cycles << ", hits " << hits << ", misses " << misses);
  CHECK(forged == 0);
  CHECK(wrong == 0);
  CHECK(cycles > 100);
  CHECK(hits > 0);
  CHECK(misses > 0);
  CHECK(s.verify().empty());
  CHECK(s.size() == kGroups * kRun + 1);
}
