// SPDX-License-Identifier: Apache-2.0
// The options of a test's cache: a capacity, a shard count, and no
// background maintenance (the test decides when eviction catches up).
#pragma once

#include <offheap/options.hpp>

#include <cstdint>

namespace offheap_test {

inline offheap::Options cache_options(std::uint64_t capacity, std::uint32_t shards = 4) {
  offheap::Options o;
  o.capacity_bytes = capacity;
  o.shards = shards;
  o.background_maintenance = false;
  return o;
}

}  // namespace offheap_test
