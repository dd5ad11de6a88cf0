// SPDX-License-Identifier: Apache-2.0
// offheap_bench: offheap::Store side by side with
// absl::flat_hash_map<std::string, std::string> in one binary.
//
// Two parts, run one after the other:
//
//   W1, the "RED OHC" shape: 16-byte keys, 64-byte values, 24,000 entries,
//   one thread; get (copy into a reused std::string), put (overwrite of an
//   existing key) and mixed (90% get / 10% put). Keys are drawn uniformly at
//   random from a stream precomputed before timing. Run as many short
//   repetitions, randomly interleaved across subjects, so that both subjects
//   see the same swings of a shared, noisy machine; the summary quotes
//   medians and the ratio of medians.
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
// binary counts every malloc and operator new, alloc_counter.hpp) and memory
// per entry (see Footprint below for exactly what is counted).
//
// The trade-off: everything is single-threaded and in-memory; this measures
// the per-operation path (hash, index probe, record copy), not scaling.
#include "summary.hpp"
#include "workload.hpp"

#include <offheap/offheap.hpp>

#include <benchmark/benchmark.h>

#if defined(OFFHEAP_BENCH_HAVE_ABSL)
#include <absl/base/config.h>
#include <absl/container/flat_hash_map.h>
#endif

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
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

struct Settings {
  std::uint64_t scale_keys = 2'000'000;
  bool scale_absl = true;
  int scale_reps = 3;
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
///               location per index slot, and fixed = the free-list table
///               and the read-counter lines (Stats::mapped_bytes of an empty
///               store minus its one-page index table). Not counted: the
///               journal's chunk table (65,536 x 16 B = 1 MiB of virtual
///               memory, a page touched per 256 chunks), which
///               Stats::mapped_bytes does not report.
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
    return empty.stats().mapped_bytes - static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
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

  explicit StoreSubject(std::uint64_t expected_entries) : store_(options(expected_entries)) {}

  void put(std::string_view key, std::string_view value) { store_.put(key, value); }
  bool get(std::string_view key, std::string& out) const { return store_.get(key, out); }

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
  print_platform();

  // Defaults first: a flag the user repeats later wins.
  std::vector<char*> args{argv[0]};
  for (const char* f : kDefaultFlags) args.push_back(const_cast<char*>(f));
  args.insert(args.end(), user.begin(), user.end());
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
  for_each_subject([&]<class S>() {
    register_scale<S>();
    for (const Shape shape : kShapes) {
      for (const ScaleOp op : kScaleOps) names.push_back(scale_name(op, shape, S::kName));
    }
  }, g_settings.scale_absl);
  const bool ran_scale = run_phase(reporter, names);
  filled() = {};

  if (!ran_w1 && !ran_scale) {
    std::fprintf(stderr, "offheap_bench: --benchmark_filter=%s selects no benchmark\n",
                 benchmark::GetBenchmarkFilter().c_str());
    return 2;
  }
  print_platform();
  if (ran_w1) print_w1_summary(reporter);
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
