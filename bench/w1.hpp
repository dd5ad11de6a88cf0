// SPDX-License-Identifier: Apache-2.0
// The W1 ("RED OHC") workload shared by offheap_bench and
// offheap_cache_bench: 16-byte keys, 64-byte values, 24,000 entries; its
// inputs (keys, value variants, key streams), built once before any timing,
// and the check that a value read is one whole value that was written.
#pragma once

#include "workload.hpp"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace offheap_bench {

inline constexpr std::uint64_t kW1Entries = 24'000;
inline constexpr std::size_t kW1KeyBytes = 16;
inline constexpr std::size_t kW1ValueBytes = 64;
inline constexpr unsigned kW1StreamLog2 = 20;        // 1 Mi precomputed key indices per stream
inline constexpr unsigned kW1PutPerMille = 100;      // mixed: 10% puts
inline constexpr std::size_t kW1ValueVariants = 8;   // puts rotate through these values
inline constexpr std::uint64_t kCheckEvery = 8;      // W1 gets: check one in 8 whole (power of 2)

/// The keys, a uniform stream of key indices, a 90/10 stream (kPutBit marks
/// the puts) and the value variants; the same seeds in every run.
struct W1Inputs {
  KeySet keys = KeySet::random_fixed(kW1Entries, kW1KeyBytes, 0x5EED0001);
  IndexStream uniform{kW1Entries, kW1StreamLog2, 0, 0x5EED0002};
  IndexStream mixed{kW1Entries, kW1StreamLog2, kW1PutPerMille, 0x5EED0003};
  std::vector<std::string> values = value_variants(kW1ValueVariants, kW1ValueBytes);
};

inline const W1Inputs& w1_inputs() {
  static const W1Inputs inputs;
  return inputs;
}

/// Whether a value read (while other threads may overwrite it) is one whole
/// W1 value: the right length, and its first and last words from the same
/// one of the variants (their first bytes all differ). Applied to every 8th
/// get, the same for every subject: a check on every get costs a few
/// nanoseconds, a fair share of a W1 get.
class WholeValueCheck {
 public:
  explicit WholeValueCheck(const std::vector<std::string>& variants) {
    for (std::size_t i = 0; i < variants.size(); ++i) {
      const std::string& v = variants[i];
      std::uint8_t& slot = by_first_byte_[static_cast<unsigned char>(v[0])];
      if (slot != 0 || v.size() != kW1ValueBytes) std::abort();  // the check needs both
      slot = static_cast<std::uint8_t>(i + 1);
      first_.push_back(word(v.data()));
      last_.push_back(word(v.data() + kW1ValueBytes - 8));
    }
  }

  bool whole(std::string_view v) const noexcept {
    if (v.size() != kW1ValueBytes) return false;
    const unsigned i = by_first_byte_[static_cast<unsigned char>(v[0])];
    return i != 0 && word(v.data()) == first_[i - 1] &&
           word(v.data() + kW1ValueBytes - 8) == last_[i - 1];
  }

 private:
  static std::uint64_t word(const char* p) noexcept {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    return w;
  }
  std::uint8_t by_first_byte_[256] = {};  // variant + 1; 0: none starts so
  std::vector<std::uint64_t> first_, last_;
};

inline const WholeValueCheck& whole_value_check() {
  static const WholeValueCheck check(w1_inputs().values);
  return check;
}

/// Whether the value read by a get at stream position `p` is torn: every
/// 8th get (the same ones for every subject), a value that is not one of
/// those written.
inline bool w1_torn(std::uint64_t p, const std::string& out, const WholeValueCheck& check) {
  return (p & (kCheckEvery - 1)) == 0 && !check.whole(out);
}

/// Whether a W1 get at stream position `p` went wrong: a miss, or (every 8th)
/// a value that is not one of those written.
inline bool w1_wrong(bool hit, std::uint64_t p, const std::string& out,
                     const WholeValueCheck& check) {
  return !hit || w1_torn(p, out, check);
}

}  // namespace offheap_bench
