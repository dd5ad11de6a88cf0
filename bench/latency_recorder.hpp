// SPDX-License-Identifier: Apache-2.0
// What offheap_latency keeps of every timed operation, with no allocation
// while it records:
//
//   LatencyHistogram  a log-linear histogram of counter ticks: exact below
//                     256 ticks, then 256 buckets per power of two (each at
//                     most 1/256 = 0.4% wide), up to 2^48 ticks; the exact
//                     maximum beside it. A percentile is the upper bound of
//                     the bucket it falls in (never above the maximum).
//   SlowLog           the operations at or over a threshold (1 ms): their
//                     count, and the 10 slowest with when they started and
//                     their sequence number, so that a stall can be set
//                     beside other events of the run later.
//   Usage             getrusage() figures of a thread or of the process:
//                     involuntary and voluntary context switches, page
//                     faults.
#pragma once

#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace offheap_bench {

class LatencyHistogram {
 public:
  static constexpr unsigned kSubBits = 8;
  static constexpr std::uint64_t kSub = std::uint64_t{1} << kSubBits;
  static constexpr unsigned kMaxBits = 48;
  static constexpr std::size_t kBuckets = (kMaxBits - kSubBits + 1) * kSub;

  /// Allocates and touches every bucket (before any timing).
  LatencyHistogram() : counts_(kBuckets, 0) {}

  void add(std::uint64_t ticks) noexcept {
    ++counts_[index(ticks)];
    ++count_;
    if (ticks > max_) max_ = ticks;
  }

  void merge(const LatencyHistogram& o) noexcept {
    for (std::size_t i = 0; i < kBuckets; ++i) counts_[i] += o.counts_[i];
    count_ += o.count_;
    max_ = std::max(max_, o.max_);
  }

  std::uint64_t count() const noexcept { return count_; }
  std::uint64_t max() const noexcept { return max_; }

  /// The value at or below which a fraction q of the samples lie (the upper
  /// bound of its bucket, at most the maximum); 0 when empty.
  std::uint64_t percentile(double q) const noexcept {
    if (count_ == 0) return 0;
    auto rank = static_cast<std::uint64_t>(q * static_cast<double>(count_));
    if (static_cast<double>(rank) < q * static_cast<double>(count_)) ++rank;
    rank = std::clamp<std::uint64_t>(rank, 1, count_);
    std::uint64_t seen = 0;
    for (std::size_t i = 0; i < kBuckets; ++i) {
      seen += counts_[i];
      if (seen >= rank) return std::min(upper(i), max_);
    }
    return max_;
  }

  static std::size_t index(std::uint64_t v) noexcept {
    constexpr std::uint64_t kTop = (std::uint64_t{1} << kMaxBits) - 1;
    if (v > kTop) v = kTop;
    if (v < kSub) return static_cast<std::size_t>(v);
    const unsigned k = 63u - static_cast<unsigned>(__builtin_clzll(v));  // >= kSubBits
    const unsigned shift = k - kSubBits;
    return static_cast<std::size_t>((shift + 1) * kSub + ((v >> shift) - kSub));
  }

  static std::uint64_t upper(std::size_t i) noexcept {
    if (i < kSub) return i;
    const std::uint64_t shift = i / kSub - 1;
    const std::uint64_t m = i % kSub + kSub;
    return ((m + 1) << shift) - 1;
  }

 private:
  std::vector<std::uint64_t> counts_;
  std::uint64_t count_ = 0;
  std::uint64_t max_ = 0;
};

/// One operation at or over the threshold.
struct SlowEvent {
  std::uint64_t ticks = 0;  // its latency
  std::uint64_t at = 0;     // the counter when it started
  std::uint64_t seq = 0;    // its sequence number (a growth writer's: the entries before it)
  char op = '?';            // 'g' get, 'p' put, 'e' empty (noise floor)
};

class SlowLog {
 public:
  static constexpr std::size_t kKeep = 10;

  void add(const SlowEvent& e) noexcept {
    ++over_;
    if (kept_ < kKeep) {
      events_[kept_++] = e;
      return;
    }
    auto least = std::min_element(events_.begin(), events_.end(),
                                  [](const SlowEvent& a, const SlowEvent& b) { return a.ticks < b.ticks; });
    if (e.ticks > least->ticks) *least = e;
  }

  void merge(const SlowLog& o) noexcept {
    const std::uint64_t over = over_ + o.over_;
    for (std::size_t i = 0; i < o.kept_; ++i) add(o.events_[i]);
    over_ = over;
  }

  /// Operations at or over the threshold, all of them.
  std::uint64_t over() const noexcept { return over_; }

  /// The slowest kept, slowest first.
  std::vector<SlowEvent> slowest() const {
    std::vector<SlowEvent> v(events_.begin(), events_.begin() + static_cast<std::ptrdiff_t>(kept_));
    std::sort(v.begin(), v.end(), [](const SlowEvent& a, const SlowEvent& b) { return a.ticks > b.ticks; });
    return v;
  }

 private:
  std::array<SlowEvent, kKeep> events_{};
  std::size_t kept_ = 0;
  std::uint64_t over_ = 0;
};

/// One kind of operation of one thread (or merged over threads).
class Recorder {
 public:
  Recorder(char op, std::uint64_t slow_ticks) : op_(op), slow_ticks_(slow_ticks) {}

  [[gnu::always_inline]] void record(std::uint64_t ticks, std::uint64_t at, std::uint64_t seq) noexcept {
    hist_.add(ticks);
    if (ticks >= slow_ticks_) [[unlikely]] slow_.add({ticks, at, seq, op_});
  }

  void merge(const Recorder& o) noexcept {
    hist_.merge(o.hist_);
    slow_.merge(o.slow_);
  }

  const LatencyHistogram& hist() const noexcept { return hist_; }
  const SlowLog& slow() const noexcept { return slow_; }

 private:
  LatencyHistogram hist_;
  SlowLog slow_;
  char op_;
  std::uint64_t slow_ticks_;
};

/// getrusage() figures.
struct Usage {
  long invol = 0;   // ru_nivcsw: involuntary context switches
  long vol = 0;     // ru_nvcsw: voluntary context switches
  long minflt = 0;  // ru_minflt: page faults served without I/O
  long majflt = 0;  // ru_majflt

  static Usage of(int who) noexcept {
    rusage r{};
    ::getrusage(who, &r);
    return {r.ru_nivcsw, r.ru_nvcsw, r.ru_minflt, r.ru_majflt};
  }
  static Usage thread() noexcept { return of(RUSAGE_THREAD); }
  static Usage process() noexcept { return of(RUSAGE_SELF); }

  Usage operator-(const Usage& o) const noexcept {
    return {invol - o.invol, vol - o.vol, minflt - o.minflt, majflt - o.majflt};
  }
  Usage& operator+=(const Usage& o) noexcept {
    invol += o.invol;
    vol += o.vol;
    minflt += o.minflt;
    majflt += o.majflt;
    return *this;
  }
};

}  // namespace offheap_bench
