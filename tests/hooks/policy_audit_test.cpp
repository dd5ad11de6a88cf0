// SPDX-License-Identifier: Apache-2.0
// verify() checks a cache's eviction policy against its records: every
// live record held once, the policy's byte and entry counts right. An
// inconsistency planted through a test hook (OFFHEAP_TESTING_POLICY_HOOK:
// one insert the policy is not told of, or one removal it is not told of)
// is reported; the same run without the plant verifies clean. Each policy.
#include <offheap/offheap.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

namespace {

std::uint64_t calls = 0;
std::uint64_t skip_at = 0;  // the call to skip (1-based); 0: none
const char* skip_call = "";

bool skip(const char* call) {
  if (std::string(call) != skip_call) return false;
  return ++calls == skip_at;
}

template <class C>
std::string run(const char* call, std::uint64_t at) {
  calls = 0;
  skip_at = at;
  skip_call = call;
  offheap::detail::testing_policy_skips = &skip;
  offheap::Options o;
  o.shards = 2;
  o.capacity_bytes = 64 << 10;
  o.background_maintenance = false;
  C c(o);
  for (std::uint64_t i = 0; i < 400; ++i) c.put("key-" + std::to_string(i), std::string(100 + i % 50, 'v'));
  for (std::uint64_t i = 0; i < 400; i += 3) c.remove("key-" + std::to_string(i));
  c.maintain();
  std::string problem = c.verify();
  offheap::detail::testing_policy_skips = nullptr;
  return problem;
}

}  // namespace

TEMPLATE_TEST_CASE("verify() catches a cache policy that lost an insert or a removal", "[cache][verify][hook]",
                   offheap::Cache, offheap::LruCache, offheap::TinyLfuCache) {
  CHECK(run<TestType>("admit", 0).empty());
  // The 390th insert never reaches the policy: a live record it does not hold.
  const std::string lost_insert = run<TestType>("admit", 390);
  CHECK_THAT(lost_insert, Catch::Contains("the eviction policy holds") && Catch::Contains("live records"));
  // The 100th removal never reaches it: it counts bytes nobody holds.
  const std::string lost_removal = run<TestType>("forget", 100);
  CHECK_THAT(lost_removal, Catch::Contains("the eviction policy counts"));
}
