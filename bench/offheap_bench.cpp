// SPDX-License-Identifier: Apache-2.0
// offheap_bench: offheap::Store side by side with
// absl::flat_hash_map<std::string, std::string> on one thread, and with
// libcuckoo::cuckoohash_map and tbb::concurrent_hash_map (concurrent_peers.hpp)
// on several, in one binary.
//
// Three phases, run one after the other:
//
//   W1, the "RED OHC" shape: 16-byte keys, 64-byte values, 24,000 entries,
//   one thread; get (copy into a reused std::string), put (overwrite of an
//   existing key) and mixed (90% get / 10% put). Keys are drawn uniformly at
//   random from a stream precomputed before timing. Run as many short
//   repetitions, randomly interleaved across subjects, so that both subjects
//   see the same swings of a shared, noisy machine; the summary quotes
//   medians and the ratio of medians.
//
//   W1 on threads: the same three operations on one subject shared by 1, 2
//   and 4 threads (offheap::Store, and the concurrent peers that were found),
//   built fresh for each run before its threads start; thread t of T walks
//   positions t, t + T, t + 2T, ... of the same streams. Timed in wall-clock
//   time: all threads' operations over the time between the start and the
//   stop barrier; beside it, the cores the run kept busy (its threads' CPU
//   time / wall time: how much of a shared machine it got, which bounds its
//   scaling) and operations per CPU second (what an operation costs under
//   contention, spinning included). With them, in the same interleaved
//   phase, the epoch fence choice (detail/epoch.hpp): W1 get on 1 and 2
//   threads and a bare EpochGuard, each under FenceMode::symmetric and
//   ::asymmetric, set between runs while no benchmark thread exists. Fewer,
//   equally short repetitions (--mt_reps, --mt_min_time).
//
//   Scale, the NoHeapDB shape: N keys (default 2,000,000; --scale_keys=N),
//   short decimal keys ("1234567") and 36-character UUID keys, 8-byte
//   values. Write rate (all N into a fresh store, and into one pre-sized for
//   N), read rate (all N in random order, every value checked). Each
//   measurement is one pass over the N keys (one iteration); the passes are
//   repeated only a few times (--scale_reps, default 3), interleaved, and the
//   summary quotes the median: a single pass on a shared machine can be off
//   by 2x.
//
// Also reported: heap allocations per operation over the timed loop (the
// binary counts every malloc and operator new, alloc_counter.hpp; per thread
// on threads) and memory per entry (see Footprint below for exactly what is
// counted). Gets on threads check that every value read is one whole value
// that was written (no torn reads).
//
// The trade-off: everything is in-memory, on the W1 working set of a few
// megabytes; this measures the per-operation path (hash, index probe, record
// copy) and how it shares a small machine between threads, not large-scale
// scaling: on 2 hardware threads, 4 threads oversubscribe the cores.
#include "concurrent_peers.hpp"
#include "summary.hpp"
#include "workload.hpp"

#include <offheap/offheap.hpp>

#include <benchmark/benchmark.h>

#if defined(OFFHEAP_BENCH_HAVE_ABSL)
#include <absl/base/config.h>
#include <absl/container/flat_hash_map.h>
#endif

#if defined(OFFHEAP_BENCH_HAVE_CUCKOO) && !defined(OFFHEAP_BENCH_CUCKOO_VERSION)
#define OFFHEAP_BENCH_CUCKOO_VERSION "(version unknown)"
#endif

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

// Last: its definitions of malloc and friends must follow every declaration
// of them (clang's <mm_malloc.h> redeclares posix_memalign without noexcept).
#include "alloc_counter.hpp"

namespace offheap_bench {
namespace {

// ---- settings ------------------------------------------------------------------

constexpr std::uint64_t kW1Entries = 24'000;
constexpr std::size_t kW1KeyBytes = 16;
constexpr std::size_t kW1ValueBytes = 64;
constexpr unsigned kW1StreamLog2 = 20;      // 1 Mi precomputed key indices per stream
constexpr unsigned kW1PutPerMille = 100;    // mixed: 10% puts
constexpr std::size_t kW1ValueVariants = 8;  // puts rotate through these values

constexpr const char* kDefaultFlags[] = {
    "--benchmark_repetitions=15",
    "--benchmark_min_time=0.05",
    "--benchmark_enable_random_interleaving=true",
};

// W1 on threads: at most this many repetitions of this many seconds each,
// and never more than the --benchmark_repetitions and --benchmark_min_time
// in force (so a quick run with few short repetitions stays quick).
constexpr int kMtRepsDefault = 9;
constexpr double kMtMinTimeDefault = 0.05;
constexpr int kMtThreadCounts[] = {1, 2, 4};
constexpr int kFenceThreadCounts[] = {1, 2};
constexpr std::uint64_t kMtCheckEvery = 8;  // gets on threads: check one in 8 (power of 2)

struct Settings {
  std::uint64_t scale_keys = 2'000'000;
  bool scale_absl = true;
  int scale_reps = 3;
  int mt_reps = kMtRepsDefault;
  double mt_min_time = kMtMinTimeDefault;
  bool mt_reps_given = false;  // --mt_reps / --mt_min_time: taken as given, no cap
  bool mt_min_time_given = false;
};
Settings g_settings;
std::uint64_t g_wrong_values = 0;  // scale reads that returned a wrong value or none

// ---- memory per entry ----------------------------------------------------------

/// Memory per entry after filling a subject with N entries.
///
/// offheap::Store:
///   bytes     = Stats::mapped_bytes / N: everything the store maps and
///               reports (journal chunks, including the unused tail of the
///               newest one, the index table, the free-list table, the
///               per-thread read-counter lines). Virtual size: a page costs
///               memory only once touched.
///   overhead  = (journal_bytes + index_capacity * 9 + fixed) / N
///               - (key + value bytes per entry, 80 for W1), where
///               journal_bytes = bytes of records written (24-byte header,
///               key, value, padding to 8; free records count too),
///               index_capacity * 9 = one control byte and one 8-byte
///               location per index slot, and fixed = the shards' free-list
///               tables and the read-counter lines (Stats::mapped_bytes of
///               an empty store minus its shards' one-page index tables).
///               The first 256 entries of each shard's chunk table live in
///               the Shard object (heap, counted below).
///   heap      = process heap bytes after filling minus before creating, / N.
///
/// absl::flat_hash_map<std::string, std::string>:
///   bytes     = heap bytes after filling minus before creating, / N: the
///               slot array (two std::string per slot), control bytes, and
///               the heap blocks of keys and values too long for the string's
///               inline buffer (15 chars in libstdc++), each block counted as
///               malloc_usable_size + 8.
///   overhead  = bytes - (key + value bytes per entry).
///   heap      = bytes.
struct Footprint {
  double bytes = 0;
  double overhead = 0;
  double heap = 0;
};

std::uint64_t store_fixed_table_bytes() {
  static const std::uint64_t fixed = [] {
    const offheap::Store empty;
    const offheap::Stats s = empty.stats();
    return s.mapped_bytes - s.shards * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  }();
  return fixed;
}

void set_footprint_counters(benchmark::State& state, const Footprint& f) {
  state.counters["bytes/entry"] = f.bytes;
  state.counters["overhead/entry"] = f.overhead;
  state.counters["heap/entry"] = f.heap;
}

// ---- subjects -------------------------------------------------------------------
//
// A subject: constructible from an expected entry count (0: none given),
// put(key, value), get(key, out) -> bool, footprint(heap_delta).

class StoreSubject {
 public:
  static constexpr const char* kName = "offheap::Store";
  static constexpr const char* kShortName = "offheap";

  explicit StoreSubject(std::uint64_t expected_entries) : store_(options(expected_entries)) {}

  void put(std::string_view key, std::string_view value) { store_.put(key, value); }
  bool get(std::string_view key, std::string& out) const { return store_.get(key, out); }
  /// After a fill, untimed: frees the index tables growth replaced.
  void settle() { store_.maintain(); }
  /// On threads: the key as the subject takes it (a view, no copy).
  static std::string_view key(std::string_view k, std::string& /*scratch*/) noexcept { return k; }

  Footprint footprint(std::int64_t heap_delta) const {
    const offheap::Stats s = store_.stats();
    const auto n = static_cast<double>(s.records);
    const std::uint64_t counted = s.journal_bytes + s.index_capacity * 9 + store_fixed_table_bytes();
    Footprint f;
    f.bytes = static_cast<double>(s.mapped_bytes) / n;
    f.overhead = (static_cast<double>(counted) - static_cast<double>(s.key_value_bytes)) / n;
    f.heap = static_cast<double>(heap_delta) / n;
    return f;
  }

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

  explicit AbslSubject(std::uint64_t expected_entries) {
    if (expected_entries != 0) map_.reserve(expected_entries);
  }

  /// Find-or-insert, then assign the value (reuses the value's capacity).
  void put(std::string_view key, std::string_view value) {
    const auto r = map_.try_emplace(absl::string_view(key.data(), key.size()));
    r.first->second.assign(value.data(), value.size());
  }
  /// Find, then copy the value into out (the same work as Store::get).
  bool get(std::string_view key, std::string& out) const {
    const auto it = map_.find(absl::string_view(key.data(), key.size()));
    if (it == map_.end()) return false;
    out.assign(it->second.data(), it->second.size());
    return true;
  }

  Footprint footprint(std::int64_t heap_delta) const {
    const auto n = static_cast<double>(map_.size());
    std::uint64_t kv = 0;
    for (const auto& [k, v] : map_) kv += k.size() + v.size();
    Footprint f;
    f.bytes = static_cast<double>(heap_delta) / n;
    f.overhead = (static_cast<double>(heap_delta) - static_cast<double>(kv)) / n;
    f.heap = f.bytes;
    return f;
  }

 private:
  absl::flat_hash_map<std::string, std::string> map_;
};
#endif

// ---- W1 -------------------------------------------------------------------------

struct W1Inputs {
  KeySet keys = KeySet::random_fixed(kW1Entries, kW1KeyBytes, 0x5EED0001);
  IndexStream uniform{kW1Entries, kW1StreamLog2, 0, 0x5EED0002};
  IndexStream mixed{kW1Entries, kW1StreamLog2, kW1PutPerMille, 0x5EED0003};
  std::vector<std::string> values = value_variants(kW1ValueVariants, kW1ValueBytes);
};

const W1Inputs& w1_inputs() {
  static const W1Inputs inputs;
  return inputs;
}

/// One subject filled with the W1 entries, built on first use (untimed) and
/// shared by all its W1 runs; `cursor` continues the key stream across runs.
template <class S>
struct W1Fixture {
  std::int64_t heap_before = heap_bytes_in_use();
  S subject{0};
  Footprint footprint;
  std::uint64_t cursor = 0;

  W1Fixture() {
    const W1Inputs& in = w1_inputs();
    for (std::uint64_t i = 0; i < kW1Entries; ++i) {
      subject.put(in.keys.key(i), in.values[i % kW1ValueVariants]);
    }
    footprint = subject.footprint(heap_bytes_in_use() - heap_before);
    // A first get outside any timed loop: per-thread setup (offheap takes a
    // thread number on a thread's first read) is not a per-operation cost.
    std::string out;
    subject.get(in.keys.key(0), out);
  }
};

template <class S>
W1Fixture<S>& w1_fixture() {
  static W1Fixture<S> fixture;
  return fixture;
}

template <class S>
void finish_w1(benchmark::State& state, W1Fixture<S>& fx, std::uint64_t pos,
               std::uint64_t allocs, std::uint64_t misses) {
  fx.cursor = pos;
  const auto iterations = static_cast<std::int64_t>(state.iterations());
  state.SetItemsProcessed(iterations);
  state.counters["allocs/op"] =
      static_cast<double>(allocs) / static_cast<double>(iterations > 0 ? iterations : 1);
  state.counters["wrong"] = static_cast<double>(misses);
  set_footprint_counters(state, fx.footprint);
  if (misses != 0) {
    state.SkipWithError(("a get missed a key that is present (" + std::to_string(misses) +
                         " times)").c_str());
  }
}

template <class S>
void BM_W1_Get(benchmark::State& state) {
  const W1Inputs& in = w1_inputs();
  W1Fixture<S>& fx = w1_fixture<S>();
  std::string out(kW1ValueBytes, '\0');
  std::uint64_t pos = fx.cursor, misses = 0;
  const std::uint64_t allocs_before = allocation_count();
  for (auto _ : state) {
    misses += !fx.subject.get(in.keys.key(in.uniform.at(pos++)), out);
    benchmark::DoNotOptimize(out.data());
  }
  finish_w1(state, fx, pos, allocation_count() - allocs_before, misses);
}

template <class S>
void BM_W1_Put(benchmark::State& state) {
  const W1Inputs& in = w1_inputs();
  W1Fixture<S>& fx = w1_fixture<S>();
  std::uint64_t pos = fx.cursor;
  const std::uint64_t allocs_before = allocation_count();
  for (auto _ : state) {
    const std::uint64_t p = pos++;
    fx.subject.put(in.keys.key(in.uniform.at(p)), in.values[p % kW1ValueVariants]);
  }
  finish_w1(state, fx, pos, allocation_count() - allocs_before, 0);
}

template <class S>
void BM_W1_Mixed(benchmark::State& state) {
  const W1Inputs& in = w1_inputs();
  W1Fixture<S>& fx = w1_fixture<S>();
  std::string out(kW1ValueBytes, '\0');
  std::uint64_t pos = fx.cursor, misses = 0;
  const std::uint64_t allocs_before = allocation_count();
  for (auto _ : state) {
    const std::uint64_t p = pos++;
    const std::uint32_t e = in.mixed.at(p);
    const std::string_view key = in.keys.key(e & ~IndexStream::kPutBit);
    if (e & IndexStream::kPutBit) {
      fx.subject.put(key, in.values[p % kW1ValueVariants]);
    } else {
      misses += !fx.subject.get(key, out);
      benchmark::DoNotOptimize(out.data());
    }
  }
  finish_w1(state, fx, pos, allocation_count() - allocs_before, misses);
}

constexpr const char* kW1Ops[] = {"Get", "Put", "Mixed"};

std::string w1_name(const char* op, const char* subject) {
  return std::string("BM_W1_") + op + "<" + subject + ">";
}

template <class S>
void register_w1() {
  benchmark::RegisterBenchmark(w1_name("Get", S::kName).c_str(), BM_W1_Get<S>);
  benchmark::RegisterBenchmark(w1_name("Put", S::kName).c_str(), BM_W1_Put<S>);
  benchmark::RegisterBenchmark(w1_name("Mixed", S::kName).c_str(), BM_W1_Mixed<S>);
}

// ---- W1 on threads ----------------------------------------------------------------
//
// One subject shared by all threads of a run. A subject here is safe for
// concurrent put and get. Keys come from the flat W1 key buffer, as on one
// thread; S::key(view, scratch) turns one into what the subject takes: the
// view itself for offheap::Store, a copy in the thread's reused std::string
// for the peers (concurrent_peers.hpp).

/// Whether a value read while other threads overwrite it is one whole W1
/// value: the right length, and its first and last words from the same one
/// of the variants (their first bytes all differ). Applied to every 8th get
/// of a thread, the same for every subject: a check on every get costs a few
/// nanoseconds, a fair share of a W1 get.
class WholeValueCheck {
 public:
  explicit WholeValueCheck(const std::vector<std::string>& variants) {
    for (std::size_t i = 0; i < variants.size(); ++i) {
      const std::string& v = variants[i];
      std::uint8_t& slot = by_first_byte_[static_cast<unsigned char>(v[0])];
      if (slot != 0 || v.size() != kW1ValueBytes) std::abort();  // the check needs both
      slot = static_cast<std::uint8_t>(i + 1);
      first_.push_back(word(v.data()));
      last_.push_back(word(v.data() + kW1ValueBytes - 8));
    }
  }

  bool whole(const std::string& v) const noexcept {
    if (v.size() != kW1ValueBytes) return false;
    const unsigned i = by_first_byte_[static_cast<unsigned char>(v[0])];
    return i != 0 && word(v.data()) == first_[i - 1] &&
           word(v.data() + kW1ValueBytes - 8) == last_[i - 1];
  }

 private:
  static std::uint64_t word(const char* p) noexcept {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    return w;
  }
  std::uint8_t by_first_byte_[256] = {};  // variant + 1; 0: none starts so
  std::vector<std::uint64_t> first_, last_;
};

const WholeValueCheck& whole_value_check() {
  static const WholeValueCheck check(w1_inputs().values);
  return check;
}

/// The epoch fence mode a run sets up: the process default (asymmetric where
/// the kernel has membarrier), or one of the two forced.
enum class Fence { process_default, symmetric, asymmetric };
offheap::detail::FenceMode g_default_fence = offheap::detail::FenceMode::symmetric;

const char* fence_name(Fence f) { return f == Fence::symmetric ? "symmetric" : "asymmetric"; }

/// Requires: no thread inside an epoch guard (Setup runs before a run's
/// threads start, and each run's threads are joined before the next Setup).
void apply_fence(Fence f) {
  using offheap::detail::FenceMode;
  const FenceMode m = f == Fence::process_default ? g_default_fence
                      : f == Fence::symmetric     ? FenceMode::symmetric
                                                  : FenceMode::asymmetric;
  offheap::detail::EpochDomain::instance().set_mode(m);
}

/// The subject of the run in progress; one run at a time.
template <class S>
std::unique_ptr<S>& shared_subject() {
  static std::unique_ptr<S> subject;
  return subject;
}

/// Setup of a run on threads: the fence mode, then a fresh subject filled
/// with the W1 entries (untimed, on the main thread, before the run's
/// threads start).
template <class S, Fence F>
void mt_setup(const benchmark::State&) {
  apply_fence(F);
  const W1Inputs& in = w1_inputs();
  whole_value_check();
  std::unique_ptr<S>& subject = shared_subject<S>();
  subject.reset();
  subject = std::make_unique<S>(0);
  std::string scratch;
  for (std::uint64_t i = 0; i < kW1Entries; ++i) {
    subject->put(S::key(in.keys.key(i), scratch), in.values[i % kW1ValueVariants]);
  }
  subject->settle();
}

template <class S>
void mt_teardown(const benchmark::State&) {
  shared_subject<S>().reset();
}

enum class MtOp { get, put, mixed };
constexpr MtOp kMtOps[] = {MtOp::get, MtOp::put, MtOp::mixed};
const char* op_name(MtOp op) { return kW1Ops[static_cast<int>(op)]; }

/// One thread's share of a W1 run on the shared subject. Thread t of T takes
/// stream positions t, t + T, t + 2T, ...: the threads' slices interleave
/// and never overlap. Thread 0 also times the whole run on the wall clock:
/// Google Benchmark releases all threads together from a start barrier and
/// leaves the loop only past a stop barrier that waits for the last thread,
/// so thread 0's span covers every thread's operations ("wall_Mops").
/// Google Benchmark's own items_per_second divides by the threads' average
/// loop time instead, which flatters a run whose threads finish unevenly.
template <class S, MtOp Op>
void BM_W1MT(benchmark::State& state) {
  const W1Inputs& in = w1_inputs();
  const KeySet& keys = in.keys;
  const WholeValueCheck& check = whole_value_check();
  const IndexStream& stream = Op == MtOp::mixed ? in.mixed : in.uniform;
  S& subject = *shared_subject<S>();
  const auto step = static_cast<std::uint64_t>(state.threads());
  auto pos = static_cast<std::uint64_t>(state.thread_index());
  std::string out(kW1ValueBytes, '\0');
  std::string scratch(kW1KeyBytes, '\0');
  // Untimed: a thread's first read of a store takes its thread number (one
  // allocation per thread, not per operation).
  subject.get(S::key(keys.key(0), scratch), out);
  std::uint64_t wrong = 0, gets = 0;
  const auto get = [&](std::string_view key) {
    const bool hit = subject.get(S::key(key, scratch), out);
    wrong += !hit || ((gets++ & (kMtCheckEvery - 1)) == 0 && !check.whole(out));
  };
  const std::uint64_t allocs_before = thread_allocation_count();

  auto it = state.begin();  // the start barrier, then the timers start
  const auto start = std::chrono::steady_clock::now();
  for (const auto end = state.end(); it != end; ++it) {
    const std::uint64_t p = pos;
    pos += step;
    if constexpr (Op == MtOp::get) {
      get(keys.key(stream.at(p)));
    } else if constexpr (Op == MtOp::put) {
      subject.put(S::key(keys.key(stream.at(p)), scratch), in.values[p % kW1ValueVariants]);
    } else {
      const std::uint32_t e = stream.at(p);
      const std::string_view key = keys.key(e & ~IndexStream::kPutBit);
      if (e & IndexStream::kPutBit) {
        subject.put(S::key(key, scratch), in.values[p % kW1ValueVariants]);
      } else {
        get(key);
      }
    }
  }
  const auto stop = std::chrono::steady_clock::now();  // past the stop barrier

  const auto iterations = static_cast<double>(state.iterations());
  const double allocs = static_cast<double>(thread_allocation_count() - allocs_before);
  state.SetItemsProcessed(state.iterations());
  state.counters["allocs/op"] =
      benchmark::Counter(allocs / std::max(iterations, 1.0), benchmark::Counter::kAvgThreads);
  state.counters["wrong"] = static_cast<double>(wrong);  // summed over the threads
  if (state.thread_index() == 0) {
    const double seconds = std::chrono::duration<double>(stop - start).count();
    state.counters["wall_Mops"] = iterations * state.threads() / std::max(seconds, 1e-9) / 1e6;
  }
  if (wrong != 0) {
    state.SkipWithError((std::to_string(wrong) +
                         " gets missed a present key or read a torn value").c_str());
  }
}

/// A bare reader critical section, as every store read opens one.
void BM_Epoch_Guard(benchmark::State& state) {
  offheap::detail::EpochDomain& domain = offheap::detail::EpochDomain::instance();
  offheap::detail::ThreadNumbers::current();  // untimed: the thread's number
  for (auto _ : state) {
    const offheap::detail::EpochGuard guard(domain, offheap::detail::ThreadNumbers::current());
    benchmark::DoNotOptimize(&guard);
  }
  state.SetItemsProcessed(state.iterations());
}

template <Fence F>
void fence_setup(const benchmark::State&) {
  apply_fence(F);
}

std::string mt_name(MtOp op, const char* subject) {
  return std::string("BM_W1MT_") + op_name(op) + "<" + subject + ">";
}
std::string fence_get_name(Fence f) { return std::string("BM_Epoch_Get<") + fence_name(f) + ">"; }
std::string fence_guard_name(Fence f) {
  return std::string("BM_Epoch_Guard<") + fence_name(f) + ">";
}
/// The name SummaryReporter keeps a run on `threads` threads under.
std::string with_threads(const std::string& name, int threads) {
  return name + "/threads:" + std::to_string(threads);
}

/// The repetitions and seconds of a run on threads (see kMtRepsDefault).
struct MtRuns {
  int reps;
  double min_time;
};

/// Wall-clock time (what matters is the threads' joint throughput), the
/// runs' repetitions and seconds, one instance per thread count.
void on_threads(benchmark::internal::Benchmark* b, const MtRuns& runs,
                std::initializer_list<int> thread_counts) {
  b->UseRealTime()->Repetitions(runs.reps)->MinTime(runs.min_time);
  for (const int n : thread_counts) b->Threads(n);
}

template <class S, MtOp Op>
void register_mt_op(const MtRuns& runs) {
  benchmark::internal::Benchmark* b =
      benchmark::RegisterBenchmark(mt_name(Op, S::kName).c_str(), BM_W1MT<S, Op>);
  b->Setup(mt_setup<S, Fence::process_default>)->Teardown(mt_teardown<S>);
  on_threads(b, runs, {kMtThreadCounts[0], kMtThreadCounts[1], kMtThreadCounts[2]});
}

template <class S>
void register_mt(const MtRuns& runs) {
  register_mt_op<S, MtOp::get>(runs);
  register_mt_op<S, MtOp::put>(runs);
  register_mt_op<S, MtOp::mixed>(runs);
}

/// The fence modes measured: both where the kernel has membarrier, else
/// only symmetric (set_mode would fall back to it anyway).
std::vector<Fence> fences_measured() {
  if (offheap::detail::EpochDomain::instance().asymmetric_available()) {
    return {Fence::symmetric, Fence::asymmetric};
  }
  return {Fence::symmetric};
}

template <Fence F>
void register_fence(const MtRuns& runs) {
  benchmark::internal::Benchmark* get = benchmark::RegisterBenchmark(
      fence_get_name(F).c_str(), BM_W1MT<StoreSubject, MtOp::get>);
  get->Setup(mt_setup<StoreSubject, F>)->Teardown(mt_teardown<StoreSubject>);
  on_threads(get, runs, {kFenceThreadCounts[0], kFenceThreadCounts[1]});
  benchmark::RegisterBenchmark(fence_guard_name(F).c_str(), BM_Epoch_Guard)
      ->Setup(fence_setup<F>)
      ->Repetitions(runs.reps)
      ->MinTime(runs.min_time);
}

// ---- scale ----------------------------------------------------------------------

enum class Shape { decimal, uuid };
constexpr Shape kShapes[] = {Shape::decimal, Shape::uuid};
const char* shape_name(Shape s) { return s == Shape::decimal ? "decimal" : "uuid"; }

const KeySet& scale_keys(Shape shape) {
  static std::optional<KeySet> decimal, uuid;
  std::optional<KeySet>& k = shape == Shape::decimal ? decimal : uuid;
  if (!k) {
    k = shape == Shape::decimal ? KeySet::decimal(g_settings.scale_keys)
                                : KeySet::uuid(g_settings.scale_keys, 0x5EED0010);
  }
  return *k;
}

const std::vector<std::uint32_t>& scale_read_order() {
  static const std::vector<std::uint32_t> order =
      random_permutation(g_settings.scale_keys, 0x5EED0011);
  return order;
}

/// The one filled subject kept between scale runs, so a read run can reuse
/// what a write run built; at most one lives at a time (N can be large).
struct FilledSubject {
  std::string id;
  std::shared_ptr<void> subject;
  Footprint footprint;
};
FilledSubject& filled() {
  static FilledSubject f;
  return f;
}

template <class S>
std::string filled_id(Shape shape) {
  return std::string(S::kName) + "/" + shape_name(shape);
}

template <class S>
void fill(S& subject, const KeySet& keys) {
  char buf[8];
  for (std::uint64_t i = 0; i < keys.size(); ++i) subject.put(keys.key(i), scale_value(i, buf));
}

template <class S>
void BM_Scale_Put(benchmark::State& state, Shape shape, bool presized) {
  const KeySet& keys = scale_keys(shape);
  const std::uint64_t n = keys.size();
  filled() = {};  // free the last filled subject before building another
  const std::int64_t heap_before = heap_bytes_in_use();
  auto subject = std::make_shared<S>(presized ? n : 0);
  const std::uint64_t allocs_before = allocation_count();
  for (auto _ : state) fill(*subject, keys);
  const std::uint64_t allocs = allocation_count() - allocs_before;
  const auto ops = static_cast<std::int64_t>(n) * static_cast<std::int64_t>(state.iterations());
  state.SetItemsProcessed(ops);
  state.counters["allocs/op"] = static_cast<double>(allocs) / static_cast<double>(ops);
  state.counters["wrong"] = 0;  // checked by the read run; here for one table layout
  const Footprint f = subject->footprint(heap_bytes_in_use() - heap_before);
  set_footprint_counters(state, f);
  filled() = {filled_id<S>(shape), subject, f};
}

template <class S>
void BM_Scale_Get(benchmark::State& state, Shape shape) {
  const KeySet& keys = scale_keys(shape);
  const std::vector<std::uint32_t>& order = scale_read_order();
  if (filled().id != filled_id<S>(shape)) {  // untimed: build what no write run left
    filled() = {};
    const std::int64_t heap_before = heap_bytes_in_use();
    auto subject = std::make_shared<S>(0);
    fill(*subject, keys);
    filled() = {filled_id<S>(shape), subject, subject->footprint(heap_bytes_in_use() - heap_before)};
  }
  const S& subject = *static_cast<const S*>(filled().subject.get());
  std::string out(8, '\0');
  std::uint64_t wrong = 0;
  const std::uint64_t allocs_before = allocation_count();
  for (auto _ : state) {
    for (const std::uint32_t i : order) {
      const std::uint64_t expected = i;
      wrong += !subject.get(keys.key(i), out) || out.size() != 8 ||
               std::memcmp(out.data(), &expected, 8) != 0;
    }
  }
  const std::uint64_t allocs = allocation_count() - allocs_before;
  const auto ops =
      static_cast<std::int64_t>(order.size()) * static_cast<std::int64_t>(state.iterations());
  state.SetItemsProcessed(ops);
  state.counters["allocs/op"] = static_cast<double>(allocs) / static_cast<double>(ops);
  state.counters["wrong"] = static_cast<double>(wrong);
  set_footprint_counters(state, filled().footprint);
  g_wrong_values += wrong;
  if (wrong != 0) {
    state.SkipWithError((std::to_string(wrong) + " reads returned a wrong value or none").c_str());
  }
}

enum class ScaleOp { put_fresh, put_presized, get };
constexpr ScaleOp kScaleOps[] = {ScaleOp::put_fresh, ScaleOp::put_presized, ScaleOp::get};

std::string scale_name(ScaleOp op, Shape shape, const char* subject) {
  const char* base = op == ScaleOp::get ? "BM_Scale_Get<" : "BM_Scale_Put<";
  const char* suffix = op == ScaleOp::put_fresh      ? "/fresh"
                       : op == ScaleOp::put_presized ? "/presized"
                                                     : "/random_order";
  return base + std::string(subject) + ">/" + shape_name(shape) + suffix;
}

template <class S>
void register_scale() {
  for (const Shape shape : kShapes) {
    for (const ScaleOp op : kScaleOps) {
      const std::string name = scale_name(op, shape, S::kName);
      benchmark::internal::Benchmark* b =
          op == ScaleOp::get
              ? benchmark::RegisterBenchmark(name.c_str(), BM_Scale_Get<S>, shape)
              : benchmark::RegisterBenchmark(name.c_str(), BM_Scale_Put<S>, shape,
                                             op == ScaleOp::put_presized);
      b->Iterations(1)->Repetitions(g_settings.scale_reps)->Unit(benchmark::kMillisecond);
    }
  }
}

// ---- main: flags, platform, phases, summary ------------------------------------------

template <class Fn>
void for_each_subject(Fn&& fn, bool with_absl = true) {
  fn.template operator()<StoreSubject>();
#if defined(OFFHEAP_BENCH_HAVE_ABSL)
  if (with_absl) fn.template operator()<AbslSubject>();
#else
  (void)with_absl;
#endif
}

template <class Fn>
void for_each_mt_subject(Fn&& fn) {
  fn.template operator()<StoreSubject>();
#if defined(OFFHEAP_BENCH_HAVE_CUCKOO)
  fn.template operator()<CuckooSubject>();
#endif
#if defined(OFFHEAP_BENCH_HAVE_TBB)
  fn.template operator()<TbbSubject>();
#endif
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  }
  return "unknown CPU";
}

void print_platform() {
  utsname u{};
  ::uname(&u);
  std::printf("offheap_bench: offheap %u.%u.%u", offheap::kVersionMajor, offheap::kVersionMinor,
              offheap::kVersionPatch);
#if defined(OFFHEAP_BENCH_HAVE_ABSL)
  std::printf(" vs absl::flat_hash_map (abseil %d)\n", ABSL_LTS_RELEASE_VERSION);
#else
  std::printf(" (abseil not found: absl::flat_hash_map not measured)\n");
#endif
  std::printf("  CPU:      %s, %u hardware threads\n", cpu_model().c_str(),
              std::thread::hardware_concurrency());
  std::printf("  OS:       %s %s %s\n", u.sysname, u.release, u.machine);
#if defined(__clang__)
  std::printf("  Compiler: clang %s", __clang_version__);
#elif defined(__GNUC__)
  std::printf("  Compiler: GCC %s", __VERSION__);
#else
  std::printf("  Compiler: unknown");
#endif
#if defined(NDEBUG) && defined(__OPTIMIZE__)
  std::printf(", optimized, NDEBUG\n");
#else
  std::printf(", WARNING: not an optimized NDEBUG build, numbers are not meaningful\n");
#endif
  std::printf("  Threads:  W1 on 1, 2 and 4 threads, %d repetitions of %.3g s; peers:",
              g_settings.mt_reps, g_settings.mt_min_time);
#if defined(OFFHEAP_BENCH_HAVE_CUCKOO)
  std::printf(" libcuckoo %s", OFFHEAP_BENCH_CUCKOO_VERSION);
#else
  std::printf(" libcuckoo not found");
#endif
#if defined(OFFHEAP_BENCH_HAVE_TBB)
  std::printf(", oneTBB %s\n", TBB_VERSION_STRING);
#else
  std::printf(", TBB not found\n");
#endif
  std::printf("  Scale:    %" PRIu64 " keys, %d passes each%s\n\n", g_settings.scale_keys,
              g_settings.scale_reps,
              g_settings.scale_absl ? "" : " (absl left out: --scale_absl=false)");
  std::fflush(stdout);
}

bool parse_u64(const char* text, std::uint64_t& out) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || text[0] == '-') return false;
  out = v;
  return true;
}

bool parse_seconds(const char* text, double& out) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text, &end);
  if (errno != 0 || end == text || !(v > 0) || v > 3600) return false;
  if (*end == 's') ++end;  // newer Google Benchmark spells seconds "0.05s"
  if (*end != '\0') return false;
  out = v;
  return true;
}

/// Takes this binary's own flags out of argv; false on a malformed one.
bool parse_own_flags(std::vector<char*>& args) {
  std::vector<char*> rest;
  for (char* a : args) {
    const std::string_view s(a);
    if (s.rfind("--scale_keys=", 0) == 0) {
      std::uint64_t n = 0;
      if (!parse_u64(a + std::strlen("--scale_keys="), n) || n == 0 || n > 0xFFFFFFFFull) {
        std::fprintf(stderr, "offheap_bench: --scale_keys wants a number in [1, 2^32)\n");
        return false;
      }
      g_settings.scale_keys = n;
    } else if (s.rfind("--scale_reps=", 0) == 0) {
      std::uint64_t n = 0;
      if (!parse_u64(a + std::strlen("--scale_reps="), n) || n == 0 || n > 1000) {
        std::fprintf(stderr, "offheap_bench: --scale_reps wants a number in [1, 1000]\n");
        return false;
      }
      g_settings.scale_reps = static_cast<int>(n);
    } else if (s.rfind("--mt_reps=", 0) == 0) {
      std::uint64_t n = 0;
      if (!parse_u64(a + std::strlen("--mt_reps="), n) || n == 0 || n > 1000) {
        std::fprintf(stderr, "offheap_bench: --mt_reps wants a number in [1, 1000]\n");
        return false;
      }
      g_settings.mt_reps = static_cast<int>(n);
      g_settings.mt_reps_given = true;
    } else if (s.rfind("--mt_min_time=", 0) == 0) {
      if (!parse_seconds(a + std::strlen("--mt_min_time="), g_settings.mt_min_time)) {
        std::fprintf(stderr, "offheap_bench: --mt_min_time wants seconds in (0, 3600]\n");
        return false;
      }
      g_settings.mt_min_time_given = true;
    } else if (s == "--scale_absl=false" || s == "--scale_absl=0") {
      g_settings.scale_absl = false;
    } else if (s == "--scale_absl=true" || s == "--scale_absl=1") {
      g_settings.scale_absl = true;
    } else {
      if (s == "--help" || s == "-h") {
        std::printf(
            "offheap_bench flags (besides Google Benchmark's, listed below):\n"
            "  --scale_keys=N          keys in the scale run (default 2000000)\n"
            "  --scale_reps=R          passes of each scale measurement, median quoted (default 3)\n"
            "  --scale_absl=true|false include absl::flat_hash_map in the scale run\n"
            "  --mt_reps=R             repetitions of each run on threads (default 9, at most\n"
            "                          --benchmark_repetitions unless given)\n"
            "  --mt_min_time=S         seconds of each run on threads (default 0.05, at most\n"
            "                          --benchmark_min_time unless given)\n"
            "Defaults this binary passes to Google Benchmark (override them freely):\n");
        for (const char* f : kDefaultFlags) std::printf("  %s\n", f);
        std::printf("\n");
      }
      rest.push_back(a);
    }
  }
  args = std::move(rest);
  return true;
}

/// Caps the runs on threads by the --benchmark_repetitions and
/// --benchmark_min_time in force (the last of each in `args` wins, as in
/// Google Benchmark), unless --mt_reps / --mt_min_time were given.
void cap_mt_runs(const std::vector<char*>& args) {
  for (const char* a : args) {
    const std::string_view s(a);
    std::uint64_t n = 0;
    double t = 0;
    if (s.rfind("--benchmark_repetitions=", 0) == 0 && !g_settings.mt_reps_given &&
        parse_u64(a + std::strlen("--benchmark_repetitions="), n) && n > 0) {
      g_settings.mt_reps = static_cast<int>(std::min<std::uint64_t>(n, kMtRepsDefault));
    } else if (s.rfind("--benchmark_min_time=", 0) == 0 && !g_settings.mt_min_time_given &&
               parse_seconds(a + std::strlen("--benchmark_min_time="), t)) {
      g_settings.mt_min_time = std::min(t, kMtMinTimeDefault);
    }
  }
}

/// Whether --benchmark_filter selects any of `names` (the library's rule: a
/// regex searched in the name, negated by a leading '-').
bool filter_selects(const std::vector<std::string>& names) {
  std::string spec = benchmark::GetBenchmarkFilter();
  if (spec.empty() || spec == "all") spec = ".";
  bool negate = false;
  if (spec[0] == '-') {
    negate = true;
    spec.erase(0, 1);
  }
  try {
    const std::regex re(spec);
    for (const std::string& n : names) {
      if (std::regex_search(n, re) != negate) return true;
    }
    return false;
  } catch (const std::regex_error&) {
    return true;  // let the library report the bad regex
  }
}

void print_w1_summary(const SummaryReporter& rep) {
  std::printf(
      "\n== Summary: W1 (%" PRIu64 " entries, %zu-byte keys, %zu-byte values, uniform random keys, "
      "1 thread)\n",
      kW1Entries, kW1KeyBytes, kW1ValueBytes);
  std::printf("   Mops/s: median of the interleaved repetitions (+-: half the interquartile\n"
              "   range), from thread CPU time, which a busy neighbour disturbs less than wall time\n");
  std::printf("%-6s %20s %20s %13s %12s %12s %5s\n", "op", "offheap Mops/s", "absl Mops/s",
              "offheap/absl", "allocs/op", "allocs/op", "reps");
  std::printf("%-6s %20s %20s %13s %12s %12s %5s\n", "", "", "", "", "offheap", "absl", "");
  const auto rates = [](const std::vector<Sample>& s) {
    return collect(s, [](const Sample& x) { return x.items_per_second / 1e6; });
  };
  const auto allocs = [](const std::vector<Sample>& s) {
    return median(collect(s, [](const Sample& x) { return x.counter("allocs/op"); }));
  };
  for (const char* op : kW1Ops) {
    const std::vector<Sample> o = rep.samples(w1_name(op, StoreSubject::kName));
    std::vector<Sample> a;
#if defined(OFFHEAP_BENCH_HAVE_ABSL)
    a = rep.samples(w1_name(op, AbslSubject::kName));
#endif
    if (o.empty() && a.empty()) continue;
    const double om = median(rates(o)), am = median(rates(a));
    char oc[32] = "-", ac[32] = "-", ratio[32] = "-", oa[32] = "-", aa[32] = "-";
    if (!o.empty()) {
      std::snprintf(oc, sizeof oc, "%.2f +-%.0f%%", om, half_iqr_percent(rates(o)));
      std::snprintf(oa, sizeof oa, "%.3f", allocs(o));
    }
    if (!a.empty()) {
      std::snprintf(ac, sizeof ac, "%.2f +-%.0f%%", am, half_iqr_percent(rates(a)));
      std::snprintf(aa, sizeof aa, "%.3f", allocs(a));
    }
    if (!o.empty() && !a.empty()) std::snprintf(ratio, sizeof ratio, "%.2f", om / am);
    std::printf("%-6s %20s %20s %13s %12s %12s %5zu\n", op, oc, ac, ratio, oa, aa,
                std::max(o.size(), a.size()));
  }
  std::printf("\n%-34s %12s %16s %12s\n", "memory per entry (W1)", "bytes/entry", "overhead/entry",
              "heap/entry");
  for_each_subject([&]<class S>() {
    for (const char* op : kW1Ops) {
      const std::vector<Sample> s = rep.samples(w1_name(op, S::kName));
      if (s.empty()) continue;
      const std::string label =
          std::string(S::kName) + (std::is_same_v<S, StoreSubject> ? " (mapped)" : " (heap)");
      std::printf("%-34s %12.1f %16.1f %12.1f\n", label.c_str(), s[0].counter("bytes/entry"),
                  s[0].counter("overhead/entry"), s[0].counter("heap/entry"));
      break;
    }
  });
  std::printf("   overhead = bytes beyond the %zu bytes of key and value; what each figure counts:\n"
              "   see Footprint in bench/offheap_bench.cpp\n",
              kW1KeyBytes + kW1ValueBytes);
}

/// "12.34 +-3%" for the median and spread of `v`, or "-" if empty.
std::string median_cell(const std::vector<double>& v, const char* format = "%.2f") {
  if (v.empty()) return "-";
  char num[32], cell[48];
  std::snprintf(num, sizeof num, format, median(v));
  std::snprintf(cell, sizeof cell, "%s +-%.0f%%", num, half_iqr_percent(v));
  return cell;
}

std::string ratio_cell(double r) {
  if (!(r > 0) || std::isinf(r)) return "-";
  char cell[32];
  std::snprintf(cell, sizeof cell, "%.2f", r);
  return cell;
}

std::vector<double> wall_mops(const std::vector<Sample>& s) {
  return collect(s, [](const Sample& x) { return x.counter("wall_Mops"); });
}

/// Cores a run on threads kept busy: its threads' CPU time over its wall
/// time. On a shared machine this says how much of it the run got.
std::vector<double> cores_busy(const std::vector<Sample>& s) {
  return collect(s, [](const Sample& x) {
    const double wall_seconds = x.iterations / (x.counter("wall_Mops") * 1e6);
    return wall_seconds > 0 ? x.cpu_seconds / wall_seconds : NAN;
  });
}

/// Operations per CPU second of all threads: the cost of an operation
/// whatever the cores the machine gave, contention (spinning, cache-line
/// transfers) included.
std::vector<double> cpu_mops(const std::vector<Sample>& s) {
  return collect(s, [](const Sample& x) {
    return x.cpu_seconds > 0 ? x.iterations / x.cpu_seconds / 1e6 : NAN;
  });
}

/// A subject's column in the summaries on threads.
struct MtColumn {
  std::string name;
  std::string short_name;
};

std::vector<MtColumn> mt_columns() {
  std::vector<MtColumn> c;
  for_each_mt_subject([&]<class S>() { c.push_back({S::kName, S::kShortName}); });
  return c;
}

void print_mt_summary(const SummaryReporter& rep) {
  const std::vector<MtColumn> cols = mt_columns();
  const auto key = [](MtOp op, const std::string& subject, int threads) {
    return with_threads(mt_name(op, subject.c_str()), threads);
  };
  bool any = false;
  for (const MtOp op : kMtOps) {
    for (const int t : kMtThreadCounts) {
      for (const MtColumn& c : cols) any = any || !rep.samples(key(op, c.name, t)).empty();
    }
  }
  if (!any) return;
  std::printf("\n== Summary: W1 on threads (%" PRIu64
              " entries, one subject shared by all threads; %u hardware threads)\n",
              kW1Entries, std::thread::hardware_concurrency());
  std::printf("   Mops/s: all threads' operations / wall time from start to stop barrier,\n"
              "   median of the interleaved repetitions (+-: half the interquartile range)\n");
  std::printf("%-6s %7s", "op", "threads");
  for (const MtColumn& c : cols) std::printf(" %16s", (c.short_name + " Mops/s").c_str());
  for (std::size_t i = 1; i < cols.size(); ++i) {
    std::printf(" %16s", ("offheap/" + cols[i].short_name).c_str());
  }
  std::printf(" %10s %6s %5s\n", "allocs/op", "wrong", "reps");
  std::printf("%-6s %7s", "", "");
  for (std::size_t i = 0; i < 2 * cols.size() - 1; ++i) std::printf(" %16s", "");
  std::printf(" %10s %6s %5s\n", "offheap", "", "");

  // medians per (op, subject, threads), for the ratio tables below: Mops/s,
  // cores busy, Mops per CPU second
  std::map<std::string, double> med, cores, per_cpu;
  for (const MtOp op : kMtOps) {
    for (const int t : kMtThreadCounts) {
      std::vector<std::vector<Sample>> samples;
      std::size_t reps = 0;
      for (const MtColumn& c : cols) {
        samples.push_back(rep.samples(key(op, c.name, t)));
        reps = std::max(reps, samples.back().size());
        if (samples.back().empty()) continue;
        med[key(op, c.name, t)] = median(wall_mops(samples.back()));
        cores[key(op, c.name, t)] = median(cores_busy(samples.back()));
        per_cpu[key(op, c.name, t)] = median(cpu_mops(samples.back()));
      }
      if (reps == 0) continue;
      std::printf("%-6s %7d", op_name(op), t);
      for (const auto& s : samples) std::printf(" %16s", median_cell(wall_mops(s)).c_str());
      const double ours = samples[0].empty() ? NAN : median(wall_mops(samples[0]));
      for (std::size_t i = 1; i < cols.size(); ++i) {
        const double theirs = samples[i].empty() ? NAN : median(wall_mops(samples[i]));
        std::printf(" %16s", ratio_cell(ours / theirs).c_str());
      }
      double wrong = 0;
      for (const auto& s : samples) {
        for (const Sample& x : s) wrong += x.counter("wrong", 0.0);
      }
      const std::vector<double> allocs =
          collect(samples[0], [](const Sample& x) { return x.counter("allocs/op"); });
      char ac[32] = "-";
      if (!allocs.empty()) std::snprintf(ac, sizeof ac, "%.3f", median(allocs));
      std::printf(" %10s %6.0f %5zu\n", ac, wrong, reps);
    }
  }
  if (cols.size() == 1) {
    std::printf("   (no concurrent peer found: Debian libcuckoo-dev and libtbb-dev add them)\n");
  }

  const auto in = [&](const std::map<std::string, double>& m, MtOp op,
                      const std::string& subject, int threads) {
    const auto it = m.find(key(op, subject, threads));
    return it == m.end() ? NAN : it->second;
  };
  const auto at = [&](MtOp op, const std::string& subject, int threads) {
    return in(med, op, subject, threads);
  };
  std::printf("\n   scaling: median Mops/s on N threads / median on 1 thread%s;\n"
              "   cores busy: the threads' CPU time / wall time (what the run got of a shared\n"
              "   machine); per CPU-s: Mops per CPU second of all threads, N threads / 1 thread\n"
              "   (the cost of an operation under contention, whatever the cores given)\n",
              std::thread::hardware_concurrency() < 4 ? " (4 threads oversubscribe the cores)"
                                                      : "");
  std::printf("%-6s %-26s %8s %8s %6s %6s %6s %10s %10s\n", "op", "subject", "2T/1T", "4T/1T",
              "cores", "cores", "cores", "per CPU-s", "per CPU-s");
  std::printf("%-6s %-26s %8s %8s %6s %6s %6s %10s %10s\n", "", "", "", "", "1T", "2T", "4T",
              "2T/1T", "4T/1T");
  for (const MtOp op : kMtOps) {
    for (const MtColumn& c : cols) {
      const double one = at(op, c.name, 1);
      if (std::isnan(one)) continue;
      const double cpu_one = in(per_cpu, op, c.name, 1);
      std::printf("%-6s %-26s %8s %8s %6.2f %6.2f %6.2f %10s %10s\n", op_name(op),
                  c.name.c_str(), ratio_cell(at(op, c.name, 2) / one).c_str(),
                  ratio_cell(at(op, c.name, 4) / one).c_str(), in(cores, op, c.name, 1),
                  in(cores, op, c.name, 2), in(cores, op, c.name, 4),
                  ratio_cell(in(per_cpu, op, c.name, 2) / cpu_one).c_str(),
                  ratio_cell(in(per_cpu, op, c.name, 4) / cpu_one).c_str());
    }
  }
  if (cols.size() > 1) {
    std::printf("\n   offheap::Store / peer at 2 threads (ratio of medians; > 1: offheap "
                "faster)\n");
    std::printf("%-26s %8s %8s %8s\n", "peer", "get", "put", "mixed");
    for (std::size_t i = 1; i < cols.size(); ++i) {
      std::printf("%-26s", cols[i].name.c_str());
      for (const MtOp op : kMtOps) {
        std::printf(" %8s", ratio_cell(at(op, cols[0].name, 2) / at(op, cols[i].name, 2)).c_str());
      }
      std::printf("\n");
    }
  }
}

void print_fence_summary(const SummaryReporter& rep) {
  const std::vector<Fence> fences = fences_measured();
  bool any = false;
  for (const Fence f : fences) {
    any = any || !rep.samples(fence_guard_name(f)).empty();
    for (const int t : kFenceThreadCounts) {
      any = any || !rep.samples(with_threads(fence_get_name(f), t)).empty();
    }
  }
  if (!any) return;
  std::printf("\n== Summary: epoch fence (detail::EpochDomain::set_mode), offheap::Store W1 "
              "get and a bare EpochGuard\n"
              "   get: Mops/s from wall time as above; guard: ns per guard from thread CPU time;\n"
              "   median (+-: half the interquartile range). speed-up > 1: asymmetric is faster;\n"
              "   faster: the mode whose interquartile range lies wholly on the better side\n");
  std::printf("%-22s %18s %18s %10s %-11s %5s\n", "", "symmetric", "asymmetric", "speed-up",
              "faster", "reps");
  const auto row = [&](const char* label, const std::string& sym_name,
                       const std::string& asym_name, bool guard) {
    const std::vector<Sample> sym = rep.samples(sym_name);
    const std::vector<Sample> asym =
        fences.size() > 1 ? rep.samples(asym_name) : std::vector<Sample>{};
    if (sym.empty() && asym.empty()) return;
    const auto figure = [guard](const std::vector<Sample>& s) {
      return guard ? collect(s, [](const Sample& x) { return 1e9 / x.items_per_second; })
                   : wall_mops(s);
    };
    const std::vector<double> fs = figure(sym), fa = figure(asym);
    double speedup = NAN;
    const char* faster = "-";
    if (!fs.empty() && !fa.empty()) {
      speedup = guard ? median(fs) / median(fa) : median(fa) / median(fs);
      // Better is lower for ns, higher for Mops/s: compare the quartiles.
      const auto better = [guard](const std::vector<double>& a, const std::vector<double>& b) {
        return guard ? quantile(a, 0.75) < quantile(b, 0.25)
                     : quantile(a, 0.25) > quantile(b, 0.75);
      };
      faster = better(fa, fs) ? "asymmetric" : better(fs, fa) ? "symmetric" : "noise";
    }
    std::printf("%-22s %18s %18s %10s %-11s %5zu\n", label, median_cell(fs).c_str(),
                median_cell(fa).c_str(), ratio_cell(speedup).c_str(), faster,
                std::max(sym.size(), asym.size()));
  };
  for (const int t : kFenceThreadCounts) {
    const std::string label =
        "get, " + std::to_string(t) + (t == 1 ? " thread, Mops/s" : " threads, Mops/s");
    row(label.c_str(), with_threads(fence_get_name(Fence::symmetric), t),
        with_threads(fence_get_name(Fence::asymmetric), t), false);
  }
  row("EpochGuard, ns", fence_guard_name(Fence::symmetric), fence_guard_name(Fence::asymmetric),
      true);
  const bool asym = offheap::detail::EpochDomain::instance().asymmetric_available();
  std::printf("   membarrier(PRIVATE_EXPEDITED) %s; mode after the runs (the default): %s\n",
              asym ? "available" : "NOT available: asymmetric not measured",
              offheap::detail::EpochDomain::instance().mode() ==
                      offheap::detail::FenceMode::asymmetric
                  ? "asymmetric"
                  : "symmetric");
}

void print_scale_summary(const SummaryReporter& rep) {
  std::printf("\n== Summary: scale (NoHeapDB shape): %" PRIu64
              " keys, 8-byte values, 1 thread\n"
              "   Mops/s: median of the interleaved passes, from thread CPU time\n",
              g_settings.scale_keys);
  std::printf("%-8s %-20s %15s %12s %13s %10s %10s %8s %7s\n", "keys", "op", "offheap Mops/s",
              "absl Mops/s", "offheap/absl", "allocs/op", "allocs/op", "wrong", "passes");
  std::printf("%-8s %-20s %15s %12s %13s %10s %10s %8s %7s\n", "", "", "", "", "", "offheap",
              "absl", "values", "");
  for (const Shape shape : kShapes) {
    for (const ScaleOp op : kScaleOps) {
      const std::vector<Sample> o = rep.samples(scale_name(op, shape, StoreSubject::kName));
      std::vector<Sample> a;
#if defined(OFFHEAP_BENCH_HAVE_ABSL)
      a = rep.samples(scale_name(op, shape, AbslSubject::kName));
#endif
      if (o.empty() && a.empty()) continue;
      const auto rate = [](const std::vector<Sample>& s) {
        return median(collect(s, [](const Sample& x) { return x.items_per_second / 1e6; }));
      };
      const auto fig = [](const std::vector<Sample>& s, const char* name) {
        return median(collect(s, [&](const Sample& x) { return x.counter(name); }));
      };
      char oc[32] = "-", ac[32] = "-", ratio[32] = "-", oa[32] = "-", aa[32] = "-", w[32] = "-";
      if (!o.empty()) {
        std::snprintf(oc, sizeof oc, "%.2f", rate(o));
        std::snprintf(oa, sizeof oa, "%.3f", fig(o, "allocs/op"));
      }
      if (!a.empty()) {
        std::snprintf(ac, sizeof ac, "%.2f", rate(a));
        std::snprintf(aa, sizeof aa, "%.3f", fig(a, "allocs/op"));
      }
      if (!o.empty() && !a.empty()) std::snprintf(ratio, sizeof ratio, "%.2f", rate(o) / rate(a));
      if (op == ScaleOp::get) {
        double wrong = 0;
        for (const Sample& x : o) wrong += x.counter("wrong", 0.0);
        for (const Sample& x : a) wrong += x.counter("wrong", 0.0);
        std::snprintf(w, sizeof w, "%.0f", wrong);
      }
      const char* label = op == ScaleOp::put_fresh      ? "put (fresh)"
                          : op == ScaleOp::put_presized ? "put (presized)"
                                                        : "get (random order)";
      std::printf("%-8s %-20s %15s %12s %13s %10s %10s %8s %7zu\n", shape_name(shape), label, oc,
                  ac, ratio, oa, aa, w, std::max(o.size(), a.size()));
    }
  }
  std::printf("\n%-34s %-8s %12s %16s %12s\n", "memory per entry (scale, fresh)", "keys",
              "bytes/entry", "overhead/entry", "heap/entry");
  for_each_subject([&]<class S>() {
    for (const Shape shape : kShapes) {
      const std::vector<Sample> s = rep.samples(scale_name(ScaleOp::put_fresh, shape, S::kName));
      if (s.empty()) continue;
      const std::string label =
          std::string(S::kName) + (std::is_same_v<S, StoreSubject> ? " (mapped)" : " (heap)");
      std::printf("%-34s %-8s %12.1f %16.1f %12.1f\n", label.c_str(), shape_name(shape),
                  s[0].counter("bytes/entry"), s[0].counter("overhead/entry"),
                  s[0].counter("heap/entry"));
    }
  }, g_settings.scale_absl);
}

/// Runs what is registered now if the filter selects any of `names`.
/// Returns whether it ran any.
bool run_phase(SummaryReporter& reporter, const std::vector<std::string>& names) {
  const bool selected = filter_selects(names);
  if (selected) benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::ClearRegisteredBenchmarks();
  return selected;
}

int run(int argc, char** argv) {
  std::vector<char*> user(argv + 1, argv + argc);
  if (!parse_own_flags(user)) return 2;

  // Defaults first: a flag the user repeats later wins.
  std::vector<char*> args{argv[0]};
  for (const char* f : kDefaultFlags) args.push_back(const_cast<char*>(f));
  args.insert(args.end(), user.begin(), user.end());
  cap_mt_runs(args);
  // Before any store exists: the mode a process starts in, restored after the
  // fence runs.
  g_default_fence = offheap::detail::EpochDomain::instance().mode();
  print_platform();
  int n = static_cast<int>(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 2;

  SummaryReporter reporter;

  std::vector<std::string> names;
  for_each_subject([&]<class S>() {
    register_w1<S>();
    for (const char* op : kW1Ops) names.push_back(w1_name(op, S::kName));
  });
  const bool ran_w1 = run_phase(reporter, names);

  names.clear();
  const MtRuns runs{g_settings.mt_reps, g_settings.mt_min_time};
  for_each_mt_subject([&]<class S>() {
    register_mt<S>(runs);
    for (const MtOp op : kMtOps) {
      for (const int t : kMtThreadCounts) names.push_back(with_threads(mt_name(op, S::kName), t));
    }
  });
  for (const Fence f : fences_measured()) {
    if (f == Fence::symmetric) {
      register_fence<Fence::symmetric>(runs);
    } else {
      register_fence<Fence::asymmetric>(runs);
    }
    for (const int t : kFenceThreadCounts) names.push_back(with_threads(fence_get_name(f), t));
    names.push_back(fence_guard_name(f));
  }
  const bool ran_mt = run_phase(reporter, names);
  apply_fence(Fence::process_default);

  names.clear();
  for_each_subject([&]<class S>() {
    register_scale<S>();
    for (const Shape shape : kShapes) {
      for (const ScaleOp op : kScaleOps) names.push_back(scale_name(op, shape, S::kName));
    }
  }, g_settings.scale_absl);
  const bool ran_scale = run_phase(reporter, names);
  filled() = {};

  if (!ran_w1 && !ran_mt && !ran_scale) {
    std::fprintf(stderr, "offheap_bench: --benchmark_filter=%s selects no benchmark\n",
                 benchmark::GetBenchmarkFilter().c_str());
    return 2;
  }
  print_platform();
  if (ran_w1) print_w1_summary(reporter);
  if (ran_mt) {
    print_mt_summary(reporter);
    print_fence_summary(reporter);
  }
  if (ran_scale) print_scale_summary(reporter);
  benchmark::Shutdown();

  if (!reporter.errors().empty() || g_wrong_values != 0) {
    std::printf("\nFAILED:\n");
    for (const std::string& e : reporter.errors()) std::printf("  %s\n", e.c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace offheap_bench

int main(int argc, char** argv) { return offheap_bench::run(argc, argv); }
