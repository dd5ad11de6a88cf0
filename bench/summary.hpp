// SPDX-License-Identifier: Apache-2.0
// Collecting results for the closing summary: a console reporter that keeps
// every repetition of every benchmark, and the robust statistics (median,
// interquartile spread) the summary quotes.
//
// The trade-off: this machine is shared and its speed swings, so one
// benchmark's mean says little. The reporter keeps each repetition's figures
// (keyed by the registered name) and the summary quotes medians and ratios of
// medians of subjects measured in the same interleaved run. A benchmark run
// on several thread counts is kept once per count, as "name/threads:N". On
// screen it shows Google Benchmark's aggregates (mean, median, stddev, cv)
// rather than every repetition; --benchmark_out still receives every run.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
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

}  // namespace offheap_bench
