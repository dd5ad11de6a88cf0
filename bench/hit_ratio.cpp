// SPDX-License-Identifier: Apache-2.0
// offheap_hit_ratio: the miss ratio of each eviction policy on Zipf traces,
// in reference mode (tests/support/record_model.hpp: one thread, every hit
// applied at once, deterministic), beside Belady's offline optimum and a
// plain LRU for context.
//
//   Traces: --objects ids (default 1,000,000), --requests requests (default
//   10,000,000) drawn by tests/support/zipf.hpp for each --alphas value
//   (default 0.6, 0.8, 1.0, 1.2), popularity scrambled over ids, fixed seed.
//   Every object is one byte, so a cache's capacity is a count of objects:
//   --sizes percent of --objects (default 1 and 10). Cold misses count.
//
//   Subjects, one type each in a type list (Subjects below): Belady's MIN
//   (tests/support/belady.hpp), a plain std::list LRU
//   (tests/support/reference_lru.hpp), a FIFO (tests/support/fifo_policy.hpp),
//   and whichever of offheap::eviction::S3Fifo, Lru and WTinyLfu have their
//   headers in the tree. All but the plain LRU run through simulate(), whose
//   host checks every eviction; Belady must come out at or below every other
//   subject at every point, or the run fails.
//
//   Output: a markdown table of miss ratios; at alpha 1.0, ours beside the
//   published simulator figures for the same kind of trace (libCacheSim, 1M
//   objects, 10M requests); a miss-ratio curve at --curve_alpha (default
//   1.0) over --curve_sizes (default 0.1% to 20%, log-spaced) as a table and
//   as an SVG (--svg, default hit_ratio.svg in the working directory).
//
// The trade-off: unit-size objects and a synthetic, stationary trace keep
// the numbers comparable with published ones and with each other, and say
// nothing about size-aware behaviour or shifting hot sets. A plain
// executable (no Google Benchmark): what it measures is counts, not time.
#include "cli.hpp"
#include "platform.hpp"
#include "support/belady.hpp"
#include "support/fifo_policy.hpp"
#include "support/record_model.hpp"
#include "support/store_name.hpp"
#include "support/reference_lru.hpp"
#include "support/zipf.hpp"

#if __has_include(<offheap/eviction/s3fifo.hpp>)
#include <offheap/eviction/s3fifo.hpp>
#define OFFHEAP_HIT_RATIO_HAVE_S3FIFO 1
#endif
#if __has_include(<offheap/eviction/lru.hpp>)
#include <offheap/eviction/lru.hpp>
#define OFFHEAP_HIT_RATIO_HAVE_LRU 1
#endif
#if __has_include(<offheap/eviction/w_tiny_lfu.hpp>)
#include <offheap/eviction/w_tiny_lfu.hpp>
#define OFFHEAP_HIT_RATIO_HAVE_WTINYLFU 1
#endif

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace {

using offheap_bench::exponent;
using offheap_bench::parse_doubles;
using offheap_bench::parse_u64;
using offheap_bench::with_commas;
using offheap_test::simulate;

// ---- settings -----------------------------------------------------------------

struct Settings {
  std::uint64_t objects = 1'000'000;
  std::uint64_t requests = 10'000'000;
  std::vector<double> alphas{0.6, 0.8, 1.0, 1.2};
  std::vector<double> sizes{1, 10};  // percent of objects
  double curve_alpha = 1.0;
  std::vector<double> curve_sizes{0.1, 0.2, 0.5, 1, 2, 5, 10, 20};
  std::string svg = "hit_ratio.svg";
  std::uint64_t seed = offheap_test::kZipfSeed;
  std::vector<std::string> only;  // --policies: subject keys; empty: all
};

// The figures the issue quotes for alpha 1.0 (1M objects, 10M requests;
// caches of 1% and 10%), from libCacheSim's simulator.
struct Published {
  double at_1_percent;
  double at_10_percent;
};

// ---- subjects -------------------------------------------------------------------

// One trace and what is precomputed from it, shared by every subject.
struct Trace {
  double alpha;
  std::vector<std::uint64_t> ids;
  std::vector<std::uint64_t> next_use;  // for Belady
};

struct PlainLru {};  // tag: tests/support/reference_lru.hpp

// Subject<S>: key (for --policies), name (for tables), published figures if
// any, and run(trace, capacity) -> misses.
template <class S>
struct Subject;

template <>
struct Subject<offheap_test::BeladyPolicy> {
  static constexpr std::string_view key = "belady", name = "Belady";
  static constexpr std::optional<Published> published = Published{0.2814, 0.1332};
  static std::uint64_t run(const Trace& t, std::uint64_t capacity) {
    offheap_test::BeladyPolicy p(t.ids, t.next_use);
    return simulate(p, t.ids, capacity).misses;
  }
};

template <>
struct Subject<PlainLru> {
  static constexpr std::string_view key = "plain_lru", name = "LRU (plain)";
  static constexpr std::optional<Published> published = Published{0.4148, 0.2229};
  static std::uint64_t run(const Trace& t, std::uint64_t capacity) {
    return offheap_test::reference_lru(t.ids, capacity).misses;
  }
};

template <>
struct Subject<offheap_test::FifoPolicy> {
  static constexpr std::string_view key = "fifo", name = "FIFO";
  static constexpr std::optional<Published> published = std::nullopt;
  static std::uint64_t run(const Trace& t, std::uint64_t capacity) {
    offheap_test::FifoPolicy p;
    return simulate(p, t.ids, capacity).misses;
  }
};

// The library's policies, built as a store builds them (simulate() then
// calls set_capacity).
template <class P>
std::uint64_t run_library_policy(const Trace& t, std::uint64_t capacity) {
  P p(offheap_test::store_name("hit_ratio"));
  return simulate(p, t.ids, capacity).misses;
}

#ifdef OFFHEAP_HIT_RATIO_HAVE_S3FIFO
template <>
struct Subject<offheap::eviction::S3Fifo> {
  static constexpr std::string_view key = "s3fifo", name = "S3-FIFO";
  static constexpr std::optional<Published> published = Published{0.3379, 0.1883};
  static std::uint64_t run(const Trace& t, std::uint64_t capacity) {
    return run_library_policy<offheap::eviction::S3Fifo>(t, capacity);
  }
};
#endif
#ifdef OFFHEAP_HIT_RATIO_HAVE_LRU
template <>
struct Subject<offheap::eviction::Lru> {
  static constexpr std::string_view key = "lru", name = "LRU";
  static constexpr std::optional<Published> published = Published{0.4148, 0.2229};
  static std::uint64_t run(const Trace& t, std::uint64_t capacity) {
    return run_library_policy<offheap::eviction::Lru>(t, capacity);
  }
};
#endif
#ifdef OFFHEAP_HIT_RATIO_HAVE_WTINYLFU
template <>
struct Subject<offheap::eviction::WTinyLfu> {
  static constexpr std::string_view key = "wtinylfu", name = "W-TinyLFU";
  static constexpr std::optional<Published> published = Published{0.3337, 0.1877};
  static std::uint64_t run(const Trace& t, std::uint64_t capacity) {
    return run_library_policy<offheap::eviction::WTinyLfu>(t, capacity);
  }
};
#endif

// Belady first: the others are checked against it.
using Subjects = std::tuple<offheap_test::BeladyPolicy, PlainLru, offheap_test::FifoPolicy
#ifdef OFFHEAP_HIT_RATIO_HAVE_S3FIFO
                            , offheap::eviction::S3Fifo
#endif
#ifdef OFFHEAP_HIT_RATIO_HAVE_LRU
                            , offheap::eviction::Lru
#endif
#ifdef OFFHEAP_HIT_RATIO_HAVE_WTINYLFU
                            , offheap::eviction::WTinyLfu
#endif
                            >;

// The type list as values: what the tables and the loops use.
struct SubjectInfo {
  std::string_view key, name;
  std::optional<Published> published;
  std::uint64_t (*run)(const Trace&, std::uint64_t);
  double seconds = 0;  // spent in run(), all points
};

template <class... S>
std::vector<SubjectInfo> subject_infos(std::tuple<S...>*) {
  return {SubjectInfo{Subject<S>::key, Subject<S>::name, Subject<S>::published, &Subject<S>::run}...};
}

// ---- measuring -------------------------------------------------------------------

std::uint64_t capacity_of(const Settings& s, double percent) {
  return std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::llround(static_cast<double>(s.objects) * percent / 100)));
}

// Miss ratios by (alpha, capacity, subject index), each point run once.
class Results {
 public:
  Results(const Settings& s, std::vector<SubjectInfo>& subjects) : settings_(s), subjects_(subjects) {}

  double miss_ratio(double alpha, std::uint64_t capacity, std::size_t subject) {
    const auto key = std::make_tuple(alpha, capacity, subject);
    if (const auto it = points_.find(key); it != points_.end()) return it->second;
    const Trace& t = trace(alpha);
    SubjectInfo& info = subjects_[subject];
    const auto start = std::chrono::steady_clock::now();
    const std::uint64_t misses = info.run(t, capacity);
    info.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double ratio = static_cast<double>(misses) / static_cast<double>(t.ids.size());
    points_.emplace(key, ratio);
    return ratio;
  }

  double trace_seconds() const noexcept { return trace_seconds_; }

 private:
  // One trace held at a time: at the default size a trace and its next-use
  // times take 160 MB. Callers go alpha by alpha.
  const Trace& trace(double alpha) {
    if (!trace_ || trace_->alpha != alpha) {
      const auto start = std::chrono::steady_clock::now();
      trace_.reset();
      trace_.emplace(Trace{alpha, offheap_test::zipf_trace(settings_.objects, alpha, settings_.requests, settings_.seed), {}});
      trace_->next_use = offheap_test::next_uses(trace_->ids);
      trace_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    return *trace_;
  }

  const Settings& settings_;
  std::vector<SubjectInfo>& subjects_;
  std::optional<Trace> trace_;
  std::map<std::tuple<double, std::uint64_t, std::size_t>, double> points_;
  double trace_seconds_ = 0;
};

// ---- output ------------------------------------------------------------------------

std::string percent(double p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g%%", p);
  return buf;
}

struct Curve {
  std::string_view name;
  std::vector<double> miss_ratios;  // one per size
};

// The miss-ratio curve as an SVG: x is the cache size on a log scale, y the
// miss ratio from 0 to the next tenth above the highest point; a polyline
// with markers per subject and a legend. Plain SVG 1.1, no script or CSS,
// so that any viewer and GitHub's renderer show it the same.
std::string curve_svg(const std::vector<double>& sizes, const std::vector<Curve>& curves, const std::string& title) {
  constexpr double kWidth = 760, kHeight = 480;
  constexpr double kLeft = 70, kRight = 190, kTop = 40, kBottom = 60;  // margins
  constexpr double kPlotW = kWidth - kLeft - kRight, kPlotH = kHeight - kTop - kBottom;
  static constexpr const char* kColors[] = {"#000000", "#1f77b4", "#ff7f0e", "#2ca02c",
                                            "#d62728", "#9467bd", "#8c564b", "#e377c2"};
  // The y axis ends on a labelled tenth: steps of 0.1, or of 0.2 beyond 0.5
  // so that the labels stay few.
  double highest = 0;
  for (const Curve& c : curves) for (const double m : c.miss_ratios) highest = std::max(highest, m);
  int tenths = std::clamp(static_cast<int>(std::ceil(highest * 10 - 1e-9)), 1, 10);
  const int y_step = tenths > 5 ? 2 : 1;
  tenths = (tenths + y_step - 1) / y_step * y_step;
  const double y_max = tenths / 10.0;
  const double lx0 = std::log10(sizes.front()), lx1 = std::log10(sizes.back());
  const auto x_of = [&](double size) {
    return lx1 == lx0 ? kLeft + kPlotW / 2 : kLeft + (std::log10(size) - lx0) / (lx1 - lx0) * kPlotW;
  };
  const auto y_of = [&](double m) { return kTop + (1 - m / y_max) * kPlotH; };

  std::ostringstream o;
  o.setf(std::ios::fixed);
  o.precision(1);
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << kHeight
    << "\" viewBox=\"0 0 " << kWidth << ' ' << kHeight << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << kLeft + kPlotW / 2 << "\" y=\"24\" text-anchor=\"middle\" font-size=\"14\">" << title
    << "</text>\n";
  // Grid and ticks: a vertical line per size, a horizontal one per tenth.
  for (const double s : sizes) {
    const double x = x_of(s);
    o << "<line x1=\"" << x << "\" y1=\"" << kTop << "\" x2=\"" << x << "\" y2=\"" << kTop + kPlotH
      << "\" stroke=\"#e0e0e0\"/>\n"
      << "<text x=\"" << x << "\" y=\"" << kTop + kPlotH + 18 << "\" text-anchor=\"middle\">" << percent(s)
      << "</text>\n";
  }
  for (int i = 0; i <= tenths; i += y_step) {
    const double y = y_of(i / 10.0);
    o << "<line x1=\"" << kLeft << "\" y1=\"" << y << "\" x2=\"" << kLeft + kPlotW << "\" y2=\"" << y
      << "\" stroke=\"#e0e0e0\"/>\n"
      << "<text x=\"" << kLeft - 8 << "\" y=\"" << y + 4 << "\" text-anchor=\"end\">" << i / 10.0 << "</text>\n";
  }
  // Axes and their labels.
  o << "<line x1=\"" << kLeft << "\" y1=\"" << kTop + kPlotH << "\" x2=\"" << kLeft + kPlotW << "\" y2=\""
    << kTop + kPlotH << "\" stroke=\"black\"/>\n"
    << "<line x1=\"" << kLeft << "\" y1=\"" << kTop << "\" x2=\"" << kLeft << "\" y2=\"" << kTop + kPlotH
    << "\" stroke=\"black\"/>\n"
    << "<text x=\"" << kLeft + kPlotW / 2 << "\" y=\"" << kHeight - 16
    << "\" text-anchor=\"middle\">cache size (% of objects, log scale)</text>\n"
    << "<text transform=\"translate(20," << kTop + kPlotH / 2
    << ") rotate(-90)\" text-anchor=\"middle\">miss ratio</text>\n";
  // One polyline and its markers per subject; the legend on the right.
  for (std::size_t c = 0; c < curves.size(); ++c) {
    const char* color = kColors[c % std::size(kColors)];
    o << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"2\""
      << (c == 0 ? " stroke-dasharray=\"6 3\"" : "") << " points=\"";
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      o << (i ? " " : "") << x_of(sizes[i]) << ',' << y_of(curves[c].miss_ratios[i]);
    }
    o << "\"/>\n";
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      o << "<circle cx=\"" << x_of(sizes[i]) << "\" cy=\"" << y_of(curves[c].miss_ratios[i]) << "\" r=\"3\" fill=\""
        << color << "\"/>\n";
    }
    const double ly = kTop + 10 + static_cast<double>(c) * 20;
    o << "<line x1=\"" << kLeft + kPlotW + 16 << "\" y1=\"" << ly << "\" x2=\"" << kLeft + kPlotW + 44 << "\" y2=\""
      << ly << "\" stroke=\"" << color << "\" stroke-width=\"2\"" << (c == 0 ? " stroke-dasharray=\"6 3\"" : "")
      << "/>\n"
      << "<text x=\"" << kLeft + kPlotW + 50 << "\" y=\"" << ly + 4 << "\">" << curves[c].name << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

// ---- flags -------------------------------------------------------------------------

void usage(const char* argv0) {
  std::printf(
      "usage: %s [flags]\n"
      "  --objects=N          distinct objects in each trace (default 1000000)\n"
      "  --requests=N         requests in each trace (default 10000000)\n"
      "  --alphas=A,B,...     Zipf exponents (default 0.6,0.8,1.0,1.2)\n"
      "  --sizes=P,Q,...      cache sizes, percent of --objects (default 1,10)\n"
      "  --curve_alpha=A      the miss-ratio curve's exponent (default 1.0)\n"
      "  --curve_sizes=P,...  the curve's sizes, percent (default 0.1,0.2,0.5,1,2,5,10,20;\n"
      "                       empty: no curve)\n"
      "  --svg=PATH           where the curve goes (default hit_ratio.svg)\n"
      "  --seed=N             the traces' seed (default the tests' seed)\n"
      "  --policies=K,...     subjects to run (keys:",
      argv0);
  std::vector<SubjectInfo> all = subject_infos(static_cast<Subjects*>(nullptr));
  for (const SubjectInfo& s : all) std::printf(" %.*s", static_cast<int>(s.key.size()), s.key.data());
  std::printf("; default all)\n");
}

std::vector<std::string> split(const char* v) {
  std::vector<std::string> out;
  std::string_view rest(v);
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    out.emplace_back(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
  }
  return out;
}

// Fills `s` from argv; false (having said why) on a bad flag.
bool parse_flags(int argc, char** argv, Settings& s) {
  return offheap_bench::parse_flags(argc, argv, usage, [&s](const offheap_bench::Flag& flag) {
    std::uint64_t n = 0;
    if (const char* v = flag.value("--objects=")) {
      if (!parse_u64(v, n) || n == 0 || n >= (std::uint64_t{1} << 32)) return flag.fail("wants a number in [1, 2^32)");
      s.objects = n;
    } else if (const char* v = flag.value("--requests=")) {
      if (!parse_u64(v, n) || n == 0) return flag.fail("wants a positive number");
      s.requests = n;
    } else if (const char* v = flag.value("--alphas=")) {
      if (!parse_doubles(v, s.alphas) || s.alphas.empty()) return flag.fail("wants exponents >= 0, comma-separated");
    } else if (const char* v = flag.value("--sizes=")) {
      if (!parse_doubles(v, s.sizes) || s.sizes.empty() ||
          std::any_of(s.sizes.begin(), s.sizes.end(), [](double p) { return p <= 0 || p > 100; })) {
        return flag.fail("wants percents in (0, 100], comma-separated");
      }
    } else if (const char* v = flag.value("--curve_alpha=")) {
      std::vector<double> one;
      if (!parse_doubles(v, one) || one.size() != 1) return flag.fail("wants one exponent >= 0");
      s.curve_alpha = one[0];
    } else if (const char* v = flag.value("--curve_sizes=")) {
      if (!parse_doubles(v, s.curve_sizes) ||
          std::any_of(s.curve_sizes.begin(), s.curve_sizes.end(), [](double p) { return p <= 0 || p > 100; })) {
        return flag.fail("wants percents in (0, 100], comma-separated");
      }
      std::sort(s.curve_sizes.begin(), s.curve_sizes.end());
    } else if (const char* v = flag.value("--svg=")) {
      if (*v == '\0') return flag.fail("wants a path");
      s.svg = v;
    } else if (const char* v = flag.value("--seed=")) {
      if (!parse_u64(v, n)) return flag.fail("wants a number");
      s.seed = n;
    } else if (const char* v = flag.value("--policies=")) {
      s.only = split(v);
      const std::vector<SubjectInfo> all = subject_infos(static_cast<Subjects*>(nullptr));
      for (const std::string& k : s.only) {
        if (std::none_of(all.begin(), all.end(), [&](const SubjectInfo& x) { return x.key == k; })) {
          return flag.fail("names a subject not built in (see --help)");
        }
      }
    } else {
      return flag.unknown();
    }
    return true;
  });
}

// ---- main -------------------------------------------------------------------------

int run(const Settings& s) {
  std::vector<SubjectInfo> subjects;
  for (const SubjectInfo& info : subject_infos(static_cast<Subjects*>(nullptr))) {
    if (s.only.empty() || std::find(s.only.begin(), s.only.end(), info.key) != s.only.end()) {
      subjects.push_back(info);
    }
  }
  Results results(s, subjects);

  std::printf("# offheap_hit_ratio: miss ratio per eviction policy, Zipf traces, reference mode\n\n");
  std::printf("- Traces: %s objects, %s requests each, Zipf alpha", with_commas(s.objects).c_str(),
              with_commas(s.requests).c_str());
  for (const double a : s.alphas) std::printf(" %s", exponent(a).c_str());
  std::printf(", seed 0x%" PRIX64 ", popularity scrambled over ids; cold misses counted\n", s.seed);
  std::printf("- Caches:");
  for (const double p : s.sizes) std::printf(" %s (%s objects)", percent(p).c_str(), with_commas(capacity_of(s, p)).c_str());
  std::printf("; unit-size objects; every hit applied at once (one thread)\n");
  std::string names, missing;
  for (const SubjectInfo& info : subjects) names += (names.empty() ? "" : ", ") + std::string(info.name);
#ifndef OFFHEAP_HIT_RATIO_HAVE_S3FIFO
  missing += ", S3-FIFO";
#endif
#ifndef OFFHEAP_HIT_RATIO_HAVE_LRU
  missing += ", LRU";
#endif
#ifndef OFFHEAP_HIT_RATIO_HAVE_WTINYLFU
  missing += ", W-TinyLFU";
#endif
  std::printf("- Subjects: %s%s%s\n", names.c_str(), missing.empty() ? "" : "; no header in this tree: ",
              missing.empty() ? "" : missing.c_str() + 2);
  std::printf("- Host: %s; %s\n\n", offheap_bench::cpu_model().c_str(),
              offheap_bench::compiler().c_str());
  std::fflush(stdout);

  // Belady (subject 0 when present) is the floor: a subject below it means
  // a broken harness or policy, and the run fails.
  bool below_optimum = false;
  const auto check_floor = [&](double alpha, std::uint64_t capacity, const std::vector<double>& row) {
    if (subjects.empty() || subjects[0].key != "belady") return;
    for (std::size_t i = 1; i < row.size(); ++i) {
      if (row[i] < row[0]) {
        std::fprintf(stderr, "ERROR: %.*s misses less than Belady's MIN (%.6f < %.6f) at alpha %g, %" PRIu64
                             " objects: impossible\n",
                     static_cast<int>(subjects[i].name.size()), subjects[i].name.data(), row[i], row[0], alpha,
                     capacity);
        below_optimum = true;
      }
    }
  };

  // The main table, alpha by alpha (one trace in memory at a time); the
  // curve's points are measured while its alpha's trace is loaded.
  const auto measure_curve = [&](double alpha) {
    for (const double p : s.curve_sizes) {
      for (std::size_t i = 0; i < subjects.size(); ++i) results.miss_ratio(alpha, capacity_of(s, p), i);
    }
  };
  std::printf("## Miss ratio\n\n| alpha | cache | objects |");
  for (const SubjectInfo& info : subjects) std::printf(" %.*s |", static_cast<int>(info.name.size()), info.name.data());
  std::printf("\n|---:|---:|---:|");
  for (std::size_t i = 0; i < subjects.size(); ++i) std::printf("---:|");
  std::printf("\n");
  std::map<std::pair<double, double>, std::vector<double>> rows;  // (alpha, percent) -> ratios
  for (const double a : s.alphas) {
    for (const double p : s.sizes) {
      const std::uint64_t capacity = capacity_of(s, p);
      std::vector<double>& row = rows[{a, p}];
      for (std::size_t i = 0; i < subjects.size(); ++i) row.push_back(results.miss_ratio(a, capacity, i));
      std::printf("| %s | %s | %s |", exponent(a).c_str(), percent(p).c_str(), with_commas(capacity).c_str());
      for (const double m : row) std::printf(" %.4f |", m);
      std::printf("\n");
      std::fflush(stdout);
      check_floor(a, capacity, row);
    }
    if (a == s.curve_alpha) measure_curve(a);
  }

  // Ours beside the published figures, where the run has their points.
  const bool has_1 = std::find(s.sizes.begin(), s.sizes.end(), 1.0) != s.sizes.end();
  const bool has_10 = std::find(s.sizes.begin(), s.sizes.end(), 10.0) != s.sizes.end();
  if (std::find(s.alphas.begin(), s.alphas.end(), 1.0) != s.alphas.end() && has_1 && has_10) {
    std::printf("\n## Alpha 1.0 beside the published figures (libCacheSim; 1M objects, 10M requests)\n\n");
    if (s.objects != 1'000'000 || s.requests != 10'000'000) {
      std::printf("This run's traces are not that size: compare with care.\n\n");
    }
    std::printf("| subject | 1%% ours | published | difference | 10%% ours | published | difference |\n"
                "|---|---:|---:|---:|---:|---:|---:|\n");
    const std::vector<double>& r1 = rows[{1.0, 1.0}];
    const std::vector<double>& r10 = rows[{1.0, 10.0}];
    const auto cells = [](double ours, std::optional<double> published) {
      char buf[64];
      if (published) {
        const double d = std::round((ours - *published) * 1e4) / 1e4;  // no "-0.0000"
        std::snprintf(buf, sizeof buf, "%.4f | %.4f | %+.4f", ours, *published, d == 0 ? 0.0 : d);
      } else {
        std::snprintf(buf, sizeof buf, "%.4f | - | -", ours);
      }
      return std::string(buf);
    };
    for (std::size_t i = 0; i < subjects.size(); ++i) {
      const auto& pub = subjects[i].published;
      std::printf("| %.*s | %s | %s |\n", static_cast<int>(subjects[i].name.size()), subjects[i].name.data(),
                  cells(r1[i], pub ? std::optional<double>(pub->at_1_percent) : std::nullopt).c_str(),
                  cells(r10[i], pub ? std::optional<double>(pub->at_10_percent) : std::nullopt).c_str());
    }
  }

  // The miss-ratio curve.
  if (!s.curve_sizes.empty() && !subjects.empty()) {
    std::printf("\n## Miss-ratio curve, alpha %s\n\n| cache | objects |", exponent(s.curve_alpha).c_str());
    for (const SubjectInfo& info : subjects) std::printf(" %.*s |", static_cast<int>(info.name.size()), info.name.data());
    std::printf("\n|---:|---:|");
    for (std::size_t i = 0; i < subjects.size(); ++i) std::printf("---:|");
    std::printf("\n");
    std::vector<Curve> curves;
    for (const SubjectInfo& info : subjects) curves.push_back(Curve{info.name, {}});
    for (const double p : s.curve_sizes) {
      const std::uint64_t capacity = capacity_of(s, p);
      std::printf("| %s | %s |", percent(p).c_str(), with_commas(capacity).c_str());
      std::vector<double> row;
      for (std::size_t i = 0; i < subjects.size(); ++i) {
        row.push_back(results.miss_ratio(s.curve_alpha, capacity, i));
        curves[i].miss_ratios.push_back(row.back());
        std::printf(" %.4f |", row.back());
      }
      std::printf("\n");
      std::fflush(stdout);
      check_floor(s.curve_alpha, capacity, row);
    }
    char title[160];
    std::snprintf(title, sizeof title, "Miss ratio, Zipf alpha %s, %s objects, %s requests", exponent(s.curve_alpha).c_str(),
                  with_commas(s.objects).c_str(), with_commas(s.requests).c_str());
    std::ofstream out(s.svg);
    out << curve_svg(s.curve_sizes, curves, title);
    out.close();
    if (!out) {
      std::fprintf(stderr, "ERROR: could not write %s\n", s.svg.c_str());
      return 1;
    }
    std::printf("\nCurve written to %s\n", s.svg.c_str());
  }

  std::printf("\n## Time (s)\n\nTraces and next-use times: %.1f;", results.trace_seconds());
  for (const SubjectInfo& info : subjects) {
    std::printf(" %.*s: %.1f;", static_cast<int>(info.name.size()), info.name.data(), info.seconds);
  }
  std::printf("\n");
  return below_optimum ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  if (!parse_flags(argc, argv, s)) return 2;
  try {
    return run(s);
  } catch (const std::exception& e) {
    // simulate()'s HostError: a policy broke the host's contract.
    std::fprintf(stderr, "ERROR: %s\n", e.what());
    return 1;
  }
}
