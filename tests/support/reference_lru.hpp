// SPDX-License-Identifier: Apache-2.0
// A plain LRU cache simulator, written to be obviously correct rather than
// fast or off-heap: a std::list in recency order and a map from id to its
// list node. The eviction tests hold offheap::eviction::Lru to it exactly
// (same trace, same capacity rule as simulate(): a miss puts the new object
// in, then evicts from the cold end while the objects pass the capacity),
// and the hit-ratio bench prints it for context.
#pragma once

#include <cstdint>
#include <list>
#include <stdexcept>
#include <unordered_map>
#include <vector>

namespace offheap_test {

struct ReferenceResult {
  std::uint64_t requests = 0;
  std::uint64_t misses = 0;
  double miss_ratio() const noexcept {
    return requests == 0 ? 0.0 : static_cast<double>(misses) / static_cast<double>(requests);
  }
};

/// LRU over `trace` with `capacity` bytes, every object `object_bytes`.
inline ReferenceResult reference_lru(const std::vector<std::uint64_t>& trace, std::uint64_t capacity,
                                     std::uint64_t object_bytes = 1) {
  if (object_bytes == 0 || object_bytes > capacity) throw std::invalid_argument("reference_lru: object too large");
  std::list<std::uint64_t> recency;  // front: most recently used
  std::unordered_map<std::uint64_t, std::list<std::uint64_t>::iterator> where;
  where.reserve(capacity / object_bytes + 1);
  std::uint64_t bytes = 0;
  ReferenceResult r;
  for (const std::uint64_t id : trace) {
    ++r.requests;
    if (const auto it = where.find(id); it != where.end()) {
      recency.splice(recency.begin(), recency, it->second);  // to the front; iterators stay valid
      continue;
    }
    ++r.misses;
    recency.push_front(id);
    where.emplace(id, recency.begin());
    bytes += object_bytes;
    while (bytes > capacity) {
      where.erase(recency.back());
      recency.pop_back();
      bytes -= object_bytes;
    }
  }
  return r;
}

}  // namespace offheap_test
