// SPDX-License-Identifier: Apache-2.0
// A clock the test moves by hand (Options::clock).
#pragma once

#include <offheap/expiry.hpp>

#include <atomic>
#include <cstdint>

namespace offheap_test {

class ManualClock final : public offheap::Clock {
 public:
  std::uint64_t now_ms() const noexcept override { return now_.load(std::memory_order_relaxed); }
  void advance(std::uint64_t ms) { now_.fetch_add(ms, std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> now_{1'000'000};
};

}  // namespace offheap_test
