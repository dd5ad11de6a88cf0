// SPDX-License-Identifier: Apache-2.0
// offheap_cache_bench: the caches (offheap::Cache = S3-FIFO,
// offheap::LruCache, offheap::TinyLfuCache) beside the uncapped
// offheap::Store on the W1 shape (w1.hpp: 16-byte keys, 64-byte values,
// 24,000 keys), each cache with capacity_bytes at half the working set's
// record bytes (a record: 24-byte header + key + value, padded to 8). Every
// subject is pre-sized (expected_entries = 24,000) and runs with background
// maintenance, as a user would run a cache. Three operations, each on 1 and
// on 2 threads sharing one subject:
//
//   get hit:     gets over keys known to be resident. A cache's are those
//                for_each finds after the fill (and maintain(), which evicts
//                down to the capacity); the store walks the same number of
//                keys: those an offheap::Cache holds after the same fill.
//                Every get should hit: a store's miss fails the run, a
//                cache's hit ratio is reported. The ratio the issue states a
//                target for: a cache's get hit / the store's, >= 0.9.
//   cache-aside: a uniform random stream over all 24,000 keys: get, and put
//                the value on a miss (about half miss in a cache).
//   put:         insert or overwrite of uniform random keys (a cache evicts
//                as it goes; the store overwrites in place).
//
// Method, as offheap_bench's threaded phase: each run builds its subject
// fresh and fills it (untimed, before its threads start); thread t of T
// walks positions t, t + T, ... of a precomputed stream; thread 0 times all
// threads' operations between the start and stop barriers (wall clock).
// Many short repetitions of every subject, operation and thread count,
// randomly interleaved, so all see the same swings of a shared machine; the
// summary quotes medians and ratios of medians. Also per run: heap
// allocations per operation in the timed loop (per thread,
// alloc_counter.hpp), whole-value checks on every 8th get (w1.hpp), and the
// cache's live_bytes after the run, which must stay within capacity * 17/16
// + 4 KiB per shard (else the run fails).
//
// The trade-off: a 2.5 MB working set measures the per-operation path and
// what eviction adds to it, not memory misses; on 2 hardware threads the
// 2-thread runs share the cores with the maintenance thread.
#include "platform.hpp"
#include "summary.hpp"
#include "w1.hpp"
#include "workload.hpp"

#include <offheap/offheap.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <numeric>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

// Last: its definitions of malloc and friends must follow every declaration
// of them (clang's <mm_malloc.h> redeclares posix_memalign without noexcept).
#include "alloc_counter.hpp"

namespace offheap_bench {
namespace {

// ---- settings ------------------------------------------------------------------

// The default flags: summary.hpp (kDefaultFlags).
constexpr int kThreadCounts[] = {1, 2};

constexpr std::uint64_t kHeaderBytes = 24;  // a record's header (options.hpp)
constexpr std::uint64_t kRecordBytes = (kHeaderBytes + kW1KeyBytes + kW1ValueBytes + 7) / 8 * 8;
constexpr std::uint64_t kWorkingSetBytes = kW1Entries * kRecordBytes;
constexpr std::uint64_t kCapacityBytes = kWorkingSetBytes / 2;
constexpr double kGetHitTarget = 0.9;  // a cache's get hit / the store's, at least

/// The most live bytes a cache may hold (options.hpp: capacity_bytes).
std::uint64_t live_bound(std::uint32_t shards) {
  return kCapacityBytes + kCapacityBytes / 16 + std::uint64_t{4096} * shards;
}

// ---- subjects -------------------------------------------------------------------

/// A subject's name and eviction policy in the tables, and whether it is a
/// cache (capacity_bytes at half the working set).
struct Info {
  const char* name;
  const char* policy;
  bool capped;
};
template <class T>
constexpr Info kInfo =
    std::is_same_v<T, offheap::Store>      ? Info{"offheap::Store", "no eviction, uncapped", false}
    : std::is_same_v<T, offheap::Cache>    ? Info{"offheap::Cache", "S3-FIFO", true}
    : std::is_same_v<T, offheap::LruCache> ? Info{"offheap::LruCache", "LRU", true}
                                           : Info{"offheap::TinyLfuCache", "W-TinyLFU", true};
template <class T>
constexpr bool kCapped = kInfo<T>.capped;

/// Every subject, the store first (the tables' order).
template <class Fn>
void for_each_subject(Fn&& fn) {
  fn.template operator()<offheap::Store>();
  fn.template operator()<offheap::Cache>();
  fn.template operator()<offheap::LruCache>();
  fn.template operator()<offheap::TinyLfuCache>();
}

template <class S>
offheap::Options options_of() {
  offheap::Options o;  // background_maintenance on, record_stats off: the defaults
  o.expected_entries = kW1Entries;
  o.capacity_bytes = kCapped<S> ? kCapacityBytes : 0;
  return o;
}

/// The shards of a cache here (Options::shards at its default).
std::uint32_t cache_shards() {
  static const std::uint32_t shards = offheap::Cache(options_of<offheap::Cache>()).stats().shards;
  return shards;
}

template <class S>
std::string describe() {
  const S probe(options_of<S>());
  const offheap::Options& o = probe.options();
  std::string d = std::string(kInfo<S>.policy) + "; capacity_bytes = " +
                  (kCapped<S> ? with_commas(o.capacity_bytes) + " (half the working set)"
                              : std::string("0 (none)")) +
                  ", expected_entries = " + with_commas(o.expected_entries) + ", " +
                  std::to_string(probe.stats().shards) + " shards, background maintenance " +
                  (o.background_maintenance ? "on" : "off") + ", record_stats " +
                  (o.record_stats ? "on" : "off") + ", on_removal " +
                  (o.on_removal ? "set" : "unset");
  return d + "; get(string_view, std::string&) copies out; put(string_view, string_view)";
}

// ---- inputs ---------------------------------------------------------------------

/// A get-hit stream holds numbers in [0, 2^31); v maps onto a list of n keys
/// as (v * n) >> 31: uniform over the list, with no division in the loop.
constexpr unsigned kHitLog2 = 31;

const IndexStream& hit_stream() {
  static const IndexStream stream(std::uint64_t{1} << kHitLog2, kW1StreamLog2, 0, 0x5EED0021);
  return stream;
}

/// Key -> its index in the W1 key set, to name the keys a cache holds.
const std::unordered_map<std::string_view, std::uint32_t>& key_index() {
  static const auto index = [] {
    std::unordered_map<std::string_view, std::uint32_t> m;
    const KeySet& keys = w1_inputs().keys;
    for (std::uint32_t i = 0; i < kW1Entries; ++i) m.emplace(keys.key(i), i);
    return m;
  }();
  return index;
}

/// Puts the W1 entries into a fresh subject, then one maintenance round on
/// this thread (a cache evicts down to its capacity). Untimed.
template <class T>
void fill(T& subject) {
  const W1Inputs& in = w1_inputs();
  for (std::uint64_t i = 0; i < kW1Entries; ++i) {
    subject.put(in.keys.key(i), in.values[i % kW1ValueVariants]);
  }
  subject.maintain();
}

/// The keys `subject` holds (indices into the W1 key set); counts the
/// records for_each found with a key not written or a value not whole.
template <class T>
std::vector<std::uint32_t> resident_keys(const T& subject, std::uint64_t& bad) {
  std::vector<std::uint32_t> keys;
  keys.reserve(kW1Entries);
  const auto& index = key_index();
  const WholeValueCheck& check = whole_value_check();
  subject.for_each([&](std::string_view key, std::string_view value) {
    const auto it = index.find(key);
    if (it == index.end() || !check.whole(value)) {
      ++bad;
    } else {
      keys.push_back(it->second);
    }
  });
  return keys;
}

/// The store's get-hit keys: those an offheap::Cache holds after the same
/// fill, so the store's gets walk as many keys as a cache's.
struct StoreHitKeys {
  std::vector<std::uint32_t> keys;
  std::uint64_t store_live_bytes = 0;  // after the fill: the working set, measured

  StoreHitKeys() {
    offheap::Cache cache(options_of<offheap::Cache>());
    fill(cache);
    std::uint64_t bad = 0;
    keys = resident_keys(cache, bad);
    if (bad != 0 || keys.empty()) {
      std::fprintf(stderr, "offheap_cache_bench: the reference cache holds %" PRIu64
                           " wrong records and %zu keys\n", bad, keys.size());
      std::exit(1);
    }
    offheap::Store store(options_of<offheap::Store>());
    fill(store);
    store_live_bytes = store.stats().live_bytes;
  }
};

const StoreHitKeys& store_hit_keys() {
  static const StoreHitKeys k;
  return k;
}

// ---- runs -----------------------------------------------------------------------

enum class Op { get_hit, cache_aside, put };
constexpr Op kOps[] = {Op::get_hit, Op::cache_aside, Op::put};
const char* op_name(Op op) {
  return op == Op::get_hit ? "GetHit" : op == Op::cache_aside ? "CacheAside" : "Put";
}
const char* op_label(Op op) {
  return op == Op::get_hit ? "get hit" : op == Op::cache_aside ? "cache-aside" : "put";
}

/// The name SummaryReporter keeps a run under.
std::string run_name(Op op, const std::string& subject, int threads) {
  return std::string("BM_Cache_") + op_name(op) + "<" + subject + ">/threads:" +
         std::to_string(threads);
}

/// The subject of the run in progress (one run at a time) and its get-hit
/// keys.
template <class S>
struct Run {
  std::unique_ptr<S> subject;
  std::vector<std::uint32_t> hit_keys;
  std::uint64_t bad_records = 0;  // for_each found a key not written or a torn value
};

template <class S>
Run<S>& current_run() {
  static Run<S> run;
  return run;
}

/// Setup of a run: a fresh subject, filled and settled, on the main thread
/// before the run's threads start.
template <class S, Op O>
void setup(const benchmark::State&) {
  Run<S>& run = current_run<S>();
  run.subject.reset();
  run.subject = std::make_unique<S>(options_of<S>());
  fill(*run.subject);
  run.hit_keys.clear();
  run.bad_records = 0;
  if constexpr (O == Op::get_hit) {
    run.hit_keys =
        kCapped<S> ? resident_keys(*run.subject, run.bad_records) : store_hit_keys().keys;
  }
}

template <class S>
void teardown(const benchmark::State&) {
  current_run<S>().subject.reset();
}

/// One thread's share of a run on the shared subject (see the top of this
/// file). Counters: gets and hits (summed over the threads), wrong (torn
/// values; a store's misses), allocs/op (per thread, averaged), and from
/// thread 0 wall_Mops and the subject's live_bytes and records after the run.
template <class S, Op O>
void BM_Cache(benchmark::State& state) {
  const W1Inputs& in = w1_inputs();
  const WholeValueCheck& check = whole_value_check();
  const IndexStream& stream = O == Op::get_hit ? hit_stream() : in.uniform;
  Run<S>& run = current_run<S>();
  S& subject = *run.subject;
  const std::uint32_t* hit_keys = run.hit_keys.data();
  const std::uint64_t hit_count = run.hit_keys.size();
  const auto step = static_cast<std::uint64_t>(state.threads());
  auto pos = static_cast<std::uint64_t>(state.thread_index());
  std::string out(kW1ValueBytes, '\0');
  std::uint64_t gets = 0, hits = 0, wrong = 0;

  const auto key_at = [&](std::uint64_t p) {
    if constexpr (O == Op::get_hit) {
      return in.keys.key(hit_keys[(std::uint64_t{stream.at(p)} * hit_count) >> kHitLog2]);
    } else {
      return in.keys.key(stream.at(p));
    }
  };
  const auto op = [&](std::uint64_t p) {
    const std::string_view key = key_at(p);
    if constexpr (O == Op::put) {
      subject.put(key, in.values[p % kW1ValueVariants]);
    } else {
      const bool hit = subject.get(key, out);
      // Every 8th get of each thread is checked whole; a store holds every key.
      wrong += hit ? w1_torn(gets, out, check) : !kCapped<S>;
      hits += hit;
      ++gets;
      if constexpr (O == Op::cache_aside) {
        if (!hit) subject.put(key, in.values[p % kW1ValueVariants]);
      }
    }
  };
  if (O == Op::get_hit && hit_count == 0) state.SkipWithError("no resident key to get");
  // Untimed: a thread's first put and first hit (a cache takes a thread
  // number for the reader's hit buffer at its first hit).
  if constexpr (O != Op::get_hit) subject.put(key_at(pos), in.values[pos % kW1ValueVariants]);
  if (hit_count != 0 || O != Op::get_hit) subject.get(key_at(pos), out);
  const std::uint64_t allocs_before = thread_allocation_count();

  auto it = state.begin();  // the start barrier, then the timers start
  const auto start = std::chrono::steady_clock::now();
  for (const auto end = state.end(); it != end; ++it) {
    op(pos);
    pos += step;
  }
  const auto stop = std::chrono::steady_clock::now();  // past the stop barrier

  set_thread_counters(state, static_cast<double>(thread_allocation_count() - allocs_before),
                      std::chrono::duration<double>(stop - start).count());
  state.counters["gets"] = static_cast<double>(gets);  // these three: summed over the threads
  state.counters["hits"] = static_cast<double>(hits);
  state.counters["wrong"] = static_cast<double>(wrong);
  if (state.thread_index() == 0) {
    const offheap::Stats s = subject.stats();
    state.counters["live_bytes"] = static_cast<double>(s.live_bytes);
    state.counters["records"] = static_cast<double>(s.records);
    if (O == Op::get_hit) state.counters["hit_keys"] = static_cast<double>(hit_count);
    if (s.policy_hits_applied + s.policy_hits_dropped != 0) {
      // Lru, WTinyLfu: the share of readers' hits that reached the policy
      // since the subject was made (the rest found their ring full).
      state.counters["hits_kept"] = static_cast<double>(s.policy_hits_applied) /
                                    static_cast<double>(s.policy_hits_applied + s.policy_hits_dropped);
    }
    if (kCapped<S> && s.live_bytes > live_bound(s.shards)) {
      state.SkipWithError(("live_bytes " + with_commas(s.live_bytes) + " past the bound " +
                           with_commas(live_bound(s.shards))).c_str());
    }
    if (run.bad_records != 0) {
      state.SkipWithError((std::to_string(run.bad_records) +
                           " records for_each found hold a key or value never written").c_str());
    }
  }
  if (wrong != 0) {
    state.SkipWithError((std::to_string(wrong) + " gets read a torn value or missed a key "
                                                 "the store holds").c_str());
  }
}

template <class S, Op O>
void register_op() {
  benchmark::internal::Benchmark* b = benchmark::RegisterBenchmark(
      (std::string("BM_Cache_") + op_name(O) + "<" + kInfo<S>.name + ">").c_str(), BM_Cache<S, O>);
  b->Setup(setup<S, O>)->Teardown(teardown<S>)->UseRealTime();
  for (const int t : kThreadCounts) b->Threads(t);
}

// ---- summary --------------------------------------------------------------------

std::vector<Info> columns() {
  std::vector<Info> c;
  for_each_subject([&]<class S>() { c.push_back(kInfo<S>); });
  return c;
}

/// The closing tables, from the samples the reporter kept.
class Report {
 public:
  explicit Report(const SummaryReporter& rep) : rep_(rep), cols_(columns()) {}

  void print_throughput() const {
    std::printf("\n== Summary: W1 (%s keys, %zu-byte keys, %zu-byte values), caches at half the "
                "working set\n   Mops/s: all threads' operations / wall time, median of the "
                "interleaved repetitions\n   (+-: half the interquartile range); 2T: two threads "
                "sharing one subject\n",
                with_commas(kW1Entries).c_str(), kW1KeyBytes, kW1ValueBytes);
    std::printf("%-22s", "subject");
    for (const Op op : kOps) {
      for (const int t : kThreadCounts) {
        std::printf(" %15s", (std::string(op_label(op)) + " " + std::to_string(t) + "T").c_str());
      }
    }
    std::printf(" %5s\n", "reps");
    for (const Info& c : cols_) {
      std::size_t reps = 0;
      std::printf("%-22s", c.name);
      for (const Op op : kOps) {
        for (const int t : kThreadCounts) {
          const std::vector<Sample> s = samples(op, c.name, t);
          reps = std::max(reps, s.size());
          std::printf(" %15s", median_cell(wall_mops(s)).c_str());
        }
      }
      std::printf(" %5zu\n", reps);
    }
  }

  void print_hits_and_memory() const {
    std::printf("\n   hit ratio: hits / gets, median of the repetitions (get hit: gets of keys "
                "resident after the fill);\n   cache/store: the cache's get hit Mops/s / the "
                "store's, ratio of medians (target >= %.2f)\n",
                kGetHitTarget);
    std::printf("%-22s %9s %11s %11s %11s %11s %11s %11s\n", "subject", "get hit", "hit ratio",
                "hit ratio", "hit ratio", "hit ratio", "cache/store", "cache/store");
    std::printf("%-22s %9s %11s %11s %11s %11s %11s %11s\n", "", "keys", "get hit 1T",
                "get hit 2T", "c-aside 1T", "c-aside 2T", "get hit 1T", "get hit 2T");
    for (const Info& c : cols_) {
      std::printf("%-22s %9s", c.name,
                  number_cell(median(values(c.name, "hit_keys", {Op::get_hit})), "%.0f").c_str());
      for (const Op op : {Op::get_hit, Op::cache_aside}) {
        for (const int t : kThreadCounts) {
          std::printf(" %11s", number_cell(hit_ratio(op, c.name, t), "%.4f").c_str());
        }
      }
      for (const int t : kThreadCounts) {
        std::printf(" %11s", c.capped ? ratio_cell(get_hit_ratio(c.name, t)).c_str() : "-");
      }
      std::printf("\n");
    }

    std::printf("\n   allocs/op: heap allocations per operation in the timed loop, the most "
                "of any run (1T and 2T);\n   live bytes: Stats::live_bytes after each run "
                "(capacity %s; bound: capacity * 17/16 + 4 KiB per shard)\n",
                with_commas(kCapacityBytes).c_str());
    std::printf("%-22s %9s %11s %9s %11s %11s %11s %6s\n", "subject", "allocs/op",
                "allocs/op", "allocs/op", "live bytes", "live bytes", "max live /", "wrong");
    std::printf("%-22s %9s %11s %9s %11s %11s %11s %6s\n", "", "get hit", "cache-aside", "put",
                "median", "max", "capacity", "");
    for (const Info& c : cols_) {
      std::printf("%-22s", c.name);
      for (const Op op : kOps) {
        std::printf(op == Op::cache_aside ? " %11s" : " %9s",
                    number_cell(max_of(values(c.name, "allocs/op", {op})), "%.3g").c_str());
      }
      const std::vector<double> live = values(c.name, "live_bytes");
      const std::vector<double> wrong = values(c.name, "wrong");
      const double of_capacity = c.capped ? max_of(live) / kCapacityBytes : NAN;
      std::printf(" %11s %11s %11s %6.0f\n", number_cell(median(live), "%.0f").c_str(),
                  number_cell(max_of(live), "%.0f").c_str(),
                  number_cell(of_capacity, "%.3f").c_str(),
                  std::accumulate(wrong.begin(), wrong.end(), 0.0));
    }
  }

  void print_markdown() const {
    std::printf("\n== Markdown (for the README; medians of this run)\n\n");
    std::printf("| W1, caches at half the working set; Mops/s | get hit 1T | get hit 2T | "
                "cache-aside 1T | cache-aside 2T | put 1T | put 2T | get hit vs store 1T | 2T | "
                "cache-aside hit ratio |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (const Info& c : cols_) {
      std::printf("| %s (%s)", c.name, c.policy);
      for (const Op op : kOps) {
        for (const int t : kThreadCounts) std::printf(" | %s", md(mops(op, c.name, t)).c_str());
      }
      for (const int t : kThreadCounts) {
        std::printf(" | %s", c.capped ? md(get_hit_ratio(c.name, t)).c_str() : "—");
      }
      std::printf(" | %s |\n", md(hit_ratio(Op::cache_aside, c.name, 1), "%.3f").c_str());
    }
  }

  void print_targets() const {
    std::printf("\n== Targets (the issue's): in this run\n");
    const auto line = [](const std::string& what, double value, const char* format,
                         bool at_least, double bound) {
      const char* verdict = std::isnan(value)                                 ? "not measured"
                            : (at_least ? value >= bound : value <= bound) ? "met"
                                                                              : "MISSED";
      std::printf("  %-58s %10s  (target %s %s: %s)\n", what.c_str(),
                  number_cell(value, format).c_str(), at_least ? ">=" : "<=",
                  number_cell(bound, format).c_str(), verdict);
    };
    for (const Info& c : cols_) {
      if (!c.capped) continue;
      for (const int t : kThreadCounts) {
        line("get hit " + std::to_string(t) + "T: " + c.name + " / " + cols_[0].name,
             get_hit_ratio(c.name, t), "%.2f", true, kGetHitTarget);
      }
    }
    std::vector<double> allocs;
    for (const Info& c : cols_) allocs.push_back(max_of(values(c.name, "allocs/op")));
    std::erase_if(allocs, [](double a) { return std::isnan(a); });
    line("allocations per operation (the most of any run)", max_of(allocs), "%.3g", false, 0);
    const std::uint32_t shards = cache_shards();
    for (const Info& c : cols_) {
      if (!c.capped) continue;
      line(std::string(c.name) + ": live bytes after any run",
           max_of(values(c.name, "live_bytes")), "%.0f", false,
           static_cast<double>(live_bound(shards)));
    }
  }

 private:
  std::vector<Sample> samples(Op op, const std::string& subject, int threads) const {
    return rep_.samples(run_name(op, subject, threads));
  }
  double mops(Op op, const std::string& subject, int threads) const {
    return median(wall_mops(samples(op, subject, threads)));
  }
  double hit_ratio(Op op, const std::string& subject, int threads) const {
    return median(collect(samples(op, subject, threads), [](const Sample& x) {
      const double gets = x.counter("gets");
      return gets > 0 ? x.counter("hits") / gets : NAN;
    }));
  }
  double get_hit_ratio(const std::string& cache, int threads) const {
    return mops(Op::get_hit, cache, threads) / mops(Op::get_hit, cols_[0].name, threads);
  }
  /// A counter of every run (1T and 2T) of `subject` doing one of `ops`.
  std::vector<double> values(const std::string& subject, const char* counter,
                             std::initializer_list<Op> ops = {kOps[0], kOps[1], kOps[2]}) const {
    std::vector<double> v;
    for (const Op op : ops) {
      for (const int t : kThreadCounts) {
        const std::vector<double> x = counter_values(samples(op, subject, t), counter);
        v.insert(v.end(), x.begin(), x.end());
      }
    }
    return v;
  }
  static double max_of(const std::vector<double>& v) {
    return v.empty() ? NAN : *std::max_element(v.begin(), v.end());
  }
  static std::string md(double x, const char* format = "%.2f") {
    return std::isnan(x) ? "—" : number_cell(x, format);
  }

  const SummaryReporter& rep_;
  std::vector<Info> cols_;
};

// ---- main -----------------------------------------------------------------------

/// The last value of `flag` ("--name=") in args, or "?".
std::string flag_value(const std::vector<char*>& args, std::string_view flag) {
  std::string v = "?";
  for (const char* a : args) {
    if (std::string_view(a).substr(0, flag.size()) == flag) v = a + flag.size();
  }
  return v;
}

void print_setup(const std::vector<char*>& args) {
  std::printf("offheap_cache_bench: offheap %u.%u.%u, caches beside the store\n",
              offheap::kVersionMajor, offheap::kVersionMinor, offheap::kVersionPatch);
  print_host();
  std::printf("  Runs:     %s repetitions of %s s per subject, operation and thread count, "
              "randomly interleaved\n",
              flag_value(args, "--benchmark_repetitions=").c_str(),
              flag_value(args, "--benchmark_min_time=").c_str());
  const StoreHitKeys& ref = store_hit_keys();
  std::printf("  Record:   %" PRIu64 "-byte header + %zu-byte key + %zu-byte value, padded to 8 = "
              "%" PRIu64 " bytes\n  Working set: %s x %" PRIu64 " = %s bytes (the store's "
              "live_bytes after the fill: %s%s)\n  Capacity: %s bytes (half) for each cache\n"
              "  Store get hit keys: the %s keys an offheap::Cache holds after the same fill\n"
              "Subjects:\n",
              kHeaderBytes, kW1KeyBytes, kW1ValueBytes, kRecordBytes,
              with_commas(kW1Entries).c_str(), kRecordBytes, with_commas(kWorkingSetBytes).c_str(),
              with_commas(ref.store_live_bytes).c_str(),
              ref.store_live_bytes == kWorkingSetBytes ? ", as computed" : ", WARNING: differs",
              with_commas(kCapacityBytes).c_str(), with_commas(ref.keys.size()).c_str());
  for_each_subject([]<class S>() {
    std::printf("  %s: %s\n", kInfo<S>.name, describe<S>().c_str());
  });
  std::printf("\n");
  std::fflush(stdout);
}

int run(int argc, char** argv) {
  // Defaults first: a flag the user repeats later wins.
  std::vector<char*> args = with_default_flags(argv[0], std::vector<char*>(argv + 1, argv + argc));
  for (const char* a : args) {
    if (std::strcmp(a, "--help") != 0) continue;
    std::printf("offheap_cache_bench takes Google Benchmark's flags (below); defaults: %s %s %s\n",
                kDefaultFlags[0], kDefaultFlags[1], kDefaultFlags[2]);
  }
  key_index();  // the inputs, before any timing
  hit_stream();
  whole_value_check();
  const std::vector<char*> given = args;  // Initialize takes its flags out of args
  print_setup(given);
  int n = static_cast<int>(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 2;

  for_each_subject([]<class S>() {
    register_op<S, Op::get_hit>();
    register_op<S, Op::cache_aside>();
    register_op<S, Op::put>();
  });
  SummaryReporter reporter;
  if (benchmark::RunSpecifiedBenchmarks(&reporter) == 0) {
    std::fprintf(stderr, "offheap_cache_bench: --benchmark_filter=%s selects no benchmark\n",
                 benchmark::GetBenchmarkFilter().c_str());
    return 2;
  }
  print_setup(given);
  const Report report(reporter);
  report.print_throughput();
  report.print_hits_and_memory();
  report.print_markdown();
  report.print_targets();
  benchmark::Shutdown();
  return reporter.exit_code();
}

}  // namespace
}  // namespace offheap_bench

int main(int argc, char** argv) { return offheap_bench::run(argc, argv); }
