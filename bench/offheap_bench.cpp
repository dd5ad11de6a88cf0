// SPDX-License-Identifier: Apache-2.0
// offheap_bench: offheap::Store side by side with every peer that CMake
// found, each used as a user who chose it would use it (subjects.hpp,
// concurrent_peers.hpp, file_peers.hpp): absl::flat_hash_map, libcuckoo,
// tbb::concurrent_hash_map, LMDB, RocksDB and Tkrzw's HashDBM (the last three
// with files on tmpfs and no syncs). One binary, three phases:
//
//   W1, the "RED OHC" shape: 16-byte keys, 64-byte values, 24,000 entries,
//   every subject pre-sized for them, one thread; get (copy into a reused
//   std::string), put (overwrite of an existing key) and mixed (90% get /
//   10% put). Keys are drawn uniformly at random from a stream precomputed
//   before timing. Many short repetitions, randomly interleaved across
//   subjects, so that all see the same swings of a shared, noisy machine;
//   the summary quotes medians and ratios of medians. Wall-clock time: a
//   subject's background threads (RocksDB's flushes, offheap's maintenance)
//   work on the time they take from it.
//
//   W1 on threads: the same three operations on one subject shared by 1, 2
//   and 4 threads (every thread-safe subject), built fresh and filled for
//   each run before its threads start; thread t of T walks positions t,
//   t + T, t + 2T, ... of the same streams. Timed in wall-clock time: all
//   threads' operations over the time between the start and the stop
//   barrier; beside it, the cores the run kept busy (its threads' CPU time /
//   wall time: how much of a shared machine it got) and operations per CPU
//   second (what an operation costs under contention, spinning included).
//   Fewer, equally short repetitions (--mt_reps, --mt_min_time).
//
//   Scale, the NoHeapDB shape: N keys (default 10,000,000; --scale_keys=N),
//   short decimal keys ("1234567") and 36-character UUID keys, 8-byte
//   values, one thread. One pass of a subject and key shape: all N keys into
//   a fresh subject (not pre-sized), then all N into one pre-sized for N, then
//   all N read back in random order from that pre-sized one (every value
//   checked): three passes, each timed on its own (wall clock). The same
//   table layout for every subject's reads: all filled the same way, all
//   pre-sized. Repeated a few times (--scale_reps, default 3), interleaved
//   with the other subjects; the summary quotes medians.
//
// Also reported: heap allocations per operation over the timed loop (the
// binary counts every malloc and operator new, alloc_counter.hpp; per thread
// on threads) and memory per entry, measured for every subject the same way
// from the process's resident memory plus its files (memory.hpp). Gets check
// that every value read is one whole value that was written (W1: every 8th,
// for every subject alike; scale: every one); a wrong value fails the run.
//
// The trade-off: the W1 working set is a few megabytes; W1 measures the
// per-operation path (hash, index probe, record copy) and how it shares a
// small machine between threads, not large-scale scaling: on 2 hardware
// threads, 4 threads oversubscribe the cores. The scale phase is where
// memory misses and memory per entry show.
#include "concurrent_peers.hpp"
#include "file_peers.hpp"
#include "memory.hpp"
#include "platform.hpp"
#include "scratch_dir.hpp"
#include "subjects.hpp"
#include "summary.hpp"
#include "w1.hpp"
#include "workload.hpp"

#include <offheap/offheap.hpp>

#include <benchmark/benchmark.h>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

// Last: its definitions of malloc and friends must follow every declaration
// of them (clang's <mm_malloc.h> redeclares posix_memalign without noexcept).
#include "alloc_counter.hpp"

namespace offheap_bench {
namespace {

// ---- settings ------------------------------------------------------------------

// The W1 shape, its inputs and value check: w1.hpp; the default flags:
// summary.hpp.

// W1 on threads: at most this many repetitions of this many seconds each,
// and never more than the --benchmark_repetitions and --benchmark_min_time
// in force (so a quick run with few short repetitions stays quick).
constexpr int kMtRepsDefault = 9;
constexpr double kMtMinTimeDefault = 0.05;
constexpr int kMtThreadCounts[] = {1, 2, 4};

constexpr std::uint64_t kScaleKeysDefault = 10'000'000;
// The targets are stated for this many keys.
constexpr std::uint64_t kScaleTargetKeys = 10'000'000;

struct Settings {
  std::uint64_t scale_keys = kScaleKeysDefault;
  int scale_reps = 3;
  int mt_reps = kMtRepsDefault;
  double mt_min_time = kMtMinTimeDefault;
  bool mt_reps_given = false;  // --mt_reps / --mt_min_time: taken as given, no cap
  bool mt_min_time_given = false;
  std::uint64_t w1_reps = 0;  // the --benchmark_repetitions and _min_time in force
  double w1_min_time = 0;
};
Settings g_settings;
std::uint64_t g_wrong_values = 0;  // scale reads that returned a wrong value or none

// ---- subjects -------------------------------------------------------------------

/// Every subject compiled in, in the order of the tables.
template <class Fn>
void for_each_subject(Fn&& fn) {
  fn.template operator()<StoreSubject>();
#if defined(OFFHEAP_BENCH_HAVE_ABSL)
  fn.template operator()<AbslSubject>();
#endif
#if defined(OFFHEAP_BENCH_HAVE_BOOST)
  fn.template operator()<BoostSubject>();
#endif
#if defined(OFFHEAP_BENCH_HAVE_CUCKOO)
  fn.template operator()<CuckooSubject>();
#endif
#if defined(OFFHEAP_BENCH_HAVE_TBB)
  fn.template operator()<TbbSubject>();
#endif
#if defined(OFFHEAP_BENCH_HAVE_LMDB)
  fn.template operator()<LmdbSubject>();
#endif
#if defined(OFFHEAP_BENCH_HAVE_ROCKSDB)
  fn.template operator()<RocksSubject>();
#endif
#if defined(OFFHEAP_BENCH_HAVE_TKRZW)
  fn.template operator()<TkrzwSubject>();
#endif
}

/// The subjects several threads may share.
template <class Fn>
void for_each_mt_subject(Fn&& fn) {
  for_each_subject([&]<class S>() {
    if constexpr (S::kThreadSafe) fn.template operator()<S>();
  });
}

/// A subject's row in the summaries.
struct Column {
  std::string name;
  bool thread_safe = false;
};

std::vector<Column> columns() {
  std::vector<Column> c;
  for_each_subject([&]<class S>() { c.push_back({S::kName, S::kThreadSafe}); });
  return c;
}

/// The peers CMake did not find, for the platform lines.
std::string missing_peers() {
  std::string m = missing_map_peers();
  const auto add = [&m](const char* what) { note_missing(m, what); };
#if !defined(OFFHEAP_BENCH_HAVE_LMDB)
  add("LMDB (liblmdb-dev)");
#endif
#if !defined(OFFHEAP_BENCH_HAVE_ROCKSDB)
  add("RocksDB (librocksdb-dev)");
#endif
#if !defined(OFFHEAP_BENCH_HAVE_TKRZW)
  add("Tkrzw (libtkrzw-dev)");
#endif
  (void)add;
  return m;
}

// ---- W1 -------------------------------------------------------------------------

/// Puts the W1 entries into a fresh subject (untimed), then settles it.
template <class S>
void fill_w1(S& subject, typename S::Session& session) {
  const W1Inputs& in = w1_inputs();
  for (std::uint64_t i = 0; i < kW1Entries; ++i) {
    subject.put(session, in.keys.key(i), in.values[i % kW1ValueVariants]);
  }
  subject.settle();
}

/// One subject filled with the W1 entries, built on first use (untimed) and
/// shared by all its W1 runs on one thread; `cursor` continues the key
/// stream across runs. Freed when the phase ends (release_w1_fixtures).
template <class S>
struct W1Fixture {
  std::unique_ptr<S> subject;
  std::unique_ptr<typename S::Session> session;  // declared after: goes first
  Footprint footprint;
  std::uint64_t cursor = 0;

  W1Fixture() {
    const FootprintProbe probe(heap_bytes_in_use());
    subject = std::make_unique<S>(kW1Entries);
    session = std::make_unique<typename S::Session>(*subject);
    fill_w1(*subject, *session);
    footprint = probe.finish(subject->files(), kW1Entries,
                             kW1Entries * (kW1KeyBytes + kW1ValueBytes), heap_bytes_in_use());
    // A first get outside any timed loop: per-thread setup is not a
    // per-operation cost.
    std::string out;
    subject->get(*session, w1_inputs().keys.key(0), out);
  }
};

std::vector<void (*)()>& w1_releasers() {
  static std::vector<void (*)()> r;
  return r;
}

template <class S>
std::unique_ptr<W1Fixture<S>>& w1_slot() {
  static std::unique_ptr<W1Fixture<S>> fixture;
  return fixture;
}

template <class S>
W1Fixture<S>& w1_fixture() {
  std::unique_ptr<W1Fixture<S>>& slot = w1_slot<S>();
  if (!slot) {
    slot = std::make_unique<W1Fixture<S>>();
    w1_releasers().push_back([] { w1_slot<S>().reset(); });
  }
  return *slot;
}

void release_w1_fixtures() {
  for (const auto release : w1_releasers()) release();
  w1_releasers().clear();
}

void set_footprint_counters(benchmark::State& state, const Footprint& f, const char* suffix = "") {
  const std::string s(suffix);
  state.counters["bytes/entry" + s] = f.bytes;
  state.counters["beyond/entry" + s] = f.beyond;
  state.counters["anon/entry" + s] = f.anon;
  state.counters["files/entry" + s] = f.files;
  state.counters["heap/entry" + s] = f.heap;
}

template <class S>
void finish_w1(benchmark::State& state, W1Fixture<S>& fx, std::uint64_t pos,
               std::uint64_t allocs, std::uint64_t wrong) {
  fx.cursor = pos;
  const auto iterations = static_cast<std::int64_t>(state.iterations());
  state.SetItemsProcessed(iterations);
  state.counters["allocs/op"] =
      static_cast<double>(allocs) / static_cast<double>(iterations > 0 ? iterations : 1);
  state.counters["wrong"] = static_cast<double>(wrong);
  set_footprint_counters(state, fx.footprint);
  if (wrong != 0) {
    state.SkipWithError(("a get missed a present key or read a wrong value (" +
                         std::to_string(wrong) + " times)").c_str());
  }
}

template <class S>
void BM_W1_Get(benchmark::State& state) {
  const W1Inputs& in = w1_inputs();
  const WholeValueCheck& check = whole_value_check();
  W1Fixture<S>& fx = w1_fixture<S>();
  S& subject = *fx.subject;
  std::string out(kW1ValueBytes, '\0');
  std::uint64_t pos = fx.cursor, wrong = 0;
  const std::uint64_t allocs_before = allocation_count();
  for (auto _ : state) {
    const std::uint64_t p = pos++;
    wrong += w1_wrong(subject.get(*fx.session, in.keys.key(in.uniform.at(p)), out), p, out, check);
  }
  finish_w1(state, fx, pos, allocation_count() - allocs_before, wrong);
}

template <class S>
void BM_W1_Put(benchmark::State& state) {
  const W1Inputs& in = w1_inputs();
  W1Fixture<S>& fx = w1_fixture<S>();
  S& subject = *fx.subject;
  std::uint64_t pos = fx.cursor;
  const std::uint64_t allocs_before = allocation_count();
  for (auto _ : state) {
    const std::uint64_t p = pos++;
    subject.put(*fx.session, in.keys.key(in.uniform.at(p)), in.values[p % kW1ValueVariants]);
  }
  finish_w1(state, fx, pos, allocation_count() - allocs_before, 0);
}

template <class S>
void BM_W1_Mixed(benchmark::State& state) {
  const W1Inputs& in = w1_inputs();
  const WholeValueCheck& check = whole_value_check();
  W1Fixture<S>& fx = w1_fixture<S>();
  S& subject = *fx.subject;
  std::string out(kW1ValueBytes, '\0');
  std::uint64_t pos = fx.cursor, wrong = 0;
  const std::uint64_t allocs_before = allocation_count();
  for (auto _ : state) {
    const std::uint64_t p = pos++;
    const std::uint32_t e = in.mixed.at(p);
    const std::string_view key = in.keys.key(e & ~IndexStream::kPutBit);
    if (e & IndexStream::kPutBit) {
      subject.put(*fx.session, key, in.values[p % kW1ValueVariants]);
    } else {
      wrong += w1_wrong(subject.get(*fx.session, key, out), p, out, check);
    }
  }
  finish_w1(state, fx, pos, allocation_count() - allocs_before, wrong);
}

enum class Op { get, put, mixed };
constexpr Op kOps[] = {Op::get, Op::put, Op::mixed};
const char* op_name(Op op) {
  return op == Op::get ? "Get" : op == Op::put ? "Put" : "Mixed";
}
/// The op's name in the summaries (the "90/10" for mixed).
const char* op_label(Op op) { return op == Op::get ? "get" : op == Op::put ? "put" : "90/10"; }

std::string w1_name(Op op, const std::string& subject) {
  return std::string("BM_W1_") + op_name(op) + "<" + subject + ">";
}

template <class S>
void register_w1() {
  const auto reg = [](Op op, void (*fn)(benchmark::State&)) {
    benchmark::RegisterBenchmark(w1_name(op, S::kName).c_str(), fn)->UseRealTime();
  };
  reg(Op::get, BM_W1_Get<S>);
  reg(Op::put, BM_W1_Put<S>);
  reg(Op::mixed, BM_W1_Mixed<S>);
}

// ---- W1 on threads ----------------------------------------------------------------
//
// One subject shared by all threads of a run; each thread keeps its own
// session (LMDB's read transaction, RocksDB's PinnableSlice). Keys come from
// the flat W1 key buffer, as on one thread, and go to the subject as views.

/// The subject of the run in progress; one run at a time.
template <class S>
std::unique_ptr<S>& shared_subject() {
  static std::unique_ptr<S> subject;
  return subject;
}

/// Setup of a run on threads: a fresh subject, pre-sized, filled with the W1
/// entries (untimed, on the main thread, before the run's threads start).
template <class S>
void mt_setup(const benchmark::State&) {
  whole_value_check();
  std::unique_ptr<S>& subject = shared_subject<S>();
  subject.reset();
  subject = std::make_unique<S>(kW1Entries);
  typename S::Session session(*subject);
  fill_w1(*subject, session);
}

template <class S>
void mt_teardown(const benchmark::State&) {
  shared_subject<S>().reset();
}

/// One thread's share of a W1 run on the shared subject. Thread t of T takes
/// stream positions t, t + T, t + 2T, ...: the threads' slices interleave
/// and never overlap. Thread 0 also times the whole run on the wall clock:
/// Google Benchmark releases all threads together from a start barrier and
/// leaves the loop only past a stop barrier that waits for the last thread,
/// so thread 0's span covers every thread's operations ("wall_Mops").
/// Google Benchmark's own items_per_second divides by the threads' average
/// loop time instead, which flatters a run whose threads finish unevenly.
template <class S, Op O>
void BM_W1MT(benchmark::State& state) {
  const W1Inputs& in = w1_inputs();
  const KeySet& keys = in.keys;
  const WholeValueCheck& check = whole_value_check();
  const IndexStream& stream = O == Op::mixed ? in.mixed : in.uniform;
  S& subject = *shared_subject<S>();
  typename S::Session session(subject);
  const auto step = static_cast<std::uint64_t>(state.threads());
  auto pos = static_cast<std::uint64_t>(state.thread_index());
  std::string out(kW1ValueBytes, '\0');
  // Untimed: a thread's first read (offheap takes a thread number then).
  subject.get(session, keys.key(0), out);
  std::uint64_t wrong = 0, gets = 0;
  const auto get = [&](std::string_view key) {
    const bool hit = subject.get(session, key, out);
    wrong += w1_wrong(hit, gets++, out, check);
  };
  const std::uint64_t allocs_before = thread_allocation_count();

  auto it = state.begin();  // the start barrier, then the timers start
  const auto start = std::chrono::steady_clock::now();
  for (const auto end = state.end(); it != end; ++it) {
    const std::uint64_t p = pos;
    pos += step;
    if constexpr (O == Op::get) {
      get(keys.key(stream.at(p)));
    } else if constexpr (O == Op::put) {
      subject.put(session, keys.key(stream.at(p)), in.values[p % kW1ValueVariants]);
    } else {
      const std::uint32_t e = stream.at(p);
      const std::string_view key = keys.key(e & ~IndexStream::kPutBit);
      if (e & IndexStream::kPutBit) {
        subject.put(session, key, in.values[p % kW1ValueVariants]);
      } else {
        get(key);
      }
    }
  }
  const auto stop = std::chrono::steady_clock::now();  // past the stop barrier

  set_thread_counters(state, static_cast<double>(thread_allocation_count() - allocs_before),
                      std::chrono::duration<double>(stop - start).count());
  state.counters["wrong"] = static_cast<double>(wrong);  // summed over the threads
  if (wrong != 0) {
    state.SkipWithError((std::to_string(wrong) +
                         " gets missed a present key or read a torn value").c_str());
  }
}

std::string mt_name(Op op, const std::string& subject) {
  return std::string("BM_W1MT_") + op_name(op) + "<" + subject + ">";
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

template <class S, Op O>
void register_mt_op(const MtRuns& runs) {
  benchmark::internal::Benchmark* b =
      benchmark::RegisterBenchmark(mt_name(O, S::kName).c_str(), BM_W1MT<S, O>);
  // Wall-clock time (what matters is the threads' joint throughput).
  b->Setup(mt_setup<S>)->Teardown(mt_teardown<S>);
  b->UseRealTime()->Repetitions(runs.reps)->MinTime(runs.min_time);
  for (const int n : kMtThreadCounts) b->Threads(n);
}

template <class S>
void register_mt(const MtRuns& runs) {
  register_mt_op<S, Op::get>(runs);
  register_mt_op<S, Op::put>(runs);
  register_mt_op<S, Op::mixed>(runs);
}

// ---- scale ----------------------------------------------------------------------

enum class Shape { decimal, uuid };
constexpr Shape kShapes[] = {Shape::decimal, Shape::uuid};
const char* shape_name(Shape s) { return s == Shape::decimal ? "decimal" : "uuid"; }
const char* shape_label(Shape s) {
  return s == Shape::decimal ? "decimal keys" : "36-char UUID keys";
}

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

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// One timed pass: its seconds and the allocations it made.
struct Pass {
  double seconds = 0;
  std::uint64_t allocs = 0;
};

/// Puts all of `keys` (value: the key's index), timed.
template <class S>
Pass fill_scale(S& subject, typename S::Session& session, const KeySet& keys) {
  char buf[8];
  const std::uint64_t allocs_before = allocation_count();
  const auto t0 = std::chrono::steady_clock::now();
  for (std::uint64_t i = 0; i < keys.size(); ++i) {
    subject.put(session, keys.key(i), scale_value(i, buf));
  }
  return {seconds_since(t0), allocation_count() - allocs_before};
}

/// Reads every key back in the random order, timed; counts wrong values.
template <class S>
Pass read_scale(S& subject, typename S::Session& session, const KeySet& keys,
                std::uint64_t& wrong) {
  const std::vector<std::uint32_t>& order = scale_read_order();
  std::string out(8, '\0');
  const std::uint64_t allocs_before = allocation_count();
  const auto t0 = std::chrono::steady_clock::now();
  for (const std::uint32_t i : order) {
    const std::uint64_t expected = i;
    wrong += !subject.get(session, keys.key(i), out) || out.size() != 8 ||
             std::memcmp(out.data(), &expected, 8) != 0;
  }
  return {seconds_since(t0), allocation_count() - allocs_before};
}

/// The same reads in slices of 64 keys through the subject's batch lookup
/// (offheap's get_all), where it has one; timed; counts wrong values.
template <class S>
Pass read_scale_batched(const S& subject, const KeySet& keys, std::uint64_t& wrong) {
  const std::vector<std::uint32_t>& order = scale_read_order();
  std::array<std::string_view, 64> batch;
  std::array<std::optional<std::string>, 64> values;
  for (auto& v : values) v.emplace(8, '\0');  // (no allocation in the loop)
  const std::uint64_t allocs_before = allocation_count();
  const auto t0 = std::chrono::steady_clock::now();
  for (std::size_t base = 0; base < order.size(); base += batch.size()) {
    const std::size_t n = std::min(batch.size(), order.size() - base);
    for (std::size_t j = 0; j < n; ++j) batch[j] = keys.key(order[base + j]);
    subject.get_batch(std::span(batch.data(), n), std::span(values.data(), n));
    for (std::size_t j = 0; j < n; ++j) {
      const std::uint64_t expected = order[base + j];
      std::optional<std::string>& v = values[j];
      wrong += !v || v->size() != 8 || std::memcmp(v->data(), &expected, 8) != 0;
      if (!v) v.emplace(8, '\0');
    }
  }
  return {seconds_since(t0), allocation_count() - allocs_before};
}

/// One repetition: fresh fill, pre-sized fill, random-order reads of the
/// pre-sized subject (see the top of this file); offheap also reads them
/// in batches (get_all), reported apart. One subject lives at a time.
template <class S>
void BM_Scale(benchmark::State& state, Shape shape) {
  const KeySet& keys = scale_keys(shape);
  scale_read_order();
  const std::uint64_t n = keys.size();
  const std::uint64_t kv_bytes = keys.key_bytes() + 8 * n;
  Pass fresh, presized, read, batched;
  Footprint fresh_fp, presized_fp;
  std::uint64_t wrong = 0;
  for (auto _ : state) {
    {
      const FootprintProbe probe(heap_bytes_in_use());
      S subject(0);
      typename S::Session session(subject);
      fresh = fill_scale(subject, session, keys);
      subject.settle();
      fresh_fp = probe.finish(subject.files(), n, kv_bytes, heap_bytes_in_use());
    }
    {
      const FootprintProbe probe(heap_bytes_in_use());
      S subject(n);
      typename S::Session session(subject);
      presized = fill_scale(subject, session, keys);
      subject.settle();
      presized_fp = probe.finish(subject.files(), n, kv_bytes, heap_bytes_in_use());
      read = read_scale(subject, session, keys, wrong);
      if constexpr (requires { subject.get_batch({}, {}); }) batched = read_scale_batched(subject, keys, wrong);
    }
    state.SetIterationTime(fresh.seconds + presized.seconds + read.seconds);
  }
  const auto ops = static_cast<double>(n);
  state.counters["write_fresh_Mops"] = ops / fresh.seconds / 1e6;
  state.counters["write_presized_Mops"] = ops / presized.seconds / 1e6;
  state.counters["read_Mops"] = ops / read.seconds / 1e6;
  state.counters["allocs/op_write_fresh"] = static_cast<double>(fresh.allocs) / ops;
  state.counters["allocs/op_write"] = static_cast<double>(presized.allocs) / ops;
  state.counters["allocs/op_read"] = static_cast<double>(read.allocs) / ops;
  if (batched.seconds != 0) {
    state.counters["read_batch64_Mops"] = ops / batched.seconds / 1e6;
    state.counters["allocs/op_read_batch64"] = static_cast<double>(batched.allocs) / ops;
  }
  state.counters["wrong"] = static_cast<double>(wrong);
  set_footprint_counters(state, presized_fp);
  set_footprint_counters(state, fresh_fp, "_fresh");
  g_wrong_values += wrong;
  if (wrong != 0) {
    state.SkipWithError((std::to_string(wrong) + " reads returned a wrong value or none").c_str());
  }
}

std::string scale_name(Shape shape, const std::string& subject) {
  return "BM_Scale<" + subject + ">/" + shape_name(shape);
}

template <class S>
void register_scale() {
  for (const Shape shape : kShapes) {
    benchmark::RegisterBenchmark(scale_name(shape, S::kName).c_str(), BM_Scale<S>, shape)
        ->Iterations(1)
        ->Repetitions(g_settings.scale_reps)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  }
}

// ---- main: flags, platform, phases ------------------------------------------------

void print_platform() {
  std::printf("offheap_bench: offheap %u.%u.%u against every peer found\n", offheap::kVersionMajor,
              offheap::kVersionMinor, offheap::kVersionPatch);
  print_host();
  const std::string missing = missing_peers();
  if (!missing.empty()) std::printf("  Not found (not measured): %s\n", missing.c_str());
#if defined(OFFHEAP_BENCH_HAVE_LMDB) || defined(OFFHEAP_BENCH_HAVE_ROCKSDB) || \
    defined(OFFHEAP_BENCH_HAVE_TKRZW)
  const ScratchDir& dir = ScratchDir::instance();
  std::printf("  Files:    %s (%s)\n", dir.root().c_str(),
              dir.on_tmpfs() ? "tmpfs" : "WARNING: not tmpfs, the file-backed peers use a file system");
#endif
  std::printf("  W1:       1 thread, %" PRIu64 " repetitions of %.3g s per subject and op, "
              "randomly interleaved\n",
              g_settings.w1_reps, g_settings.w1_min_time);
  std::printf("  Threads:  W1 on 1, 2 and 4 threads, %d repetitions of %.3g s\n",
              g_settings.mt_reps, g_settings.mt_min_time);
  std::printf("  Scale:    %" PRIu64 " keys, %d passes each\n\n", g_settings.scale_keys,
              g_settings.scale_reps);
  std::fflush(stdout);
}

/// Every subject's configuration and how it is sized where pre-sized (W1,
/// and the scale run's reads) and where not (the scale run's fresh writes).
void print_configurations() {
  std::printf("Subjects (pre-sized: W1 for %" PRIu64 " entries, on 1 and more threads, and the "
              "scale run's\npre-sized writes and its reads for %" PRIu64 "; not pre-sized: the "
              "scale run's fresh writes):\n",
              kW1Entries, g_settings.scale_keys);
  for_each_subject([]<class S>() {
    std::printf("  %s: %s\n", S::kName, S::describe().c_str());
    std::printf("  %*s  pre-sized: %s; not pre-sized: %s\n", static_cast<int>(std::strlen(S::kName)),
                "", S::sizing(g_settings.scale_keys).c_str(), S::sizing(0).c_str());
  });
  std::printf("\n");
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

bool parse_bool(std::string_view text, bool& out) {
  if (text == "true" || text == "1") {
    out = true;
  } else if (text == "false" || text == "0") {
    out = false;
  } else {
    return false;
  }
  return true;
}

void print_help() {
  std::printf(
      "offheap_bench flags (besides Google Benchmark's, listed below):\n"
      "  --scale_keys=N             keys in the scale run (default %" PRIu64 ")\n"
      "  --scale_reps=R             passes of each scale measurement, median quoted (default 3)\n"
      "  --mt_reps=R                repetitions of each run on threads (default %d, at most\n"
      "                             --benchmark_repetitions unless given)\n"
      "  --mt_min_time=S            seconds of each run on threads (default %.2g, at most\n"
      "                             --benchmark_min_time unless given)\n"
      "  --rocksdb_mmap_reads=B     RocksDB's allow_mmap_reads (default true)\n"
      "  --rocksdb_cache_mb=N       RocksDB's block cache, MiB (default 64)\n"
      "Leave subjects out with --benchmark_filter (e.g. --benchmark_filter=-RocksDB).\n"
      "Defaults this binary passes to Google Benchmark (override them freely):\n",
      kScaleKeysDefault, kMtRepsDefault, kMtMinTimeDefault);
  for (const char* f : kDefaultFlags) std::printf("  %s\n", f);
  std::printf("\n");
}

/// Takes this binary's own flags out of argv; false on a malformed one.
bool parse_own_flags(std::vector<char*>& args) {
  std::vector<char*> rest;
  const auto fail = [](const char* message) {
    std::fprintf(stderr, "offheap_bench: %s\n", message);
    return false;
  };
  for (char* a : args) {
    const std::string_view s(a);
    const auto value = [&](std::string_view flag) -> const char* {
      return s.size() > flag.size() && s.substr(0, flag.size()) == flag ? a + flag.size()
                                                                         : nullptr;
    };
    std::uint64_t n = 0;
    if (const char* v = value("--scale_keys=")) {
      if (!parse_u64(v, n) || n == 0 || n > 0xFFFFFFFFull) {
        return fail("--scale_keys wants a number in [1, 2^32)");
      }
      g_settings.scale_keys = n;
    } else if (const char* v = value("--scale_reps=")) {
      if (!parse_u64(v, n) || n == 0 || n > 1000) return fail("--scale_reps wants [1, 1000]");
      g_settings.scale_reps = static_cast<int>(n);
    } else if (const char* v = value("--mt_reps=")) {
      if (!parse_u64(v, n) || n == 0 || n > 1000) return fail("--mt_reps wants [1, 1000]");
      g_settings.mt_reps = static_cast<int>(n);
      g_settings.mt_reps_given = true;
    } else if (const char* v = value("--mt_min_time=")) {
      if (!parse_seconds(v, g_settings.mt_min_time)) {
        return fail("--mt_min_time wants seconds in (0, 3600]");
      }
      g_settings.mt_min_time_given = true;
    } else if (const char* v = value("--rocksdb_mmap_reads=")) {
      bool b = true;
      if (!parse_bool(v, b)) return fail("--rocksdb_mmap_reads wants true|false");
#if defined(OFFHEAP_BENCH_HAVE_ROCKSDB)
      g_rocks.mmap_reads = b;
#endif
    } else if (const char* v = value("--rocksdb_cache_mb=")) {
      if (!parse_u64(v, n) || n == 0 || n > (1u << 20)) {
        return fail("--rocksdb_cache_mb wants MiB in [1, 2^20]");
      }
#if defined(OFFHEAP_BENCH_HAVE_ROCKSDB)
      g_rocks.cache_mb = n;
#endif
    } else {
      if (s == "--help" || s == "-h") print_help();
      rest.push_back(a);
    }
  }
  args = std::move(rest);
  return true;
}

/// Notes the --benchmark_repetitions and --benchmark_min_time in force (the
/// last of each in `args` wins, as in Google Benchmark) and caps the runs on
/// threads by them, unless --mt_reps / --mt_min_time were given.
void cap_mt_runs(const std::vector<char*>& args) {
  for (const char* a : args) {
    const std::string_view s(a);
    std::uint64_t n = 0;
    double t = 0;
    if (s.rfind("--benchmark_repetitions=", 0) == 0 &&
        parse_u64(a + std::strlen("--benchmark_repetitions="), n) && n > 0) {
      g_settings.w1_reps = n;
      if (!g_settings.mt_reps_given) {
        g_settings.mt_reps = static_cast<int>(std::min<std::uint64_t>(n, kMtRepsDefault));
      }
    } else if (s.rfind("--benchmark_min_time=", 0) == 0 &&
               parse_seconds(a + std::strlen("--benchmark_min_time="), t)) {
      g_settings.w1_min_time = t;
      if (!g_settings.mt_min_time_given) g_settings.mt_min_time = std::min(t, kMtMinTimeDefault);
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

/// Runs what is registered now if the filter selects any of `names`.
/// Returns whether it ran any.
bool run_phase(SummaryReporter& reporter, const std::vector<std::string>& names) {
  const bool selected = filter_selects(names);
  if (selected) benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::ClearRegisteredBenchmarks();
  return selected;
}

// ---- summaries ------------------------------------------------------------------

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

/// The closing summaries, from the samples the reporter kept: one table per
/// phase for the console, the same figures as markdown tables for the
/// README, and the ratios issue 10's targets are stated in.
class Report {
 public:
  explicit Report(const SummaryReporter& rep) : rep_(rep), cols_(columns()) {}

  void print_w1() const {
    std::printf("\n== Summary: W1 (%" PRIu64 " entries, %zu-byte keys, %zu-byte values, uniform "
                "random keys, 1 thread, every subject pre-sized)\n",
                kW1Entries, kW1KeyBytes, kW1ValueBytes);
    std::printf("   Mops/s: median of the interleaved repetitions (+-: half the interquartile "
                "range), wall time;\n   offheap/x: ratio of medians (> 1: offheap faster)\n");
    std::printf("%-26s %14s %14s %14s %9s %7s %7s %5s\n", "subject", "get Mops/s",
                "90/10 Mops/s", "put Mops/s", "offheap/x", "", "", "reps");
    std::printf("%-26s %14s %14s %14s %9s %7s %7s %5s\n", "", "", "", "", "get", "90/10", "put",
                "");
    for (const Column& c : cols_) {
      std::size_t reps = 0;
      std::string cells[3], ratios[3];
      for (int i = 0; i < 3; ++i) {
        const Op op = kW1Columns[i];
        const std::vector<Sample> s = rep_.samples(w1_name(op, c.name));
        reps = std::max(reps, s.size());
        cells[i] = median_cell(items_mops(s));
        ratios[i] = &c == &cols_[0] ? "-" : ratio_cell(w1_mops(op, offheap()) / w1_mops(op, c.name));
      }
      if (reps == 0) continue;
      std::printf("%-26s %14s %14s %14s %9s %7s %7s %5zu\n", c.name.c_str(), cells[0].c_str(),
                  cells[1].c_str(), cells[2].c_str(), ratios[0].c_str(), ratios[1].c_str(),
                  ratios[2].c_str(), reps);
    }
    std::printf("\n   memory per entry after the fill (RssAnon growth + file bytes, "
                "bench/memory.hpp); allocations per operation\n");
    std::printf("%-26s %11s %11s %9s %9s %9s %9s %7s %7s %6s\n", "subject", "bytes/entry",
                "beyond k+v", "RssAnon", "files", "heap", "allocs/op", "", "", "wrong");
    std::printf("%-26s %11s %11s %9s %9s %9s %9s %7s %7s %6s\n", "", "", "", "", "", "", "get",
                "90/10", "put", "");
    for (const Column& c : cols_) {
      std::vector<Sample> all;
      std::string allocs[3];
      for (int i = 0; i < 3; ++i) {
        const std::vector<Sample> s = rep_.samples(w1_name(kW1Columns[i], c.name));
        all.insert(all.end(), s.begin(), s.end());
        allocs[i] = number_cell(median(counter_values(s, "allocs/op")), "%.3f");
      }
      if (all.empty()) continue;
      const auto fig = [&](const char* name) {
        return number_cell(median(counter_values(all, name)), "%.1f");
      };
      std::printf("%-26s %11s %11s %9s %9s %9s %9s %7s %7s %6.0f\n", c.name.c_str(),
                  fig("bytes/entry").c_str(), fig("beyond/entry").c_str(),
                  fig("anon/entry").c_str(), fig("files/entry").c_str(), fig("heap/entry").c_str(),
                  allocs[0].c_str(), allocs[1].c_str(), allocs[2].c_str(), sum_of(all, "wrong"));
    }
    std::printf("   beyond k+v: bytes beyond the %zu of key and value; heap: the malloc "
                "counter's growth (not tbbmalloc's)\n",
                kW1KeyBytes + kW1ValueBytes);
  }

  void print_mt() const {
    std::printf("\n== Summary: W1 on threads (%" PRIu64 " entries, one pre-sized subject shared "
                "by all threads; %u hardware threads)\n",
                kW1Entries, std::thread::hardware_concurrency());
    std::printf("   Mops/s: all threads' operations / wall time from start to stop barrier, "
                "median of the\n   interleaved repetitions (+-: half the interquartile range); "
                "offheap/x: ratio of medians\n");
    std::printf("%-6s %-26s %14s %14s %14s %9s %7s %7s %9s %6s %5s\n", "op", "subject", "1T",
                "2T", "4T", "offheap/x", "", "", "allocs/op", "wrong", "reps");
    std::printf("%-6s %-26s %14s %14s %14s %9s %7s %7s %9s %6s %5s\n", "", "", "", "", "", "1T",
                "2T", "4T", "2T", "", "");
    for (const Op op : kW1Columns) {
      bool first = true;
      for (const Column& c : cols_) {
        if (!c.thread_safe) continue;
        std::size_t reps = 0;
        double wrong = 0;
        std::string cells[3], ratios[3];
        for (int i = 0; i < 3; ++i) {
          const int t = kMtThreadCounts[i];
          const std::vector<Sample> s = rep_.samples(with_threads(mt_name(op, c.name), t));
          reps = std::max(reps, s.size());
          wrong += sum_of(s, "wrong");
          cells[i] = median_cell(wall_mops(s));
          ratios[i] = &c == &cols_[0] ? "-" : ratio_cell(mt_mops(op, offheap(), t) / mt_mops(op, c.name, t));
        }
        if (reps == 0) continue;
        const std::vector<Sample> two = rep_.samples(with_threads(mt_name(op, c.name), 2));
        std::printf("%-6s %-26s %14s %14s %14s %9s %7s %7s %9s %6.0f %5zu\n",
                    first ? op_label(op) : "", c.name.c_str(), cells[0].c_str(), cells[1].c_str(),
                    cells[2].c_str(), ratios[0].c_str(), ratios[1].c_str(), ratios[2].c_str(),
                    number_cell(median(counter_values(two, "allocs/op")), "%.3f").c_str(), wrong,
                    reps);
        first = false;
      }
    }

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
    for (const Op op : kW1Columns) {
      for (const Column& c : cols_) {
        if (!c.thread_safe) continue;
        const auto figure = [&](int t, std::vector<double> (*f)(const std::vector<Sample>&)) {
          return median(f(rep_.samples(with_threads(mt_name(op, c.name), t))));
        };
        const double one = figure(1, wall_mops);
        if (std::isnan(one)) continue;
        const double cpu_one = figure(1, cpu_mops);
        std::printf("%-6s %-26s %8s %8s %6.2f %6.2f %6.2f %10s %10s\n", op_label(op),
                    c.name.c_str(), ratio_cell(figure(2, wall_mops) / one).c_str(),
                    ratio_cell(figure(4, wall_mops) / one).c_str(), figure(1, cores_busy),
                    figure(2, cores_busy), figure(4, cores_busy),
                    ratio_cell(figure(2, cpu_mops) / cpu_one).c_str(),
                    ratio_cell(figure(4, cpu_mops) / cpu_one).c_str());
      }
    }
  }

  void print_scale() const {
    std::printf("\n== Summary: scale (NoHeapDB shape): %s keys, 8-byte values, 1 thread\n"
                "   Mops/s: N operations / wall time of one pass, median of the interleaved "
                "passes; writes into a\n   fresh subject and into one pre-sized for N; reads "
                "of the pre-sized one in random order, every value checked\n",
                with_commas(g_settings.scale_keys).c_str());
    std::printf("%-8s %-26s %9s %9s %9s %9s %7s %7s %9s %7s %6s %6s\n", "keys", "subject",
                "write", "write", "read", "offheap/x", "", "", "allocs/op", "", "wrong", "passes");
    std::printf("%-8s %-26s %9s %9s %9s %9s %7s %7s %9s %7s %6s %6s\n", "", "", "fresh",
                "pre-sized", "random", "write fr", "pre-sz", "read", "write", "read", "", "");
    for (const Shape shape : kShapes) {
      for (const Column& c : cols_) {
        const std::vector<Sample> s = rep_.samples(scale_name(shape, c.name));
        if (s.empty()) continue;
        const bool self = &c == &cols_[0];
        const auto rate = [&](const char* counter) {
          return number_cell(scale_figure(shape, c.name, counter));
        };
        const auto ratio = [&](const char* counter) {
          return self ? std::string("-")
                      : ratio_cell(scale_figure(shape, offheap(), counter) /
                                   scale_figure(shape, c.name, counter));
        };
        std::printf("%-8s %-26s %9s %9s %9s %9s %7s %7s %9s %7s %6.0f %6zu\n", shape_name(shape),
                    c.name.c_str(), rate("write_fresh_Mops").c_str(),
                    rate("write_presized_Mops").c_str(), rate("read_Mops").c_str(),
                    ratio("write_fresh_Mops").c_str(), ratio("write_presized_Mops").c_str(),
                    ratio("read_Mops").c_str(),
                    number_cell(scale_figure(shape, c.name, "allocs/op_write"), "%.3f").c_str(),
                    number_cell(scale_figure(shape, c.name, "allocs/op_read"), "%.3f").c_str(),
                    sum_of(s, "wrong"), s.size());
      }
    }
    std::printf("\n   memory per entry (RssAnon growth + file bytes, bench/memory.hpp), "
                "median of the passes\n");
    std::printf("%-8s %-26s %11s %11s %11s %9s %9s %9s\n", "keys", "subject", "bytes/entry",
                "beyond k+v", "beyond k+v", "RssAnon", "files", "heap");
    std::printf("%-8s %-26s %11s %11s %11s %9s %9s %9s\n", "", "", "pre-sized", "pre-sized",
                "fresh", "pre-sized", "pre-sized", "pre-sized");
    for (const Shape shape : kShapes) {
      for (const Column& c : cols_) {
        if (rep_.samples(scale_name(shape, c.name)).empty()) continue;
        const auto fig = [&](const char* counter) {
          return number_cell(scale_figure(shape, c.name, counter), "%.1f");
        };
        std::printf("%-8s %-26s %11s %11s %11s %9s %9s %9s\n", shape_name(shape), c.name.c_str(),
                    fig("bytes/entry").c_str(), fig("beyond/entry").c_str(),
                    fig("beyond/entry_fresh").c_str(), fig("anon/entry").c_str(),
                    fig("files/entry").c_str(), fig("heap/entry").c_str());
      }
    }
    for (const Shape shape : kShapes) {
      const double batched = scale_figure(shape, offheap(), "read_batch64_Mops");
      if (!(batched > 0)) continue;
      std::printf("   %s, %s: random reads in batches of 64 (get_all: index lines, then records, "
                  "prefetched) %s Mops/s, %s x its single gets (%s allocs/op); not in the ratios above\n",
                  offheap().c_str(), shape_name(shape), number_cell(batched).c_str(),
                  number_cell(batched / scale_figure(shape, offheap(), "read_Mops"), "%.2f").c_str(),
                  number_cell(scale_figure(shape, offheap(), "allocs/op_read_batch64"), "%.3f").c_str());
    }
    std::printf("   key + value bytes per entry: decimal %.2f, uuid 44\n",
                static_cast<double>(scale_keys(Shape::decimal).key_bytes()) /
                        static_cast<double>(g_settings.scale_keys) +
                    8);
  }

  /// The tables as markdown, ready for the README, and the subjects'
  /// configurations as a list.
  void print_markdown(bool w1, bool scale) const {
    std::printf("\n== Markdown (for the README; medians of this run)\n");
    if (w1) {
      std::printf("\n| W1: %zu B keys, %zu B values, %s entries, pre-sized; Mops/s | get 1T | "
                  "90/10 1T | put 1T | get 2T | 90/10 2T | put 2T |\n",
                  kW1KeyBytes, kW1ValueBytes, with_commas(kW1Entries).c_str());
      std::printf("|---|---:|---:|---:|---:|---:|---:|\n");
      for (const Column& c : cols_) {
        std::printf("| %s", c.name.c_str());
        for (const Op op : kW1Columns) std::printf(" | %s", md(w1_mops(op, c.name)).c_str());
        for (const Op op : kW1Columns) std::printf(" | %s", md(mt_mops(op, c.name, 2)).c_str());
        std::printf(" |\n");
      }
    }
    if (scale) {
      std::printf("\n| %s keys, 8 B values, 1 thread; Mops/s | write (fresh) | write "
                  "(pre-sized) | read (random order) | bytes/entry beyond key+value |\n",
                  with_commas(g_settings.scale_keys).c_str());
      std::printf("|---|---:|---:|---:|---:|\n");
      for (const Shape shape : kShapes) {
        for (const Column& c : cols_) {
          if (rep_.samples(scale_name(shape, c.name)).empty()) continue;
          std::printf("| %s, %s | %s | %s | %s | %s |\n", c.name.c_str(), shape_label(shape),
                      md(scale_figure(shape, c.name, "write_fresh_Mops")).c_str(),
                      md(scale_figure(shape, c.name, "write_presized_Mops")).c_str(),
                      md(scale_figure(shape, c.name, "read_Mops")).c_str(),
                      md(scale_figure(shape, c.name, "beyond/entry"), "%.0f").c_str());
        }
      }
      std::printf("\nReads and bytes per entry: the subject pre-sized for the keys. Bytes per "
                  "entry: resident anonymous memory plus file bytes (tmpfs), less the key and "
                  "value bytes.\n");
    }
    std::printf("\nSubjects (1T: one thread; 2T: two threads sharing one subject; files on "
                "tmpfs):\n\n");
    for_each_subject([]<class S>() {
      std::printf("- **%s**: %s. Pre-sized for N entries: %s; not pre-sized: %s.\n", S::kName,
                  S::describe().c_str(), S::sizing(g_settings.scale_keys).c_str(),
                  S::sizing(0).c_str());
    });
  }

  /// The ratios issue 10's targets are stated in, each against its bound.
  void print_targets() const {
    std::printf("\n== Targets (issue 10): ratios of medians in this run\n");
    const auto line = [](const std::string& what, double value, bool at_least, double bound) {
      const char* verdict = std::isnan(value)                         ? "not measured"
                            : (at_least ? value >= bound : value <= bound) ? "met"
                                                                          : "MISSED";
      std::printf("  %-66s %7s  (target %s %.2f: %s)\n", what.c_str(), number_cell(value).c_str(),
                  at_least ? ">=" : "<=", bound, verdict);
    };
    const std::string absl = "absl::flat_hash_map", cuckoo = "libcuckoo::cuckoohash_map",
                      lmdb = "LMDB";
    for (const Op op : kW1Columns) {
      line(std::string("W1 ") + op_label(op) + " 1T: offheap / absl", w1_mops(op, offheap()) / w1_mops(op, absl),
           true, 1.0);
    }
    line("W1 get 2T: offheap / libcuckoo 2T", mt_mops(Op::get, offheap(), 2) / mt_mops(Op::get, cuckoo, 2),
         true, 1.5);
    for (const Op op : kW1Columns) {
      line(std::string("W1 ") + op_label(op) + " 1T: offheap / LMDB",
           w1_mops(op, offheap()) / w1_mops(op, lmdb), true, 5.0);
    }
    for (const Op op : kW1Columns) {
      line(std::string("W1 ") + op_label(op) + " 2T: offheap / LMDB",
           mt_mops(op, offheap(), 2) / mt_mops(op, lmdb, 2), true, 5.0);
    }
    const std::string at = with_commas(g_settings.scale_keys) + " keys";
    if (g_settings.scale_keys != kScaleTargetKeys) {
      std::printf("  (the scale targets are stated for %s keys; this run has %s)\n",
                  with_commas(kScaleTargetKeys).c_str(), at.c_str());
    }
    const auto scale_ratio = [&](Shape shape, const char* counter, const std::string& peer) {
      return scale_figure(shape, offheap(), counter) / scale_figure(shape, peer, counter);
    };
    line(at + ", decimal: random reads, offheap / absl", scale_ratio(Shape::decimal, "read_Mops", absl),
         true, 1.5);
    line(at + ", decimal: random reads, offheap / libcuckoo",
         scale_ratio(Shape::decimal, "read_Mops", cuckoo), true, 1.0);
    line(at + ", uuid: random reads, offheap / libcuckoo", scale_ratio(Shape::uuid, "read_Mops", cuckoo),
         true, 1.5);
    for (const Shape shape : kShapes) {
      line(at + ", " + shape_name(shape) + ": writes (fresh), offheap / libcuckoo",
           scale_ratio(shape, "write_fresh_Mops", cuckoo), true, 1.5);
      line(at + ", " + shape_name(shape) + ": writes (pre-sized), offheap / libcuckoo",
           scale_ratio(shape, "write_presized_Mops", cuckoo), true, 1.5);
    }
    for (const Shape shape : kShapes) {
      line(at + ", " + shape_name(shape) + ": offheap bytes/entry beyond k+v (pre-sized)",
           scale_figure(shape, offheap(), "beyond/entry"), false, 40);
      line(at + ", " + shape_name(shape) + ": offheap bytes/entry beyond k+v (fresh)",
           scale_figure(shape, offheap(), "beyond/entry_fresh"), false, 40);
    }
    // Allocations per operation: the largest median of any offheap run.
    double allocs = NAN;
    const auto take = [&](const std::vector<Sample>& s, const char* counter) {
      const double m = median(counter_values(s, counter));
      if (!std::isnan(m)) allocs = std::isnan(allocs) ? m : std::max(allocs, m);
    };
    for (const Op op : kW1Columns) {
      take(rep_.samples(w1_name(op, offheap())), "allocs/op");
      for (const int t : kMtThreadCounts) {
        take(rep_.samples(with_threads(mt_name(op, offheap()), t)), "allocs/op");
      }
    }
    for (const Shape shape : kShapes) {
      take(rep_.samples(scale_name(shape, offheap())), "allocs/op_write_fresh");
      take(rep_.samples(scale_name(shape, offheap())), "allocs/op_write");
      take(rep_.samples(scale_name(shape, offheap())), "allocs/op_read");
      take(rep_.samples(scale_name(shape, offheap())), "allocs/op_read_batch64");
    }
    line("offheap allocations per operation (largest of all runs)", allocs, false, 0);
  }

 private:
  static constexpr Op kW1Columns[] = {Op::get, Op::mixed, Op::put};  // the tables' order

  const std::string& offheap() const { return cols_[0].name; }

  double w1_mops(Op op, const std::string& subject) const {
    return median(items_mops(rep_.samples(w1_name(op, subject))));
  }
  double mt_mops(Op op, const std::string& subject, int threads) const {
    return median(wall_mops(rep_.samples(with_threads(mt_name(op, subject), threads))));
  }
  double scale_figure(Shape shape, const std::string& subject, const char* counter) const {
    return median(counter_values(rep_.samples(scale_name(shape, subject)), counter));
  }
  static std::string md(double x, const char* format = "%.2f") {
    return std::isnan(x) ? "—" : number_cell(x, format);
  }

  const SummaryReporter& rep_;
  std::vector<Column> cols_;
};

int run(int argc, char** argv) {
  std::vector<char*> user(argv + 1, argv + argc);
  if (!parse_own_flags(user)) return 2;

  // Defaults first: a flag the user repeats later wins.
  std::vector<char*> args = with_default_flags(argv[0], user);
  cap_mt_runs(args);
  print_platform();
  int n = static_cast<int>(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 2;
  print_configurations();

  SummaryReporter reporter;

  std::vector<std::string> names;
  for_each_subject([&]<class S>() {
    register_w1<S>();
    for (const Op op : kOps) names.push_back(w1_name(op, S::kName));
  });
  const bool ran_w1 = run_phase(reporter, names);
  release_w1_fixtures();

  names.clear();
  const MtRuns runs{g_settings.mt_reps, g_settings.mt_min_time};
  for_each_mt_subject([&]<class S>() {
    register_mt<S>(runs);
    for (const Op op : kOps) {
      for (const int t : kMtThreadCounts) names.push_back(with_threads(mt_name(op, S::kName), t));
    }
  });
  const bool ran_mt = run_phase(reporter, names);

  names.clear();
  for_each_subject([&]<class S>() {
    register_scale<S>();
    for (const Shape shape : kShapes) names.push_back(scale_name(shape, S::kName));
  });
  const bool ran_scale = run_phase(reporter, names);

  if (!ran_w1 && !ran_mt && !ran_scale) {
    std::fprintf(stderr, "offheap_bench: --benchmark_filter=%s selects no benchmark\n",
                 benchmark::GetBenchmarkFilter().c_str());
    return 2;
  }
  print_platform();
  const Report report(reporter);
  if (ran_w1) report.print_w1();
  if (ran_mt) report.print_mt();
  if (ran_scale) report.print_scale();
  report.print_markdown(ran_w1 || ran_mt, ran_scale);
  report.print_targets();
  benchmark::Shutdown();
  return reporter.exit_code(g_wrong_values != 0);
}

}  // namespace
}  // namespace offheap_bench

int main(int argc, char** argv) { return offheap_bench::run(argc, argv); }
