// SPDX-License-Identifier: Apache-2.0
// WTinyLfu alone, against mock records (support/mock_records.hpp), and its
// count-min sketch: each rule, the hill climber on recency- and
// frequency-biased traces, admission under hash flooding, determinism, byte
// counts under random use, and miss ratios on a Zipf trace beside S3Fifo and
// Lru (traces replayed by simulate(), support/record_model.hpp).
#include <offheap/detail/cache/count_min.hpp>
#include <offheap/detail/index/hash.hpp>
#include <offheap/detail/memory/os.hpp>
#include <offheap/eviction/lru.hpp>
#include <offheap/eviction/s3fifo.hpp>
#include <offheap/eviction/w_tiny_lfu.hpp>

#include "support/mock_records.hpp"
#include "support/record_model.hpp"
#include "support/zipf.hpp"
#include "support/store_name.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <string>
#include <vector>

using offheap::detail::CountMin;
using offheap::eviction::Handle;
using offheap::eviction::Lru;
using offheap::eviction::S3Fifo;
using offheap::eviction::WTinyLfu;
using offheap_test::EvictFails;
using offheap_test::MockRecords;
using offheap_test::RecordModel;
using offheap_test::Result;
using offheap_test::simulate;
using offheap_test::SplitMix64;

namespace {

const offheap::detail::StoreName& kName = offheap_test::store_name("w-tinylfu test");

/// `requests` object ids drawn from a Zipf distribution over `objects`
/// (rank r with weight 1 / r^alpha), ranks shuffled onto ids. Not
/// support/zipf.hpp's draw: the miss ratios below were measured on this one.
std::vector<std::uint64_t> zipf_trace(std::uint32_t objects, std::uint64_t requests, double alpha,
                                      std::uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<double> cdf(objects);
  double sum = 0;
  for (std::uint32_t i = 0; i < objects; ++i) cdf[i] = (sum += std::pow(1.0 + i, -alpha));
  for (double& c : cdf) c /= sum;
  std::vector<std::uint32_t> id(objects);
  for (std::uint32_t i = 0; i < objects; ++i) id[i] = i;
  for (std::uint32_t i = objects - 1; i > 0; --i) std::swap(id[i], id[rng.below(i + 1)]);
  std::vector<std::uint64_t> trace(requests);
  for (auto& t : trace) {
    const auto rank = std::lower_bound(cdf.begin(), cdf.end(), rng.unit()) - cdf.begin();
    t = id[static_cast<std::size_t>(std::min<std::ptrdiff_t>(rank, objects - 1))];
  }
  return trace;
}

/// Record hashes, one draw of `Draw`: draw 0 is MockRecords::hash_of, the
/// others remix it. A miss ratio moves with the hashes (which keys share
/// the sketch's counters), by about as much as WTinyLfu leads S3Fifo at
/// 1% of the objects: the trace tests below hold on the mean of
/// kHashDraws draws, and on each draw only with a margin.
template <std::uint64_t Draw>
std::uint64_t drawn_hash(std::uint64_t id) {
  const std::uint64_t h = MockRecords::hash_of(id);
  return Draw == 0 ? h : offheap::detail::mix64(h + Draw * 0x9E3779B97F4A7C15ull);
}
constexpr unsigned kHashDraws = 5;
constexpr RecordModel::KeyHash kDrawnHash[kHashDraws] = {drawn_hash<0>, drawn_hash<1>, drawn_hash<2>, drawn_hash<3>,
                                                          drawn_hash<4>};

/// The host the traces below are replayed on (simulate(), one byte a
/// record): its records hashed by hash draw `draw`, not by key_hash().
RecordModel trace_host(unsigned draw = 0) { return RecordModel(0, kDrawnHash[draw]); }

/// The miss ratio of a fresh `P` on `trace`, records hashed by `draw`.
template <class P>
double miss_ratio(const std::vector<std::uint64_t>& trace, std::uint64_t capacity, unsigned draw = 0) {
  P p(kName);
  p.set_capacity(capacity);
  RecordModel host = trace_host(draw);
  return simulate(p, host, trace, capacity).miss_ratio();
}

const std::vector<std::uint64_t>& test_trace() {
  static const std::vector<std::uint64_t> trace = zipf_trace(100000, 2000000, 1.0, 42);
  return trace;
}

/// A recency-biased trace: a new object every `every` requests, each
/// request for an object `age` objects older than the newest, age drawn
/// from an exponential of mean `mean_age`: what was used recently is used
/// again, what is old is dead, whatever its past count.
std::vector<std::uint64_t> recency_trace(std::uint64_t requests, std::uint64_t every, double mean_age, std::uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<std::uint64_t> trace(requests);
  for (std::uint64_t i = 0; i < requests; ++i) {
    const std::uint64_t newest = i / every;
    const auto age = static_cast<std::uint64_t>(-std::log(1.0 - rng.unit()) * mean_age);
    trace[i] = age > newest ? 0 : newest - age;
  }
  return trace;
}

/// A frequency-biased trace: one request in three for a hot set of
/// `hot` objects (Zipf, alpha 1), the others for objects never asked for
/// again (a scan): what is used often is kept, and a large window only
/// fills with objects seen once. Ids from `first` on.
std::vector<std::uint64_t> frequency_trace(std::uint64_t requests, std::uint32_t hot, std::uint32_t first, std::uint64_t seed) {
  std::vector<std::uint64_t> trace = zipf_trace(hot, requests, 1.0, seed);
  SplitMix64 rng(seed + 1);
  std::uint32_t next = first + hot;
  for (auto& t : trace) t = rng.below(3) == 0 ? first + t : next++;
  return trace;
}

}  // namespace

// ---------------------------------------------------------------- the sketch

namespace {
// The least row width: a page of 64-byte blocks, 32 counters a row each.
const std::uint64_t kPageRow = offheap::detail::page_size() / 64 * 32;
}  // namespace

TEST_CASE("CountMin counts each key, the least of its four counters", "[tinylfu][sketch]") {
  CountMin s(kName, "a sketch");
  CHECK(s.frequency(1) == 0);
  s.increment(1);  // no table yet: nothing counted
  CHECK(s.frequency(1) == 0);
  s.resize(1000);
  CHECK(s.sized_for() == 1000);
  CHECK(s.width() == std::max<std::uint64_t>(4096, kPageRow));  // 4 * 1000 rounded up to a power of two
  CHECK(s.sample_size() == 10000);
  // Four rows of 4-bit counters, and a page for the halving's bit a block.
  CHECK(s.mapped_bytes() == 4 * s.width() / 2 + offheap::detail::page_size());
  for (std::uint64_t k = 0; k < 200; ++k) {
    for (std::uint64_t i = 0; i < k % 16; ++i) s.increment(MockRecords::hash_of(k));
  }
  for (std::uint64_t k = 0; k < 200; ++k) CHECK(s.frequency(MockRecords::hash_of(k)) == k % 16);
  CHECK(s.frequency(MockRecords::hash_of(1000)) == 0);
  CHECK(s.resets() == 0);
}

TEST_CASE("CountMin saturates at 15", "[tinylfu][sketch]") {
  CountMin s(kName, "a sketch");
  s.resize(1000);
  for (int i = 0; i < 100; ++i) s.increment(7);
  CHECK(s.frequency(7) == 15);
  s.increment(8);
  CHECK(s.frequency(8) == 1);
  CHECK(s.frequency(7) == 15);
}

TEST_CASE("CountMin's halving is spread over the increments that follow: reads and increments see it done",
          "[tinylfu][sketch]") {
  CountMin s(kName, "a sketch");
  s.resize(1000);  // 128 blocks: a pass of at most 64 increments
  const std::uint64_t hot = MockRecords::hash_of(1), warm = MockRecords::hash_of(2);
  for (int i = 0; i < 15; ++i) s.increment(hot);
  for (int i = 0; i < 10; ++i) s.increment(warm);
  std::uint64_t k = 100;
  while (s.additions() < s.sample_size() - 1) s.increment(MockRecords::hash_of(k++ % 5000 + 100));
  const unsigned warm_before = s.frequency(warm);
  REQUIRE(warm_before >= 10);
  REQUIRE_FALSE(s.halving());
  s.increment(MockRecords::hash_of(99999));  // the sample is full: the pass begins
  REQUIRE(s.halving());
  CHECK(s.resets() == 1);
  // Read before the pass reaches their blocks: already halved.
  CHECK(s.frequency(hot) == 7);
  CHECK(s.frequency(warm) == warm_before / 2);
  // Raised while the pass runs: counted on the halved counts, and the pass
  // (which skips a block an increment halved) does not halve them again.
  for (int i = 0; i < 3; ++i) s.increment(warm);
  CHECK(s.frequency(warm) == warm_before / 2 + 3);
  int steps = 0;
  while (s.halving()) {
    s.increment(MockRecords::hash_of(200000 + steps));
    ++steps;
  }
  CHECK(steps <= 64);
  CHECK(s.frequency(hot) == 7);
  CHECK(s.frequency(warm) == warm_before / 2 + 3);
  // A second pass flips the blocks' marks the other way.
  for (int i = 0; i < 8; ++i) s.increment(hot);  // 7 -> 15
  while (s.additions() < s.sample_size() - 1) s.increment(MockRecords::hash_of(k++ % 5000 + 100));
  s.increment(MockRecords::hash_of(99998));
  REQUIRE(s.halving());
  CHECK(s.frequency(hot) == 7);
  s.increment(hot);
  CHECK(s.frequency(hot) == 8);
  while (s.halving()) s.increment(MockRecords::hash_of(300000 + steps++));
  CHECK(s.frequency(hot) == 8);
  // zero() ends a pass and every count.
  s.increment(warm);
  s.zero();
  CHECK_FALSE(s.halving());
  CHECK(s.frequency(hot) == 0);
  s.increment(hot);
  CHECK(s.frequency(hot) == 1);
}

TEST_CASE("CountMin's next halving after zero() or resize() in the middle of a pass halves every block",
          "[tinylfu][sketch]") {
  const bool by_resize = GENERATE(false, true);
  CountMin s(kName, "a sketch");
  s.resize(1000);
  const std::uint64_t hot = MockRecords::hash_of(1);
  std::uint64_t k = 100;
  const auto fill_sample = [&] {
    while (s.additions() < s.sample_size() - 1) s.increment(MockRecords::hash_of(k++ % 5000 + 100));
    s.increment(MockRecords::hash_of(k++ % 5000 + 100));
  };
  // Passes one and two, then a third stopped short by zero() or resize():
  // the blocks' marks and the parity start over together.
  for (int pass = 0; pass < 3; ++pass) {
    fill_sample();
    REQUIRE(s.halving());
    if (pass < 2) s.finish_halving();
  }
  if (by_resize) s.resize(1000); else s.zero();
  REQUIRE_FALSE(s.halving());
  for (int i = 0; i < 8; ++i) s.increment(hot);
  REQUIRE(s.frequency(hot) == 8);
  fill_sample();
  REQUIRE(s.halving());
  CHECK(s.frequency(hot) == 4);
  s.finish_halving();
  CHECK(s.frequency(hot) == 4);
}

TEST_CASE("CountMin's halving over later increments reads as an immediate one: zero() and resize() mid-pass, "
          "passes that overlap",
          "[tinylfu][sketch]") {
  // Two sketches fed the same calls: `lazy` leaves each pass to the
  // increments that follow; `eager` finishes it at once after every call
  // (the halving all at once). Every key reads the same in both, always.
  const std::uint64_t records = GENERATE(1, 3, 50, 1000);  // 1 and 3: a floor-sized sketch, passes overlap
  CountMin lazy(kName, "lazy"), eager(kName, "eager");
  lazy.resize(records);
  eager.resize(records);
  SplitMix64 rng(records);
  const std::uint64_t keys = records * 4 + 8;
  std::uint64_t overlapped = 0, halvings_seen = 0;
  for (int step = 0; step < 300000; ++step) {
    const std::uint64_t op = rng.below(100000);
    if (op == 0) {
      lazy.zero();  // mid-pass or not: the parity restarts with the bits
      eager.zero();
    } else if (op == 1) {
      lazy.resize(records);  // a new table mid-pass
      eager.resize(records);
    } else {
      const std::uint64_t h = MockRecords::hash_of(rng.below(2) == 0 ? rng.below(8) : rng.below(keys));
      const bool was_halving = lazy.halving();
      const std::uint64_t resets = lazy.resets();
      lazy.increment(h);
      eager.increment(h);
      eager.finish_halving();
      overlapped += was_halving && lazy.resets() != resets;
      halvings_seen += lazy.resets() != resets;
    }
    REQUIRE(lazy.resets() == eager.resets());
    REQUIRE(lazy.additions() == eager.additions());
    for (int probe = 0; probe < 4; ++probe) {
      const std::uint64_t h = MockRecords::hash_of(rng.below(keys));
      INFO("step " << step << ", records " << records);
      REQUIRE(lazy.frequency(h) == eager.frequency(h));
    }
  }
  CHECK(halvings_seen > 10);
  if (records <= 3) CHECK(overlapped > 0);
}

TEST_CASE("CountMin halves every counter after 10 x its records increments", "[tinylfu][sketch]") {
  CountMin s(kName, "a sketch");
  s.resize(1000);
  const std::uint64_t hot = MockRecords::hash_of(1), warm = MockRecords::hash_of(2), odd = MockRecords::hash_of(3);
  for (int i = 0; i < 15; ++i) s.increment(hot);
  for (int i = 0; i < 9; ++i) s.increment(warm);
  for (int i = 0; i < 5; ++i) s.increment(odd);
  // Other keys up to one increment short of the sample.
  std::uint64_t k = 100;
  while (s.additions() < s.sample_size() - 1) s.increment(MockRecords::hash_of(k++ % 5000 + 100));
  CHECK(s.resets() == 0);
  CHECK(s.frequency(hot) == 15);
  CHECK(s.frequency(warm) >= 9);
  const unsigned warm_before = s.frequency(warm), odd_before = s.frequency(odd);
  s.increment(MockRecords::hash_of(99999));
  CHECK(s.resets() == 1);
  CHECK(s.frequency(hot) == 7);
  CHECK(s.frequency(warm) == warm_before / 2);
  CHECK(s.frequency(odd) == odd_before / 2);
  CHECK(s.additions() == 0);  // the sample starts over
  // The next halving comes after a whole sample more.
  while (s.additions() < s.sample_size() - 1) s.increment(MockRecords::hash_of(k++ % 5000 + 100));
  CHECK(s.resets() == 1);
  s.increment(hot);
  CHECK(s.resets() == 2);
  CHECK(s.frequency(hot) == 4);  // (7 + 1) / 2
  // A saturated key's accesses are not counted in the sample.
  const std::uint64_t before = s.additions();
  for (int i = 0; i < 15; ++i) s.increment(odd);
  CHECK(s.frequency(odd) == 15);
  const std::uint64_t counted = s.additions() - before;
  for (int i = 0; i < 100; ++i) s.increment(odd);
  CHECK(s.additions() - before == counted);
  // zero(): every count gone, the table kept.
  s.zero();
  CHECK(s.frequency(hot) == 0);
  CHECK(s.mapped());
}

TEST_CASE("CountMin resize forgets the counts and widens the rows", "[tinylfu][sketch]") {
  CountMin s(kName, "a sketch");
  s.resize(100);
  CHECK(s.width() == std::max<std::uint64_t>(512, kPageRow));  // at least a page of blocks
  s.increment(5);
  s.resize(100000);
  CHECK(s.width() == 524288);
  CHECK(s.frequency(5) == 0);
}

// ---------------------------------------------------------------- the rules

TEST_CASE("WTinyLfu: new records fill the window, which spills into probation", "[tinylfu]") {
  WTinyLfu p(kName);
  p.set_capacity(1000);
  MockRecords m;
  CHECK(p.stats().window_target == 10);
  for (std::uint64_t i = 0; i < 10; ++i) p.admit(m.write(i), m);
  CHECK(p.window_records() == 10);
  CHECK(p.probation_records() == 0);
  p.admit(m.write(10), m);  // 11 bytes: one past the window's target
  CHECK(p.window_records() == 10);
  CHECK(p.probation_records() == 1);
  for (std::uint64_t i = 11; i < 1000; ++i) p.admit(m.write(i), m);
  CHECK(p.window_records() == 10);
  CHECK(p.probation_records() == 990);
  CHECK(p.stats().small_bytes == 10);
  CHECK(p.stats().main_bytes == 990);
  CHECK(p.stats().bytes == 1000);
  CHECK(p.stats().entries == 1000);
  CHECK(p.stats().mapped_bytes > 0);
}

TEST_CASE("WTinyLfu: a hit in probation promotes, protected past its share demotes its LRU record", "[tinylfu]") {
  WTinyLfu p(kName);
  p.set_capacity(1000);  // window 10, main 990, protected 792
  MockRecords m;
  for (std::uint64_t i = 0; i < 1000; ++i) p.admit(m.write(i), m);
  // Records 0..989 went to probation in order (0 is its LRU record).
  for (std::uint64_t i = 0; i < 792; ++i) p.hit(m.handle(i), m);
  CHECK(p.protected_records() == 792);
  CHECK(p.probation_records() == 198);
  CHECK(p.stats().protected_bytes == 792);
  p.hit(m.handle(800), m);  // protected passes 792: its LRU record (0) back to probation
  CHECK(p.protected_records() == 792);
  CHECK(p.probation_records() == 198);
  // A hit in the window keeps it there.
  p.hit(m.handle(995), m);
  CHECK(p.window_records() == 10);
  // Within its share the window is left alone: eviction takes probation's
  // LRU record, 792 (0 went to probation's head, 800 to protected).
  p.forget(m.handle(999), m);  // (a store tells the policy first)
  m.remove(999);
  CHECK(p.stats().bytes == 999);
  p.admit(m.write(2000), m);
  REQUIRE(p.evict_one(m));
  CHECK(m.evicted() == std::vector<std::uint64_t>{792});
}

TEST_CASE("WTinyLfu: the window's LRU record enters main only if more frequent than the victim", "[tinylfu]") {
  WTinyLfu p(kName);
  p.set_capacity(100);  // window 1, main 99
  MockRecords m;
  for (std::uint64_t i = 0; i < 100; ++i) p.admit(m.write(i), m);
  CHECK(p.window_records() == 1);  // 99
  // A newcomer (seen once) against probation's LRU record (0, seen once): evicted.
  p.admit(m.write(100), m);
  REQUIRE(p.evict_one(m));
  CHECK(m.evicted().back() == 99);  // the candidate: 99 was the window's LRU record
  CHECK(p.window_records() == 1);
  // Make the window's record (100) more frequent than probation's LRU (0).
  p.hit(m.handle(100), m);
  p.hit(m.handle(100), m);
  p.admit(m.write(101), m);
  REQUIRE(p.evict_one(m));
  CHECK(m.evicted().back() == 0);  // the victim
  CHECK(m.live(100));
  CHECK(p.probation_records() == 99);
  CHECK(p.frequency(MockRecords::hash_of(100)) == 3);
  CHECK(p.stats().bytes == 100);
}

TEST_CASE("WTinyLfu evicts exactly one record a call, and every record once", "[tinylfu]") {
  WTinyLfu p(kName);
  p.set_capacity(50);
  MockRecords m;
  CHECK_FALSE(p.evict_one(m));
  for (std::uint64_t i = 0; i < 200; ++i) {
    p.admit(m.write(i), m);
    if (i % 3 == 0) p.hit(m.handle(i), m);
  }
  std::uint64_t n = 0;
  while (p.evict_one(m)) {
    ++n;
    REQUIRE(m.evicted().size() == n);
    REQUIRE(m.resident() == 200 - n);
  }
  CHECK(n == 200);
  CHECK(p.stats().bytes == 0);
  CHECK(p.stats().entries == 0);
}

TEST_CASE("WTinyLfu keeps the record when host.evict throws", "[tinylfu]") {
  WTinyLfu p(kName);
  p.set_capacity(100);
  EvictFails m;
  for (std::uint64_t i = 0; i < 101; ++i) p.admit(m.write(i), m);
  for (std::uint64_t i = 0; i < 50; ++i) p.hit(m.handle(i), m);
  p.hit(m.handle(100), m);  // the candidate wins: the victim is the one that fails
  p.hit(m.handle(100), m);
  const auto before = p.stats();
  m.fail_next = true;
  CHECK_THROWS_AS(p.evict_one(m), offheap::Error);
  const auto after = p.stats();
  CHECK(after.entries == before.entries);
  CHECK(after.bytes == before.bytes);
  CHECK(after.small_bytes == before.small_bytes);
  CHECK(after.main_bytes == before.main_bytes);
  std::uint64_t n = 0;
  while (p.evict_one(m)) ++n;
  CHECK(n == 101);
}

TEST_CASE("WTinyLfu replace keeps the list, rekeys and moves to its head, forget drops the bytes", "[tinylfu]") {
  WTinyLfu p(kName);
  p.set_capacity(100);
  MockRecords m;
  for (std::uint64_t i = 0; i < 100; ++i) p.admit(m.write(i, 1), m);
  // 0 (probation's LRU record) replaced by a record of 5 bytes at a new location.
  const Handle old = m.handle(0);
  p.replace(old, m.replace(0, 500, 5, MockRecords::hash_of(0)), m);
  CHECK(p.stats().bytes == 104);
  CHECK(p.stats().main_bytes == 103);
  CHECK(p.probation_records() == 99);
  // Now at probation's head: 1 is its LRU record, evicted first.
  p.forget(m.handle(99), m);  // the window's only record
  m.remove(99);
  CHECK(p.stats().small_bytes == 0);
  REQUIRE(p.evict_one(m));
  CHECK(m.evicted().back() == 1);
  // Replaced in place (same location, new stamp).
  const Handle o2 = m.handle(2);
  p.replace(o2, m.replace(2, 2, 3, MockRecords::hash_of(2)), m);
  CHECK(p.stats().bytes == 102 - 1 + 3);
  p.forget(m.handle(500), m);
  m.remove(500);
  CHECK(p.stats().bytes == 104 - 5);
  CHECK(p.stats().bytes == m.resident_bytes());
}

TEST_CASE("WTinyLfu sizes its sketch for the capacity in records at the records' mean size", "[tinylfu]") {
  WTinyLfu p(kName);
  p.set_capacity(1000000);
  MockRecords m;
  CHECK(p.sketch_records() == 0);  // nothing mapped before the first record
  for (std::uint64_t i = 0; i < 50; ++i) p.admit(m.write(i, 10000), m);
  CHECK(p.sketch_records() == 100);  // 1,000,000 / 10,000
  for (int k = 0; k < 5; ++k) p.hit(m.handle(3), m);
  CHECK(p.frequency(MockRecords::hash_of(3)) == 6);
  // Smaller records: once the estimate doubles, a sketch sized anew (and
  // empty).
  std::uint64_t loc = 50;
  while (p.sketch_records() == 100) p.admit(m.write(loc++, 100), m);
  CHECK(p.sketch_records() >= 200);
  // 1,000,000 * (50 + j) / (500,000 + 100 j) >= 200 from j = 52 on.
  CHECK(loc == 50 + 52);
  CHECK(p.frequency(MockRecords::hash_of(3)) == 0);
  CHECK(p.stats().bytes == m.resident_bytes());
}

// ---------------------------------------------------------------- flooding

TEST_CASE("WTinyLfu admits a warm candidate no more frequent than the victim once in about 128", "[tinylfu]") {
  // Every key has one hash (an attacker's collisions): candidate and victim
  // always count the same, so only the 1/128 draw lets a candidate in.
  const std::uint64_t kHash = 12345;
  WTinyLfu p(kName);
  p.set_capacity(1000);
  MockRecords m;
  for (std::uint64_t i = 0; i < 1000; ++i) p.admit(m.write(i, 1, kHash), m);
  REQUIRE(p.window_records() == 10);
  // The window, oldest first (no hits: it stays in admission order).
  std::deque<std::uint64_t> window;
  for (std::uint64_t i = 990; i < 1000; ++i) window.push_back(i);
  std::uint64_t loc = 1000;
  const int kTrials = 256000;
  int admitted = 0;
  for (int t = 0; t < kTrials; ++t, ++loc) {
    p.admit(m.write(loc, 1, kHash), m);
    window.push_back(loc);
    REQUIRE(p.frequency(kHash) >= WTinyLfu::kWarm);
    REQUIRE(p.evict_one(m));
    // The candidate was the window's oldest record: still here, it won.
    if (m.live(window.front())) ++admitted;
    window.pop_front();
    REQUIRE(p.window_records() == 10);
  }
  // No hits, a hit ratio of 0 every period: the climber holds the window.
  CHECK(p.stats().window_target == 10);
  CHECK(m.resident() == 1000);
  CHECK(admitted >= kTrials / 128 - 200);  // 2000 expected, standard deviation 44
  CHECK(admitted <= kTrials / 128 + 200);
  // A cold candidate (a hash of its own, seen once) never gets in by chance
  // (the victims' count stays at 15: a saturated key's accesses do not
  // count toward a halving, and 2,000 cold ones are less than a sample).
  const std::uint64_t first_cold = loc;
  int cold_contests = 0, cold_admitted = 0;
  for (int t = 0; t < 2000; ++t, ++loc) {
    p.admit(m.write(loc), m);
    window.push_back(loc);
    REQUIRE(p.evict_one(m));
    if (window.front() >= first_cold) {
      ++cold_contests;
      if (m.live(window.front())) ++cold_admitted;
    }
    window.pop_front();
  }
  CHECK(cold_contests == 2000 - 10);
  CHECK(cold_admitted == 0);
}

// ---------------------------------------------------------------- bookkeeping

TEST_CASE("WTinyLfu's byte counts follow random admits, replaces, removals, hits and evictions", "[tinylfu]") {
  WTinyLfu p(kName);
  const std::uint64_t capacity = 5000;
  p.set_capacity(capacity);
  MockRecords m;
  SplitMix64 rng(7);
  const std::uint64_t kKeys = 2000;
  std::vector<std::uint64_t> loc_of(kKeys);
  for (std::uint64_t k = 0; k < kKeys; ++k) loc_of[k] = k;
  std::uint64_t next_loc = kKeys;
  std::uint64_t evictions = 0;
  const auto key_hash = [](std::uint64_t key) { return offheap::detail::mix64(key + 77); };
  const auto evict_to = [&](std::uint64_t limit) {
    while (m.resident_bytes() > limit) {
      REQUIRE(p.evict_one(m));
      ++evictions;
    }
  };
  for (int step = 0; step < 200000; ++step) {
    const std::uint64_t key = rng.below(kKeys);
    const std::uint64_t bytes = 1 + rng.below(20);
    const std::uint64_t op = rng.below(10);
    const std::uint64_t loc = loc_of[key];
    if (!m.live(loc)) {
      evict_to(capacity - bytes);
      p.admit(m.write(loc, bytes, key_hash(key)), m);
    } else if (op < 6) {
      p.hit(m.handle(loc), m);
    } else if (op < 8) {
      const Handle old = m.handle(loc);
      if (rng.below(2) == 0) loc_of[key] = next_loc++;  // rewritten elsewhere
      p.replace(old, m.replace(loc, loc_of[key], bytes, key_hash(key)), m);
      evict_to(capacity);
    } else {
      p.forget(m.handle(loc), m);
      m.remove(loc);
    }
    const auto s = p.stats();
    REQUIRE(s.bytes == m.resident_bytes());
    REQUIRE(s.small_bytes + s.main_bytes == m.resident_bytes());
    REQUIRE(s.entries == m.resident());
    REQUIRE(s.protected_bytes <= s.main_bytes);
    REQUIRE(s.window_target <= capacity * 8 / 10);
  }
  CHECK(m.evicted().size() == evictions);
  CHECK(evictions > 10000);
  while (p.evict_one(m)) {
  }
  CHECK(m.resident() == 0);
  CHECK(p.stats().bytes == 0);
  CHECK(p.stats().entries == 0);
  p.clear();
  CHECK(p.stats().window_target == capacity / 100);
}

// ---------------------------------------------------------------- traces

TEST_CASE("WTinyLfu is deterministic: two runs evict the same records", "[tinylfu]") {
  const std::vector<std::uint64_t> trace(test_trace().begin(), test_trace().begin() + 300000);
  WTinyLfu a(kName), b(kName);
  a.set_capacity(1000);
  b.set_capacity(1000);
  RecordModel ha = trace_host(), hb = trace_host();
  const Result ra = simulate(a, ha, trace, 1000);
  const Result rb = simulate(b, hb, trace, 1000);
  CHECK(ra.misses == rb.misses);
  CHECK(ra.evictions == rb.evictions);
  CHECK(ra.evictions > 0);
  CHECK(ha.eviction_digest() == hb.eviction_digest());  // the same records, in the same order
  CHECK(a.stats().window_target == b.stats().window_target);
  CHECK(a.stats().protected_bytes == b.stats().protected_bytes);
  CHECK(a.stats().sketch_resets == b.stats().sketch_resets);
  CHECK(a.stats().sketch_resets >= 10);  // 300,000 accesses, a halving every 10,000 counted increments
}

TEST_CASE("WTinyLfu misses less than S3Fifo on a Zipf trace (100k objects, 2M requests, alpha 1)", "[tinylfu]") {
  const auto& trace = test_trace();
  // Measured over twenty hash draws (mean, worst draw): at 1,000 records
  // (1%) WTinyLfu 0.4013 / 0.4136 beside S3Fifo 0.4012 (which hashes
  // nothing) and LRU 0.4942; at 10,000 (10%) WTinyLfu 0.2078 / 0.2116
  // beside S3Fifo 0.2169 and LRU 0.2642. At 1% the two are level; at 10%
  // WTinyLfu leads on every draw.
  struct Case {
    std::uint64_t capacity;
    double mean_most;    // WTinyLfu's mean over the draws, at most
    double most;         // on any draw
    double lead_least;   // S3Fifo's mean less WTinyLfu's, at least
  };
  for (const Case c : {Case{1000, 0.4060, 0.4160, -0.0050}, Case{10000, 0.2095, 0.2130, 0.0060}}) {
    double w_sum = 0, s_sum = 0;
    std::uint64_t window_sum = 0;
    for (unsigned d = 0; d < kHashDraws; ++d) {
      WTinyLfu p(kName);
      p.set_capacity(c.capacity);
      RecordModel host = trace_host(d);
      const double w = simulate(p, host, trace, c.capacity).miss_ratio();
      const double s = miss_ratio<S3Fifo>(trace, c.capacity, d);
      INFO("capacity " << c.capacity << ", hash draw " << d << ": WTinyLfu " << w << ", S3Fifo " << s);
      w_sum += w;
      s_sum += s;
      CHECK(w <= c.most);
      CHECK(host.resident_bytes() == c.capacity);
      CHECK(p.stats().bytes == c.capacity);
      // A frequency-biased workload: the climber keeps the window small
      // (where it ends wanders with the draw: 0-32% at 1%, 0-10% at 10%).
      CHECK(p.stats().window_target <= c.capacity * 4 / 10);
      window_sum += p.stats().window_target;
      CHECK(p.stats().sketch_resets > 0);
    }
    const double w_mean = w_sum / kHashDraws, s_mean = s_sum / kHashDraws;
    INFO("capacity " << c.capacity << ", means: WTinyLfu " << w_mean << ", S3Fifo " << s_mean << ", window "
                     << window_sum / kHashDraws);
    CHECK(window_sum / kHashDraws <= c.capacity / 10);  // measured: 6.1% and 4.1%
    CHECK(w_mean <= c.mean_most);
    CHECK(s_mean - w_mean >= c.lead_least);
  }
}

TEST_CASE("WTinyLfu's climber widens the window when recency wins and narrows it when frequency wins", "[tinylfu]") {
  // Measured over twenty hash draws: the recency trace leaves the window at
  // 747-800 records of 1,000 (miss ratio at most 0.3292); the frequency
  // trace then narrows it to 173-683, 61% of where it began on the mean
  // (the hit ratios of nearby windows differ by less than a sample's
  // noise there, so the climber's steps decay before it reaches the
  // least window).
  const std::uint64_t capacity = 1000;
  double wide_sum = 0, narrow_sum = 0;
  for (unsigned d = 0; d < kHashDraws; ++d) {
    WTinyLfu p(kName);
    p.set_capacity(capacity);
    RecordModel host = trace_host(d);  // both traces, one after the other
    // Recency: with the window held at 1% this trace misses 85% of the time
    // (newcomers lose to records that were popular and are now dead); LRU
    // misses 27%.
    const double recency = simulate(p, host, recency_trace(1000000, 4, 250, 5), capacity).miss_ratio();
    const std::uint64_t wide = p.stats().window_target;
    INFO("hash draw " << d << ", recency: miss ratio " << recency << ", window " << wide);
    CHECK(wide >= capacity * 7 / 10);
    CHECK(recency <= 0.34);
    // Then frequency: a hot set five times the cache among one-time keys.
    const double frequency = simulate(p, host, frequency_trace(2000000, 5000, 300000, 9), capacity).miss_ratio();
    const std::uint64_t narrow = p.stats().window_target;
    INFO("frequency: miss ratio " << frequency << ", window " << narrow);
    CHECK(narrow < wide);
    CHECK(frequency <= 0.78);
    wide_sum += static_cast<double>(wide);
    narrow_sum += static_cast<double>(narrow);
  }
  INFO("mean windows: " << wide_sum / kHashDraws << " after recency, " << narrow_sum / kHashDraws << " after frequency");
  CHECK(narrow_sum <= wide_sum * 3 / 4);
}

// The bench trace (1M objects, 10M requests, caches of 1% and 10%):
// about half a minute, run by name.
TEST_CASE("WTinyLfu on the bench trace (1M objects, 10M requests, alpha 1)", "[.][tinylfu-bench]") {
  const auto trace = zipf_trace(1000000, 10000000, 1.0, 42);
  for (const std::uint64_t capacity : {10000u, 100000u}) {
    WTinyLfu p(kName);
    p.set_capacity(capacity);
    RecordModel host = trace_host();
    const double w = simulate(p, host, trace, capacity).miss_ratio();
    std::printf("capacity %llu: LRU %.4f  S3Fifo %.4f  WTinyLfu %.4f (window %llu)\n",
                static_cast<unsigned long long>(capacity), miss_ratio<Lru>(trace, capacity),
                miss_ratio<S3Fifo>(trace, capacity), w, static_cast<unsigned long long>(p.stats().window_target));
    CHECK(w <= (capacity == 10000 ? 0.340 : 0.190));
  }
}
