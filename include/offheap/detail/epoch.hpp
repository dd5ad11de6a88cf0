// SPDX-License-Identifier: Apache-2.0
// Epoch-based reclamation: when memory a reader may still touch can be freed.
//
// One process-wide domain. A reader brackets every access to shared store
// memory with an EpochGuard: it publishes the global epoch it saw in its own
// slot (one cache line per thread number, see thread_slots.hpp) and clears the
// slot when it leaves. A writer that unpublishes something (an index table
// after growth, a chunk after clear()) retires it with the current epoch E and
// advances the global epoch to E + 1; the thing may be freed once every slot
// is either quiescent (0) or holds an epoch above E, since a reader that
// published E + 1 or later loaded the global epoch after the unpublishing and
// therefore cannot see the old pointer.
//
// The read side costs a load of the global epoch (a line that changes only
// when something is retired), a store to the reader's own line, and a fence
// that orders that store before the reader's loads of shared pointers. Two
// ways to get that fence, chosen once per process:
//   - asymmetric (default where the kernel has it): the reader's fence is a
//     compiler barrier only, and a writer that scans slots first runs
//     membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), which makes every running
//     thread of the process execute a full barrier. Scans are rare (one per
//     retirement), reads are not.
//   - symmetric: a seq_cst fence on the read side (a locked instruction on
//     x86-64), paired with a seq_cst fence before the writer's scan.
// ThreadSanitizer builds always use the symmetric scheme (TSan does not know
// membarrier); bench/ measures both.
//
// Threads beyond kMaxThreads have no slot: they count themselves in a shared
// counter, and while it is non-zero nothing is freed (reclamation waits; it
// never races). Likewise a scan whose membarrier fails frees nothing.
#pragma once

#include <offheap/detail/os.hpp>
#include <offheap/detail/thread_slots.hpp>

#include <atomic>
#include <cerrno>
#include <cstdint>

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace offheap::detail {

enum class FenceMode : std::uint8_t { symmetric, asymmetric };

/// Fault injection for tests: while nonzero, every membarrier call of the
/// asymmetric scheme fails with this errno instead of being made.
inline std::atomic<int>& testing_fail_membarrier() noexcept {
  static std::atomic<int> err{0};
  return err;
}

/// membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED): 0, or -1 with errno set.
inline long membarrier_private_expedited() noexcept {
  if (const int err = testing_fail_membarrier().load(std::memory_order_relaxed)) {
    errno = err;
    return -1;
  }
  return ::syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
}

class EpochDomain {
 public:
  /// The process's domain. Stores keep the reference: the hot path does not
  /// pay for the function-local static's guard.
  static EpochDomain& instance() noexcept {
    // Never destroyed: threads may read stores after static destruction began.
    static EpochDomain* d = new EpochDomain;
    return *d;
  }

  FenceMode mode() const noexcept { return mode_.load(std::memory_order_relaxed); }

  /// Chooses the scheme (tests and benchmarks compare the two); asymmetric
  /// falls back to symmetric where the kernel lacks membarrier.
  /// Requires: no reader inside a guard, no scan running.
  void set_mode(FenceMode m) noexcept {
    mode_.store(m == FenceMode::asymmetric && asymmetric_available_ ? m : FenceMode::symmetric,
                std::memory_order_relaxed);
  }
  bool asymmetric_available() const noexcept { return asymmetric_available_; }

  // ---- read side -------------------------------------------------------------

  /// Enters a critical section. Returns false if this thread was already
  /// inside one (a nested guard: the outer epoch stands, and leave() must
  /// not be called for this one).
  /// Requires: n is ThreadNumbers::current() (passed in: the caller needs
  /// it for its counters too).
  bool enter(std::uint32_t n) noexcept {
    if (n == kMaxThreads) [[unlikely]] {
      // seq_cst: pairs with the seq_cst load in safe_epoch().
      overflow_readers_.fetch_add(1, std::memory_order_seq_cst);
      return true;
    }
    std::atomic_ref<std::uint64_t> slot(slots_[n].epoch);
    if (slot.load(std::memory_order_relaxed) != 0) return false;  // only this thread writes it
    // Acquire pairs with the release in advance(): a reader that sees the new
    // epoch sees everything unpublished before it.
    slot.store(epoch_.load(std::memory_order_acquire), std::memory_order_relaxed);
    // Orders the slot store before this reader's loads of shared pointers;
    // pairs with the heavy side in safe_epoch() (membarrier or seq_cst fence).
    if (mode() == FenceMode::asymmetric) [[likely]] {
      std::atomic_signal_fence(std::memory_order_seq_cst);
    } else {
      std::atomic_thread_fence(std::memory_order_seq_cst);
    }
    return true;
  }

  /// Leaves the critical section enter() returned true for.
  void leave(std::uint32_t n) noexcept {
    if (n == kMaxThreads) [[unlikely]] {
      overflow_readers_.fetch_sub(1, std::memory_order_release);
      return;
    }
    // Release: the reader's loads of shared memory happen before a reclaimer
    // that sees the slot clear frees anything (pairs with the acquire scan).
    std::atomic_ref<std::uint64_t>(slots_[n].epoch).store(0, std::memory_order_release);
  }

  // ---- write side --------------------------------------------------------------

  /// The epoch to stamp something being retired with; advances the global
  /// epoch. Call after the thing was unpublished.
  std::uint64_t advance() noexcept {
    // seq_cst RMW: release pairs with enter()'s acquire load.
    return epoch_.fetch_add(1, std::memory_order_seq_cst);
  }

  /// The largest epoch E such that everything retired at E or before may be
  /// freed now; 0 if nothing may be.
  std::uint64_t safe_epoch() const noexcept {
    if (mode() == FenceMode::asymmetric) {
      // Every running thread of the process passes a full barrier: any slot
      // store that precedes a reader's pointer loads is visible below. If
      // the call fails, a reader's slot store may still sit in its store
      // buffer, so the scan proves nothing: free nothing this time.
      if (membarrier_private_expedited() != 0) [[unlikely]] return 0;
    }
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (overflow_readers_.load(std::memory_order_seq_cst) != 0) return 0;
    std::uint64_t oldest = epoch_.load(std::memory_order_seq_cst);
    const std::uint32_t used = ThreadNumbers::high_water();
    for (std::uint32_t i = 0; i < used; ++i) {
      // Acquire pairs with leave()'s release store.
      const std::uint64_t e =
          std::atomic_ref<std::uint64_t>(slots_[i].epoch).load(std::memory_order_acquire);
      if (e != 0 && e < oldest) oldest = e;
    }
    return oldest - 1;
  }

  /// Test-only: the number of readers inside a guard right now.
  std::uint32_t active_readers() const noexcept {
    std::uint32_t active = overflow_readers_.load(std::memory_order_relaxed);
    const std::uint32_t used = ThreadNumbers::high_water();
    for (std::uint32_t i = 0; i < used; ++i) {
      active += std::atomic_ref<std::uint64_t>(slots_[i].epoch).load(std::memory_order_relaxed) != 0;
    }
    return active;
  }

 private:
  struct alignas(kCacheLine) Slot {
    std::uint64_t epoch;  // 0: quiescent; else the epoch seen on entry
  };
  static constexpr std::uint64_t kSlotBytes = sizeof(Slot) * kMaxThreads;

  EpochDomain() {
    slots_ = reinterpret_cast<Slot*>(map_anonymous(kSlotBytes, "offheap", "epoch slots"));
#if defined(OFFHEAP_TSAN)  // detail/os.hpp: TSan does not know membarrier
    asymmetric_available_ = false;
#else
    asymmetric_available_ = register_membarrier();
#endif
    mode_.store(asymmetric_available_ ? FenceMode::asymmetric : FenceMode::symmetric,
                std::memory_order_relaxed);
  }

  static bool register_membarrier() noexcept {
    const long cmds = ::syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    if (cmds < 0 || (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return false;
    return ::syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
  }

  alignas(kCacheLine) std::atomic<std::uint64_t> epoch_{1};
  alignas(kCacheLine) std::atomic<std::uint32_t> overflow_readers_{0};
  Slot* slots_ = nullptr;
  std::atomic<FenceMode> mode_{FenceMode::symmetric};
  bool asymmetric_available_ = false;
};

/// A reader's critical section: shared store memory it loads a pointer to
/// stays mapped until the guard ends.
class EpochGuard {
 public:
  explicit EpochGuard(EpochDomain& d = EpochDomain::instance(),
                      std::uint32_t thread = ThreadNumbers::current()) noexcept
      : domain_(d), thread_(thread), entered_(domain_.enter(thread_)) {}
  ~EpochGuard() {
    if (entered_) domain_.leave(thread_);
  }
  EpochGuard(const EpochGuard&) = delete;
  EpochGuard& operator=(const EpochGuard&) = delete;

 private:
  EpochDomain& domain_;
  std::uint32_t thread_;
  bool entered_;
};

}  // namespace offheap::detail
