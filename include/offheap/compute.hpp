// SPDX-License-Identifier: Apache-2.0
// What an atomic read-modify-write did: OffHeapStore::compute() and the
// operations built on it (compute_if_absent, compute_if_present, merge,
// compute_value<T>).
//
// The rules the functions given to compute() and its kin follow (when they
// run, the lock, what they may call, how long the old value's view lives)
// are stated once at OffHeapStore's compute group (store.hpp). Modelled on
// ConcurrentHashMap.compute and friends (Java; Caffeine's asMap()),
// libcuckoo's upsert / uprase_fn, and RocksDB's merge operator (applied
// at once here, not at read time). This header only names the outcome; it
// hands out no memory.
#pragma once

#include <cstdint>
#include <string_view>

namespace offheap {

/// What compute() and its kin did to the key.
enum class Computed : std::uint8_t {
  unchanged,  ///< nothing written: the function kept the value, or the key stayed absent
  inserted,   ///< the key was absent (or expired) and now holds the function's value
  updated,    ///< the key held a value and now holds the function's other one
  removed,    ///< the key held a value and the function removed it
};

/// A short, stable name for a Computed ("inserted", ...).
constexpr std::string_view to_string(Computed c) noexcept {
  switch (c) {
    case Computed::unchanged: return "unchanged";
    case Computed::inserted: return "inserted";
    case Computed::updated: return "updated";
    case Computed::removed: return "removed";
  }
  return "unknown";
}

/// Whether the key holds a value after the call (inserted or updated).
constexpr bool wrote(Computed c) noexcept { return c == Computed::inserted || c == Computed::updated; }

}  // namespace offheap
