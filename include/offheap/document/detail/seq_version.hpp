// SPDX-License-Identifier: Apache-2.0
// A version stamp for structures built of several store records (the
// document layer's indexes): one writer at a time changes them between
// begin_write() and end_write(); readers read records (copies, by
// Store::get) between begin_read() and stable(), and trust what they read
// only if stable() says no writer came between (a seqlock over records
// that are each whole on their own).
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>

namespace offheap::detail {

class SeqVersion {
 public:
  /// Odd from here: a reader that began before, or begins now, sees the
  /// change in stable() or waits in begin_read().
  void begin_write() noexcept {
    v_.store(v_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    // Orders the odd version before the record writes that follow: pairs
    // with the acquire fence in stable() (a reader whose copies saw any of
    // them sees the version moved).
    std::atomic_thread_fence(std::memory_order_release);
  }
  /// Even again. Pairs with the acquire load in begin_read(): the records
  /// written are visible to a reader that sees the new version.
  void end_write() noexcept { v_.store(v_.load(std::memory_order_relaxed) + 1, std::memory_order_release); }

  /// The version a read begins with; waits while a writer is inside (its
  /// time there is a few record writes).
  std::uint64_t begin_read() const noexcept {
    for (unsigned spins = 0;; ++spins) {
      const std::uint64_t v = v_.load(std::memory_order_acquire);  // pairs with end_write()
      if ((v & 1) == 0) return v;
      if (spins > 64) std::this_thread::yield();
    }
  }
  /// Whether no writer began since begin_read() returned `v`.
  bool stable(std::uint64_t v) const noexcept {
    // Pairs with the release fence in begin_write().
    std::atomic_thread_fence(std::memory_order_acquire);
    return v_.load(std::memory_order_relaxed) == v;
  }

 private:
  std::atomic<std::uint64_t> v_{0};
};

/// begin_write() ... end_write() over a scope (end_write() on the way out,
/// exceptions too: a store write that throws leaves the structure as the
/// writes before it made it, which the caller then repairs or rebuilds).
class SeqWriteScope {
 public:
  explicit SeqWriteScope(SeqVersion& v) noexcept : v_(v) { v_.begin_write(); }
  ~SeqWriteScope() { v_.end_write(); }
  SeqWriteScope(const SeqWriteScope&) = delete;
  SeqWriteScope& operator=(const SeqWriteScope&) = delete;

 private:
  SeqVersion& v_;
};

}  // namespace offheap::detail
