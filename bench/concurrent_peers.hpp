// SPDX-License-Identifier: Apache-2.0
// The concurrent hash maps offheap::Store is measured beside:
// libcuckoo::cuckoohash_map (Debian libcuckoo-dev) and
// tbb::concurrent_hash_map (Debian libtbb-dev), both from std::string to
// std::string. Each is compiled in only when CMake found it
// (OFFHEAP_BENCH_HAVE_CUCKOO, OFFHEAP_BENCH_HAVE_TBB). See subjects.hpp for
// what a subject is.
//
// Both take the caller's std::string_view key as it is: libcuckoo's find_fn,
// update_fn and insert are templates on the key type and hash and compare it
// with the map's hasher and equality, which here take std::string_view;
// oneTBB's concurrent_hash_map has heterogeneous find and insert (since
// 2021.4) when its HashCompare declares is_transparent, as StringViewCompare
// does. The hash is std::hash<std::string_view>, which hashes the bytes as
// std::hash<std::string> (both maps' default) does.
//
// get copies the value into the caller's reused std::string under the map's
// own read protection (libcuckoo's two bucket locks, TBB's per-item reader
// lock). put finds the key and assigns the value in place, reusing its
// capacity (libcuckoo: update_fn under the bucket locks; TBB: a writer
// accessor), and inserts on a miss (libcuckoo: insert of the key built from
// the view; TBB: insert, which builds the key from the view).
//
// Sizing: pre-sized exactly when offheap::Store is (libcuckoo's constructor
// takes the entry count; TBB's the bucket count, one bucket per entry).
// Unsized, each is default-constructed: libcuckoo's default reserves room for
// 2^16 buckets of 4 slots (262,144 entries), TBB starts with a few buckets.
// tbb::concurrent_hash_map allocates its nodes from TBB's own allocator
// (tbbmalloc when installed), which the malloc counter does not see; the
// memory figures come from the process's resident memory and do.
#pragma once

#include "subjects.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

#if defined(OFFHEAP_BENCH_HAVE_CUCKOO)
#include <libcuckoo/cuckoohash_map.hh>
#endif
#if defined(OFFHEAP_BENCH_HAVE_TBB)
#include <tbb/concurrent_hash_map.h>
#include <tbb/version.h>
#endif

#if defined(OFFHEAP_BENCH_HAVE_CUCKOO) && !defined(OFFHEAP_BENCH_CUCKOO_VERSION)
#define OFFHEAP_BENCH_CUCKOO_VERSION "(version unknown)"
#endif

namespace offheap_bench {

/// Hash and equality on std::string_view, for std::string keys looked up by
/// view (a std::string converts to one without a copy).
struct StringViewHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept {
    return std::hash<std::string_view>{}(s);
  }
};
struct StringViewEqual {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const noexcept { return a == b; }
};

#if defined(OFFHEAP_BENCH_HAVE_CUCKOO)
class CuckooSubject {
 public:
  static constexpr const char* kName = "libcuckoo::cuckoohash_map";
  static constexpr bool kThreadSafe = true;
  using Session = NoSession<CuckooSubject>;

  static std::string describe() {
    return std::string("libcuckoo ") + OFFHEAP_BENCH_CUCKOO_VERSION +
           ", cuckoohash_map<std::string, std::string, hash and equality on string_view> "
           "(find_fn, update_fn and insert take the string_view: no key copy); get: find_fn "
           "copies out under the bucket locks; put: update_fn assigns in place, insert on a "
           "miss";
  }
  static std::string sizing(std::uint64_t n) {
    return n != 0 ? "constructed for " + std::to_string(n) + " entries"
                  : "default-constructed (room for 262,144 entries, grows)";
  }

  explicit CuckooSubject(std::uint64_t expected_entries)
      : map_(expected_entries != 0 ? expected_entries : libcuckoo::DEFAULT_SIZE) {}

  void put(Session&, std::string_view key, std::string_view value) {
    const auto assign = [value](std::string& v) { v.assign(value.data(), value.size()); };
    // A key inserted by another thread between the two calls is assigned
    // by the second update_fn.
    while (!map_.update_fn(key, assign)) {
      if (map_.insert(key, value)) return;
    }
  }

  bool get(Session&, std::string_view key, std::string& out) const {
    return map_.find_fn(key, [&out](const std::string& v) { out.assign(v); });
  }

  void settle() noexcept {}
  std::filesystem::path files() const { return {}; }

 private:
  libcuckoo::cuckoohash_map<std::string, std::string, StringViewHash, StringViewEqual> map_;
};
#endif

#if defined(OFFHEAP_BENCH_HAVE_TBB)
/// oneTBB's HashCompare, transparent: find and insert take the view.
struct StringViewCompare {
  using is_transparent = void;
  std::size_t hash(std::string_view s) const noexcept { return StringViewHash{}(s); }
  bool equal(std::string_view a, std::string_view b) const noexcept { return a == b; }
};

class TbbSubject {
 public:
  static constexpr const char* kName = "tbb::concurrent_hash_map";
  static constexpr bool kThreadSafe = true;
  using Session = NoSession<TbbSubject>;

  static std::string describe() {
    return std::string("oneTBB ") + TBB_VERSION_STRING +
           ", concurrent_hash_map<std::string, std::string, transparent HashCompare on "
           "string_view> (heterogeneous find and insert: no key copy); get: find with a "
           "const_accessor, copy out; put: insert with an accessor (finds or inserts), assign "
           "in place";
  }
  static std::string sizing(std::uint64_t n) {
    return n != 0 ? "constructed with " + std::to_string(n) + " buckets"
                  : "default-constructed (grows)";
  }

  explicit TbbSubject(std::uint64_t expected_entries) : map_(make(expected_entries)) {}

  /// Find-or-insert under a writer accessor, then assign.
  void put(Session&, std::string_view key, std::string_view value) {
    Map::accessor a;
    map_.insert(a, key);
    a->second.assign(value.data(), value.size());
  }

  /// Copies the value out under a reader accessor. (oneTBB 2021.8 declares
  /// the heterogeneous find non-const.)
  bool get(Session&, std::string_view key, std::string& out) {
    Map::const_accessor a;
    if (!map_.find(a, key)) return false;
    out.assign(a->second);
    return true;
  }

  void settle() noexcept {}
  std::filesystem::path files() const { return {}; }

 private:
  using Map = tbb::concurrent_hash_map<std::string, std::string, StringViewCompare>;
  static Map make(std::uint64_t n) { return n != 0 ? Map(static_cast<Map::size_type>(n)) : Map(); }
  Map map_;
};
#endif

}  // namespace offheap_bench
