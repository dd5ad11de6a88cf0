// SPDX-License-Identifier: Apache-2.0
// The subjects the benchmark measures, each used as a user who chose it would
// use it: its lookup with the caller's std::string_view key wherever the
// library takes one (no key copy), pre-sized exactly when offheap::Store is,
// with its documented fast options. This header holds the interface and the
// single-process maps; concurrent_peers.hpp holds libcuckoo and oneTBB,
// file_peers.hpp LMDB, RocksDB and Tkrzw. Each peer is compiled in only when
// CMake found it (OFFHEAP_BENCH_HAVE_<NAME>).
//
// A subject S:
//   S::kName                    its name in benchmark names and tables
//   S::kThreadSafe              may several threads put and get at once
//   S::describe()               its configuration: library, version, options,
//                               lookup and write forms
//   S::sizing(n)                how it is sized for n entries (0: not pre-sized)
//   S(n)                        empty, pre-sized for n entries (0: not)
//   S::Session s(subject)       what one thread keeps between operations
//                               (LMDB: its read transaction; RocksDB: its
//                               ReadOptions and PinnableSlice); one per thread
//   put(s, key, value)          insert or overwrite
//   get(s, key, out) -> bool    copy the value into `out` (a reused string)
//   settle()                    after a fill, untimed (offheap: maintain())
//   get_batch(keys, values)     optional (offheap: get_all); the scale phase
//                               times a batched read pass where it exists
//   files()                     the directory of its files, or empty
//
// Every get does the same work: find the key, copy the value into the
// caller's reused std::string under the subject's own read protection. Every
// put is one write as the library makes it: find-or-insert then assign in
// place for the hash maps (no allocation on an overwrite), one transaction
// for LMDB, one Put for RocksDB, one Set for Tkrzw.
#pragma once

#include <offheap/offheap.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#if defined(OFFHEAP_BENCH_HAVE_ABSL)
#include <absl/base/config.h>
#include <absl/container/flat_hash_map.h>
#endif
#if defined(OFFHEAP_BENCH_HAVE_BOOST)
#include <boost/container_hash/hash.hpp>
#include <boost/unordered/unordered_flat_map.hpp>
#include <boost/version.hpp>
#include <functional>
#endif

namespace offheap_bench {

/// The session of a subject that keeps nothing per thread.
template <class S>
struct NoSession {
  explicit NoSession(S&) noexcept {}
};

class StoreSubject {
 public:
  static constexpr const char* kName = "offheap::Store";
  static constexpr bool kThreadSafe = true;
  using Session = NoSession<StoreSubject>;

  static std::string describe() {
    const StoreSubject probe(0);
    return "offheap " + std::to_string(offheap::kVersionMajor) + "." +
           std::to_string(offheap::kVersionMinor) + "." + std::to_string(offheap::kVersionPatch) +
           ", offheap::Store in anonymous memory, Options at their defaults (" +
           std::to_string(probe.store_.stats().shards) +
           " shards here, background maintenance) but expected_entries; get(string_view, "
           "std::string&) copies out; put(string_view, string_view)";
  }
  static std::string sizing(std::uint64_t n) {
    return n != 0 ? "expected_entries = " + std::to_string(n)
                  : "expected_entries = 0 (starts small, grows)";
  }

  explicit StoreSubject(std::uint64_t expected_entries) : store_(options(expected_entries)) {}

  void put(Session&, std::string_view key, std::string_view value) { store_.put(key, value); }
  bool get(Session&, std::string_view key, std::string& out) const { return store_.get(key, out); }
  /// A batch of lookups (get_all: index lines, then records, prefetched),
  /// reported apart from the single gets the peers are compared on.
  std::size_t get_batch(std::span<const std::string_view> keys, std::span<std::optional<std::string>> values) const {
    return store_.get_all(keys, values);
  }
  /// After a fill, untimed: frees what growth replaced.
  void settle() { store_.maintain(); }
  std::filesystem::path files() const { return {}; }

 private:
  static offheap::Options options(std::uint64_t expected_entries) {
    offheap::Options o;
    o.expected_entries = expected_entries;
    return o;
  }
  offheap::Store store_;
};

#if defined(OFFHEAP_BENCH_HAVE_ABSL)
class AbslSubject {
 public:
  static constexpr const char* kName = "absl::flat_hash_map";
  static constexpr bool kThreadSafe = false;
  using Session = NoSession<AbslSubject>;

  static std::string describe() {
    return "abseil LTS " + std::to_string(ABSL_LTS_RELEASE_VERSION) +
           ", absl::flat_hash_map<std::string, std::string> (absl::Hash; heterogeneous "
           "lookup: find and try_emplace take the string_view, no key copy); get: find, copy "
           "out; put: try_emplace(string_view) then assign (no allocation on an overwrite); "
           "one thread only";
  }
  static std::string sizing(std::uint64_t n) {
    return n != 0 ? "reserve(" + std::to_string(n) + ")" : "not reserved (grows)";
  }

  explicit AbslSubject(std::uint64_t expected_entries) {
    if (expected_entries != 0) map_.reserve(expected_entries);
  }

  /// Find-or-insert, then assign the value (reuses the value's capacity).
  void put(Session&, std::string_view key, std::string_view value) {
    const auto r = map_.try_emplace(absl::string_view(key.data(), key.size()));
    r.first->second.assign(value.data(), value.size());
  }
  /// Find, then copy the value into out (the same work as Store::get).
  bool get(Session&, std::string_view key, std::string& out) const {
    const auto it = map_.find(absl::string_view(key.data(), key.size()));
    if (it == map_.end()) return false;
    out.assign(it->second.data(), it->second.size());
    return true;
  }
  void settle() noexcept {}
  std::filesystem::path files() const { return {}; }

 private:
  absl::flat_hash_map<std::string, std::string> map_;
};
#endif

#if defined(OFFHEAP_BENCH_HAVE_BOOST)
class BoostSubject {
 public:
  static constexpr const char* kName = "boost::unordered_flat_map";
  static constexpr bool kThreadSafe = false;
  using Session = NoSession<BoostSubject>;

  static std::string describe() {
    return "Boost " + std::to_string(BOOST_VERSION / 100000) + "." + std::to_string(BOOST_VERSION / 100 % 1000) +
           ", boost::unordered_flat_map<std::string, std::string> (boost::hash over the string_view, "
           "std::equal_to<>: find takes the string_view, no key copy); get: find, copy out; put: find "
           "then assign (no allocation on an overwrite), else emplace (this Boost has no "
           "heterogeneous try_emplace); one thread only";
  }
  static std::string sizing(std::uint64_t n) {
    return n != 0 ? "reserve(" + std::to_string(n) + ")" : "not reserved (grows)";
  }

  explicit BoostSubject(std::uint64_t expected_entries) {
    if (expected_entries != 0) map_.reserve(expected_entries);
  }

  void put(Session&, std::string_view key, std::string_view value) {
    const auto it = map_.find(key);
    if (it != map_.end()) {
      it->second.assign(value.data(), value.size());
    } else {
      map_.emplace(std::string(key), std::string(value));
    }
  }
  bool get(Session&, std::string_view key, std::string& out) const {
    const auto it = map_.find(key);
    if (it == map_.end()) return false;
    out.assign(it->second.data(), it->second.size());
    return true;
  }
  void settle() noexcept {}
  std::filesystem::path files() const { return {}; }

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return boost::hash<std::string_view>{}(s); }
  };
  boost::unordered_flat_map<std::string, std::string, Hash, std::equal_to<>> map_;
};
#endif

/// Adds `what` to a comma-separated list of the peers CMake did not find.
inline void note_missing(std::string& list, const char* what) {
  list += list.empty() ? what : std::string(", ") + what;
}
/// The in-memory peers (maps) CMake did not find, each with its package.
inline std::string missing_map_peers() {
  std::string m;
#if !defined(OFFHEAP_BENCH_HAVE_ABSL)
  note_missing(m, "absl::flat_hash_map (libabsl-dev)");
#endif
#if !defined(OFFHEAP_BENCH_HAVE_BOOST)
  note_missing(m, "boost::unordered_flat_map (libboost1.81-dev)");
#endif
#if !defined(OFFHEAP_BENCH_HAVE_CUCKOO)
  note_missing(m, "libcuckoo (libcuckoo-dev)");
#endif
#if !defined(OFFHEAP_BENCH_HAVE_TBB)
  note_missing(m, "tbb::concurrent_hash_map (libtbb-dev)");
#endif
  return m;
}

}  // namespace offheap_bench
