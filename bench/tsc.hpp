// SPDX-License-Identifier: Apache-2.0
// The time-stamp counter as offheap_latency reads it: one operation timed on
// its own, fenced so that the two reads bracket exactly the operation's
// instructions, and the counter's rate calibrated once against
// std::chrono::steady_clock.
//
//   tsc_begin()  lfence; rdtsc; lfence: the read waits for every earlier
//                instruction to finish, and the operation does not start
//                before the read.
//   tsc_end()    rdtscp; lfence: rdtscp reads only after every earlier
//                instruction (the operation's) has executed; the lfence keeps
//                later instructions (the recording) from starting before it.
//   tsc_now()    a bare rdtsc, for deadlines (no ordering needed).
//
// The fences cost a few tens of cycles; the noise floor (the same loop
// around an empty operation) shows what they add to every figure.
//
// Meaningful where the TSC is invariant (constant rate, running through
// sleep states: /proc/cpuinfo's constant_tsc and nonstop_tsc flags, which
// tsc_flags() reports). Elsewhere than x86-64 the "ticks" are steady_clock
// nanoseconds.
#pragma once

#include <chrono>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#if defined(__x86_64__)
#define OFFHEAP_BENCH_RDTSC 1
#endif

namespace offheap_bench {

[[gnu::always_inline]] inline std::uint64_t tsc_begin() noexcept {
#if defined(OFFHEAP_BENCH_RDTSC)
  std::uint32_t lo, hi;
  asm volatile("lfence\n\trdtsc\n\tlfence" : "=a"(lo), "=d"(hi) : : "memory");
  return (std::uint64_t{hi} << 32) | lo;
#else
  return static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
#endif
}

[[gnu::always_inline]] inline std::uint64_t tsc_end() noexcept {
#if defined(OFFHEAP_BENCH_RDTSC)
  std::uint32_t lo, hi;
  asm volatile("rdtscp\n\tlfence" : "=a"(lo), "=d"(hi) : : "rcx", "memory");
  return (std::uint64_t{hi} << 32) | lo;
#else
  return static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
#endif
}

[[gnu::always_inline]] inline std::uint64_t tsc_now() noexcept {
#if defined(OFFHEAP_BENCH_RDTSC)
  std::uint32_t lo, hi;
  asm volatile("rdtsc" : "=a"(lo), "=d"(hi));
  return (std::uint64_t{hi} << 32) | lo;
#else
  return static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
#endif
}

/// A spin-wait hint.
inline void cpu_relax() noexcept {
#if defined(OFFHEAP_BENCH_RDTSC)
  asm volatile("pause");
#endif
}

/// The counter's rate, measured once.
struct TscRate {
  double ticks_per_ns = 1;
  double calibration_ms = 0;  // the span it was measured over

  double ns(std::uint64_t ticks) const noexcept { return static_cast<double>(ticks) / ticks_per_ns; }
  double ms(std::uint64_t ticks) const noexcept { return ns(ticks) / 1e6; }
  std::uint64_t ticks(double ns) const noexcept { return static_cast<std::uint64_t>(ns * ticks_per_ns); }
};

/// Reads steady_clock between two counter reads, a few times, and keeps the
/// tightest pair (the counter at the middle of its bracket).
struct ClockPair {
  std::int64_t clock_ns;
  double tsc;
};
inline ClockPair clock_pair() {
  ClockPair best{0, 0};
  std::uint64_t best_spread = ~std::uint64_t{0};
  for (int i = 0; i < 16; ++i) {
    const std::uint64_t a = tsc_begin();
    const auto c = std::chrono::steady_clock::now();
    const std::uint64_t b = tsc_end();
    if (b - a < best_spread) {
      best_spread = b - a;
      best = {std::chrono::duration_cast<std::chrono::nanoseconds>(c.time_since_epoch()).count(),
              (static_cast<double>(a) + static_cast<double>(b)) / 2};
    }
  }
  return best;
}

/// Counter ticks per steady_clock nanosecond over `span` (slept through).
inline TscRate calibrate_tsc(std::chrono::milliseconds span) {
#if defined(OFFHEAP_BENCH_RDTSC)
  const ClockPair a = clock_pair();
  std::this_thread::sleep_for(span);
  const ClockPair b = clock_pair();
  const double ns = static_cast<double>(b.clock_ns - a.clock_ns);
  return {(b.tsc - a.tsc) / ns, ns / 1e6};
#else
  return {1.0, 0.0};
#endif
}

/// Which of constant_tsc and nonstop_tsc /proc/cpuinfo lists, e.g.
/// "constant_tsc nonstop_tsc"; "neither" if none.
inline std::string tsc_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::string w, found;
    while (words >> w) {
      if (w == "constant_tsc" || w == "nonstop_tsc") found += (found.empty() ? "" : " ") + w;
    }
    return found.empty() ? "neither constant_tsc nor nonstop_tsc" : found;
  }
  return "no flags line in /proc/cpuinfo";
}

}  // namespace offheap_bench
