// SPDX-License-Identifier: Apache-2.0
// offheap_persist_bench: file-backed stores.
//
//   Reopen    N small records (default 10M: 12-byte keys, 8-byte values):
//             the open after a clean close (maps the saved index, reads no
//             record) and the open after a kill (scans every record and
//             rebuilds the index, shards in parallel), interleaved.
//   Large     the NoHeapDB large-data run scaled to this machine: 64 KiB
//             values, a few GiB in files (default 49,152 records, 3 GiB);
//             the load rate, then random reads in place for a while, every
//             byte of every value checked.
//   Modes     put throughput (overwrites of 100k keys, 100-byte values) in
//             each Durability mode and in anonymous memory, interleaved in
//             short slices.
//
// Flags: --dir=PATH (default /tmp/offheap-persist-bench, emptied first),
// --records=N, --large_records=N, --large_read_seconds=S, --mode_keys=N,
// then Google Benchmark's.
#include <offheap/offheap.hpp>

#include "summary.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace offheap_bench {
namespace {

struct Settings {
  fs::path dir = "/tmp/offheap-persist-bench";
  std::uint64_t records = 10'000'000;
  std::uint64_t large_records = 49'152;
  double large_read_seconds = 10;
  std::uint64_t mode_keys = 100'000;
} g;

std::uint64_t g_wrong = 0;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

/// Whether the CPU has CRC32C instructions (x86 SSE4.2, Arm CRC32), which
/// the checksums of file-backed stores use where present.
bool cpu_has_crc32c() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) == 0 || line.rfind("Features", 0) == 0) {
      return line.find(" sse4_2") != std::string::npos || line.find(" crc32") != std::string::npos;
    }
  }
  return false;
}

std::string small_key(std::uint64_t i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "k%011" PRIu64, i);
  return buf;
}

offheap::Options small_options() {
  offheap::Options o;
  o.path = g.dir / "small";
  return o;
}

/// Builds the small-record store once (untimed; its load rate is printed).
void build_small() {
  fs::remove_all(g.dir / "small");
  const auto t0 = Clock::now();
  offheap::Options o = small_options();
  o.expected_entries = g.records;
  offheap::Store s(o);
  for (std::uint64_t i = 0; i < g.records; ++i) s.put_value(small_key(i), i * 3);
  const double load = seconds_since(t0);
  const auto t1 = Clock::now();
  s.close();
  std::printf("small store: %" PRIu64 " records loaded in %.2f s (%.2f M puts/s), clean close %.2f s\n",
              g.records, load, static_cast<double>(g.records) / load / 1e6, seconds_since(t1));
}

/// Leaves the small store unclean, as a kill would: a child opens it and
/// dies without closing.
void make_unclean() {
  const pid_t pid = ::fork();
  if (pid == 0) {
    try {
      offheap::Store s(small_options());
      s.put_value(small_key(0), std::uint64_t{0});  // a write, as a live process makes
      ::_exit(0);  // with the store open: no close
    } catch (...) {
      ::_exit(1);
    }
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "persist_bench: the child that leaves the store unclean failed\n");
    std::exit(1);
  }
}

void check_small(benchmark::State& state, const offheap::Store& s, bool want_rebuilt) {
  if (s.size() != g.records || s.stats().rebuilt != want_rebuilt) {
    std::fprintf(stderr, "persist_bench: reopened %" PRIu64 " of %" PRIu64 " records, rebuilt %d\n",
                 s.size(), g.records, static_cast<int>(s.stats().rebuilt));
    ++g_wrong;
    state.SkipWithError("the reopened store does not hold every record");
  }
  std::mt19937_64 rng(7);
  for (int n = 0; n < 1000; ++n) {
    const std::uint64_t i = rng() % g.records;
    const auto v = s.get_value<std::uint64_t>(small_key(i));
    if (!v || *v != i * 3) {
      ++g_wrong;
      state.SkipWithError("a reopened record reads wrong");
      return;
    }
  }
}

void BM_Reopen(benchmark::State& state, bool clean) {
  for (auto _ : state) {
    if (!clean) make_unclean();
    const auto t0 = Clock::now();
    offheap::Store s(small_options());
    state.SetIterationTime(seconds_since(t0));
    check_small(state, s, !clean);
    // The close (saving the index again) is not timed.
  }
  state.counters["records"] = static_cast<double>(g.records);
}

// ---- large records ----------------------------------------------------------

constexpr std::size_t kLargeValue = 64 * 1024;

std::string large_key(std::uint64_t i) { return "large:" + std::to_string(i); }
/// Every byte depends on the record and its position.
void large_value(std::uint64_t i, std::string& out) {
  out.resize(kLargeValue);
  std::uint64_t x = i * 0x9E3779B97F4A7C15ull + 1;
  for (std::size_t j = 0; j < kLargeValue; j += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(out.data() + j, &x, 8);
  }
}

void run_large() {
  fs::remove_all(g.dir / "large");
  offheap::Options o;
  o.path = g.dir / "large";
  o.expected_entries = g.large_records;
  std::string v;
  const double gib = static_cast<double>(g.large_records * kLargeValue) / (1 << 30);
  {
    offheap::Store s(o);
    const auto t0 = Clock::now();
    for (std::uint64_t i = 0; i < g.large_records; ++i) {
      large_value(i, v);
      s.put(large_key(i), v);
    }
    const double load = seconds_since(t0);
    const auto t1 = Clock::now();
    s.close();
    std::printf("\nlarge: %" PRIu64 " records of 64 KiB (%.2f GiB): load %.2f s = %.0f records/s, "
                "%.2f GiB/s (value generation included); clean close (msync) %.2f s\n",
                g.large_records, gib, load, static_cast<double>(g.large_records) / load,
                gib / load, seconds_since(t1));
  }
  offheap::Store s(o);
  std::printf("large: reopen %.4f s (rebuilt: %s)\n", s.stats().open_seconds,
              s.stats().rebuilt ? "yes" : "no");
  std::mt19937_64 rng(42);
  std::uint64_t reads = 0, bad = 0;
  double read_seconds = 0;  // the reads alone: each timed on its own
  const auto t0 = Clock::now();
  std::string expect;
  while (seconds_since(t0) < g.large_read_seconds) {
    const std::uint64_t i = rng() % g.large_records;
    large_value(i, expect);  // untimed: the bytes the read must find
    const auto r0 = Clock::now();
    const bool hit = s.read(large_key(i), [&](std::string_view got) {
      if (got != expect) ++bad;
    });
    read_seconds += seconds_since(r0);
    if (!hit) ++bad;
    ++reads;
  }
  // Two clock reads per read (a few tens of ns) against a 64 KiB read.
  std::printf("large: %" PRIu64 " random reads, every byte checked, in %.2f s of reads (%.1f s "
              "with generating the expected bytes between them): %.0f reads/s, %.2f GiB/s, "
              "%.1f us per read in place incl. checksum and compare; wrong: %" PRIu64 "\n",
              reads, read_seconds, seconds_since(t0), static_cast<double>(reads) / read_seconds,
              static_cast<double>(reads) * kLargeValue / read_seconds / (1 << 30),
              read_seconds / static_cast<double>(reads) * 1e6, bad);
  g_wrong += bad;
}

// ---- durability modes ---------------------------------------------------------

struct ModeSubject {
  const char* name;
  bool files;
  offheap::Durability durability;
};
constexpr ModeSubject kModes[] = {
    {"memory", false, offheap::Durability::none},
    {"none", true, offheap::Durability::none},
    {"on_close", true, offheap::Durability::on_close},
    {"periodic", true, offheap::Durability::periodic},
    {"every_write", true, offheap::Durability::every_write},
};

std::vector<std::unique_ptr<offheap::Store>>& mode_stores() {
  static std::vector<std::unique_ptr<offheap::Store>> stores;
  return stores;
}

void open_mode_stores() {
  for (const ModeSubject& m : kModes) {
    offheap::Options o;
    if (m.files) {
      o.path = g.dir / (std::string("mode-") + m.name);
      fs::remove_all(o.path);
    }
    o.durability = m.durability;
    o.expected_entries = g.mode_keys;
    o.sync_interval = std::chrono::milliseconds(1000);
    auto s = std::make_unique<offheap::Store>(o);
    const std::string value(100, 'v');
    for (std::uint64_t i = 0; i < g.mode_keys; ++i) s->put(small_key(i), value);
    s->sync();
    mode_stores().push_back(std::move(s));
  }
}

void BM_Mode_Put(benchmark::State& state, std::size_t mode) {
  offheap::Store& s = *mode_stores()[mode];
  std::mt19937_64 rng(mode);
  std::string value(100, 'w');
  std::uint64_t n = 0;
  for (auto _ : state) {
    value[n % 100] = static_cast<char>('a' + n % 26);
    s.put(small_key(rng() % g.mode_keys), value);
    ++n;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(n));
}

bool parse_flags(std::vector<char*>& args) {
  std::vector<char*> rest;
  for (char* a : args) {
    const std::string s = a;
    auto value = [&](const char* name) -> const char* {
      const std::string prefix = std::string("--") + name + "=";
      return s.rfind(prefix, 0) == 0 ? a + prefix.size() : nullptr;
    };
    if (const char* v = value("dir")) {
      g.dir = v;
    } else if (const char* v = value("records")) {
      g.records = std::strtoull(v, nullptr, 10);
    } else if (const char* v = value("large_records")) {
      g.large_records = std::strtoull(v, nullptr, 10);
    } else if (const char* v = value("large_read_seconds")) {
      g.large_read_seconds = std::strtod(v, nullptr);
    } else if (const char* v = value("mode_keys")) {
      g.mode_keys = std::strtoull(v, nullptr, 10);
    } else {
      rest.push_back(a);
    }
  }
  args = rest;
  return g.records > 1000 && g.large_records > 0 && g.mode_keys > 0;
}

int run(int argc, char** argv) {
  std::vector<char*> user(argv + 1, argv + argc);
  if (!parse_flags(user)) {
    std::fprintf(stderr, "persist_bench: bad flags (--records must exceed 1000)\n");
    return 2;
  }
  const char* defaults[] = {"--benchmark_repetitions=7", "--benchmark_enable_random_interleaving=true",
                            "--benchmark_display_aggregates_only=false"};
  std::vector<char*> args{argv[0]};
  for (const char* f : defaults) args.push_back(const_cast<char*>(f));
  args.insert(args.end(), user.begin(), user.end());
  int n = static_cast<int>(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 2;
  fs::create_directories(g.dir);
  std::printf("offheap_persist_bench: files in %s; %u hardware threads; CPU CRC32C instructions: "
              "%s\n",
              g.dir.c_str(), std::thread::hardware_concurrency(), cpu_has_crc32c() ? "yes" : "no");

  SummaryReporter reporter;
  build_small();
  benchmark::RegisterBenchmark("Reopen/clean", BM_Reopen, true)->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("Reopen/rebuild", BM_Reopen, false)->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::ClearRegisteredBenchmarks();
  fs::remove_all(g.dir / "small");

  run_large();
  fs::remove_all(g.dir / "large");

  std::printf("\n");
  open_mode_stores();
  for (std::size_t m = 0; m < std::size(kModes); ++m) {
    benchmark::RegisterBenchmark((std::string("Put/") + kModes[m].name).c_str(), BM_Mode_Put, m)
        ->MinTime(0.3);
  }
  benchmark::RunSpecifiedBenchmarks(&reporter);
  mode_stores().clear();
  for (const ModeSubject& m : kModes) fs::remove_all(g.dir / (std::string("mode-") + m.name));

  std::printf("\n== Summary (medians of interleaved repetitions; +-: half the interquartile range)\n");
  for (const char* name : {"Reopen/clean", "Reopen/rebuild"}) {
    const std::vector<double> t =
        collect(reporter.samples(name), [](const Sample& s) { return s.real_seconds / s.iterations; });
    std::printf("%-16s %" PRIu64 " records: %.4f s +-%.0f%% (%zu runs)\n", name, g.records,
                median(t), half_iqr_percent(t), t.size());
  }
  auto rate = [&](const char* mode) {
    return median(collect(reporter.samples(std::string("Put/") + mode),
                          [](const Sample& s) { return s.items_per_second; }));
  };
  const double mem = rate("memory");
  for (const ModeSubject& m : kModes) {
    const double r = rate(m.name);
    std::printf("Put/%-12s %12.0f puts/s  (%.4f of memory)\n", m.name, r, r / mem);
  }
  benchmark::Shutdown();
  if (g_wrong != 0) {
    std::printf("\nFAILED: %" PRIu64 " wrong values\n", g_wrong);
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace offheap_bench

int main(int argc, char** argv) { return offheap_bench::run(argc, argv); }
