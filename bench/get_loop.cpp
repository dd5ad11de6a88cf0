// SPDX-License-Identifier: Apache-2.0
// offheap_get_loop: W1 gets in a plain loop, one subject per process, for
// counting instructions, cache misses and branch mispredictions with
// valgrind (these machines expose no hardware counters). Only the loop is
// measured: it runs between CALLGRIND_START_INSTRUMENTATION and
// CALLGRIND_STOP_INSTRUMENTATION (callgrind: run with --instr-atstart=no;
// the fill before it counts nothing), and for cachegrind, which ignores
// those requests, a run with 0 gets measures the fill alone: subtract it.
//
//   offheap_get_loop SUBJECT [GETS] [--puts | --evicting-puts]
//     SUBJECT: store, cache, lru, tinylfu (offheap, W1 options as
//              offheap_bench and offheap_cache_bench give them), absl,
//              boost (as offheap_bench runs them: subjects.hpp)
//     GETS:    default 2,097,152 (2 x the key stream)
//     --puts:  that many W1 puts (overwrites of resident keys, values
//              rotating as offheap_bench's) are measured instead, then
//              read back unmeasured and checked as the gets are
//     --evicting-puts: caches only, at half the W1 working set (as
//              offheap_cache_bench sizes them), past their capacity: that
//              many puts of fresh 16-byte keys are measured, each of which
//              evicts; the last 64 are read back unmeasured and checked
//
//   valgrind --tool=callgrind --instr-atstart=no
//       --callgrind-out-file=get.store.out build/release/bench/offheap_get_loop store
//   python3 bench/stage_table.py get.*.out      (instructions per get by stage)
//
// The caches hold the whole W1 working set (capacity_bytes twice the live
// bytes): every get is a hit, as in offheap_cache_bench's get-hit cell, so
// the figures say what a hit costs, not what a miss does. Every value read
// is checked (its length), so the loop cannot be optimized away.
#include "subjects.hpp"
#include "w1.hpp"

#include <offheap/offheap.hpp>

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_STOP_INSTRUMENTATION
#endif
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
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

/// --puts: that many W1 puts (overwrites of resident keys) measured, then
/// the gets that check them (every key still there, with a whole value),
/// unmeasured. Out of line, so that the get loop compiles as without it.
template <class Get, class Put>
[[gnu::noinline]] std::uint64_t run_put_loop(std::uint64_t puts, Get get, Put put) {
  const auto& in = w1_inputs();
  CALLGRIND_START_INSTRUMENTATION;
  for (std::uint64_t i = 0; i < puts; ++i) put(in.keys.key(in.uniform.at(i)), in.values[i % in.values.size()]);
  CALLGRIND_STOP_INSTRUMENTATION;
  std::string out;
  std::uint64_t bytes = 0;
  for (std::uint64_t i = 0; i < puts; ++i) {
    if (get(in.keys.key(in.uniform.at(i)), out)) bytes += out.size();
  }
  return bytes;
}

bool g_puts = false;
bool g_evicting = false;

/// --evicting-puts: a cache filled past its capacity (the W1 keys, then
/// fresh keys until it has evicted, then as many again; maintain()
/// finishes any index migration), then `puts` puts of fresh keys measured.
template <class Store>
[[gnu::noinline]] std::uint64_t run_evicting_loop(Store& s, std::uint64_t puts) {
  const auto& in = w1_inputs();
  // 'f' and 15 hex digits (not snprintf: its ~500 instructions would be
  // counted with each put).
  char buf[16];
  const auto fresh = [&buf](std::uint64_t i) {
    buf[0] = 'f';
    for (int d = 15; d >= 1; --d, i >>= 4) buf[d] = "0123456789abcdef"[i & 15];
    return std::string_view(buf, 16);
  };
  std::uint64_t next = 0;
  while (s.stats().evictions == 0) {
    for (int i = 0; i < 1024; ++i, ++next) s.put(fresh(next), in.values[next % in.values.size()]);
  }
  for (const std::uint64_t more = next; next < 2 * more; ++next) s.put(fresh(next), in.values[next % in.values.size()]);
  s.maintain();
  const std::uint64_t first = next;
  CALLGRIND_START_INSTRUMENTATION;
  for (std::uint64_t i = 0; i < puts; ++i) s.put(fresh(first + i), in.values[i % in.values.size()]);
  CALLGRIND_STOP_INSTRUMENTATION;
  std::string out;
  for (std::uint64_t i = puts - std::min<std::uint64_t>(puts, 64); i < puts; ++i) {
    if (!s.get(fresh(first + i), out) || out != in.values[i % in.values.size()]) {
      std::fprintf(stderr, "offheap_get_loop: fresh key #%llu not read back\n", static_cast<unsigned long long>(i));
      std::exit(1);
    }
  }
  return puts * offheap_bench::kW1ValueBytes;  // (checked above)
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
  if (g_evicting) return run_evicting_loop(s, gets);
  if (s.size() != in.keys.size()) {
    std::fprintf(stderr, "offheap_get_loop: the store holds %llu of %llu keys\n",
                 static_cast<unsigned long long>(s.size()), static_cast<unsigned long long>(in.keys.size()));
    std::exit(1);
  }
  if (g_puts) {
    return run_put_loop(gets, [&](std::string_view k, std::string& out) { return s.get(k, out); },
                        [&](std::string_view k, std::string_view v) { s.put(k, v); });
  }
  return run_loop(gets, [&](std::string_view k, std::string& out) { return s.get(k, out); });
}

/// A hash map configured as offheap_bench runs it (subjects.hpp: reserved,
/// heterogeneous find), filled through its put, read through its get.
template <class Subject>
std::uint64_t map_subject(std::uint64_t gets) {
  const auto& in = w1_inputs();
  Subject m(offheap_bench::kW1Entries);
  typename Subject::Session session(m);
  for (std::uint64_t i = 0; i < in.keys.size(); ++i) m.put(session, in.keys.key(i), in.values[i % in.values.size()]);
  if (g_puts) {
    return run_put_loop(gets, [&](std::string_view k, std::string& out) { return m.get(session, k, out); },
                        [&](std::string_view k, std::string_view v) { m.put(session, k, v); });
  }
  return run_loop(gets, [&](std::string_view k, std::string& out) { return m.get(session, k, out); });
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: offheap_get_loop store|cache|lru|tinylfu|absl|boost [gets] [--puts | --evicting-puts]\n");
    return 2;
  }
  const std::string_view subject = argv[1];
  const std::uint64_t gets = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 2'097'152;
  g_puts = argc > 3 && std::string_view(argv[3]) == "--puts";
  g_evicting = argc > 3 && std::string_view(argv[3]) == "--evicting-puts";
  if (g_evicting && (subject == "store" || subject == "absl" || subject == "boost")) {
    std::fprintf(stderr, "offheap_get_loop: --evicting-puts takes a cache (cache, lru, tinylfu)\n");
    return 2;
  }
  // Twice the W1 live bytes (104 a record): no cache evicts. Evicting:
  // half of them, as offheap_cache_bench.
  const std::uint64_t capacity =
      g_evicting ? offheap_bench::kW1Entries * 104 / 2 : 2 * offheap_bench::kW1Entries * 104;
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
    bytes = map_subject<offheap_bench::AbslSubject>(gets);
#endif
#if defined(OFFHEAP_BENCH_HAVE_BOOST)
  } else if (subject == "boost") {
    bytes = map_subject<offheap_bench::BoostSubject>(gets);
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
  std::printf("%s: %llu %s, %llu bytes\n", argv[1], static_cast<unsigned long long>(gets),
              g_evicting ? "evicting puts" : g_puts ? "puts" : "gets",
              static_cast<unsigned long long>(bytes));
  return 0;
}
