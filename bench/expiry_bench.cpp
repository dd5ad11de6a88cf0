// SPDX-License-Identifier: Apache-2.0
// offheap_expiry_bench: what expiry costs.
//
// 1. The timing wheel at scale (--scales, default 1M; 10M by hand): a
//    store on a clock the bench moves (Options::clock), background
//    maintenance off, pre-sized; 16-byte keys, 8-byte values. Timed: N puts
//    with TTLs spread uniformly over 1-60,000 ms beside N puts without a
//    TTL (what scheduling adds to a write), then the maintain() calls that
//    expire every entry as the clock advances in 100 ms steps, beside N
//    remove() calls on the TTL-free store (what finding and removing an
//    expired record costs against removing it by key). Subjects alternate,
//    repetitions per scale (--reps, default 3 at 1M, 1 at 10M); medians.
//
// 2. W1 while the wheel expires 10% of the entries every second (the
//    default clock, background maintenance on): 24,000 keys of 16 bytes,
//    64-byte values; the TTL store's entries live 5-15 s (uniform: a tenth
//    of them expire each second) and a refill thread puts back every key it
//    finds missing, every 10 ms, with a new TTL; the plain store gets the
//    same refill thread (it finds nothing missing). Gets over a uniform
//    stream (1 and 2 threads) and the 90/10 mix (1 thread; the TTL store's
//    puts carry a 5-15 s TTL), in short slices with the two stores
//    alternating (--slices, default 15 per cell, --slice_ms 200), medians of
//    Mops/s; the expirations per second the TTL store saw are printed
//    beside them.
//
// 3. Memory back to the OS (--rss_mib, default 1024): an anonymous store
//    (background maintenance on) filled with 8 KiB values, cleared,
//    refilled, emptied key by key; the process's resident memory
//    (/proc/self/statm) after each step, and how long it took (from the
//    step's start) to fall back to within 2% of what the fill added
//    (polled every millisecond, up to 2 s).
//
// 4. Compaction (--compact_n, default 1,000,000 records): a one-shard
//    store (background maintenance off, compaction_factor 1.2) filled with
//    1 KiB values, two thirds of them removed at random, then one
//    maintain(): what it moved, how long per MiB moved (a shard's writers
//    wait while a chunk is moved), and the mapped bytes before and after,
//    for max_chunk_bytes 4 MiB, 64 MiB and 1 GiB.
//
// Output: the configuration, then the tables in markdown.
#include "cli.hpp"
#include "platform.hpp"
#include "w1.hpp"
#include "workload.hpp"

#include <offheap/offheap.hpp>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace offheap_bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

struct BenchClock : offheap::Clock {
  std::atomic<std::uint64_t> t{1'700'000'000'000};
  std::uint64_t now_ms() const noexcept override { return t.load(std::memory_order_relaxed); }
};

// ---- 1. the wheel at scale ----------------------------------------------------------

struct ScaleRun {
  double put_ttl_ns, put_plain_ns, expire_ns, remove_ns, expire_rounds;
  std::uint64_t peak_entries;
};

ScaleRun scale_run(const KeySet& keys, std::uint64_t seed) {
  const std::uint64_t n = keys.size();
  const std::uint64_t value = 0x0123456789abcdefull;
  const std::string_view v(reinterpret_cast<const char*>(&value), 8);
  std::mt19937_64 rng(seed);
  std::vector<std::uint32_t> ttl(n);
  for (auto& t : ttl) t = 1 + static_cast<std::uint32_t>(rng() % 60'000);
  ScaleRun r{};
  BenchClock clock;
  offheap::Options o;
  o.clock = &clock;
  o.background_maintenance = false;
  o.expected_entries = n;
  {
    offheap::Store plain(o);
    auto t = Clock::now();
    for (std::uint64_t i = 0; i < n; ++i) plain.put(keys.key(i), v);
    r.put_plain_ns = seconds_since(t) * 1e9 / static_cast<double>(n);
    t = Clock::now();
    for (std::uint64_t i = 0; i < n; ++i) plain.remove(keys.key(i));
    r.remove_ns = seconds_since(t) * 1e9 / static_cast<double>(n);
    if (plain.size() != 0) std::abort();
  }
  offheap::Store store(o);
  auto t = Clock::now();
  for (std::uint64_t i = 0; i < n; ++i) store.put(keys.key(i), v, std::chrono::milliseconds(ttl[i]));
  r.put_ttl_ns = seconds_since(t) * 1e9 / static_cast<double>(n);
  const offheap::Stats before = store.stats();
  r.peak_entries = before.expiry_entries;
  t = Clock::now();
  std::uint64_t rounds = 0;
  for (std::uint64_t ms = 0; ms <= 60'000; ms += 100, ++rounds) {
    clock.t += 100;
    store.maintain();
  }
  r.expire_ns = seconds_since(t) * 1e9 / static_cast<double>(n);
  r.expire_rounds = static_cast<double>(rounds);
  const offheap::Stats after = store.stats();
  if (store.size() != 0 || after.expirations != n) {
    std::fprintf(stderr, "expiry bench: %" PRIu64 " records left, %" PRIu64 " expirations of %" PRIu64 "\n",
                 store.size(), after.expirations, n);
    std::exit(1);
  }
  return r;
}

// ---- 2. W1 with expiry ------------------------------------------------------------

enum class Op { get1, get2, mixed1 };
const char* op_name(Op op) { return op == Op::get1 ? "get 1T" : op == Op::get2 ? "get 2T" : "90/10 1T"; }

struct W1Subject {
  bool ttl;
  offheap::Store store;
  std::atomic<bool> stop{false};
  std::thread refill;
  std::mt19937_64 rng{42};

  static offheap::Options options() {
    offheap::Options o;
    o.expected_entries = kW1Entries;
    return o;
  }
  static offheap::Ttl lifetime(std::mt19937_64& r) { return std::chrono::milliseconds(5000 + r() % 10'000); }

  explicit W1Subject(bool with_ttl) : ttl(with_ttl), store(options()) {
    for (std::uint64_t i = 0; i < kW1Entries; ++i) put(i, rng);
    // Puts back what expired, every 10 ms (the plain store: finds nothing).
    refill = std::thread([this] {
      std::mt19937_64 r(7);
      const W1Inputs& inputs = w1_inputs();
      // (put() draws TTLs from r, this thread's own generator.)
      while (!stop.load(std::memory_order_relaxed)) {
        for (std::uint64_t i = 0; i < kW1Entries; ++i) {
          if (!store.contains(inputs.keys.key(i))) put(i, r);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    });
  }
  ~W1Subject() {
    stop = true;
    refill.join();
  }
  void put(std::uint64_t i, std::mt19937_64& r) {
    const W1Inputs& in = w1_inputs();
    store.put(in.keys.key(i), in.values[i % in.values.size()],
              ttl ? lifetime(r) : offheap::Ttl{});
  }
};

/// Runs `op` for about `ms` on `s`; returns Mops/s.
double slice(W1Subject& s, Op op, double ms, std::uint64_t& pos) {
  const W1Inputs& in = w1_inputs();
  const int threads = op == Op::get2 ? 2 : 1;
  std::atomic<std::uint64_t> done{0};
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> bad{0};
  const auto work = [&](int t) {
    std::string out;
    out.reserve(128);
    std::mt19937_64 r(static_cast<std::uint64_t>(t) + pos);
    std::uint64_t n = 0, p = pos + static_cast<std::uint64_t>(t) * 7919;
    while (!stop.load(std::memory_order_relaxed)) {
      for (int k = 0; k < 256; ++k, ++p, ++n) {
        const std::uint32_t e = op == Op::mixed1 ? in.mixed.at(p) : in.uniform.at(p);
        const std::uint32_t i = e & ~IndexStream::kPutBit;
        if (e & IndexStream::kPutBit) {
          s.put(i, r);
        } else if (s.store.get(in.keys.key(i), out) && out.size() != kW1ValueBytes) {
          bad.fetch_add(1);
        }
      }
    }
    done.fetch_add(n);
  };
  std::vector<std::thread> pool;
  const auto t0 = Clock::now();
  for (int t = 1; t < threads; ++t) pool.emplace_back(work, t);
  std::thread timer([&] {
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
    stop = true;
  });
  work(0);
  for (auto& th : pool) th.join();
  timer.join();
  const double secs = seconds_since(t0);
  pos += 1 << 16;
  if (bad.load() != 0) {
    std::fprintf(stderr, "expiry bench: a value of the wrong length\n");
    std::exit(1);
  }
  return static_cast<double>(done.load()) / secs / 1e6;
}

// ---- 3. memory back to the OS --------------------------------------------------------

std::uint64_t rss_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

/// Polls the RSS every millisecond until it is at most `limit` (up to 2 s);
/// returns the seconds it took (2 if it never got there).
double wait_rss(std::uint64_t limit) {
  const auto t = Clock::now();
  while (rss_bytes() > limit && seconds_since(t) < 2.0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return seconds_since(t);
}

void rss_table(std::uint64_t mib) {
  const std::string value(8192, 'v');
  const std::uint64_t n = (mib << 20) / value.size();
  offheap::Options o;
  o.expected_entries = n;
  offheap::Store s(o);
  const auto key = [](std::uint64_t i) { return "key-" + std::to_string(i); };
  std::printf("| step | seconds | RSS after, MiB | back within 2%% of the fill, ms |\n|---|---:|---:|---:|\n");
  const auto row = [](const char* step, double secs, std::uint64_t rss, double to_floor) {
    if (to_floor < 0) {
      std::printf("| %s | %.3f | %.1f | |\n", step, secs, static_cast<double>(rss) / (1 << 20));
    } else {
      std::printf("| %s | %.3f | %.1f | %.1f |\n", step, secs, static_cast<double>(rss) / (1 << 20), to_floor * 1e3);
    }
    std::fflush(stdout);
  };
  const std::uint64_t start = rss_bytes();
  row("start", 0, start, -1);
  auto t = Clock::now();
  for (std::uint64_t i = 0; i < n; ++i) s.put(key(i), value);
  const std::uint64_t peak = rss_bytes();
  row("fill", seconds_since(t), peak, -1);
  t = Clock::now();
  s.clear();
  const double clear_secs = seconds_since(t);
  // Back to within 2% of what the store added (the process held `start`
  // before: the earlier sections' inputs).
  const std::uint64_t floor = start + (peak - start) / 50;
  row("clear", clear_secs, rss_bytes(), wait_rss(floor) + clear_secs);
  t = Clock::now();
  for (std::uint64_t i = 0; i < n; ++i) s.put(key(i), value);
  row("refill", seconds_since(t), rss_bytes(), -1);
  t = Clock::now();
  for (std::uint64_t i = 0; i < n; ++i) s.remove(key(i));
  const double remove_secs = seconds_since(t);
  const double settle = wait_rss(floor) + remove_secs;
  row("remove every key", remove_secs, rss_bytes(), settle);
  std::printf("\nPeak %.1f MiB.\n", static_cast<double>(peak) / (1 << 20));
}

void compaction_table(std::uint64_t n) {
  std::printf("| max_chunk_bytes | moved, MiB | records moved | seconds | ms per MiB moved | mapped before, MiB | "
              "mapped after, MiB | live, MiB | chunks emptied |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  const std::string value(1024, 'v');
  for (const std::uint64_t chunk : {std::uint64_t{4} << 20, std::uint64_t{64} << 20, std::uint64_t{1} << 30}) {
    offheap::Options o;
    o.shards = 1;
    o.max_chunk_bytes = chunk;
    o.compaction_factor = 1.2;
    o.background_maintenance = false;
    o.expected_entries = n;
    offheap::Store s(o);
    const auto key = [](std::uint64_t i) { return "key-" + std::to_string(i); };
    for (std::uint64_t i = 0; i < n; ++i) s.put(key(i), value);
    std::mt19937_64 rng(1);
    for (std::uint64_t i = 0; i < n; ++i) {
      if (rng() % 3 != 0) s.remove(key(i));
    }
    const offheap::Stats before = s.stats();
    const auto t = Clock::now();
    s.maintain();
    const double secs = seconds_since(t);
    const offheap::Stats after = s.stats();
    const double moved = static_cast<double>(after.compacted_bytes) / (1 << 20);
    std::printf("| %" PRIu64 " MiB | %.1f | %s | %.3f | %.2f | %.1f | %.1f | %.1f | %" PRIu64 " |\n", chunk >> 20, moved,
                with_commas(after.compacted_records).c_str(), secs, moved > 0 ? secs * 1e3 / moved : 0.0,
                static_cast<double>(before.mapped_bytes) / (1 << 20), static_cast<double>(after.mapped_bytes) / (1 << 20),
                static_cast<double>(after.live_bytes) / (1 << 20), after.chunks_emptied);
    std::fflush(stdout);
  }
}

}  // namespace
}  // namespace offheap_bench

int main(int argc, char** argv) {
  using namespace offheap_bench;
  std::vector<double> scales_d{1e6};
  std::uint64_t slices = 15, slice_ms = 200, reps = 0, rss_mib = 1024, warmup_s = 15, compact_n = 1'000'000;
  const auto usage = [](const char* self) {
    std::printf("usage: %s [--scales=1000000,10000000] [--reps=N] [--slices=15] [--slice_ms=200] "
                "[--warmup_s=15] [--rss_mib=1024] [--compact_n=1000000]\n", self);
  };
  const bool ok = parse_flags(argc, argv, +usage, [&](const Flag& f) {
    if (const char* v = f.value("--scales=")) return parse_doubles(v, scales_d) || f.fail("a list of entry counts");
    if (const char* v = f.value("--slices=")) return parse_u64(v, slices) || f.fail("a number");
    if (const char* v = f.value("--slice_ms=")) return parse_u64(v, slice_ms) || f.fail("a number");
    if (const char* v = f.value("--reps=")) return parse_u64(v, reps) || f.fail("a number");
    if (const char* v = f.value("--rss_mib=")) return parse_u64(v, rss_mib) || f.fail("a number");
    if (const char* v = f.value("--warmup_s=")) return parse_u64(v, warmup_s) || f.fail("a number");
    if (const char* v = f.value("--compact_n=")) return parse_u64(v, compact_n) || f.fail("a number");
    return f.unknown();
  });
  if (!ok) return 2;
  print_host();

  std::printf("\n## The timing wheel at scale\n\n"
              "Store, pre-sized, background maintenance off, a clock the bench moves; 16-byte keys, 8-byte values; "
              "TTLs uniform over 1-60,000 ms; maintain() every 100 ms of clock to 60 s. ns per entry, medians.\n\n");
  std::printf("| entries | put, no TTL | put with TTL | expire (maintain) | remove by key | wheel entries at the peak |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|\n");
  for (double sd : scales_d) {
    const auto n = static_cast<std::uint64_t>(sd);
    const KeySet keys = KeySet::random_fixed(n, 16, 0x5EED0100 + n);
    const std::uint64_t r = reps != 0 ? reps : n > 2'000'000 ? 1 : 3;
    std::vector<double> put_plain, put_ttl, expire, remove;
    std::uint64_t peak = 0;
    for (std::uint64_t i = 0; i < r; ++i) {
      const ScaleRun s = scale_run(keys, i + 1);
      put_plain.push_back(s.put_plain_ns);
      put_ttl.push_back(s.put_ttl_ns);
      expire.push_back(s.expire_ns);
      remove.push_back(s.remove_ns);
      peak = s.peak_entries;
    }
    std::printf("| %s | %.0f | %.0f | %.0f | %.0f | %s |\n", with_commas(n).c_str(), median(put_plain),
                median(put_ttl), median(expire), median(remove), with_commas(peak).c_str());
    std::fflush(stdout);
  }

  std::printf("\n## W1 while the wheel expires 10%% of the entries per second\n\n"
              "24,000 keys (16 B), 64 B values, pre-sized, background maintenance on, the default clock; "
              "TTL store: entries live 5-15 s, a refill thread puts back what is missing every 10 ms "
              "(the plain store runs the same thread); %" PRIu64 " slices of %" PRIu64
              " ms per cell, the stores alternating; Mops/s medians.\n\n",
              slices, slice_ms);
  W1Subject plain(false), ttl(true);
  // The TTL store reaches its steady state first (entries written at the
  // start live 5-15 s): a tenth of them expiring each second.
  std::this_thread::sleep_for(std::chrono::seconds(warmup_s));
  const auto start = Clock::now();
  const std::uint64_t expired_before = ttl.store.stats().expirations;
  std::printf("| W1 | plain store | store with TTLs | ratio |\n|---|---:|---:|---:|\n");
  std::uint64_t pos = 0;
  for (const Op op : {Op::get1, Op::get2, Op::mixed1}) {
    std::vector<double> a, b, ratio;
    for (std::uint64_t i = 0; i < slices; ++i) {
      const bool ttl_first = i % 2 == 1;
      const double x = ttl_first ? 0 : slice(plain, op, static_cast<double>(slice_ms), pos);
      const double y = slice(ttl, op, static_cast<double>(slice_ms), pos);
      const double x2 = ttl_first ? slice(plain, op, static_cast<double>(slice_ms), pos) : x;
      a.push_back(x2);
      b.push_back(y);
      ratio.push_back(y / x2);
    }
    std::printf("| %s | %.2f | %.2f | %.2f |\n", op_name(op), median(a), median(b), median(ratio));
    std::fflush(stdout);
  }
  const double secs = seconds_since(start);
  const offheap::Stats st = ttl.store.stats();
  std::printf("\nThe TTL store: %.0f expirations per second over %.1f s (%.1f%% of the entries per second), "
              "%" PRIu64 " records at the end, %" PRIu64 " wheel entries.\n",
              static_cast<double>(st.expirations - expired_before) / secs, secs,
              100.0 * static_cast<double>(st.expirations - expired_before) / secs / static_cast<double>(kW1Entries),
              st.records, st.expiry_entries);

  std::printf("\n## Memory back to the OS\n\nAn anonymous store, background maintenance on, %" PRIu64
              " MiB of 8 KiB values; the process's RSS.\n\n", rss_mib);
  rss_table(rss_mib);

  std::printf("\n## Compaction\n\n"
              "One shard, %s records of 1 KiB values, two thirds removed at random, then one maintain() "
              "(compaction_factor 1.2, background maintenance off).\n\n",
              with_commas(compact_n).c_str());
  compaction_table(compact_n);
  return 0;
}
