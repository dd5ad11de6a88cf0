// SPDX-License-Identifier: Apache-2.0
// offheap_get_loop: W1 gets in a plain loop, one subject per process, for
// counting instructions, cache misses and branch mispredictions with
// valgrind (these machines expose no hardware counters). Only the loop is
// measured: it runs between CALLGRIND_START_INSTRUMENTATION and
// CALLGRIND_STOP_INSTRUMENTATION (callgrind: run with --instr-atstart=no;
// the fill before it counts nothing), and for cachegrind, which ignores
// those requests, a run with 0 gets measures the fill alone: subtract it.
//
//   offheap_get_loop SUBJECT [GETS]
//     SUBJECT: store, cache, lru, tinylfu (offheap, W1 options as
//              offheap_bench and offheap_cache_bench give them), absl,
//              boost (each at its best: reserved, transparent lookup)
//     GETS:    default 2,097,152 (2 x the key stream)
//
//   valgrind --tool=callgrind --instr-atstart=no
//       --callgrind-out-file=get.store.out build/release/bench/offheap_get_loop store
//   python3 bench/stage_table.py get.*.out      (instructions per get by stage)
//
// The caches hold the whole W1 working set (capacity_bytes twice the live
// bytes): every get is a hit, as in offheap_cache_bench's get-hit cell, so
// the figures say what a hit costs, not what a miss does. Every value read
// is checked (its length), so the loop cannot be optimized away.
#include "w1.hpp"

#include <offheap/offheap.hpp>

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_STOP_INSTRUMENTATION
#endif
#if defined(OFFHEAP_BENCH_HAVE_ABSL)
#include <absl/container/flat_hash_map.h>
#endif
#if __has_include(<boost/unordered/unordered_flat_map.hpp>)
#include <boost/container_hash/hash.hpp>
#include <boost/unordered/unordered_flat_map.hpp>
#define OFFHEAP_BENCH_HAVE_BOOST 1
#endif

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <string_view>

namespace {

using offheap_bench::w1_inputs;

template <class Get>
std::uint64_t run_loop(std::uint64_t gets, Get&& get) {
  const auto& in = w1_inputs();
  std::string out;
  std::uint64_t bytes = 0;
  CALLGRIND_START_INSTRUMENTATION;
  for (std::uint64_t i = 0; i < gets; ++i) {
    if (get(in.keys.key(in.uniform.at(i)), out)) bytes += out.size();
  }
  CALLGRIND_STOP_INSTRUMENTATION;
  return bytes;
}

template <class Store>
std::uint64_t offheap_subject(std::uint64_t gets, std::uint64_t capacity) {
  const auto& in = w1_inputs();
  offheap::Options o;
  o.expected_entries = offheap_bench::kW1Entries;
  o.capacity_bytes = capacity;
  Store s(o);
  for (std::uint64_t i = 0; i < in.keys.size(); ++i) s.put(in.keys.key(i), in.values[i % in.values.size()]);
  s.maintain();
  if (s.size() != in.keys.size()) {
    std::fprintf(stderr, "offheap_get_loop: the store holds %llu of %llu keys\n",
                 static_cast<unsigned long long>(s.size()), static_cast<unsigned long long>(in.keys.size()));
    std::exit(1);
  }
  return run_loop(gets, [&](std::string_view k, std::string& out) { return s.get(k, out); });
}

#if defined(OFFHEAP_BENCH_HAVE_BOOST)
/// boost::hash over std::string_view, usable with heterogeneous lookup.
struct TransparentHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return boost::hash<std::string_view>{}(s); }
};
#endif

/// `View` is the map's own string view type, which its heterogeneous find
/// takes (Debian's abseil has its own absl::string_view).
template <class View, class Map>
std::uint64_t map_subject(std::uint64_t gets, Map& m) {
  const auto& in = w1_inputs();
  m.reserve(offheap_bench::kW1Entries);
  for (std::uint64_t i = 0; i < in.keys.size(); ++i) {
    m.try_emplace(std::string(in.keys.key(i)), in.values[i % in.values.size()]);
  }
  return run_loop(gets, [&](std::string_view k, std::string& out) {
    const auto it = m.find(View(k.data(), k.size()));
    if (it == m.end()) return false;
    out.assign(it->second);
    return true;
  });
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: offheap_get_loop store|cache|lru|tinylfu|absl|boost [gets]\n");
    return 2;
  }
  const std::string_view subject = argv[1];
  const std::uint64_t gets = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 2'097'152;
  // Twice the W1 live bytes (104 a record): no cache evicts.
  const std::uint64_t capacity = 2 * offheap_bench::kW1Entries * 104;
  std::uint64_t bytes = 0;
  if (subject == "store") {
    bytes = offheap_subject<offheap::Store>(gets, 0);
  } else if (subject == "cache") {
    bytes = offheap_subject<offheap::Cache>(gets, capacity);
  } else if (subject == "lru") {
    bytes = offheap_subject<offheap::LruCache>(gets, capacity);
  } else if (subject == "tinylfu") {
    bytes = offheap_subject<offheap::TinyLfuCache>(gets, capacity);
#if defined(OFFHEAP_BENCH_HAVE_ABSL)
  } else if (subject == "absl") {
    absl::flat_hash_map<std::string, std::string> m;
    bytes = map_subject<absl::string_view>(gets, m);
#endif
#if defined(OFFHEAP_BENCH_HAVE_BOOST)
  } else if (subject == "boost") {
    boost::unordered_flat_map<std::string, std::string, TransparentHash, std::equal_to<>> m;
    bytes = map_subject<std::string_view>(gets, m);
#endif
  } else if (subject == "absl" || subject == "boost") {
    // Built without it (Debian: libabsl-dev, libboost-dev): 77, which the
    // smoke tests take as skipped.
    std::fprintf(stderr, "offheap_get_loop: built without %s\n", argv[1]);
    return 77;
  } else {
    std::fprintf(stderr, "offheap_get_loop: unknown subject '%s'\n", argv[1]);
    return 2;
  }
  if (bytes != gets * offheap_bench::kW1ValueBytes) {
    std::fprintf(stderr, "offheap_get_loop: read %llu bytes, expected %llu\n",
                 static_cast<unsigned long long>(bytes),
                 static_cast<unsigned long long>(gets * offheap_bench::kW1ValueBytes));
    return 1;
  }
  std::printf("%s: %llu gets, %llu bytes\n", argv[1], static_cast<unsigned long long>(gets),
              static_cast<unsigned long long>(bytes));
  return 0;
}
