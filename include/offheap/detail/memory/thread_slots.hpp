// SPDX-License-Identifier: Apache-2.0
// Small per-thread numbers, and per-thread counter lines built on them.
//
// A thread takes a number in [0, kMaxThreads) the first time it counts a
// read (a store with Options::record_stats) and gives it back when it
// exits, so numbers stay dense. Reads of other stores take none. A read after
// that (from a thread_local destructor that runs later) takes no new number,
// which nothing would give back: it goes on the shared overflow path. A counter
// line per (store, thread number), each on its own cache line, lets readers
// count hits and misses with plain relaxed stores: a line has one writer at
// a time, and no reader writes a line another thread writes. Threads beyond
// kMaxThreads share one overflow line and count with atomic adds.
//
// Taking a number is the only step that allocates (the thread-exit hook),
// once per thread.
#pragma once

#include <offheap/detail/memory/os.hpp>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

namespace offheap::detail {

inline constexpr std::uint32_t kMaxThreads = 1024;
inline constexpr std::size_t kCacheLine = 64;

class ThreadNumbers {
 public:
  /// This thread's number, or kMaxThreads when all are taken or when the
  /// thread has given its number back on exit.
  [[gnu::always_inline]] static std::uint32_t current() noexcept {
    const std::uint32_t n = tls_number_;
    return n != 0 ? n - 1 : take();
  }

  /// One past the highest number ever handed out: scans of per-thread slots
  /// stop here. Acquire pairs with the release in take(): a scanner that sees
  /// a number sees the slot line's mapping it was handed out with.
  static std::uint32_t high_water() noexcept {
    return pool().high_water.load(std::memory_order_acquire);
  }

 private:
  struct Pool {
    std::mutex mutex;
    std::uint32_t next = 0;  // numbers below were handed out at least once
    std::atomic<std::uint32_t> high_water{0};  // == next, readable without the mutex
    std::uint32_t free_count = 0;
    std::uint32_t free[kMaxThreads];
  };
  static Pool& pool() noexcept {
    // Never destroyed: threads may exit after static destruction began.
    static Pool* p = new Pool;
    return *p;
  }

  /// tls_number_ once the thread's number went back: current() then returns
  /// kMaxThreads without taking one.
  static constexpr std::uint32_t kGone = kMaxThreads + 1;

  /// Gives the number back at thread exit. Its destructor runs once: a
  /// number taken after it would never return to the pool.
  struct Owner {
    std::uint32_t number = kMaxThreads;
    ~Owner() {
      tls_number_ = kGone;
      if (number == kMaxThreads) return;
      Pool& p = pool();
      std::lock_guard<std::mutex> g(p.mutex);
      p.free[p.free_count++] = number;
    }
  };

  [[gnu::noinline, gnu::cold]] static std::uint32_t take() noexcept {
    Pool& p = pool();
    std::uint32_t n = kMaxThreads;
    {
      std::lock_guard<std::mutex> g(p.mutex);
      if (p.free_count > 0) {
        n = p.free[--p.free_count];
      } else if (p.next < kMaxThreads) {
        n = p.next++;
        p.high_water.store(p.next, std::memory_order_release);
      }
    }
    if (n == kMaxThreads) return n;  // overflow: no number, counted on the shared line
    owner_.number = n;
    tls_number_ = n + 1;
    return n;
  }

  static thread_local std::uint32_t tls_number_;  // number + 1; 0: none yet; kGone
  static thread_local Owner owner_;
};

inline thread_local constinit std::uint32_t ThreadNumbers::tls_number_ = 0;
inline thread_local ThreadNumbers::Owner ThreadNumbers::owner_;

/// Per-thread hit and miss counters of one store, in mapped memory: a line
/// each for thread numbers below kCounterLines, one shared line (atomic
/// adds) for the rest, so that a store maps 16 KiB of them, not 64.
class ReadCounters {
 public:
  explicit ReadCounters(const StoreName& name) : store_(name) {
    lines_ = reinterpret_cast<Line*>(map_anonymous(mapped_bytes(), name, "read counters"));
  }
  ReadCounters(const ReadCounters&) = delete;
  ReadCounters& operator=(const ReadCounters&) = delete;
  ~ReadCounters() { unmap(lines_, mapped_bytes(), store_); }

  /// Requires: n is ThreadNumbers::current().
  void count(std::uint32_t n, bool hit) const noexcept {
    if (n > kCounterLines) n = kCounterLines;
    std::atomic_ref<std::uint64_t> c(hit ? lines_[n].hits : lines_[n].misses);
    if (n != kCounterLines) {
      // Only this thread writes this line: a relaxed load and store suffice.
      c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    } else {
      c.fetch_add(1, std::memory_order_relaxed);
    }
  }

  void sum(std::uint64_t& hits, std::uint64_t& misses) const noexcept {
    hits = misses = 0;
    for (std::uint32_t i = 0; i <= kCounterLines; ++i) {
      hits += std::atomic_ref<std::uint64_t>(lines_[i].hits).load(std::memory_order_relaxed);
      misses += std::atomic_ref<std::uint64_t>(lines_[i].misses).load(std::memory_order_relaxed);
    }
  }

  static std::uint64_t mapped_bytes() noexcept { return round_up(kBytes, page_size()); }

 private:
  struct alignas(kCacheLine) Line {
    std::uint64_t hits;
    std::uint64_t misses;
  };
  static constexpr std::uint32_t kCounterLines = 255;  // + 1 shared
  static constexpr std::uint64_t kBytes = sizeof(Line) * (kCounterLines + 1);
  const StoreName& store_;
  Line* lines_ = nullptr;
};

}  // namespace offheap::detail
