// SPDX-License-Identifier: Apache-2.0
// offheap_latency: the latency of each get and put, timed on its own, for
// offheap and the peers CMake found, with the machine's own noise floor
// measured beside every figure (issue 31, item 1). A plain executable that
// prints tables; no Google Benchmark.
//
// Every operation is timed alone with the time-stamp counter (tsc.hpp:
// lfence; rdtsc; lfence before it, rdtscp; lfence after), the counter
// calibrated once against steady_clock at the start. Each thread records
// into its own log-linear histogram (latency_recorder.hpp: 0.4% buckets,
// exact maximum), allocated and touched before its loop, so the timed loop
// allocates nothing; operations of 1 ms or more are counted, and the 10
// slowest of each row kept with when they started (ms since the row's
// start) and their sequence number. W1's sizes throughout: 16-byte keys,
// 64-byte values (w1.hpp).
//
// Three scenes (--scenes=steady,growth,cache):
//
//   steady  W1 steady state: the 24,000 W1 keys put first (every subject
//           pre-sized for them, as offheap_bench does), then W1's 90/10
//           stream (90% get, 10% put of an existing key), gets and puts
//           recorded apart, for --seconds; 1 thread (every subject), then 2
//           threads sharing one subject (the thread-safe ones: offheap,
//           libcuckoo, TBB), thread t of T walking positions t, t+T, ...
//
//   growth  From empty to --growth entries (default 20,000,000), default
//           options (no expected_entries, no reserve): one writer puts fresh
//           keys and publishes how many it has put in an atomic counter; one
//           reader gets random keys among those (every get must hit).
//           absl::flat_hash_map and boost::unordered_flat_map allow no
//           concurrent reader: one thread puts, and after each put gets a
//           random key already written, both timed. One subject at a time
//           (memory), freed before the next. Then offheap alone to
//           --growth-big entries (default 50,000,000; 0 skips it). For
//           offheap the writer also reads stats() every 16,384 puts
//           (outside the timed window), so that a slow operation can be set
//           beside the index growth and the chunks mapped in its window.
//
//   cache   offheap::Cache (S3-FIFO), LruCache and TinyLfuCache with
//           capacity_bytes = --cache-bytes (default 64 MiB), background
//           maintenance on, other options at their defaults. Filled first:
//           the 24,000 W1 keys (read twice each: the hot set), then fresh
//           keys until the policy has evicted, then as many fresh keys
//           again. Timed: every put is of a fresh key (so every put adds a
//           record past the capacity and one is evicted), every get reads a
//           hot key (W1's uniform stream) and, on a miss, puts it back (a
//           cache-aside read; that put is timed as a put). One thread
//           alternating put and get, then a writer thread and a reader
//           thread, each for --seconds.
//
// After the cache scene, the memory floor (pointer_chase.hpp): chains of
// 1, 2, 4 and 8 dependent loads from random lines of a buffer twice the
// caches' capacity, each timed as an operation, so that an evicting put's
// p99.9 / p50 (a few dependent misses) is read beside what the misses alone
// give on this machine.
//
// Beside every row: the noise floor, the same timing loop around an empty
// operation for as long as the row ran, on as many runnable threads as the
// row had: its timed threads, and for offheap a spinning thread in place of
// the maintenance thread (the spinner is always runnable; the maintenance
// thread only while it has work). And getrusage()'s involuntary context
// switches over the row: the timed threads' own (RUSAGE_THREAD, summed) and
// the process's (RUSAGE_SELF: the maintenance thread included).
//
// Subjects (--subjects=store,absl,boost,cuckoo,tbb,cache,lru,tinylfu): each
// peer as offheap_bench runs it (subjects.hpp, concurrent_peers.hpp), its
// configuration printed; a peer CMake did not find is left out (its
// package named in the output).
//
// --smoke: growth to 200,000 and 400,000, 0.3 s rows, 4 MiB caches: a few
// seconds, every subject and scene, every get checked.
#include "cli.hpp"
#include "concurrent_peers.hpp"
#include "latency_recorder.hpp"
#include "platform.hpp"
#include "pointer_chase.hpp"
#include "scratch_dir.hpp"
#include "subjects.hpp"
#include "tsc.hpp"
#include "w1.hpp"
#include "workload.hpp"

#include <offheap/offheap.hpp>

#include <malloc.h>
#include <sched.h>
#include <linux/magic.h>
#include <sys/resource.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace offheap_bench {
namespace {

// ---- settings ------------------------------------------------------------------

constexpr double kSlowNs = 1e6;                       // an operation of 1 ms or more is "slow"
constexpr std::uint64_t kSampleEvery = 16'384;        // offheap growth: stats() every so many puts
constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
constexpr const char* kAllScenes = "steady,growth,cache";
constexpr const char* kAllSubjects = "store,store-files,absl,boost,cuckoo,tbb,cache,lru,tinylfu";

struct Settings {
  bool steady = true, growth = true, cache = true;
  std::uint64_t growth_n = 20'000'000;
  std::uint64_t growth_big = 50'000'000;
  double seconds = 3.0;
  std::uint64_t cache_bytes = 64 * kMiB;
  std::set<std::string> subjects;  // empty: all
  std::string dir;                 // store-files: the parent directory (empty: ScratchDir, /dev/shm)
  bool smoke = false;
};
Settings g;
TscRate g_rate;
std::uint64_t g_slow_ticks = 0;
std::uint64_t g_wrong = 0;  // gets that missed a key present, or read a torn value

bool selected(const char* id) { return g.subjects.empty() || g.subjects.count(id) != 0; }

std::string list_of(const std::set<std::string>& s) {
  std::string out;
  for (const std::string& x : s) out += (out.empty() ? "" : ",") + x;
  return out;
}

// ---- keys ---------------------------------------------------------------------

/// Fresh 16-byte keys made from their index: 16 hex digits of a bijective
/// mix of (index + seed), so distinct indices give distinct keys, spread
/// over the hash space; made in a caller's buffer outside the timed window
/// (no key table: 50M keys would take 800 MB and a cache miss per key).
class FreshKeys {
 public:
  explicit FreshKeys(std::uint64_t seed) noexcept : seed_(seed) {}

  std::string_view key(std::uint64_t i, char (&buf)[kW1KeyBytes]) const noexcept {
    static constexpr char kHex[] = "0123456789abcdef";
    std::uint64_t x = i + seed_;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    for (std::size_t c = 0; c < kW1KeyBytes; ++c) buf[c] = kHex[(x >> (60 - 4 * c)) & 0xF];
    return {buf, kW1KeyBytes};
  }

 private:
  std::uint64_t seed_;
};

/// A small fast generator (splitmix64) and a uniform pick in [0, n).
struct Rng {
  std::uint64_t s;
  std::uint64_t next() noexcept {
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  std::uint64_t below(std::uint64_t n) noexcept {
    __extension__ using U128 = unsigned __int128;
    return static_cast<std::uint64_t>((static_cast<U128>(next()) * n) >> 64);
  }
};

// ---- subjects -------------------------------------------------------------------

/// An offheap store or cache behind the subject interface (subjects.hpp),
/// with access to the store for stats().
template <class T>
class OffheapSubject {
 public:
  static constexpr bool kThreadSafe = true;
  using Session = NoSession<OffheapSubject>;

  explicit OffheapSubject(const offheap::Options& o) : store_(o) {}

  void put(Session&, std::string_view key, std::string_view value) { store_.put(key, value); }
  bool get(Session&, std::string_view key, std::string& out) const { return store_.get(key, out); }
  void settle() { store_.maintain(); }
  T& store() noexcept { return store_; }

 private:
  T store_;
};

std::string offheap_version() {
  return "offheap " + std::to_string(offheap::kVersionMajor) + "." + std::to_string(offheap::kVersionMinor) +
         "." + std::to_string(offheap::kVersionPatch);
}

/// offheap::Store: default Options but expected_entries (steady: 24,000;
/// growth: 0, the default).
struct StoreKind {
  static constexpr const char* kId = "store";
  static constexpr const char* kName = "offheap::Store";
  static constexpr bool kThreadSafe = true;
  static constexpr bool kMaintenance = true;  // a maintenance thread beside the timed ones
  using Subject = OffheapSubject<offheap::Store>;

  static std::unique_ptr<Subject> make(std::uint64_t expected_entries) {
    offheap::Options o;
    o.expected_entries = expected_entries;
    return std::make_unique<Subject>(o);
  }
  static std::string describe() {
    const offheap::Store probe{offheap::Options{}};
    const offheap::Options& o = probe.options();
    return offheap_version() + ", offheap::Store in anonymous memory, Options at their defaults (" +
           std::to_string(probe.stats().shards) + " shards here, background maintenance " +
           (o.background_maintenance ? "on" : "off") + ", record_stats " + (o.record_stats ? "on" : "off") +
           ") but expected_entries; get(string_view, std::string&) copies out; put(string_view, string_view)";
  }
  static std::string sizing(std::uint64_t n) {
    return n != 0 ? "expected_entries = " + with_commas(n) : "expected_entries = 0 (the default: starts small, grows)";
  }
};

/// A file-backed offheap::Store (growth scene only): default Options but
/// `path`, a fresh directory under --dir (default: the scratch directory
/// on /dev/shm), removed after the store closes. Its journal chunks are
/// files reserved whole with posix_fallocate.
/// The directory, removed after the store (a base: destroyed after it).
struct RemovedDir {
  explicit RemovedDir(std::filesystem::path p) : dir(std::move(p)) {}
  RemovedDir(const RemovedDir&) = delete;
  RemovedDir& operator=(const RemovedDir&) = delete;
  ~RemovedDir() { ScratchDir::remove(dir); }
  std::filesystem::path dir;
};

class FileStoreSubject : private RemovedDir, public OffheapSubject<offheap::Store> {
 public:
  explicit FileStoreSubject(std::filesystem::path d)
      : RemovedDir(std::move(d)), OffheapSubject<offheap::Store>(options(dir)) {}

 private:
  static offheap::Options options(const std::filesystem::path& p) {
    offheap::Options o;
    o.path = p;
    return o;
  }
};

struct StoreFilesKind {
  static constexpr const char* kId = "store-files";
  static constexpr const char* kName = "offheap::Store (files)";
  static constexpr bool kThreadSafe = true;
  static constexpr bool kMaintenance = true;
  using Subject = FileStoreSubject;

  static std::filesystem::path parent() {
    return g.dir.empty() ? ScratchDir::instance().root() : std::filesystem::path(g.dir);
  }
  static std::unique_ptr<Subject> make(std::uint64_t) {
    if (g.dir.empty()) return std::make_unique<Subject>(ScratchDir::instance().make("store-files"));
    static unsigned made = 0;
    std::filesystem::path p = std::filesystem::path(g.dir) /
                              ("offheap-latency-" + std::to_string(::getpid()) + "-" + std::to_string(++made));
    std::filesystem::create_directory(p);
    return std::make_unique<Subject>(std::move(p));
  }
  static std::string describe() {
    struct statfs fs {};
    const std::filesystem::path p = parent();
    const bool tmpfs = ::statfs(p.c_str(), &fs) == 0 && fs.f_type == TMPFS_MAGIC;
    const offheap::Options o;
    return offheap_version() + ", offheap::Store file-backed in " + p.string() + (tmpfs ? " (tmpfs)" : "") +
           ", Options at their defaults (durability " +
           (o.durability == offheap::Durability::on_close ? "on_close" : "not on_close") +
           ", background maintenance on); growth scene only (--subjects=store-files, --dir=PATH)";
  }
  static std::string sizing(std::uint64_t) { return "expected_entries = 0 (the default: starts small, grows)"; }
};

/// A peer from subjects.hpp / concurrent_peers.hpp, as offheap_bench runs it.
template <class S, const char* Id>
struct PeerKind {
  static constexpr const char* kId = Id;
  static constexpr const char* kName = S::kName;
  static constexpr bool kThreadSafe = S::kThreadSafe;
  static constexpr bool kMaintenance = false;
  using Subject = S;

  static std::unique_ptr<S> make(std::uint64_t n) { return std::make_unique<S>(n); }
  static std::string describe() { return S::describe(); }
  static std::string sizing(std::uint64_t n) { return S::sizing(n); }
};

constexpr char kAbslId[] = "absl";
constexpr char kBoostId[] = "boost";
constexpr char kCuckooId[] = "cuckoo";
constexpr char kTbbId[] = "tbb";

/// Every store subject compiled in, offheap first (the tables' order), each
/// only when selected.
template <class Fn>
void for_each_kind(Fn&& fn) {
  const auto one = [&]<class K>() {
    if (selected(K::kId)) fn.template operator()<K>();
  };
  one.template operator()<StoreKind>();
#if defined(OFFHEAP_BENCH_HAVE_ABSL)
  one.template operator()<PeerKind<AbslSubject, kAbslId>>();
#endif
#if defined(OFFHEAP_BENCH_HAVE_BOOST)
  one.template operator()<PeerKind<BoostSubject, kBoostId>>();
#endif
#if defined(OFFHEAP_BENCH_HAVE_CUCKOO)
  one.template operator()<PeerKind<CuckooSubject, kCuckooId>>();
#endif
#if defined(OFFHEAP_BENCH_HAVE_TBB)
  one.template operator()<PeerKind<TbbSubject, kTbbId>>();
#endif
}

/// The caches of the cache scene.
template <class T>
struct CacheInfo;
template <>
struct CacheInfo<offheap::Cache> {
  static constexpr const char* kId = "cache";
  static constexpr const char* kName = "offheap::Cache (S3-FIFO)";
};
template <>
struct CacheInfo<offheap::LruCache> {
  static constexpr const char* kId = "lru";
  static constexpr const char* kName = "offheap::LruCache (LRU)";
};
template <>
struct CacheInfo<offheap::TinyLfuCache> {
  static constexpr const char* kId = "tinylfu";
  static constexpr const char* kName = "offheap::TinyLfuCache (W-TinyLFU)";
};

template <class Fn>
void for_each_cache(Fn&& fn) {
  const auto one = [&]<class T>() {
    if (selected(CacheInfo<T>::kId)) fn.template operator()<T>();
  };
  one.template operator()<offheap::Cache>();
  one.template operator()<offheap::LruCache>();
  one.template operator()<offheap::TinyLfuCache>();
}

offheap::Options cache_options() {
  offheap::Options o;  // background maintenance on: the default
  o.capacity_bytes = g.cache_bytes;
  return o;
}


// ---- timed runs ------------------------------------------------------------------

/// What the machine did beside us: CPU time from /proc/stat's first line
/// (every CPU, in clock ticks) and this process's own CPU time.
struct MachineCpu {
  double busy_s = 0;   // user + nice + system + irq + softirq, all CPUs
  double steal_s = 0;  // taken by the hypervisor
  double own_s = 0;    // this process: user + system (getrusage)

  static MachineCpu now() {
    MachineCpu m;
    std::ifstream in("/proc/stat");
    std::string cpu;
    std::uint64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
    in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
    const auto hz = static_cast<double>(::sysconf(_SC_CLK_TCK));
    m.busy_s = static_cast<double>(user + nice + system + irq + softirq) / hz;
    m.steal_s = static_cast<double>(steal) / hz;
    rusage r{};
    ::getrusage(RUSAGE_SELF, &r);
    m.own_s = static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
              static_cast<double>(r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
    return m;
  }
  /// CPU seconds other processes (and the kernel's own threads) used
  /// between two readings (at the clock tick's resolution).
  static double others(const MachineCpu& a, const MachineCpu& b) {
    return std::max(0.0, (b.busy_s - a.busy_s) - (b.own_s - a.own_s));
  }
};

/// The wall clock's time of day, HH:MM:SS.
std::string time_of_day() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::localtime_r(&t, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%H:%M:%S", &tm);
  return buf;
}

/// The start of a run: every thread arrives, then all go at once.
struct Start {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::atomic<bool> stop{false};  // spinners (and a growth reader) stop on it
  std::uint64_t start = 0;        // the counter at the go
  std::uint64_t deadline = ~std::uint64_t{0};

  void arrive() noexcept {
    ready.fetch_add(1, std::memory_order_acq_rel);
    while (!go.load(std::memory_order_acquire)) cpu_relax();
  }
  bool past(std::uint64_t n) const noexcept { return (n & 255) == 0 && tsc_now() >= deadline; }
};

/// What one timed thread keeps (a cache line of its own: no false sharing
/// between the threads' counters).
struct alignas(64) ThreadRec {
  Recorder get{'g', g_slow_ticks};
  Recorder put{'p', g_slow_ticks};
  Recorder empty{'e', g_slow_ticks};
  Usage usage;  // its own, over its loop
  std::uint64_t wrong = 0, gets = 0, misses = 0;
};

/// One run of timed threads (and spinners).
struct Phase {
  std::uint64_t start = 0;
  double seconds = 0;  // from the go to the last timed thread's end
  Usage process;       // RUSAGE_SELF over the run
  Usage timed;         // the timed threads' RUSAGE_THREAD, summed
  int timed_threads = 0, spinners = 0;
  std::string began;     // time of day at the start
  double others_s = 0;   // CPU seconds other processes used meanwhile
  double steal_s = 0;    // seconds the hypervisor took meanwhile
  std::vector<std::unique_ptr<ThreadRec>> threads;
};

/// Runs body(t, start, rec) on `timed` threads beside `spinners` spinning
/// threads, all released together; `seconds` > 0 sets the deadline the
/// bodies watch. The main thread only waits (joins) meanwhile.
template <class Body>
Phase run_phase(int timed, int spinners, double seconds, Body&& body) {
  Phase ph;
  ph.timed_threads = timed;
  ph.spinners = spinners;
  for (int i = 0; i < timed; ++i) ph.threads.push_back(std::make_unique<ThreadRec>());
  Start st;
  std::vector<std::thread> workers, spin;
  for (int t = 0; t < timed; ++t) workers.emplace_back([&, t] { body(t, st, *ph.threads[t]); });
  for (int s = 0; s < spinners; ++s) {
    spin.emplace_back([&st] {
      st.arrive();
      while (!st.stop.load(std::memory_order_relaxed)) {
      }
    });
  }
  while (st.ready.load(std::memory_order_acquire) < timed + spinners) std::this_thread::yield();
  ph.began = time_of_day();
  const MachineCpu cpu0 = MachineCpu::now();
  const Usage before = Usage::process();
  st.start = tsc_now();
  if (seconds > 0) st.deadline = st.start + g_rate.ticks(seconds * 1e9);
  st.go.store(true, std::memory_order_release);
  for (std::thread& w : workers) w.join();
  const std::uint64_t end = tsc_now();
  st.stop.store(true, std::memory_order_release);
  for (std::thread& s : spin) s.join();
  ph.process = Usage::process() - before;
  const MachineCpu cpu1 = MachineCpu::now();
  ph.others_s = MachineCpu::others(cpu0, cpu1);
  ph.steal_s = cpu1.steal_s - cpu0.steal_s;
  ph.start = st.start;
  ph.seconds = g_rate.ns(end - st.start) / 1e9;
  for (const auto& r : ph.threads) ph.timed += r->usage;
  return ph;
}

/// The timing loop of a floor: op() timed on its own, again and again, on
/// `timed` threads beside `spinners` spinning ones, for `seconds`; the
/// times go to each thread's `empty` recorder.
template <class Op>
Phase floor_phase(int timed, int spinners, double seconds, Op op) {
  return run_phase(timed, spinners, seconds, [&op](int, Start& st, ThreadRec& r) {
    st.arrive();
    const Usage u0 = Usage::thread();
    for (std::uint64_t n = 0;; ++n) {
      if (st.past(n)) break;
      const std::uint64_t t0 = tsc_begin();
      op();
      const std::uint64_t t1 = tsc_end();
      r.empty.record(t1 - t0, t0, n);
    }
    r.usage = Usage::thread() - u0;
  });
}

/// The noise floor: the timing loop around an empty operation.
Phase noise_phase(int timed, int spinners, double seconds) {
  return floor_phase(timed, spinners, seconds, [] {});
}

/// offheap's index and chunks, read by a growth writer every kSampleEvery
/// puts (outside the timed window).
struct GrowthSample {
  std::uint64_t tsc = 0, puts = 0, index_capacity = 0, chunks = 0;
};

/// One row of a scene's table: a subject on some threads, and its noise
/// floor.
struct Row {
  std::string subject, threads;
  Phase run, noise;
  std::unique_ptr<Recorder> get, put, empty;  // merged over threads
  std::uint64_t wrong = 0, gets = 0, misses = 0;
  std::vector<std::string> notes;
  std::vector<GrowthSample> samples;

  /// Merges the threads' records; counts wrong values into g_wrong.
  void finish() {
    get = std::make_unique<Recorder>('g', g_slow_ticks);
    put = std::make_unique<Recorder>('p', g_slow_ticks);
    empty = std::make_unique<Recorder>('e', g_slow_ticks);
    for (const auto& r : run.threads) {
      get->merge(r->get);
      put->merge(r->put);
      wrong += r->wrong;
      gets += r->gets;
      misses += r->misses;
    }
    for (const auto& r : noise.threads) empty->merge(r->empty);
    run.threads.clear();
    noise.threads.clear();
    g_wrong += wrong;
  }

  std::string floor() const {
    std::string f = std::to_string(noise.timed_threads) + " timed";
    if (noise.spinners != 0) f += " + " + std::to_string(noise.spinners) + " spinning";
    return f;
  }
};

/// The row's noise floor: as many runnable threads as the row had, for as
/// long as it ran. Called once the row's subject is gone (no maintenance
/// thread left running).
void measure_floor(Row& row, int timed, bool maintenance) {
  ::malloc_trim(0);
  row.noise = noise_phase(timed, maintenance ? 1 : 0, row.run.seconds);
  row.finish();
}

/// The process's resident memory, from /proc/self/statm.
std::uint64_t resident_bytes() {
  std::ifstream in("/proc/self/statm");
  std::uint64_t size = 0, resident = 0;
  in >> size >> resident;
  return resident * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

void progress(const Row& row) {
  std::printf("  ran %s, %s: %.2f s from %s (noise floor %.2f s from %s)\n", row.subject.c_str(),
              row.threads.c_str(), row.run.seconds, row.run.began.c_str(), row.noise.seconds, row.noise.began.c_str());
  std::fflush(stdout);
}

// ---- printing --------------------------------------------------------------------

std::string dur(double ns) {
  char buf[32];
  if (ns < 1e3) {
    std::snprintf(buf, sizeof buf, "%.0f ns", ns);
  } else if (ns < 1e6) {
    std::snprintf(buf, sizeof buf, "%.2f us", ns / 1e3);
  } else if (ns < 1e9) {
    std::snprintf(buf, sizeof buf, "%.2f ms", ns / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.3f s", ns / 1e9);
  }
  return buf;
}

void print_op_line(const std::string& subject, const std::string& threads, const char* op, const Recorder& r,
                   const std::string& cs) {
  const LatencyHistogram& h = r.hist();
  if (h.count() == 0) {
    std::printf("| %s | %s | %s | 0 | | | | | | | %s |\n", subject.c_str(), threads.c_str(), op, cs.c_str());
    return;
  }
  const auto p = [&](double q) { return dur(g_rate.ns(h.percentile(q))); };
  std::printf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", subject.c_str(), threads.c_str(), op,
              with_commas(h.count()).c_str(), p(0.5).c_str(), p(0.99).c_str(), p(0.999).c_str(), p(0.9999).c_str(),
              dur(g_rate.ns(h.max())).c_str(), with_commas(r.slow().over()).c_str(), cs.c_str());
}

std::string cs_cell(const Phase& ph) {
  return with_commas(static_cast<std::uint64_t>(ph.timed.invol)) + " / " +
         with_commas(static_cast<std::uint64_t>(ph.process.invol));
}

/// Where a slow event of a growth row falls among the writer's samples.
std::string growth_window(const Row& row, const SlowEvent& e) {
  const std::vector<GrowthSample>& s = row.samples;
  if (s.size() < 2) return {};
  std::size_t j = 0;
  while (j + 1 < s.size() && s[j + 1].tsc <= e.at) ++j;
  if (j + 1 >= s.size()) return " [after the last sample]";
  const GrowthSample& a = s[j];
  const GrowthSample& b = s[j + 1];
  std::string w = " [puts #" + with_commas(a.puts) + "-#" + with_commas(b.puts) + ": index ";
  w += a.index_capacity == b.index_capacity
           ? with_commas(a.index_capacity) + " slots, unchanged"
           : with_commas(a.index_capacity) + " -> " + with_commas(b.index_capacity) + " slots";
  w += "; chunks ";
  w += a.chunks == b.chunks ? with_commas(a.chunks) + ", unchanged"
                            : with_commas(a.chunks) + " -> " + with_commas(b.chunks);
  return w + "]";
}

void print_events(const char* what, const std::vector<SlowEvent>& events, std::uint64_t start, const Row* row) {
  for (const SlowEvent& e : events) {
    const char* op = e.op == 'g' ? "get" : e.op == 'p' ? "put" : "empty";
    const double at_ms = e.at >= start ? g_rate.ms(e.at - start) : 0.0;
    std::printf("    - %s %s at %.1f ms (%s #%s)%s\n", op, dur(g_rate.ns(e.ticks)).c_str(), at_ms, what,
                with_commas(e.seq).c_str(), row != nullptr ? growth_window(*row, e).c_str() : "");
  }
}

/// The table of a scene, then per row: its notes, the slowest operations
/// of 1 ms or more, and the floor's.
void print_scene(const char* title, const std::vector<Row>& rows, const char* seq_what) {
  std::printf("\n%s\n\n", title);
  std::printf("| subject | threads | op | ops | p50 | p99 | p99.9 | p99.99 | max | >= 1 ms | invol. cs (timed threads / "
              "process) |\n");
  std::printf("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const Row& r : rows) {
    print_op_line(r.subject, r.threads, "get", *r.get, cs_cell(r.run));
    print_op_line(r.subject, r.threads, "put", *r.put, "");
    print_op_line("noise floor", r.floor(), "empty", *r.empty, cs_cell(r.noise));
  }
  std::printf("\nPer row: when it began, wall time, this process's figures over the run (getrusage), the CPU time "
              "other processes and kernel threads used meanwhile (/proc/stat less this process) and the hypervisor's steal, checks, and "
              "the slowest operations of 1 ms or more (ms since the row's start):\n");
  for (const Row& r : rows) {
    const double ops = static_cast<double>(r.get->hist().count() + r.put->hist().count());
    std::printf("\n  %s, %s: from %s, %.2f s, %.2f Mops/s timed in all; process: %s involuntary / %s voluntary "
                "context switches, %s minor faults; other processes used %.2f CPU-s, steal %.2f s\n",
                r.subject.c_str(), r.threads.c_str(), r.run.began.c_str(), r.run.seconds, ops / r.run.seconds / 1e6,
                with_commas(static_cast<std::uint64_t>(r.run.process.invol)).c_str(),
                with_commas(static_cast<std::uint64_t>(r.run.process.vol)).c_str(),
                with_commas(static_cast<std::uint64_t>(r.run.process.minflt)).c_str(), r.run.others_s,
                r.run.steal_s);
    std::printf("    noise floor (%s): from %s, %s involuntary / %s voluntary context switches; other processes used "
                "%.2f CPU-s, steal %.2f s\n",
                r.floor().c_str(), r.noise.began.c_str(),
                with_commas(static_cast<std::uint64_t>(r.noise.process.invol)).c_str(),
                with_commas(static_cast<std::uint64_t>(r.noise.process.vol)).c_str(), r.noise.others_s,
                r.noise.steal_s);
    for (const std::string& n : r.notes) std::printf("    %s\n", n.c_str());
    if (r.wrong != 0) std::printf("    WRONG: %s gets missed a key present or read a torn value\n", with_commas(r.wrong).c_str());
    SlowLog all = r.get->slow();
    all.merge(r.put->slow());
    std::printf("    %s operations of 1 ms or more (get %s, put %s)%s\n", with_commas(all.over()).c_str(),
                with_commas(r.get->slow().over()).c_str(), with_commas(r.put->slow().over()).c_str(),
                all.over() != 0 ? "; the slowest:" : "");
    print_events(seq_what, all.slowest(), r.run.start, r.samples.empty() ? nullptr : &r);
    std::printf("    noise floor: %s of 1 ms or more%s\n", with_commas(r.empty->slow().over()).c_str(),
                r.empty->slow().over() != 0 ? "; the slowest:" : "");
    print_events("iteration", r.empty->slow().slowest(), r.noise.start, nullptr);
  }
  std::fflush(stdout);
}

// ---- scene (a): W1 steady state --------------------------------------------------

template <class S>
void fill_w1(S& subject) {
  const W1Inputs& in = w1_inputs();
  typename S::Session session(subject);
  for (std::uint64_t i = 0; i < kW1Entries; ++i) subject.put(session, in.keys.key(i), in.values[i % kW1ValueVariants]);
  subject.settle();
}

template <class K>
Row steady_row(int threads) {
  using S = typename K::Subject;
  Row row;
  row.subject = K::kName;
  row.threads = std::to_string(threads);
  {
    std::unique_ptr<S> subject = K::make(kW1Entries);
    fill_w1(*subject);
    row.run = run_phase(threads, 0, g.seconds, [&](int t, Start& st, ThreadRec& r) {
      const W1Inputs& in = w1_inputs();
      const WholeValueCheck& check = whole_value_check();
      S& s = *subject;
      typename S::Session session(s);
      std::string out(kW1ValueBytes, '\0');
      s.get(session, in.keys.key(0), out);  // untimed: a thread's first read
      st.arrive();
      const Usage u0 = Usage::thread();
      const auto step = static_cast<std::uint64_t>(threads);
      std::uint64_t p = static_cast<std::uint64_t>(t);
      for (std::uint64_t n = 0;; ++n, p += step) {
        if (st.past(n)) break;
        const std::uint32_t e = in.mixed.at(p);
        const std::string_view key = in.keys.key(e & ~IndexStream::kPutBit);
        if (e & IndexStream::kPutBit) {
          const std::string_view value = in.values[p % kW1ValueVariants];
          const std::uint64_t t0 = tsc_begin();
          s.put(session, key, value);
          const std::uint64_t t1 = tsc_end();
          r.put.record(t1 - t0, t0, p);
        } else {
          const std::uint64_t t0 = tsc_begin();
          const bool hit = s.get(session, key, out);
          const std::uint64_t t1 = tsc_end();
          r.get.record(t1 - t0, t0, p);
          r.wrong += w1_wrong(hit, p, out, check);
        }
      }
      r.usage = Usage::thread() - u0;
    });
  }
  measure_floor(row, threads, K::kMaintenance);
  progress(row);
  return row;
}

void steady_scene() {
  std::vector<Row> rows;
  for_each_kind([&]<class K>() { rows.push_back(steady_row<K>(1)); });
  for_each_kind([&]<class K>() {
    if constexpr (K::kThreadSafe) rows.push_back(steady_row<K>(2));
  });
  if (rows.empty()) return;
  char title[512];
  std::snprintf(title, sizeof title,
                "== (a) W1 steady state: %s keys of %zu B, values of %zu B, pre-filled, every subject pre-sized for "
                "them; W1's 90/10 stream (90%% get, 10%% put of an existing key), %g s per row; 2 threads share one "
                "subject",
                with_commas(kW1Entries).c_str(), kW1KeyBytes, kW1ValueBytes, g.seconds);
  print_scene(title, rows, "stream position");
}

// ---- scene (b): growth from empty ------------------------------------------------

template <class K>
Row growth_row(std::uint64_t n, const std::string& label) {
  using S = typename K::Subject;
  constexpr bool kOffheap = std::is_same_v<K, StoreKind> || std::is_same_v<K, StoreFilesKind>;
  const W1Inputs& in = w1_inputs();
  const WholeValueCheck& check = whole_value_check();
  const FreshKeys keys(0x5EED0020);
  Row row;
  row.subject = label;
  const int timed = K::kThreadSafe ? 2 : 1;
  row.threads = K::kThreadSafe ? "writer + reader" : "1 (put, then get)";
  if constexpr (kOffheap) row.samples.reserve(n / kSampleEvery + 2);
  offheap::Stats end_stats;
  std::uint64_t resident = 0;
  {
    std::unique_ptr<S> subject = K::make(0);
    struct alignas(64) Published {
      std::atomic<std::uint64_t> n{0};  // entries the writer has put
    } published;
    const auto sample = [&](std::uint64_t puts) {
      if constexpr (kOffheap) {
        const offheap::Stats s = subject->store().stats();
        row.samples.push_back({tsc_now(), puts, s.index_capacity, s.chunks});
      }
    };
    sample(0);
    if (!row.samples.empty()) row.samples.back().tsc = 0;  // the start, whenever it comes
    row.run = run_phase(timed, 0, 0, [&](int t, Start& st, ThreadRec& r) {
      S& s = *subject;
      typename S::Session session(s);
      std::string out(kW1ValueBytes, '\0');
      char buf[kW1KeyBytes];
      Rng rng{0x5EED0030 + static_cast<std::uint64_t>(t)};
      st.arrive();
      const Usage u0 = Usage::thread();
      if (t == 0) {  // the writer (and, for a map without concurrent readers, the reader too)
        for (std::uint64_t i = 0; i < n; ++i) {
          const std::string_view key = keys.key(i, buf);
          const std::string_view value = in.values[i % kW1ValueVariants];
          const std::uint64_t t0 = tsc_begin();
          s.put(session, key, value);
          const std::uint64_t t1 = tsc_end();
          r.put.record(t1 - t0, t0, i);
          if constexpr (K::kThreadSafe) {
            published.n.store(i + 1, std::memory_order_release);
          } else {
            const std::uint64_t j = rng.below(i + 1);
            const std::string_view k = keys.key(j, buf);
            const std::uint64_t g0 = tsc_begin();
            const bool hit = s.get(session, k, out);
            const std::uint64_t g1 = tsc_end();
            r.get.record(g1 - g0, g0, i);
            r.wrong += w1_wrong(hit, i, out, check);
          }
          if constexpr (kOffheap) {
            if (((i + 1) & (kSampleEvery - 1)) == 0) sample(i + 1);
          }
        }
        st.stop.store(true, std::memory_order_release);
      } else {  // the reader: random keys among those already written
        std::uint64_t k = 0;
        while (!st.stop.load(std::memory_order_acquire)) {
          const std::uint64_t have = published.n.load(std::memory_order_acquire);
          if (have == 0) {
            cpu_relax();
            continue;
          }
          const std::string_view key = keys.key(rng.below(have), buf);
          const std::uint64_t t0 = tsc_begin();
          const bool hit = s.get(session, key, out);
          const std::uint64_t t1 = tsc_end();
          r.get.record(t1 - t0, t0, k);
          r.wrong += w1_wrong(hit, k, out, check);
          ++k;
        }
      }
      r.usage = Usage::thread() - u0;
    });
    if constexpr (kOffheap) {
      sample(n);
      end_stats = subject->store().stats();
    }
    resident = resident_bytes();
  }
  if (!K::kThreadSafe) {
    row.notes.push_back(std::string(K::kName) +
                        " allows no concurrent reader: one thread puts each fresh key, then gets a random key "
                        "already written, both timed");
  } else {
    row.notes.push_back("one writer thread puts fresh keys and publishes its count; one reader thread gets random "
                        "keys among those (every get must hit)");
  }
  row.notes.push_back("process resident memory with " + with_commas(n) + " entries: " +
                      with_commas(resident / kMiB) + " MiB");
  if constexpr (kOffheap) {
    std::uint64_t index_changes = 0, chunk_changes = 0;
    for (std::size_t i = 1; i < row.samples.size(); ++i) {
      index_changes += row.samples[i].index_capacity != row.samples[i - 1].index_capacity;
      chunk_changes += row.samples[i].chunks != row.samples[i - 1].chunks;
    }
    row.notes.push_back("stats() every " + with_commas(kSampleEvery) + " puts (untimed): index " +
                        with_commas(row.samples.front().index_capacity) + " -> " +
                        with_commas(end_stats.index_capacity) + " slots over " + std::to_string(end_stats.shards) +
                        " shards, changed in " + with_commas(index_changes) + " of " +
                        with_commas(row.samples.size() - 1) + " windows; chunks " +
                        with_commas(row.samples.front().chunks) + " -> " + with_commas(end_stats.chunks) +
                        ", changed in " + with_commas(chunk_changes) + " windows; mapped " +
                        with_commas(end_stats.mapped_bytes / kMiB) + " MiB at the end");
  }
  measure_floor(row, timed, K::kMaintenance);
  progress(row);
  return row;
}

void growth_scene() {
  std::vector<Row> rows;
  for_each_kind([&]<class K>() {
    rows.push_back(growth_row<K>(g.growth_n, std::string(K::kName) + " to " + with_commas(g.growth_n)));
  });
  if (selected(StoreFilesKind::kId)) {
    rows.push_back(growth_row<StoreFilesKind>(g.growth_n, std::string(StoreFilesKind::kName) + " to " +
                                                             with_commas(g.growth_n)));
  }
  if (g.growth_big != 0 && selected(StoreKind::kId)) {
    rows.push_back(growth_row<StoreKind>(g.growth_big, std::string(StoreKind::kName) + " to " + with_commas(g.growth_big)));
  }
  if (rows.empty()) return;
  char title[512];
  std::snprintf(title, sizeof title,
                "== (b) growth from empty: fresh keys of %zu B, values of %zu B, default options (not pre-sized); "
                "one subject at a time",
                kW1KeyBytes, kW1ValueBytes);
  print_scene(title, rows, "op");
  std::printf("\n  (a put's # is the entries put before it; an offheap row's [window] gives its index slots and "
              "chunks at the stats() samples around the operation's start)\n");
}

// ---- scene (c): a cache at its capacity -------------------------------------------

template <class T>
Row cache_row(bool two_threads) {
  using S = OffheapSubject<T>;
  const W1Inputs& in = w1_inputs();
  const FreshKeys keys(0x5EED0040);
  Row row;
  row.subject = CacheInfo<T>::kName;
  row.threads = two_threads ? "writer + reader" : "1 (put, then get)";
  const int timed = two_threads ? 2 : 1;
  {
    S subject(cache_options());
    typename S::Session session(subject);
    std::string out(kW1ValueBytes, '\0');
    // The hot set: the W1 keys, read twice each.
    for (std::uint64_t i = 0; i < kW1Entries; ++i) subject.put(session, in.keys.key(i), in.values[i % kW1ValueVariants]);
    for (int pass = 0; pass < 2; ++pass) {
      for (std::uint64_t i = 0; i < kW1Entries; ++i) subject.get(session, in.keys.key(i), out);
    }
    // Fresh keys until the policy evicts, then as many again.
    char buf[kW1KeyBytes];
    std::uint64_t next = 0;
    const std::uint64_t bound = 100 * (g.cache_bytes / 104 + 1);
    while (subject.store().stats().evictions == 0) {
      for (int i = 0; i < 4096; ++i, ++next) subject.put(session, keys.key(next, buf), in.values[next % kW1ValueVariants]);
      if (next > bound) {
        std::fprintf(stderr, "offheap_latency: %s evicted nothing after %s puts\n", row.subject.c_str(),
                     with_commas(next).c_str());
        std::exit(1);
      }
    }
    for (std::uint64_t i = 0, more = next; i < more; ++i, ++next) {
      subject.put(session, keys.key(next, buf), in.values[next % kW1ValueVariants]);
    }
    const std::uint64_t filled = next;
    const offheap::Stats before = subject.store().stats();
    std::atomic<std::uint64_t> fresh_puts{0};

    row.run = run_phase(timed, 0, g.seconds, [&](int t, Start& st, ThreadRec& r) {
      typename S::Session ses(subject);
      std::string value_out(kW1ValueBytes, '\0');
      char kb[kW1KeyBytes];
      const bool writes = !two_threads || t == 0;
      const bool reads = !two_threads || t == 1;
      std::uint64_t fresh = filled;  // only one thread writes fresh keys
      std::uint64_t p = 0;
      subject.get(ses, in.keys.key(0), value_out);  // untimed: a thread's first read
      st.arrive();
      const Usage u0 = Usage::thread();
      for (std::uint64_t n = 0;; ++n) {
        if (st.past(n)) break;
        if (writes) {
          const std::string_view key = keys.key(fresh, kb);
          const std::string_view value = in.values[fresh % kW1ValueVariants];
          const std::uint64_t t0 = tsc_begin();
          subject.put(ses, key, value);
          const std::uint64_t t1 = tsc_end();
          r.put.record(t1 - t0, t0, fresh - filled);
          ++fresh;
        }
        if (reads) {
          const std::uint64_t pos = p++;
          const std::string_view key = in.keys.key(in.uniform.at(pos));
          const std::uint64_t t0 = tsc_begin();
          const bool hit = subject.get(ses, key, value_out);
          const std::uint64_t t1 = tsc_end();
          r.get.record(t1 - t0, t0, pos);
          ++r.gets;
          if (hit) {
            r.wrong += w1_torn(pos, value_out, whole_value_check());
          } else {
            ++r.misses;
            const std::string_view value = in.values[in.uniform.at(pos) % kW1ValueVariants];
            const std::uint64_t p0 = tsc_begin();
            subject.put(ses, key, value);
            const std::uint64_t p1 = tsc_end();
            r.put.record(p1 - p0, p0, pos);
          }
        }
      }
      if (writes) fresh_puts.store(fresh - filled, std::memory_order_relaxed);
      r.usage = Usage::thread() - u0;
    });
    const offheap::Stats after = subject.store().stats();
    const std::uint64_t puts = fresh_puts.load();
    const std::uint64_t all_puts = after.puts - before.puts;
    const std::uint64_t evictions = after.evictions - before.evictions;
    char note[768];
    std::snprintf(note, sizeof note,
                  "filled with %s keys first; in the run: %s puts (%s of fresh keys), %s evictions (%.2f per put), "
                  "live bytes at the end %s of capacity %s (%.3fx), %s shards; index migrations begun %s (index "
                  "slots %s, still migrating at the end %s)",
                  with_commas(filled + kW1Entries).c_str(), with_commas(all_puts).c_str(), with_commas(puts).c_str(),
                  with_commas(evictions).c_str(),
                  all_puts != 0 ? static_cast<double>(evictions) / static_cast<double>(all_puts) : 0.0,
                  with_commas(after.live_bytes).c_str(), with_commas(g.cache_bytes).c_str(),
                  static_cast<double>(after.live_bytes) / static_cast<double>(g.cache_bytes),
                  std::to_string(after.shards).c_str(),
                  with_commas(after.index_migrations - before.index_migrations).c_str(),
                  with_commas(after.index_capacity).c_str(), with_commas(after.index_migrating).c_str());
    row.notes.push_back(note);
  }
  measure_floor(row, timed, true);
  char hits[256];
  std::snprintf(hits, sizeof hits, "hot-set gets: %s, hit ratio %.4f (a miss puts the key back: timed as a put)",
                with_commas(row.gets).c_str(),
                row.gets != 0 ? 1.0 - static_cast<double>(row.misses) / static_cast<double>(row.gets) : 0.0);
  row.notes.push_back(hits);
  progress(row);
  return row;
}

/// The cache scene's memory floor: chains of `loads` dependent loads from
/// random lines of a buffer twice the caches' capacity (pointer_chase.hpp),
/// each chain timed as an operation is, one timed thread beside a spinning
/// one (as the one-thread rows, whose maintenance thread the spinner
/// stands for). A put at a cache's capacity is a few dependent misses: its
/// p99.9 / p50 is read against the chain whose p50 is nearest its own.
void memory_floor(const std::vector<Row>& rows) {
  PointerChase chase(2 * g.cache_bytes);
  struct Chain {
    int loads;
    Phase phase;
    std::unique_ptr<Recorder> rec;
  };
  std::vector<Chain> chains;
  for (const int loads : {1, 2, 4, 8}) {
    Chain c{loads, {}, std::make_unique<Recorder>('e', g_slow_ticks)};
    std::uint64_t sink = chase.chase(1024);  // untimed: the TLB and the first lines
    c.phase = floor_phase(1, 1, std::max(0.2, g.seconds / 2), [&] { sink += chase.chase(loads); });
    asm volatile("" : : "r"(sink));
    for (const auto& r : c.phase.threads) c.rec->merge(r->empty);
    c.phase.threads.clear();
    chains.push_back(std::move(c));
  }
  std::printf("\nThe machine's memory floor, in the same run: chains of dependent loads from random 64-byte lines of "
              "a %s MiB buffer (4 KiB pages), each chain timed as one operation; 1 timed + 1 spinning thread, %g s "
              "each\n\n",
              with_commas(chase.bytes() / kMiB).c_str(), std::max(0.2, g.seconds / 2));
  std::printf("| dependent loads | ops | p50 | p99 | p99.9 | p99.99 | max | p99.9 / p50 |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  const auto ratio = [](const LatencyHistogram& h) {
    const double p50 = static_cast<double>(h.percentile(0.5));
    return p50 > 0 ? static_cast<double>(h.percentile(0.999)) / p50 : 0.0;
  };
  for (const Chain& c : chains) {
    const LatencyHistogram& h = c.rec->hist();
    const auto p = [&](double q) { return dur(g_rate.ns(h.percentile(q))); };
    std::printf("| %d | %s | %s | %s | %s | %s | %s | %.2fx |\n", c.loads, with_commas(h.count()).c_str(),
                p(0.5).c_str(), p(0.99).c_str(), p(0.999).c_str(), p(0.9999).c_str(), dur(g_rate.ns(h.max())).c_str(),
                ratio(h));
  }
  std::printf("\nPuts against it (one-thread rows): p99.9 / p50, and the chain whose p50 is nearest the put's:\n");
  for (const Row& r : rows) {
    if (r.threads.rfind("1 ", 0) != 0 || r.put->hist().count() == 0) continue;
    const LatencyHistogram& h = r.put->hist();
    const auto gap = [&](const Chain& x) {
      return std::abs(std::log(static_cast<double>(x.rec->hist().percentile(0.5)) /
                               static_cast<double>(h.percentile(0.5))));
    };
    const Chain* near = &chains.front();
    for (const Chain& c : chains) {
      if (gap(c) < gap(*near)) near = &c;
    }
    std::printf("  %s: put p99.9 / p50 %.2fx (p50 %s); %d dependent loads: %.2fx (p50 %s)\n", r.subject.c_str(),
                ratio(h), dur(g_rate.ns(h.percentile(0.5))).c_str(), near->loads, ratio(near->rec->hist()),
                dur(g_rate.ns(near->rec->hist().percentile(0.5))).c_str());
  }
  std::fflush(stdout);
}

void cache_scene() {
  std::vector<Row> rows;
  for (const bool two : {false, true}) {
    for_each_cache([&]<class T>() { rows.push_back(cache_row<T>(two)); });
  }
  if (rows.empty()) return;
  char title[512];
  std::snprintf(title, sizeof title,
                "== (c) caches at their capacity: capacity_bytes = %s (%s MiB), background maintenance on, other "
                "options at their defaults; every put is of a fresh key (each adds a record past the capacity), "
                "every get reads one of the %s hot keys; %g s per row",
                with_commas(g.cache_bytes).c_str(), with_commas(g.cache_bytes / kMiB).c_str(),
                with_commas(kW1Entries).c_str(), g.seconds);
  print_scene(title, rows, "op");
  memory_floor(rows);
}

// ---- the platform, flags, main ---------------------------------------------------

std::string read_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line.empty() ? "unknown" : line;
}

void print_platform(int argc, char** argv) {
  std::printf("offheap_latency: each get and put timed on its own (rdtsc), offheap beside its peers, with the "
              "machine's noise floor in the same run\n");
  print_host();
  utsname u{};
  ::uname(&u);
  cpu_set_t set;
  CPU_ZERO(&set);
  const int usable = ::sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : -1;
  std::printf("  Kernel:   %s (uname -r)\n", u.release);
  std::printf("  Cores:    %u online, %d this process may run on\n", std::thread::hardware_concurrency(), usable);
  std::printf("  Clock:    %s (clocksource); TSC: %s\n",
              read_line("/sys/devices/system/clocksource/clocksource0/current_clocksource").c_str(),
              tsc_flags().c_str());
  std::printf("  TSC rate: %.4f GHz, calibrated once against steady_clock over %.0f ms\n", g_rate.ticks_per_ns,
              g_rate.calibration_ms);
#if defined(OFFHEAP_BENCH_RDTSC)
  std::printf("  Timing:   lfence; rdtsc; lfence before each operation, rdtscp; lfence after it; log-linear "
              "histograms (buckets at most 0.4%% wide; a percentile is its bucket's upper bound; max exact)\n");
#else
  std::printf("  Timing:   steady_clock (no rdtsc on this architecture); log-linear histograms\n");
#endif
  std::printf("  Command:  ");
  for (int i = 0; i < argc; ++i) std::printf("%s%s", i ? " " : "", argv[i]);
  std::printf("\n  Settings: --scenes=%s%s%s --growth=%" PRIu64 " --growth-big=%" PRIu64
              " --seconds=%g --cache-bytes=%" PRIu64 " --subjects=%s\n",
              g.steady ? "steady" : "", g.growth ? (g.steady ? ",growth" : "growth") : "",
              g.cache ? (g.steady || g.growth ? ",cache" : "cache") : "", g.growth_n, g.growth_big, g.seconds,
              g.cache_bytes, g.subjects.empty() ? kAllSubjects : list_of(g.subjects).c_str());
  const std::string missing = missing_map_peers();
  if (!missing.empty()) std::printf("  Not built with (CMake did not find them): %s\n", missing.c_str());
  std::printf("\nSubjects (each peer as offheap_bench runs it):\n");
  for_each_kind([]<class K>() {
    std::printf("- %s: %s. Steady: %s; growth: %s.\n", K::kName, K::describe().c_str(), K::sizing(kW1Entries).c_str(),
                K::sizing(0).c_str());
  });
  if (g.growth && selected(StoreFilesKind::kId)) {
    std::printf("- %s: %s.\n", StoreFilesKind::kName, StoreFilesKind::describe().c_str());
  }
  for_each_cache([]<class T>() {
    const T probe(cache_options());
    std::printf("- %s: %s, capacity_bytes = %s, %s shards here, background maintenance %s, other Options at their "
                "defaults (expected_entries 0, record_stats off, no listener)\n",
                CacheInfo<T>::kName, offheap_version().c_str(), with_commas(g.cache_bytes).c_str(),
                std::to_string(probe.stats().shards).c_str(), probe.options().background_maintenance ? "on" : "off");
  });
  std::fflush(stdout);
}

void usage(const char* argv0) {
  std::printf(
      "usage: %s [flags]\n"
      "  --scenes=LIST      of steady,growth,cache (default: all)\n"
      "  --growth=N         growth scene: entries per subject (default 20000000)\n"
      "  --growth-big=N     then offheap::Store alone to N entries (default 50000000; 0 skips it)\n"
      "  --seconds=S        steady and cache scenes: seconds per row (default 3)\n"
      "  --cache-bytes=N    cache scene: capacity_bytes (default 67108864, 64 MiB)\n"
      "  --subjects=LIST    of %s (default: all found;\n"
      "                     store-files is a file-backed offheap::Store, growth scene only)\n"
      "  --dir=PATH         store-files: where its directory goes (default: /dev/shm)\n"
      "  --smoke            a quick run: growth 200000 and 400000, 0.3 s rows, 4 MiB caches\n"
      "                     (flags after it override its values)\n",
      argv0, kAllSubjects);
}

bool parse_list(const char* v, const char* allowed, std::set<std::string>& out) {
  out.clear();
  const std::string all = std::string(",") + allowed + ",";
  std::string_view rest(v);
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    const std::string item(rest.substr(0, comma));
    if (item.empty() || all.find("," + item + ",") == std::string::npos) return false;
    out.insert(item);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
  }
  return !out.empty();
}

bool parse(int argc, char** argv) {
  return parse_flags(argc, argv, usage, [](const Flag& f) {
    const char* v = nullptr;
    std::uint64_t n = 0;
    if (f.value("--smoke") != nullptr && std::string_view(f.value("--smoke")).empty()) {
      g.smoke = true;
      g.growth_n = 200'000;
      g.growth_big = 400'000;
      g.seconds = 0.3;
      g.cache_bytes = 4 * kMiB;
    } else if ((v = f.value("--scenes=")) != nullptr) {
      std::set<std::string> s;
      if (!parse_list(v, kAllScenes, s)) return f.fail("expected a list of steady, growth, cache");
      g.steady = s.count("steady") != 0;
      g.growth = s.count("growth") != 0;
      g.cache = s.count("cache") != 0;
    } else if ((v = f.value("--growth=")) != nullptr) {
      if (!parse_u64(v, n) || n == 0 || n > (std::uint64_t{1} << 36)) return f.fail("expected a count > 0");
      g.growth_n = n;
    } else if ((v = f.value("--growth-big=")) != nullptr) {
      if (!parse_u64(v, n) || n > (std::uint64_t{1} << 36)) return f.fail("expected a count (0: skip)");
      g.growth_big = n;
    } else if ((v = f.value("--seconds=")) != nullptr) {
      std::vector<double> d;
      if (!parse_doubles(v, d) || d.size() != 1 || d[0] <= 0 || d[0] > 3600) return f.fail("expected seconds > 0");
      g.seconds = d[0];
    } else if ((v = f.value("--cache-bytes=")) != nullptr) {
      if (!parse_u64(v, n) || n < kMiB) return f.fail("expected bytes, at least 1 MiB");
      g.cache_bytes = n;
    } else if ((v = f.value("--dir=")) != nullptr) {
      if (*v == '\0' || !std::filesystem::is_directory(v)) return f.fail("expected an existing directory");
      g.dir = v;
    } else if ((v = f.value("--subjects=")) != nullptr) {
      if (!parse_list(v, kAllSubjects, g.subjects)) return f.fail("expected a list of subjects (see --help)");
    } else {
      return f.unknown();
    }
    return true;
  });
}

int run(int argc, char** argv) {
  if (!parse(argc, argv)) return 2;
  g_rate = calibrate_tsc(std::chrono::milliseconds(g.smoke ? 50 : 250));
  g_slow_ticks = g_rate.ticks(kSlowNs);
  w1_inputs();
  whole_value_check();
  print_platform(argc, argv);
  if (g.steady) steady_scene();
  if (g.growth) growth_scene();
  if (g.cache) cache_scene();
  const Usage total = Usage::process();
  rusage r{};
  ::getrusage(RUSAGE_SELF, &r);
  std::printf("\nWhole run: %s involuntary context switches, %s major faults, peak resident %s MiB; wrong values: %s\n",
              with_commas(static_cast<std::uint64_t>(total.invol)).c_str(),
              with_commas(static_cast<std::uint64_t>(total.majflt)).c_str(),
              with_commas(static_cast<std::uint64_t>(r.ru_maxrss) / 1024).c_str(), with_commas(g_wrong).c_str());
  return g_wrong == 0 ? 0 : 1;
}

}  // namespace
}  // namespace offheap_bench

int main(int argc, char** argv) { return offheap_bench::run(argc, argv); }
