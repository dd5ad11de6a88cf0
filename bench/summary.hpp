// SPDX-License-Identifier: Apache-2.0
// Collecting results for the closing summary: a console reporter that keeps
// every repetition of every benchmark, the robust statistics (median,
// interquartile spread) the summary quotes, and the cells of its tables.
//
// The trade-off: this machine is shared and its speed swings, so one
// benchmark's mean says little. The reporter keeps each repetition's figures
// (keyed by the registered name) and the summary quotes medians and ratios of
// medians of subjects measured in the same interleaved run. A benchmark run
// on several thread counts is kept once per count, as "name/threads:N". On
// screen it shows Google Benchmark's aggregates (mean, median, stddev, cv)
// rather than every repetition; --benchmark_out still receives every run.
#pragma once

#include "cli.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace offheap_bench {

/// The figures of one repetition: user counters (rates already divided by
/// time) plus the items rate under a fixed name, the iterations of all
/// threads and the CPU seconds they used together.
struct Sample {
  double items_per_second = 0;
  double iterations = 0;
  double cpu_seconds = 0;
  double real_seconds = 0;  // wall (or manual) time of the repetition's iterations
  std::map<std::string, double> counters;

  double counter(const std::string& name, double fallback = NAN) const {
    const auto it = counters.find(name);
    return it == counters.end() ? fallback : it->second;
  }
};

/// Sets the counters of one thread's share of a run on threads: items,
/// allocs/op (`allocs`: the thread's allocations in its timed loop; averaged
/// over the threads), and from thread 0 wall_Mops: all threads' operations
/// over `seconds`, the wall time thread 0 saw between the start and the
/// stop barrier (see wall_mops below).
inline void set_thread_counters(benchmark::State& state, double allocs, double seconds) {
  const auto iterations = static_cast<double>(state.iterations());
  state.SetItemsProcessed(state.iterations());
  state.counters["allocs/op"] =
      benchmark::Counter(allocs / std::max(iterations, 1.0), benchmark::Counter::kAvgThreads);
  if (state.thread_index() == 0) {
    state.counters["wall_Mops"] = iterations * state.threads() / std::max(seconds, 1e-9) / 1e6;
  }
}

/// The flags offheap_bench and offheap_cache_bench pass to Google Benchmark
/// ahead of the user's (the last of a flag wins): many short repetitions,
/// randomly interleaved across subjects.
inline constexpr const char* kDefaultFlags[] = {
    "--benchmark_repetitions=15",
    "--benchmark_min_time=0.05",
    "--benchmark_enable_random_interleaving=true",
};

/// argv0, kDefaultFlags, then the user's flags.
inline std::vector<char*> with_default_flags(char* argv0, const std::vector<char*>& user) {
  std::vector<char*> args{argv0};
  for (const char* f : kDefaultFlags) args.push_back(const_cast<char*>(f));
  args.insert(args.end(), user.begin(), user.end());
  return args;
}

class SummaryReporter : public benchmark::ConsoleReporter {
 public:
  SummaryReporter() : benchmark::ConsoleReporter(OO_Tabular) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    std::vector<Run> shown;
    for (const Run& r : runs) {
      const std::string name = key_of(r);
      if (r.error_occurred) {
        errors_.push_back(name + ": " + r.error_message);
        shown.push_back(r);
        continue;
      }
      if (r.run_type == Run::RT_Iteration) {
        samples_[name].push_back(sample_of(r));
        if (r.repetitions <= 1) shown.push_back(r);
      } else {
        if (r.aggregate_name == "median") medians_[name] = sample_of(r);
        shown.push_back(r);
      }
    }
    if (!shown.empty()) ConsoleReporter::ReportRuns(shown);
  }

  /// The name samples are kept under: the registered name, plus
  /// "/threads:N" for a benchmark registered with Threads().
  static std::string key_of(const Run& r) {
    const benchmark::BenchmarkName& n = r.run_name;
    return n.threads.empty() ? n.function_name : n.function_name + "/" + n.threads;
  }

  /// Every repetition of `name` (see key_of); with
  /// --benchmark_display_aggregates_only the repetitions never reach this
  /// reporter and the median aggregate stands in.
  std::vector<Sample> samples(const std::string& name) const {
    if (const auto it = samples_.find(name); it != samples_.end()) return it->second;
    if (const auto it = medians_.find(name); it != medians_.end()) return {it->second};
    return {};
  }

  const std::vector<std::string>& errors() const noexcept { return errors_; }

  /// The exit code of the binary: 0, or 1 after listing the errors the runs
  /// reported, if any did or `failed` says another check failed.
  int exit_code(bool failed = false) const {
    if (errors_.empty() && !failed) return 0;
    std::printf("\nFAILED:\n");
    for (const std::string& e : errors_) std::printf("  %s\n", e.c_str());
    return 1;
  }

 private:
  static Sample sample_of(const Run& r) {
    Sample s;
    for (const auto& [key, c] : r.counters) s.counters[key] = c.value;
    s.items_per_second = s.counter("items_per_second", 0.0);
    s.iterations = static_cast<double>(r.iterations);
    s.cpu_seconds = r.cpu_accumulated_time;
    s.real_seconds = r.real_accumulated_time;
    return s;
  }

  std::map<std::string, std::vector<Sample>> samples_;
  std::map<std::string, Sample> medians_;
  std::vector<std::string> errors_;
};

/// The q-quantile (0..1) of `v`, linear between neighbours; NaN if empty.
inline double quantile(std::vector<double> v, double q) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}
inline double median(const std::vector<double>& v) { return quantile(v, 0.5); }

/// Half the interquartile range relative to the median, in percent: "±x%".
inline double half_iqr_percent(const std::vector<double>& v) {
  const double m = median(v);
  if (!(m > 0)) return NAN;
  return 50.0 * (quantile(v, 0.75) - quantile(v, 0.25)) / m;
}

/// One figure of every sample.
template <class F>
std::vector<double> collect(const std::vector<Sample>& samples, F&& figure) {
  std::vector<double> v;
  v.reserve(samples.size());
  for (const Sample& s : samples) {
    const double x = figure(s);
    if (!std::isnan(x)) v.push_back(x);
  }
  return v;
}

// ---- table cells ---------------------------------------------------------------

/// "12.34 +-3%" for the median and spread of `v`, or "-" if empty.
inline std::string median_cell(const std::vector<double>& v) {
  if (v.empty()) return "-";
  char cell[48];
  std::snprintf(cell, sizeof cell, "%.2f +-%.0f%%", median(v), half_iqr_percent(v));
  return cell;
}

/// `x` printed with `format`, or "-" for NaN.
inline std::string number_cell(double x, const char* format = "%.2f") {
  if (std::isnan(x)) return "-";
  char cell[32];
  std::snprintf(cell, sizeof cell, format, x);
  return cell;
}

inline std::string ratio_cell(double r) { return r > 0 && !std::isinf(r) ? number_cell(r) : "-"; }

inline std::vector<double> items_mops(const std::vector<Sample>& s) {
  return collect(s, [](const Sample& x) { return x.items_per_second / 1e6; });
}

inline std::vector<double> counter_values(const std::vector<Sample>& s, const std::string& name) {
  return collect(s, [&name](const Sample& x) { return x.counter(name); });
}

/// The wall_Mops counter of a run on threads: all threads' operations over
/// the wall time from the start to the stop barrier (thread 0 measures it).
inline std::vector<double> wall_mops(const std::vector<Sample>& s) {
  return counter_values(s, "wall_Mops");
}

/// The sum of a counter over the samples (0 where a sample lacks it).
inline double sum_of(const std::vector<Sample>& s, const char* counter) {
  double total = 0;
  for (const Sample& x : s) total += x.counter(counter, 0.0);
  return total;
}

}  // namespace offheap_bench
