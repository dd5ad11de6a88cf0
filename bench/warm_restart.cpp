// SPDX-License-Identifier: Apache-2.0
// offheap_warm_restart: how warm a file-backed cache comes back after a
// restart, for each cache type (offheap::Cache = S3-FIFO, offheap::LruCache,
// offheap::TinyLfuCache).
//
//   Trace: one Zipf trace (tests/support/zipf.hpp; --objects ids, default
//   200,000, exponent --alpha, default 1.0, fixed seed), walked in order by
//   every phase below: --requests warm-up requests (default 3,000,000), then
//   stretches of --measure requests (default 1,000,000). Keys of 12 bytes,
//   values of 100 bytes made from the key, so that every hit is checked
//   whole: a wrong value fails the run. capacity_bytes is 10% of the
//   objects' record bytes (a record: 24-byte header + key + value, padded to
//   8). Every request is cache-aside: get, and put the value on a miss.
//
//   Phases, each cache in a fresh directory under the scratch directory
//   (scratch_dir.hpp: /dev/shm, tmpfs) with otherwise default Options
//   (durability on_close unless --durability says, 8 shards here, background
//   maintenance on):
//     steady        warm-up, then the miss ratio of the next --measure
//                   requests (trace stretch A);
//     clean reopen  close() that cache, reopen its directory, miss ratio of
//                   the next --measure requests (stretch B), and of their
//                   first tenth alone;
//     kill -9       a child process opens a cache in another directory,
//                   runs warm-up and stretch A, then raise(SIGKILL) on
//                   itself (no close; the maintenance thread still running);
//                   the parent reopens it (stats().rebuilt must be true) and
//                   measures stretch B as above;
//     cold          a fresh empty cache measures stretch B.
//   So the three figures after a restart count the same requests, and a
//   restarted cache has the same history as the steady one.
//
//   Checks (any failure: exit status 1): every hit's value whole; the
//   cache's live_bytes after the open and after every write of every
//   measured phase at most capacity_bytes * 17/16 + 4 KiB per shard (the
//   documented bound); the reopen rebuilt (kill) or not (clean close, unless
//   Durability::none, whose every open rebuilds); the killed child died of
//   SIGKILL after reporting its own checks (in shared memory).
//
// The trade-off: a stationary trace is where a warm restart pays most (the
// hot set before the restart is the hot set after it); a trace whose hot
// set moves would narrow the gap to cold. Counts, not time: a plain
// executable, no Google Benchmark. The open times are stats().open_seconds
// of one open each, on tmpfs.
#include "cli.hpp"
#include "platform.hpp"
#include "scratch_dir.hpp"
#include "support/zipf.hpp"

#include <offheap/offheap.hpp>

#include <sys/mman.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cinttypes>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <initializer_list>
#include <new>
#include <string>
#include <string_view>
#include <vector>

namespace offheap_bench {
namespace {

namespace fs = std::filesystem;

// ---- settings ------------------------------------------------------------------

constexpr std::size_t kKeyBytes = 12;     // "k" and 11 decimal digits
constexpr std::size_t kValueBytes = 100;
constexpr std::uint64_t kHeaderBytes = 24;  // a record's header (README, options.hpp)
constexpr std::uint64_t kRecordBytes = (kHeaderBytes + kKeyBytes + kValueBytes + 7) / 8 * 8;
constexpr std::uint64_t kCapacityPercent = 10;
constexpr std::uint64_t kMaxObjects = 100'000'000'000;  // 11 digits
constexpr int kWrongShown = 5;  // wrong values printed per phase; all are counted

struct Settings {
  std::uint64_t objects = 200'000;
  std::uint64_t requests = 3'000'000;  // warm-up
  std::uint64_t measure = 1'000'000;   // each measured stretch
  double alpha = 1.0;
  std::uint64_t seed = offheap_test::kZipfSeed;
  offheap::Durability durability = offheap::Durability::on_close;

  std::uint64_t capacity() const { return objects * kRecordBytes * kCapacityPercent / 100; }
  std::uint64_t early() const { return std::max<std::uint64_t>(1, measure / 10); }
};

// ---- keys and values ------------------------------------------------------------

/// Object ids' keys, kKeyBytes each, in one buffer.
class Keys {
 public:
  explicit Keys(std::uint64_t objects) : bytes_(objects * kKeyBytes, '0') {
    for (std::uint64_t id = 0; id < objects; ++id) {
      char* k = bytes_.data() + id * kKeyBytes;
      k[0] = 'k';
      char digits[24];
      const auto r = std::to_chars(digits, digits + sizeof digits, id);
      const auto n = static_cast<std::size_t>(r.ptr - digits);
      std::memcpy(k + kKeyBytes - n, digits, n);  // zero-padded on the left
    }
  }
  std::string_view operator[](std::uint64_t id) const { return {bytes_.data() + id * kKeyBytes, kKeyBytes}; }

 private:
  std::string bytes_;
};

/// The value of object `id`: every byte depends on the id and its place.
void value_of(std::uint64_t id, std::string& out) {
  out.resize(kValueBytes);
  std::uint64_t x = offheap_test::mix64(id ^ 0xC0FFEE'0000'5EEDull);
  for (std::size_t at = 0; at < kValueBytes; at += 8) {
    x = offheap_test::mix64(x + at);
    std::memcpy(out.data() + at, &x, std::min<std::size_t>(8, kValueBytes - at));
  }
}

// ---- one phase ----------------------------------------------------------------------

/// What one stretch of cache-aside requests found. Plain data: the killed
/// child leaves its own in shared memory.
struct Tally {
  std::uint64_t requests = 0;
  std::uint64_t misses = 0;
  std::uint64_t early_requests = 0;  // the first Settings::early() requests
  std::uint64_t early_misses = 0;
  std::uint64_t wrong = 0;       // hits whose value was not the key's, whole
  std::uint64_t max_live = 0;    // live_bytes, highest seen (when checked)
  std::uint64_t over_bound = 0;  // checks that found live_bytes past the bound

  double miss_ratio() const { return requests ? static_cast<double>(misses) / static_cast<double>(requests) : 0; }
  double early_miss_ratio() const {
    return early_requests ? static_cast<double>(early_misses) / static_cast<double>(early_requests) : 0;
  }
};

/// The documented hard limit on a cache's live bytes (options.hpp).
std::uint64_t live_bound(std::uint64_t capacity, std::uint32_t shards) {
  return capacity + capacity / 16 + std::uint64_t{4096} * shards;
}

/// Everything a phase needs besides its cache.
struct Inputs {
  const Settings& settings;
  const Keys& keys;
  const std::vector<std::uint64_t>& trace;
};

template <class C>
void check_live(const C& cache, std::uint64_t bound, Tally& t) {
  const std::uint64_t live = cache.stats().live_bytes;
  t.max_live = std::max(t.max_live, live);
  if (live > bound) ++t.over_bound;
}

/// Cache-aside over trace[from, from + n): get, and put the key's value on a
/// miss. With `bounded`, checks live_bytes now and after every put.
template <class C>
Tally cache_aside(C& cache, const Inputs& in, std::uint64_t from, std::uint64_t n, bool bounded,
                  const char* phase) {
  Tally t;
  const std::uint64_t bound = live_bound(in.settings.capacity(), cache.stats().shards);
  if (bounded) check_live(cache, bound, t);
  const std::uint64_t early = in.settings.early();
  std::string out, want;
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::uint64_t id = in.trace[from + i];
    const std::string_view key = in.keys[id];
    value_of(id, want);
    const bool hit = cache.get(key, out);
    ++t.requests;
    if (i < early) ++t.early_requests;
    if (hit) {
      if (out != want) {
        if (t.wrong++ < kWrongShown) {
          std::fprintf(stderr, "\nERROR: %s: key %.*s read a value of %zu bytes that is not its own\n", phase,
                       static_cast<int>(key.size()), key.data(), out.size());
        }
      }
      continue;
    }
    ++t.misses;
    if (i < early) ++t.early_misses;
    cache.put(key, want);
    if (bounded) check_live(cache, bound, t);
  }
  return t;
}

// ---- the phases of one cache type ------------------------------------------------------

struct Reopen {
  Tally tally;
  double open_seconds = 0;
  bool rebuilt = false;
  std::uint64_t records_before = 0;  // at close, or as the child last saw them
  std::uint64_t records_after = 0;   // the open's, before any eviction
};

struct Result {
  const char* name = "";
  Tally steady;
  Reopen clean, kill;
  Tally cold;
  std::uint32_t shards = 0;
  // Every phase's, the warm-ups and the killed child's included.
  std::uint64_t wrong = 0;
  std::uint64_t over_bound = 0;

  /// `t`, its failures added to the totals.
  const Tally& counted(const Tally& t) {
    wrong += t.wrong;
    over_bound += t.over_bound;
    return t;
  }
  bool child_ok = true;
  std::string child_problem;
};

offheap::Options options_at(const Settings& s, const fs::path& dir) {
  offheap::Options o;  // background maintenance on, the default shards
  o.path = dir;
  o.capacity_bytes = s.capacity();
  o.durability = s.durability;
  return o;
}

/// What the killed child reports before it dies, in memory it shares with
/// the parent (a pipe would wake the parent and delay the kill meanwhile).
struct ChildReport {
  Tally warmup, steady;
  std::uint64_t records = 0;
  int done = 0;    // the report is whole
  int failed = 0;  // an exception: the child's own stderr says which
};

/// Runs warm-up and stretch A in a child process on a cache at `dir`, which
/// kills itself there; its report, or why there is none.
template <class C>
bool run_killed_child(const Inputs& in, const fs::path& dir, ChildReport& report, std::string& problem) {
  void* shared = ::mmap(nullptr, sizeof(ChildReport), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) {
    problem = std::string("mmap: ") + std::strerror(errno);
    return false;
  }
  auto* out = new (shared) ChildReport{};
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    try {
      C cache(options_at(in.settings, dir));
      out->warmup = cache_aside(cache, in, 0, in.settings.requests, false, "kill -9 child, warm-up");
      out->steady = cache_aside(cache, in, in.settings.requests, in.settings.measure, true, "kill -9 child, steady");
      out->records = cache.size();
      out->done = 1;
      std::raise(SIGKILL);  // with the cache open and its maintenance thread running
    } catch (const std::exception& e) {
      std::fprintf(stderr, "\nERROR: kill -9 child: %s\n", e.what());
    }
    out->failed = 1;
    ::_exit(1);  // not exit(): the parent's atexit handlers (the scratch directory) stay the parent's
  }
  int status = 0;
  if (pid < 0) {
    problem = std::string("fork: ") + std::strerror(errno);
  } else {
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    report = *out;
    if (report.done == 0 || report.failed != 0) {
      problem = "the child failed before its kill";
    } else if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL) {
      problem = "the child did not die of SIGKILL";
    }
  }
  ::munmap(shared, sizeof(ChildReport));
  return problem.empty();
}

/// Reopens the cache at `dir` and measures stretch B on it.
template <class C>
Reopen reopen_and_measure(const Inputs& in, const fs::path& dir, const char* phase) {
  Reopen r;
  C cache(options_at(in.settings, dir));
  const offheap::Stats s = cache.stats();
  r.open_seconds = s.open_seconds;
  r.rebuilt = s.rebuilt;
  // The maintenance thread may already have evicted the slack above the
  // capacity (evictions count from this open; no write has come yet).
  r.records_after = s.records + s.evictions;
  r.tally = cache_aside(cache, in, in.settings.requests + in.settings.measure, in.settings.measure, true, phase);
  return r;
}

template <class C>
Result run_policy(const char* name, const Inputs& in) {
  Result res;
  res.name = name;
  const Settings& s = in.settings;
  ScratchDir& scratch = ScratchDir::instance();
  std::printf("%s:", name);
  std::fflush(stdout);

  // Steady, then close and reopen.
  const fs::path clean_dir = scratch.make("clean");
  std::uint64_t records_at_close = 0;
  {
    C cache(options_at(s, clean_dir));
    res.shards = cache.stats().shards;
    res.counted(cache_aside(cache, in, 0, s.requests, false, "warm-up"));
    res.steady = res.counted(cache_aside(cache, in, s.requests, s.measure, true, "steady"));
    cache.close();
    records_at_close = cache.size();
  }
  std::printf(" steady %.4f;", res.steady.miss_ratio());
  std::fflush(stdout);
  res.clean = reopen_and_measure<C>(in, clean_dir, "clean reopen");
  res.clean.records_before = records_at_close;
  res.counted(res.clean.tally);
  ScratchDir::remove(clean_dir);
  std::printf(" clean reopen %.4f;", res.clean.tally.miss_ratio());
  std::fflush(stdout);

  // Killed, then reopened.
  const fs::path kill_dir = scratch.make("kill");
  ChildReport child;
  res.child_ok = run_killed_child<C>(in, kill_dir, child, res.child_problem);
  if (res.child_ok) {
    res.counted(child.warmup);
    res.counted(child.steady);
    res.kill = reopen_and_measure<C>(in, kill_dir, "kill -9 reopen");
    res.kill.records_before = child.records;
    res.counted(res.kill.tally);
    std::printf(" (child's steady %.4f) kill -9 reopen %.4f;", child.steady.miss_ratio(), res.kill.tally.miss_ratio());
  }
  ScratchDir::remove(kill_dir);

  // Cold.
  const fs::path cold_dir = scratch.make("cold");
  {
    C cache(options_at(s, cold_dir));
    res.cold = res.counted(cache_aside(cache, in, s.requests + s.measure, s.measure, true, "cold"));
  }
  ScratchDir::remove(cold_dir);
  std::printf(" cold %.4f\n", res.cold.miss_ratio());
  std::fflush(stdout);
  return res;
}

// ---- output ---------------------------------------------------------------------------

/// "a / b", each printed with `format`.
std::string pair_cell(double a, double b, const char* format = "%.4f") {
  char fa[32], fb[32];
  std::snprintf(fa, sizeof fa, format, a);
  std::snprintf(fb, sizeof fb, format, b);
  return std::string(fa) + " / " + fb;
}

void print_setup(const Settings& s, std::uint32_t shards) {
  const std::uint64_t bound = live_bound(s.capacity(), shards);
  std::printf("# offheap_warm_restart: miss ratios of file-backed caches around a restart\n\n");
  std::printf("- Policies: offheap::Cache (S3-FIFO), offheap::LruCache (LRU), offheap::TinyLfuCache (W-TinyLFU)\n");
  std::printf("- Trace: %s objects, Zipf alpha %s, seed 0x%" PRIX64
              ", popularity scrambled over ids; %zu-byte keys, %zu-byte values made from the key "
              "(every hit checked whole)\n",
              with_commas(s.objects).c_str(), exponent(s.alpha).c_str(), s.seed, kKeyBytes, kValueBytes);
  std::printf("- Requests (cache-aside: get, put on a miss): warm-up %s, then %s per measured phase "
              "(first tenth: %s)\n",
              with_commas(s.requests).c_str(), with_commas(s.measure).c_str(), with_commas(s.early()).c_str());
  std::printf("- Capacity: %s bytes (%s records) = %" PRIu64 "%% of the objects' record bytes (%s x %" PRIu64
              " bytes: %" PRIu64 "-byte header + key + value, padded to 8); bound on live bytes "
              "%s (capacity * 17/16 + 4 KiB per shard)\n",
              with_commas(s.capacity()).c_str(), with_commas(s.capacity() / kRecordBytes).c_str(), kCapacityPercent,
              with_commas(s.objects).c_str(), kRecordBytes, kHeaderBytes, with_commas(bound).c_str());
  std::printf("- Shards: %u (the default); durability: %s%s; background maintenance on; otherwise default Options\n",
              shards, offheap::to_string(s.durability),
              s.durability == offheap::Durability::on_close ? " (the documented default)" : "");
  std::printf("- Files: %s (%s)\n", ScratchDir::instance().root().c_str(),
              ScratchDir::instance().on_tmpfs() ? "tmpfs" : "NOT tmpfs: /dev/shm is another file system");
  std::printf("- Phases: steady = warm-up, then the next %s requests; clean reopen = close(), reopen, the %s after "
              "those; kill -9 = a child runs warm-up and steady, raise(SIGKILL), the parent reopens and runs the "
              "same %s; cold = a fresh empty cache on the same %s\n",
              with_commas(s.measure).c_str(), with_commas(s.measure).c_str(), with_commas(s.measure).c_str(),
              with_commas(s.measure).c_str());
  std::printf("- Host: %s; %s", cpu_model().c_str(), compiler().c_str());
#if defined(NDEBUG) && defined(__OPTIMIZE__)
  std::printf(", optimized\n\n");
#else
  std::printf(", not optimized\n\n");
#endif
  std::fflush(stdout);
}

void print_table(const Settings& s, const std::vector<Result>& results) {
  const std::string m = with_commas(s.measure), e = with_commas(s.early());
  std::printf("\n## Miss ratios (after a restart and cold: the first %s requests / all %s)\n\n", e.c_str(),
              m.c_str());
  std::printf("| policy | steady miss ratio | cold, first / all | clean reopen, first / all | "
              "kill -9 reopen, first / all | open seconds clean / kill | records kept clean / kill |\n"
              "|---|---:|---:|---:|---:|---:|---:|\n");
  for (const Result& r : results) {
    const std::string kept = with_commas(r.clean.records_after) + " of " + with_commas(r.clean.records_before) +
                             " / " + with_commas(r.kill.records_after) + " of " + with_commas(r.kill.records_before);
    std::printf("| %s | %.4f | %s | %s | %s | %s | %s |\n", r.name, r.steady.miss_ratio(),
                pair_cell(r.cold.early_miss_ratio(), r.cold.miss_ratio()).c_str(),
                pair_cell(r.clean.tally.early_miss_ratio(), r.clean.tally.miss_ratio()).c_str(),
                r.child_ok ? pair_cell(r.kill.tally.early_miss_ratio(), r.kill.tally.miss_ratio()).c_str() : "-",
                pair_cell(r.clean.open_seconds, r.kill.open_seconds).c_str(), kept.c_str());
  }
  std::printf("\n(records kept: those the open found (stats().records plus the evictions since the open), of "
              "those the cache held after close(), or of the killed child's last count: between that count and "
              "the kill, its maintenance thread may evict the records above the capacity)\n");
}

// Checks every figure the run must meet; prints what failed. True if all hold.
bool print_checks(const Settings& s, const std::vector<Result>& results) {
  bool ok = true;
  std::printf("\n## Checks\n\n| policy | wrong values (all phases) | live bytes, highest (steady, clean, kill, cold) | "
              "bound | checks over the bound | rebuilt clean / kill |\n|---|---:|---:|---:|---:|---:|\n");
  const bool want_clean_rebuilt = s.durability == offheap::Durability::none;
  for (const Result& r : results) {
    const std::uint64_t bound = live_bound(s.capacity(), r.shards);
    const std::uint64_t wrong = r.wrong, over = r.over_bound;
    std::printf("| %s | %" PRIu64 " | %s, %s, %s, %s | %s | %" PRIu64 " | %s / %s |\n", r.name, wrong,
                with_commas(r.steady.max_live).c_str(), with_commas(r.clean.tally.max_live).c_str(),
                with_commas(r.kill.tally.max_live).c_str(), with_commas(r.cold.max_live).c_str(),
                with_commas(bound).c_str(), over, r.clean.rebuilt ? "yes" : "no", r.kill.rebuilt ? "yes" : "no");
    const auto fail = [&](const std::string& why) {
      std::fprintf(stderr, "ERROR: %s: %s\n", r.name, why.c_str());
      ok = false;
    };
    if (wrong != 0) fail(std::to_string(wrong) + " wrong values");
    if (over != 0) fail(std::to_string(over) + " checks found live_bytes past " + with_commas(bound));
    if (!r.child_ok) fail("kill -9: " + r.child_problem);
    if (r.clean.rebuilt != want_clean_rebuilt) {
      fail(std::string("the reopen after close() ") + (r.clean.rebuilt ? "rebuilt" : "did not rebuild"));
    }
    if (r.child_ok && !r.kill.rebuilt) fail("the reopen after kill -9 did not rebuild");
    if (r.clean.records_after != r.clean.records_before) {
      fail("the reopen after close() holds " + with_commas(r.clean.records_after) + " records of " +
           with_commas(r.clean.records_before));
    }
  }
  return ok;
}

// ---- flags --------------------------------------------------------------------------

void usage(const char* argv0) {
  std::printf(
      "usage: %s [flags]\n"
      "  --objects=N      distinct objects in the trace (default 200000)\n"
      "  --requests=N     warm-up requests (default 3000000)\n"
      "  --measure=N      requests of each measured phase (default 1000000)\n"
      "  --alpha=A        the Zipf exponent (default 1.0)\n"
      "  --seed=N         the trace's seed (default the tests' seed)\n"
      "  --durability=D   none, on_close (default), periodic or every_write\n",
      argv0);
}

bool read_settings(int argc, char** argv, Settings& s) {
  return offheap_bench::parse_flags(argc, argv, usage, [&s](const Flag& flag) {
    std::uint64_t n = 0;
    if (const char* v = flag.value("--objects=")) {
      if (!parse_u64(v, n) || n < 100 || n > kMaxObjects) return flag.fail("wants a number in [100, 10^11]");
      s.objects = n;
    } else if (const char* v = flag.value("--requests=")) {
      if (!parse_u64(v, n)) return flag.fail("wants a number");
      s.requests = n;
    } else if (const char* v = flag.value("--measure=")) {
      if (!parse_u64(v, n) || n == 0) return flag.fail("wants a positive number");
      s.measure = n;
    } else if (const char* v = flag.value("--alpha=")) {
      std::vector<double> one;
      if (!parse_doubles(v, one) || one.size() != 1) return flag.fail("wants one exponent >= 0");
      s.alpha = one[0];
    } else if (const char* v = flag.value("--seed=")) {
      if (!parse_u64(v, n)) return flag.fail("wants a number");
      s.seed = n;
    } else if (const char* v = flag.value("--durability=")) {
      const auto modes = {offheap::Durability::none, offheap::Durability::on_close, offheap::Durability::periodic,
                          offheap::Durability::every_write};
      const auto d = std::find_if(modes.begin(), modes.end(),
                                  [v](offheap::Durability m) { return std::string_view(v) == offheap::to_string(m); });
      if (d == modes.end()) return flag.fail("wants none, on_close, periodic or every_write");
      s.durability = *d;
    } else {
      return flag.unknown();
    }
    return true;
  });
}

// ---- main ---------------------------------------------------------------------------

int run(const Settings& s) {
  const Keys keys(s.objects);
  const std::vector<std::uint64_t> trace =
      offheap_test::zipf_trace(s.objects, s.alpha, s.requests + 2 * s.measure, s.seed);
  const Inputs in{s, keys, trace};
  {
    const fs::path probe = ScratchDir::instance().make("probe");
    const std::uint32_t shards = offheap::Cache(options_at(s, probe)).stats().shards;
    ScratchDir::remove(probe);
    print_setup(s, shards);
  }
  std::vector<Result> results;
  results.push_back(run_policy<offheap::Cache>("offheap::Cache (S3-FIFO)", in));
  results.push_back(run_policy<offheap::LruCache>("offheap::LruCache (LRU)", in));
  results.push_back(run_policy<offheap::TinyLfuCache>("offheap::TinyLfuCache (W-TinyLFU)", in));
  print_table(s, results);
  const bool ok = print_checks(s, results);
  std::printf("\n%s\n", ok ? "All checks passed." : "FAILED: see the errors above.");
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace offheap_bench

int main(int argc, char** argv) {
  offheap_bench::Settings s;
  if (!offheap_bench::read_settings(argc, argv, s)) return 2;
  try {
    return offheap_bench::run(s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ERROR: %s\n", e.what());
    return 1;
  }
}
