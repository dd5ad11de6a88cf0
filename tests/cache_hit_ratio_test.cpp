// SPDX-License-Identifier: Apache-2.0
// Each cache in production mode (two reader-writer threads, the
// maintenance thread on) against its policy in reference mode (one thread,
// every hit applied) on the same Zipf trace: S3-FIFO's miss ratios agree
// within half a point, LRU's and W-TinyLFU's within one (they see readers'
// hits through lossy buffers, drained in batches, where S3-FIFO's frequency
// bits are raised at once; and between maintenance rounds a cache holds up
// to its slack above the capacity, which LRU's miss ratio feels most:
// measured 0.2595 against 0.2653). Records are all 64 bytes,
// so that the cache's byte capacity is a number of objects as in the
// reference.
#include <offheap/offheap.hpp>

#include "support/record_model.hpp"
#include "support/zipf.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <typeinfo>
#include <vector>

namespace {

constexpr std::uint64_t kRecordBytes = 64;  // 24-byte header + 9-byte key + 31-byte value

std::string key_of(std::uint64_t id) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "k%08llu", static_cast<unsigned long long>(id));
  return buf;
}

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

  typename TestType::Policy reference("reference");
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
  INFO("reference " << want << ", production " << got << ", evictions " << s.evictions);
  CHECK(s.live_bytes <= o.capacity_bytes + o.capacity_bytes / 16 + kRecordBytes);
  CHECK(got > want - TestType::tolerance);
  CHECK(got < want + TestType::tolerance);
  CHECK(want < 0.27);  // (a Zipf 1.0 trace at a 10% cache: 0.21-0.26)
  std::printf("production vs reference (%s): %.4f vs %.4f\n", typeid(typename TestType::Policy).name(), got, want);
}
