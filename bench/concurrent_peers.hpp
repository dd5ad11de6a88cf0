// SPDX-License-Identifier: Apache-2.0
// The concurrent maps offheap::Store is measured beside when several threads
// share one map: libcuckoo::cuckoohash_map<std::string, std::string> (Debian
// libcuckoo-dev) and tbb::concurrent_hash_map<std::string, std::string>
// (Debian libtbb-dev). Each is compiled in only when CMake found it
// (OFFHEAP_BENCH_HAVE_CUCKOO, OFFHEAP_BENCH_HAVE_TBB).
//
// Each subject does the work offheap::Store does: get copies the value into
// the caller's reused std::string (under the map's own read protection:
// libcuckoo's bucket spinlocks, TBB's per-item reader lock), put is
// find-or-insert then assign, which reuses the value's capacity on an
// overwrite. Both maps keep their default hasher and equality, which take
// const std::string&: key(view, scratch) copies the caller's key into the
// calling thread's reused std::string (16 bytes into a buffer in L1, no
// allocation), as a careful user of such a map does with a key that arrives
// as bytes. offheap::Store takes the view as it is. (Prebuilt std::string
// keys for everyone were measured too: the key's separate heap block adds a
// dependent cache miss to every operation of every subject, which hides the
// maps' own differences.)
//
// The trade-off: default-constructed maps, grown by inserting the entries,
// as offheap::Store is in the same runs (no pre-sizing for anyone).
// tbb::concurrent_hash_map allocates its nodes from TBB's own allocator
// (tbbmalloc when installed), which the benchmark's malloc counter does not
// see; W1 allocates nothing per operation after the fill in any case.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#if defined(OFFHEAP_BENCH_HAVE_CUCKOO)
#include <libcuckoo/cuckoohash_map.hh>
#endif
#if defined(OFFHEAP_BENCH_HAVE_TBB)
#include <tbb/concurrent_hash_map.h>
#include <tbb/version.h>
#endif

namespace offheap_bench {

#if defined(OFFHEAP_BENCH_HAVE_CUCKOO)
class CuckooSubject {
 public:
  static constexpr const char* kName = "libcuckoo::cuckoohash_map";
  static constexpr const char* kShortName = "libcuckoo";

  explicit CuckooSubject(std::uint64_t /*expected_entries*/) {}

  /// The key as the map takes it: a copy in the caller's reused string.
  static const std::string& key(std::string_view k, std::string& scratch) {
    scratch.assign(k.data(), k.size());
    return scratch;
  }

  /// Insert or assign; an overwrite assigns under the two buckets' locks.
  void put(const std::string& key, std::string_view value) { map_.insert_or_assign(key, value); }

  /// Copies the value out while the bucket locks are held.
  bool get(const std::string& key, std::string& out) const {
    return map_.find_fn(key, [&out](const std::string& v) { out.assign(v); });
  }

  void settle() noexcept {}

 private:
  libcuckoo::cuckoohash_map<std::string, std::string> map_;
};
#endif

#if defined(OFFHEAP_BENCH_HAVE_TBB)
class TbbSubject {
 public:
  static constexpr const char* kName = "tbb::concurrent_hash_map";
  static constexpr const char* kShortName = "TBB";

  explicit TbbSubject(std::uint64_t /*expected_entries*/) {}

  /// The key as the map takes it: a copy in the caller's reused string.
  static const std::string& key(std::string_view k, std::string& scratch) {
    scratch.assign(k.data(), k.size());
    return scratch;
  }

  /// Find-or-insert under a writer accessor, then assign.
  void put(const std::string& key, std::string_view value) {
    Map::accessor a;
    map_.insert(a, key);
    a->second.assign(value.data(), value.size());
  }

  /// Copies the value out under a reader accessor.
  bool get(const std::string& key, std::string& out) const {
    Map::const_accessor a;
    if (!map_.find(a, key)) return false;
    out.assign(a->second);
    return true;
  }

  void settle() noexcept {}

 private:
  using Map = tbb::concurrent_hash_map<std::string, std::string>;
  Map map_;
};
#endif

}  // namespace offheap_bench
