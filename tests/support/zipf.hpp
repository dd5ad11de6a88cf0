// SPDX-License-Identifier: Apache-2.0
// Deterministic Zipf traces for the eviction tests and the hit-ratio bench.
//
// A trace is a vector of object ids in [0, objects): rank r (0 the most
// popular) is drawn with probability (r+1)^-alpha / H, H the sum over all
// ranks, by inverting a precomputed CDF with a binary search (exact, and at
// 1M objects fast enough: the popular ranks a search walks to stay cached).
// Ranks become ids through a seeded shuffle, so popularity does not follow
// id order: a policy or a table that does better on small ids cannot look
// good by accident.
//
// Everything random comes from SplitMix64 with fixed seeds, written here, and
// nothing from <random>'s distributions, whose output the standard leaves to
// each library: a trace is the same on every platform, so a miss-ratio
// threshold in a test means the same thing everywhere. key_hash() gives the
// 64-bit key hash a store would compute for an id; policies see those, never
// ids.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

namespace offheap_test {

/// The SplitMix64 finalizer: a bijection on 64-bit words whose output bits
/// each depend on every input bit.
constexpr std::uint64_t mix64(std::uint64_t x) noexcept {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

/// The key hash a store would see for object `id`. A bijection, so distinct
/// ids never collide; salted so that it is unrelated to the rank shuffle.
constexpr std::uint64_t key_hash(std::uint64_t id) noexcept {
  return mix64(id + 0x6A09E667F3BCC909ull);
}

/// SplitMix64: a 64-bit counter through mix64. Small, fast, and identical
/// everywhere; its quality is ample for drawing traces.
class SplitMix64 {
 public:
  explicit constexpr SplitMix64(std::uint64_t seed) noexcept : state_(seed) {}

  constexpr std::uint64_t next() noexcept {
    state_ += 0x9E3779B97F4A7C15ull;
    return mix64(state_);
  }

  /// Uniform in [0, 1), on the 2^-53 grid.
  double unit() noexcept { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  /// Uniform in [0, n), n > 0, unbiased: draws in the short last stretch
  /// of the 64-bit range (2^64 mod n values) are rejected.
  std::uint64_t below(std::uint64_t n) noexcept {
    const std::uint64_t short_stretch = (0 - n) % n;  // 2^64 mod n
    for (;;) {
      const std::uint64_t x = next();
      if (x <= ~std::uint64_t{0} - short_stretch) return x % n;
    }
  }

 private:
  std::uint64_t state_;
};

/// The seed of every trace in the tests and the bench unless they say.
inline constexpr std::uint64_t kZipfSeed = 0x5EED'2F1F'0000'0001ull;

/// Draws Zipf-distributed object ids. Holds the CDF (8 bytes per object) and
/// the rank-to-id shuffle (8 more).
class Zipf {
 public:
  /// Requires objects >= 1, alpha >= 0 (0: uniform).
  Zipf(std::uint64_t objects, double alpha, std::uint64_t seed = kZipfSeed)
      : alpha_(alpha), rng_(mix64(seed ^ 0x243F6A8885A308D3ull)) {
    if (objects == 0) throw std::invalid_argument("Zipf: no objects");
    if (!(alpha >= 0)) throw std::invalid_argument("Zipf: alpha must be >= 0");
    cdf_.resize(objects);
    // Summed in long double from the largest term down: at 1M objects the
    // tail ranks' probabilities are ~1e-7 of the total and must not vanish
    // into rounding.
    long double sum = 0;
    for (std::uint64_t r = 0; r < objects; ++r) {
      sum += std::pow(static_cast<long double>(r + 1), -static_cast<long double>(alpha));
      cdf_[r] = static_cast<double>(sum);
    }
    for (std::uint64_t r = 0; r < objects; ++r) cdf_[r] = static_cast<double>(cdf_[r] / sum);
    cdf_.back() = 1.0;  // so that every u in [0, 1) falls below some entry

    // Fisher-Yates from its own stream: the shuffle does not depend on how
    // many ids are drawn later.
    id_.resize(objects);
    for (std::uint64_t r = 0; r < objects; ++r) id_[r] = r;
    SplitMix64 shuffle(mix64(seed ^ 0x13198A2E03707344ull));
    for (std::uint64_t i = objects - 1; i > 0; --i) std::swap(id_[i], id_[shuffle.below(i + 1)]);
  }

  std::uint64_t objects() const noexcept { return cdf_.size(); }
  double alpha() const noexcept { return alpha_; }

  /// The probability of rank r (0 the most popular), as the CDF holds it.
  double probability(std::uint64_t rank) const {
    return rank == 0 ? cdf_[0] : cdf_.at(rank) - cdf_[rank - 1];
  }

  /// The object id that rank r maps to.
  std::uint64_t id_of_rank(std::uint64_t rank) const { return id_.at(rank); }

  /// A rank drawn from the law: the first whose CDF exceeds u.
  std::uint64_t next_rank() noexcept {
    const double u = rng_.unit();
    return static_cast<std::uint64_t>(std::upper_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin());
  }

  /// An object id drawn from the law.
  std::uint64_t next() noexcept { return id_[next_rank()]; }

 private:
  double alpha_;
  SplitMix64 rng_;
  std::vector<double> cdf_;          // cdf_[r] = P(rank <= r); cdf_.back() == 1
  std::vector<std::uint64_t> id_;    // rank -> object id, a seeded permutation
};

/// `requests` object ids from Zipf(objects, alpha, seed): the same vector for
/// the same arguments on every run and platform.
inline std::vector<std::uint64_t> zipf_trace(std::uint64_t objects, double alpha,
                                             std::uint64_t requests,
                                             std::uint64_t seed = kZipfSeed) {
  Zipf zipf(objects, alpha, seed);
  std::vector<std::uint64_t> trace(requests);
  for (std::uint64_t& id : trace) id = zipf.next();
  return trace;
}

}  // namespace offheap_test
