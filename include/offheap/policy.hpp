// SPDX-License-Identifier: Apache-2.0
// Policies: what a store decides at compile time.
//
// A Policy names the key hash, the writer lock and a persisted id. Users
// inherit a ready policy and override one member:
//
//   struct MyPolicy : offheap::StorePolicy {
//     using Lock = offheap::NullLock;   // one writer thread at a time
//     static constexpr std::uint8_t id = 200;
//   };
//
// Optional members are filled in by PolicyTraits:
//   static constexpr bool in_place_updates  (default true): an overwrite
//     whose record fits the old slot rewrites it under the seqlock instead of
//     writing a new record.
#pragma once

#include <offheap/detail/hash.hpp>

#include <atomic>
#include <concepts>
#include <cstdint>
#include <string_view>
#include <thread>

namespace offheap {

/// A lock that does nothing: for stores written by one thread at a time.
/// Readers stay lock-free whatever the lock.
struct NullLock {
  void lock() noexcept {}
  void unlock() noexcept {}
};

/// The default writer lock: one compare-and-swap to take it uncontended, a
/// short spin, then a futex wait (std::atomic::wait), so a preempted holder
/// does not burn its waiters' time slices.
class WriterLock {
 public:
  void lock() noexcept {
    std::uint32_t expected = 0;
    // Acquire pairs with the release in unlock(): the previous holder's
    // writes are visible to the next.
    if (state_.compare_exchange_strong(expected, 1, std::memory_order_acquire,
                                       std::memory_order_relaxed)) {
      return;
    }
    lock_slow();
  }
  bool try_lock() noexcept {
    std::uint32_t expected = 0;
    return state_.compare_exchange_strong(expected, 1, std::memory_order_acquire,
                                          std::memory_order_relaxed);
  }
  void unlock() noexcept {
    // Release pairs with the acquire in lock()/lock_slow().
    if (state_.exchange(0, std::memory_order_release) == 2) state_.notify_one();
  }

 private:
  void lock_slow() noexcept {
    for (int i = 0; i < 100; ++i) {
      std::uint32_t expected = 0;
      if (state_.load(std::memory_order_relaxed) == 0 &&
          state_.compare_exchange_weak(expected, 1, std::memory_order_acquire,
                                       std::memory_order_relaxed)) {
        return;
      }
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    // 2: locked with waiters. Whoever unlocks a 2 wakes one waiter, which
    // takes the lock as 2 again (there may be more waiters).
    while (state_.exchange(2, std::memory_order_acquire) != 0) state_.wait(2, std::memory_order_relaxed);
  }

  std::atomic<std::uint32_t> state_{0};  // 0 free, 1 locked, 2 locked with waiters
};

/// What a Policy must provide.
template <class P>
concept Policy = requires {
  typename P::Hash;
  typename P::Lock;
  { P::id } -> std::convertible_to<std::uint8_t>;
} && std::constructible_from<typename P::Hash, std::uint64_t> &&
    requires(const typename P::Hash& h, std::string_view key, typename P::Lock& lock) {
      { h(key) } noexcept -> std::same_as<std::uint64_t>;
      lock.lock();
      lock.unlock();
    } && std::default_initializable<typename P::Lock>;

/// Optional policy members with their defaults.
template <class P>
struct PolicyTraits {
  static constexpr bool in_place_updates = [] {
    if constexpr (requires { P::in_place_updates; }) {
      return static_cast<bool>(P::in_place_updates);
    } else {
      return true;
    }
  }();
};

/// A database: no eviction, thread-safe writers, seeded hash.
struct StorePolicy {
  using Hash = SeededHash;
  using Lock = WriterLock;
  static constexpr std::uint8_t id = 1;
};

/// StorePolicy for programs that write from one thread at a time (readers
/// may still be many): no writer lock at all.
struct SingleWriterPolicy : StorePolicy {
  using Lock = NullLock;
  static constexpr std::uint8_t id = 2;
};

static_assert(Policy<StorePolicy>);
static_assert(Policy<SingleWriterPolicy>);

}  // namespace offheap
