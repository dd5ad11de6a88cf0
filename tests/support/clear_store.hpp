// SPDX-License-Identifier: Apache-2.0
// The store that the clear() tests in tests/hooks/ fill, clear and crash:
// its options (one shard of many small chunks, so that the records span
// several chunks and a clear has many steps; no background maintenance, so
// that syncs happen only where a test calls them), the names and values of
// what they put in it, and how many: kFillers fillers, then kKeys keys, of
// which those from kRemovedFrom on are removed before the clear.
#pragma once

#include <offheap/offheap.hpp>

#include <filesystem>
#include <string>

namespace offheap_test::clear_store {

inline constexpr int kFillers = 20;
inline constexpr int kKeys = 100;
inline constexpr int kRemovedFrom = 50;  // keys k50.. are removed before the clear

inline offheap::Options options(const std::filesystem::path& dir, offheap::Durability d) {
  offheap::Options o;
  o.path = dir;
  o.shards = 1;
  o.min_chunk_bytes = 4096;
  o.max_chunk_bytes = 4096;  // many small chunks: the clear has many steps
  o.durability = d;
  o.background_maintenance = false;  // syncs only where the test calls them
  return o;
}

inline std::string filler(int i) { return "f" + std::to_string(i); }
inline std::string key(int i) { return "k" + std::to_string(i); }
/// A key put after the clear.
inline std::string new_key(int i) { return "n" + std::to_string(i); }
inline std::string value_of(const std::string& k) { return k + std::string(90, 'v'); }

}  // namespace offheap_test::clear_store
