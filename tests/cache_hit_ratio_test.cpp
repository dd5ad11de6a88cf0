// SPDX-License-Identifier: Apache-2.0
// Each cache in production mode (two reader-writer threads, the
// maintenance thread on) against its policy in reference mode (one thread,
// every hit applied) on the same Zipf trace. S3-FIFO's readers raise its
// frequency bits at once: its miss ratio agrees with the reference's
// within half a point. LRU and W-TinyLFU see readers' hits through lossy
// rings that the maintenance thread drains every millisecond (and writers
// past the hard limit before they evict), so they apply the share of the
// hits that the rings kept, which depends on how fast the readers run
// against the drains (80% on a quiet machine here; 20% when each request
// costs a few microseconds more, as on a loaded CI machine, where LRU
// missed 0.2815 against its reference's 0.2653). Their production miss
// ratio agrees within one point with the reference applying the same
// share of hits, drawn at random (stats(): policy_hits_applied against
// policy_hits_dropped): that is the policy with its hits sampled, not
// something else. Between maintenance rounds a cache also holds up to its
// slack above the capacity, which lowers production's misses a little.
// Records are all 64 bytes, so that the cache's byte capacity is a number
// of objects as in the reference.
#include <offheap/offheap.hpp>

#include "support/record_model.hpp"
#include "support/zipf.hpp"
#include "support/store_name.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr std::uint64_t kRecordBytes = 64;  // 24-byte header + 9-byte key + 31-byte value

std::string key_of(std::uint64_t id) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "k%08llu", static_cast<unsigned long long>(id));
  return buf;
}

/// A policy's name as the README and the benches write it.
template <class P>
struct PolicyName;  // (none for a policy not named here: the print does not compile)
template <>
struct PolicyName<offheap::eviction::S3Fifo> {
  static constexpr const char* value = "S3-FIFO";
};
template <>
struct PolicyName<offheap::eviction::Lru> {
  static constexpr const char* value = "LRU";
};
template <>
struct PolicyName<offheap::eviction::WTinyLfu> {
  static constexpr const char* value = "W-TinyLFU";
};

/// `P` applying each hit with probability `keep` (a fixed seed): what a
/// policy fed by lossy hit rings sees.
template <class P>
class SampledHits : public P {
 public:
  SampledHits(const char* name, double keep) : P(offheap_test::store_name(name)), keep_(keep) {}
  template <class Host>
  void hit(const offheap::eviction::Handle& h, Host& host) {
    if (rng_.unit() < keep_) P::hit(h, host);
  }

 private:
  double keep_;
  offheap_test::SplitMix64 rng_{0x5A3D1E};
};

}  // namespace

template <class C, class Reference, int kTolerancePermille>
struct Subject {
  using Cache = C;
  using Policy = Reference;
  static constexpr double tolerance = kTolerancePermille / 1000.0;
};

TEMPLATE_TEST_CASE("A cache with two threads and maintenance misses as its policy's reference mode does",
                   "[cache][hitratio]", (Subject<offheap::Cache, offheap::eviction::S3Fifo, 5>),
                   (Subject<offheap::LruCache, offheap::eviction::Lru, 10>),
                   (Subject<offheap::TinyLfuCache, offheap::eviction::WTinyLfu, 10>)) {
  const std::uint64_t objects = 100000, requests = 1000000, cached = 10000;
  const std::vector<std::uint64_t> trace = offheap_test::zipf_trace(objects, 1.0, requests);

  typename TestType::Policy reference(offheap_test::store_name("reference"));
  const double want = offheap_test::simulate(reference, trace, cached * kRecordBytes, kRecordBytes).miss_ratio();

  offheap::Options o;
  o.shards = 1;  // one policy, as the reference
  o.capacity_bytes = cached * kRecordBytes;
  o.background_maintenance = true;
  typename TestType::Cache cache(o);
  const std::string value(31, 'v');
  std::atomic<std::uint64_t> misses{0}, wrong{0};
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      std::string out;
      std::uint64_t mine = 0, bad = 0;
      for (std::size_t i = t; i < trace.size(); i += 2) {
        const std::string k = key_of(trace[i]);
        if (cache.get(k, out)) {
          bad += out != value;  // (Catch's assertions are for the main thread only)
          continue;
        }
        ++mine;
        cache.put(k, value);
      }
      misses.fetch_add(mine);
      wrong.fetch_add(bad);
    });
  }
  for (auto& t : threads) t.join();
  CHECK(wrong.load() == 0);
  const double got = static_cast<double>(misses.load()) / static_cast<double>(requests);
  const auto s = cache.stats();
  const std::uint64_t seen = s.policy_hits_applied + s.policy_hits_dropped;
  const double kept = seen == 0 ? 1.0 : static_cast<double>(s.policy_hits_applied) / static_cast<double>(seen);
  if constexpr (TestType::Policy::reader_hits != offheap::eviction::ReaderHits::buffered) {
    CHECK(seen == 0);  // (every hit applied at once)
  } else {
    CHECK(s.policy_hits_applied > 0);
  }
  SampledHits<typename TestType::Policy> sampled("sampled", kept);
  const double want_sampled =
      kept == 1.0 ? want : offheap_test::simulate(sampled, trace, cached * kRecordBytes, kRecordBytes).miss_ratio();
  INFO("reference " << want << ", with " << kept << " of its hits " << want_sampled << ", production " << got
                    << ", evictions " << s.evictions);
  CHECK(s.live_bytes <= o.capacity_bytes + o.capacity_bytes / 16 + kRecordBytes);
  CHECK(got > want_sampled - TestType::tolerance);
  CHECK(got < want_sampled + TestType::tolerance);
  CHECK(want < 0.27);  // (a Zipf 1.0 trace at a 10% cache: 0.21-0.26)
  std::printf("production vs reference (%s): %.4f vs %.4f (%.4f with the %.2f of its hits production kept)\n",
              PolicyName<typename TestType::Policy>::value, got, want, want_sampled, kept);
}
