// SPDX-License-Identifier: Apache-2.0
// A pointer chase over random cache lines: the machine's memory latency as a
// latency figure of its own. offheap_latency times chains of dependent loads
// from it beside the cache scene, so that a put's p99.9 / p50 can be read
// against what the same number of misses costs on this machine, in the same
// run (a cache at its capacity is a few dependent misses a put: index line,
// victim record, victim's index line, the new record's line).
//
// The buffer is anonymous memory in 4 KiB pages (no madvise: as offheap's
// chunks and tables are mapped without Options::huge_pages), one 8-byte
// link at the start of each 64-byte line; the links visit every line once,
// in a random order, and come back to the start, so a chase never settles
// into a cycle short enough to stay in the cache.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

namespace offheap_bench {

class PointerChase {
 public:
  /// `bytes` rounded down to whole lines (at least two).
  explicit PointerChase(std::uint64_t bytes, std::uint64_t seed = 0xC4A5E) {
    lines_ = std::max<std::uint64_t>(2, bytes / kLine);
    bytes_ = lines_ * kLine;
    void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("PointerChase: mmap failed");
    base_ = static_cast<std::byte*>(p);
    // One random cycle through every line (Sattolo's shuffle of the order).
    std::vector<std::uint32_t> order(lines_);
    for (std::uint64_t i = 0; i < lines_; ++i) order[i] = static_cast<std::uint32_t>(i);
    std::mt19937_64 rng(seed);
    for (std::uint64_t i = lines_ - 1; i > 0; --i) {
      std::uniform_int_distribution<std::uint64_t> pick(0, i - 1);
      std::swap(order[i], order[pick(rng)]);
    }
    for (std::uint64_t i = 0; i < lines_; ++i) {
      const std::uint64_t next = std::uint64_t{order[(i + 1) % lines_]} * kLine;
      std::memcpy(base_ + std::uint64_t{order[i]} * kLine, &next, sizeof next);
    }
  }
  ~PointerChase() { ::munmap(base_, bytes_); }
  PointerChase(const PointerChase&) = delete;
  PointerChase& operator=(const PointerChase&) = delete;

  /// `loads` dependent loads from where the last call stopped.
  [[gnu::always_inline]] std::uint64_t chase(int loads) noexcept {
    std::uint64_t at = at_;
    for (int i = 0; i < loads; ++i) {
      std::uint64_t next;
      std::memcpy(&next, base_ + at, sizeof next);
      at = next;
    }
    at_ = at;
    return at;
  }

  std::uint64_t bytes() const noexcept { return bytes_; }

 private:
  static constexpr std::uint64_t kLine = 64;
  std::byte* base_ = nullptr;
  std::uint64_t lines_ = 0, bytes_ = 0;
  std::uint64_t at_ = 0;
};

}  // namespace offheap_bench
