// SPDX-License-Identifier: Apache-2.0
// The reference-mode harness checked before any policy is measured with it:
// the Zipf generator follows its law and is deterministic, the record model
// tells stale handles by stamp and catches a policy breaking its contract,
// simulate() counts exactly what a plain FIFO simulator counts, and the
// reference LRU and Belady's MIN agree with naive versions of themselves.
#include "support/belady.hpp"
#include "support/fifo_policy.hpp"
#include "support/record_model.hpp"
#include "support/reference_lru.hpp"
#include "support/zipf.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <numeric>
#include <string>
#include <unordered_set>
#include <vector>

using offheap::eviction::Handle;
using offheap_test::FifoPolicy;
using offheap_test::HostError;
using offheap_test::RecordModel;
using offheap_test::simulate;
using offheap_test::Zipf;
using offheap_test::zipf_trace;

namespace {

// Counts of each rank in `requests` draws.
std::vector<std::uint64_t> rank_counts(Zipf& zipf, std::uint64_t requests) {
  std::vector<std::uint64_t> counts(zipf.objects());
  for (std::uint64_t i = 0; i < requests; ++i) ++counts[zipf.next_rank()];
  return counts;
}

// |observed - expected| within `sigmas` binomial standard deviations.
bool within_sigmas(double observed, double p, double n, double sigmas) {
  const double expected = n * p, sd = std::sqrt(n * p * (1 - p));
  return std::abs(observed - expected) <= sigmas * sd + 1;
}

// A plain FIFO cache of `slots` objects: the misses simulate() must count
// for FifoPolicy.
std::uint64_t plain_fifo_misses(const std::vector<std::uint64_t>& trace, std::uint64_t slots) {
  std::deque<std::uint64_t> order;
  std::unordered_set<std::uint64_t> in;
  std::uint64_t misses = 0;
  for (const std::uint64_t id : trace) {
    if (in.count(id) != 0) continue;
    ++misses;
    if (order.size() == slots) {
      in.erase(order.front());
      order.pop_front();
    }
    order.push_back(id);
    in.insert(id);
  }
  return misses;
}

// LRU by moving ids to the front of a vector: slow and unmistakable.
std::uint64_t naive_lru_misses(const std::vector<std::uint64_t>& trace, std::uint64_t slots) {
  std::vector<std::uint64_t> stack;  // front: most recent
  std::uint64_t misses = 0;
  for (const std::uint64_t id : trace) {
    const auto it = std::find(stack.begin(), stack.end(), id);
    if (it != stack.end()) {
      stack.erase(it);
    } else {
      ++misses;
      if (stack.size() == slots) stack.pop_back();
    }
    stack.insert(stack.begin(), id);
  }
  return misses;
}

// MIN by scanning the rest of the trace for each resident object.
std::uint64_t naive_min_misses(const std::vector<std::uint64_t>& trace, std::uint64_t slots) {
  std::vector<std::uint64_t> cache;
  std::uint64_t misses = 0;
  for (std::size_t t = 0; t < trace.size(); ++t) {
    if (std::find(cache.begin(), cache.end(), trace[t]) != cache.end()) continue;
    ++misses;
    if (cache.size() == slots) {
      std::size_t victim = 0, farthest = 0;
      for (std::size_t i = 0; i < cache.size(); ++i) {
        std::size_t next = t + 1;
        while (next < trace.size() && trace[next] != cache[i]) ++next;
        if (next > farthest) farthest = next, victim = i;
      }
      cache.erase(cache.begin() + static_cast<std::ptrdiff_t>(victim));
    }
    cache.push_back(trace[t]);
  }
  return misses;
}

}  // namespace

// --- The generator ---

TEST_CASE("SplitMix64 and key_hash are fixed functions", "[eviction][harness]") {
  offheap_test::SplitMix64 rng(0);
  CHECK(rng.next() == 0xE220A8397B1DCDAFull);  // SplitMix64's published first output for seed 0
  CHECK(rng.next() == 0x6E789E6AA1B965F4ull);
  CHECK(offheap_test::mix64(0) == 0);
  CHECK(offheap_test::key_hash(0) != offheap_test::key_hash(1));
  std::unordered_set<std::uint64_t> hashes;
  for (std::uint64_t id = 0; id < 100'000; ++id) hashes.insert(offheap_test::key_hash(id));
  CHECK(hashes.size() == 100'000);
  // below(n) covers [0, n) and nothing else.
  std::vector<int> seen(7);
  for (int i = 0; i < 7000; ++i) {
    const std::uint64_t v = rng.below(7);
    REQUIRE(v < 7);
    ++seen[v];
  }
  for (const int c : seen) CHECK((c > 850 && c < 1150));
}

TEST_CASE("Zipf probabilities are (r+1)^-alpha normalized", "[eviction][harness]") {
  for (const double alpha : {0.0, 0.6, 1.0, 1.2}) {
    const Zipf zipf(100'000, alpha);
    double total = 0, harmonic = 0;
    for (std::uint64_t r = 0; r < zipf.objects(); ++r) {
      total += zipf.probability(r);
      harmonic += std::pow(static_cast<double>(r + 1), -alpha);
    }
    CHECK(total == Approx(1.0).epsilon(1e-12));
    CHECK(zipf.probability(0) == Approx(1.0 / harmonic).epsilon(1e-9));
    CHECK(zipf.probability(9) / zipf.probability(0) == Approx(std::pow(10.0, -alpha)).epsilon(1e-9));
    CHECK(zipf.probability(99'999) / zipf.probability(0) == Approx(std::pow(1e5, -alpha)).epsilon(1e-6));
  }
}

TEST_CASE("Zipf draws follow the law (100k objects, 2M draws)", "[eviction][harness]") {
  for (const double alpha : {0.6, 1.0, 1.2}) {
    CAPTURE(alpha);
    Zipf zipf(100'000, alpha);
    const double n = 2'000'000;
    const std::vector<std::uint64_t> counts = rank_counts(zipf, 2'000'000);
    // The top ranks one by one.
    for (std::uint64_t r = 0; r < 20; ++r) {
      CAPTURE(r, counts[r]);
      CHECK(within_sigmas(static_cast<double>(counts[r]), zipf.probability(r), n, 5));
    }
    // Every rank, in bins that double: [0], [1, 2], [3, 6], ...
    for (std::uint64_t lo = 0, width = 1; lo < zipf.objects(); lo += width, width *= 2) {
      const std::uint64_t hi = std::min<std::uint64_t>(lo + width, zipf.objects());
      double p = 0, observed = 0;
      for (std::uint64_t r = lo; r < hi; ++r) p += zipf.probability(r), observed += static_cast<double>(counts[r]);
      CAPTURE(lo, hi, observed, n * p);
      CHECK(within_sigmas(observed, p, n, 5));
    }
    // The slope of log(count) against log(rank + 1) over ranks 1-100 is -alpha.
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    const int m = 100;
    for (int r = 0; r < m; ++r) {
      const double x = std::log(r + 1.0), y = std::log(static_cast<double>(counts[r]));
      sx += x, sy += y, sxx += x * x, sxy += x * y;
    }
    const double slope = (m * sxy - sx * sy) / (m * sxx - sx * sx);
    CHECK(slope == Approx(-alpha).margin(0.03));
  }
}

TEST_CASE("Zipf ids are a seeded permutation of ranks", "[eviction][harness]") {
  const std::uint64_t n = 100'000;
  const Zipf zipf(n, 1.0);
  std::vector<std::uint64_t> ids(n);
  for (std::uint64_t r = 0; r < n; ++r) ids[r] = zipf.id_of_rank(r);
  std::vector<std::uint64_t> sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::uint64_t> iota(n);
  std::iota(iota.begin(), iota.end(), 0);
  CHECK(sorted == iota);
  // The 1,000 most popular ids are spread over the id space: about 10 of
  // them fall below 1,000 (1%), and their mean is near n/2.
  std::uint64_t low = 0;
  double mean = 0;
  for (std::uint64_t r = 0; r < 1000; ++r) low += ids[r] < 1000, mean += static_cast<double>(ids[r]) / 1000;
  CHECK(low < 40);
  CHECK(mean == Approx(n / 2.0).epsilon(0.1));
  // Another seed, another permutation.
  const Zipf other(n, 1.0, offheap_test::kZipfSeed + 1);
  std::uint64_t same = 0;
  for (std::uint64_t r = 0; r < n; ++r) same += other.id_of_rank(r) == ids[r];
  CHECK(same < 100);
}

TEST_CASE("Zipf traces are deterministic", "[eviction][harness]") {
  const std::vector<std::uint64_t> a = zipf_trace(100'000, 1.0, 200'000);
  CHECK(a == zipf_trace(100'000, 1.0, 200'000));
  const std::vector<std::uint64_t> b = zipf_trace(100'000, 1.0, 200'000, offheap_test::kZipfSeed + 1);
  std::uint64_t same = 0;
  for (std::size_t i = 0; i < a.size(); ++i) same += a[i] == b[i];
  CHECK(same < a.size() / 50);
  // Pinned: the thresholds in the policy tests are for these traces, so a
  // change to the generator must show here first (then re-derive them).
  std::uint64_t fold = 0;
  for (const std::uint64_t id : zipf_trace(1000, 1.0, 10'000)) fold = offheap_test::mix64(fold ^ id);
  CHECK(fold == 0xD453AE69C57EEC0Eull);
}

// --- The record model ---

TEST_CASE("the record model tells a reused location apart by its stamp", "[eviction][harness]") {
  RecordModel host;
  const Handle a = host.insert(1, 10);
  CHECK(host.resident(1));
  CHECK(host.resident_bytes() == 10);
  host.set_bits(a, 5);
  CHECK(host.bits(a) == 5);
  Handle probe{a.loc, a.stamp};  // as a queue keeps it
  REQUIRE(host.current(probe));
  CHECK(probe.hash == offheap_test::key_hash(1));
  CHECK(probe.bytes == 10);
  host.evict(a);
  CHECK(host.evictions() == 1);
  CHECK_FALSE(host.resident(1));
  CHECK(host.resident_bytes() == 0);

  const Handle b = host.insert(2, 20);
  CHECK(b.loc == a.loc);  // the freed location, reused
  CHECK(b.stamp != a.stamp);
  CHECK(host.bits(b) == 0);  // a new record starts with clear bits
  Handle stale{a.loc, a.stamp};
  CHECK_FALSE(host.current(stale));
  CHECK(stale.hash == 0);  // left alone when not current
  CHECK_THROWS_AS(host.evict(a), HostError);
  CHECK_THROWS_AS(host.bits(a), HostError);
  CHECK_THROWS_AS(host.set_bits(b, 8), HostError);
  Handle wild{12345, 1};
  CHECK_FALSE(host.current(wild));

  const auto [old, fresh] = host.replace(2, 30);
  CHECK(old == b);
  Handle old_probe = old;
  CHECK_FALSE(host.current(old_probe));
  CHECK(host.resident_bytes() == 30);
  const Handle removed = host.remove(2);
  CHECK(removed == fresh);
  CHECK_FALSE(host.resident(2));
  CHECK(host.resident_records() == 0);
  CHECK(host.evictions() == 1);  // removals are not evictions
  CHECK_THROWS_AS(host.handle(2), HostError);
}

namespace {

// Policies that break the contract in one way each; simulate() must notice.
// FIFO behaviour otherwise, so each runs until its fault fires.
struct BrokenPolicy : FifoPolicy {
  enum class Fault { evicts_twice, evicts_in_hit, evicts_in_admit, holds_out, claims_without_evicting,
                     evicts_stale, bits_overflow };
  Fault fault;
  std::deque<Handle> kept;  // for the faults that need handles of their own
  explicit BrokenPolicy(Fault f) : fault(f) {}

  template <class Host>
  void admit(const Handle& h, Host& host) {
    FifoPolicy::admit(h, host);
    kept.push_back(h);
    if (fault == Fault::evicts_in_admit && kept.size() > 1) host.evict(kept[kept.size() - 2]);
  }
  template <class Host>
  void hit(const Handle& h, Host& host) {
    if (fault == Fault::evicts_in_hit) host.evict(h);
    if (fault == Fault::bits_overflow) host.set_bits(h, 8);
  }
  template <class Host>
  bool evict_one(Host& host) {
    switch (fault) {
      case Fault::holds_out: return false;
      case Fault::claims_without_evicting: return true;
      case Fault::evicts_stale: host.evict(kept.front()); return true;  // never pops: the 2nd call is stale
      case Fault::evicts_twice: return FifoPolicy::evict_one(host) && FifoPolicy::evict_one(host);
      default: return FifoPolicy::evict_one(host);
    }
  }
};

}  // namespace

TEST_CASE("simulate() stops a policy that breaks the host's contract", "[eviction][harness]") {
  const std::vector<std::uint64_t> trace = zipf_trace(1000, 1.0, 5000);
  using F = BrokenPolicy::Fault;
  const auto fails_with = [&](F f, const char* text) {
    BrokenPolicy p(f);
    CHECK_THROWS_WITH(simulate(p, trace, 50), Catch::Contains(text));
  };
  fails_with(F::evicts_twice, "after 2 evictions");
  fails_with(F::evicts_in_hit, "inside hit()");
  fails_with(F::evicts_in_admit, "inside admit()");
  fails_with(F::holds_out, "found nothing to evict");
  fails_with(F::claims_without_evicting, "returned true after 0 evictions");
  fails_with(F::evicts_stale, "names no current record");
  fails_with(F::bits_overflow, "policy bits are 3 bits");
  // The same trace through the unbroken policy runs.
  FifoPolicy fine;
  CHECK(simulate(fine, trace, 50).requests == 5000);
}

// --- simulate() against plain simulators ---

TEST_CASE("simulate() with FIFO counts exactly what a plain FIFO does", "[eviction][harness]") {
  for (const double alpha : {0.6, 1.0, 1.2}) {
    const std::vector<std::uint64_t> trace = zipf_trace(10'000, alpha, 300'000);
    for (const std::uint64_t slots : {1, 10, 100, 1000, 5000}) {
      CAPTURE(alpha, slots);
      const std::uint64_t expected = plain_fifo_misses(trace, slots);
      FifoPolicy fifo;
      const offheap_test::Result r = simulate(fifo, trace, slots);
      CHECK(r.requests == trace.size());
      CHECK(r.misses == expected);
      CHECK(r.miss_ratio() == static_cast<double>(expected) / static_cast<double>(trace.size()));
      CHECK(r.max_resident_bytes == slots);  // every size here fills
      CHECK(r.evictions == r.misses - slots);
      CHECK(fifo.stats().bytes == slots);
      // Bytes: 37-byte objects in 37 * slots + 36 bytes hold `slots` objects.
      FifoPolicy by_bytes;
      const offheap_test::Result rb = simulate(by_bytes, trace, 37 * slots + 36, 37);
      CHECK(rb.misses == expected);
      CHECK(rb.max_resident_bytes == 37 * slots);
    }
  }
  // A cache larger than the objects seen misses once per object.
  const std::vector<std::uint64_t> trace = zipf_trace(1000, 1.0, 100'000);
  FifoPolicy fifo;
  const offheap_test::Result r = simulate(fifo, trace, 2000);
  CHECK(r.misses == std::unordered_set<std::uint64_t>(trace.begin(), trace.end()).size());
  CHECK(r.evictions == 0);
}

TEST_CASE("the reference LRU is LRU", "[eviction][harness]") {
  // By hand, 3 slots: 1 2 3 miss; 1 hits; 4 evicts 2; 2 evicts 3; 5 evicts
  // 1; 1 evicts 4 (FIFO would have hit 2 and missed 6 times).
  const std::vector<std::uint64_t> hand{1, 2, 3, 1, 4, 2, 5, 1};
  CHECK(offheap_test::reference_lru(hand, 3).misses == 7);
  CHECK(plain_fifo_misses(hand, 3) == 6);
  CHECK(offheap_test::reference_lru(hand, 3 * 8 + 7, 8).misses == 7);

  const std::vector<std::uint64_t> trace = zipf_trace(2000, 0.8, 50'000);
  std::uint64_t previous = ~std::uint64_t{0};
  for (const std::uint64_t slots : {1, 7, 50, 300, 1500}) {
    CAPTURE(slots);
    const offheap_test::ReferenceResult r = offheap_test::reference_lru(trace, slots);
    CHECK(r.requests == trace.size());
    CHECK(r.misses == naive_lru_misses(trace, slots));
    CHECK(r.misses < previous);  // LRU's inclusion property: more room, fewer misses
    previous = r.misses;
  }
}

TEST_CASE("Belady's MIN is the naive MIN, and below LRU and FIFO", "[eviction][harness]") {
  // By hand, 3 slots: 1 2 3 miss; 1 hits; 4 evicts 3 (never again); 2 hits;
  // 5 evicts 2 or 4 (neither comes back); 1 hits.
  const std::vector<std::uint64_t> hand{1, 2, 3, 1, 4, 2, 5, 1};
  const std::vector<std::uint64_t> hand_next = offheap_test::next_uses(hand);
  CHECK(hand_next == std::vector<std::uint64_t>{3, 5, offheap_test::kNeverAgain, 7, offheap_test::kNeverAgain,
                                                offheap_test::kNeverAgain, offheap_test::kNeverAgain,
                                                offheap_test::kNeverAgain});
  offheap_test::BeladyPolicy hand_min(hand, hand_next);
  CHECK(simulate(hand_min, hand, 3).misses == 5);

  for (const double alpha : {0.6, 1.0}) {
    const std::vector<std::uint64_t> small = zipf_trace(500, alpha, 6000);
    const std::vector<std::uint64_t> next = offheap_test::next_uses(small);
    for (const std::uint64_t slots : {1, 5, 40, 200}) {
      CAPTURE(alpha, slots);
      offheap_test::BeladyPolicy min(small, next);
      const offheap_test::Result r = simulate(min, small, slots);
      CHECK(r.misses == naive_min_misses(small, slots));
    }
  }

  const std::vector<std::uint64_t> trace = zipf_trace(10'000, 1.0, 300'000);
  const std::vector<std::uint64_t> next = offheap_test::next_uses(trace);
  for (const std::uint64_t slots : {100, 1000}) {
    CAPTURE(slots);
    offheap_test::BeladyPolicy min(trace, next);
    FifoPolicy fifo;
    const std::uint64_t belady = simulate(min, trace, slots).misses;
    const std::uint64_t lru = offheap_test::reference_lru(trace, slots).misses;
    const std::uint64_t fifo_misses = simulate(fifo, trace, slots).misses;
    CHECK(belady < lru);
    CHECK(lru < fifo_misses);
    // Far below, not just below: MIN is about 0.7x LRU's misses on this trace.
    CHECK(static_cast<double>(belady) < 0.85 * static_cast<double>(lru));
  }
}
