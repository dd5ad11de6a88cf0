// SPDX-License-Identifier: Apache-2.0
// The maintenance thread: one per store that needs one (a cache, or a
// file-backed store in Durability::periodic), running rounds of the store's
// work (evicting down to capacity, syncing when the interval has passed,
// dropping replaced index tables).
//
// A round says what it found: a backlog (more work than one round does),
// some work, or none. While rounds leave a backlog the thread runs them back
// to back (a backlog is worked off event by event); after a round with some
// work it sleeps `idle` (light load is served in batches); after each round
// that found none it sleeps twice as long as the last time, up to
// `max_idle`, so that an idle store costs a wake-up every `max_idle`, not
// every `idle`; no sleep runs past the time `due()` names (a periodic sync
// comes on time, and so does the next deadline of a record: a writer that
// schedules one earlier than the planned wake-up calls wake()). Writers
// never wait for it. A
// round that throws stops the thread for good: the error is kept
// (failure()) and the store's writes fail with it from then on; nothing
// restarts the thread silently.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

namespace offheap::detail {

enum class RoundFound { nothing, work, backlog };

class MaintenanceThread {
 public:
  /// Starts the thread; `round()` returns a RoundFound, `due()` the time
  /// until work falls due on a clock of its own (a periodic sync): no sleep
  /// runs past it.
  template <class Round, class Due>
  MaintenanceThread(Round round, Due due, std::chrono::nanoseconds idle, std::chrono::nanoseconds max_idle) {
    max_idle = std::max(idle, max_idle);
    thread_ = std::thread([this, round = std::move(round), due = std::move(due), idle, max_idle]() mutable {
      std::unique_lock<std::mutex> lock(mutex_);
      RoundFound found = RoundFound::work;
      std::chrono::nanoseconds sleep = idle;
      for (;;) {
        if (found == RoundFound::work) sleep = idle;
        // (Doubling saturates at max_idle: no overflow for any interval.)
        if (found == RoundFound::nothing) sleep = sleep >= max_idle / 2 ? max_idle : sleep * 2;
        if (found != RoundFound::backlog) {
          const std::chrono::nanoseconds wait = std::clamp(std::chrono::nanoseconds(due()), std::chrono::nanoseconds(0), sleep);
          if (cv_.wait_for(lock, wait, [&] { return stop_ || woken_; }) && stop_) return;
          woken_ = false;
        }
        if (stop_) return;
        lock.unlock();
        try {
          found = round();
          // Relaxed: statistics, read by stats() with nothing to order.
          last_round_ns_.store(now_ns(), std::memory_order_relaxed);
          rounds_.store(rounds_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        } catch (const std::exception& e) {
          lock.lock();
          failure_ = e.what();
          failed_.store(true, std::memory_order_release);  // pairs with the acquire in failed()
          return;
        } catch (...) {
          lock.lock();
          failure_ = "an unknown exception";
          failed_.store(true, std::memory_order_release);
          return;
        }
        lock.lock();
      }
    });
  }
  MaintenanceThread(const MaintenanceThread&) = delete;
  MaintenanceThread& operator=(const MaintenanceThread&) = delete;
  ~MaintenanceThread() { stop(); }

  /// Stops the thread (after the round it is in) and joins it. Idempotent.
  void stop() noexcept {
    {
      std::lock_guard<std::mutex> g(mutex_);
      stop_ = true;
    }
    stopped_.store(true, std::memory_order_relaxed);  // statistics (running())
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  /// Makes the thread run a round now if it sleeps (or right after the
  /// round it is in): a writer scheduled work due before the thread's
  /// planned wake-up. Takes the thread's mutex briefly (the thread holds
  /// it only between rounds, never during one).
  void wake() noexcept {
    {
      std::lock_guard<std::mutex> g(mutex_);
      woken_ = true;
    }
    cv_.notify_all();
  }

  /// Rounds run so far.
  std::uint64_t rounds() const noexcept { return rounds_.load(std::memory_order_relaxed); }
  /// Seconds since the last round ended (since the start before the first).
  double seconds_since_round() const noexcept {
    return static_cast<double>(now_ns() - last_round_ns_.load(std::memory_order_relaxed)) * 1e-9;
  }

  /// Whether the thread runs rounds: neither stopped nor failed.
  bool running() const noexcept { return !stopped_.load(std::memory_order_relaxed) && !failed(); }
  /// Whether a round threw (the thread has stopped).
  bool failed() const noexcept { return failed_.load(std::memory_order_acquire); }
  /// What it threw. Requires failed().
  std::string failure() const {
    std::lock_guard<std::mutex> g(mutex_);
    return failure_;
  }

 private:
  static std::int64_t now_ns() noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  mutable std::mutex mutex_;
  std::atomic<std::uint64_t> rounds_{0};
  std::atomic<std::int64_t> last_round_ns_{now_ns()};
  std::condition_variable cv_;
  bool stop_ = false;
  bool woken_ = false;  // wake() was called since the last wait
  std::atomic<bool> stopped_{false};  // stop() was called
  std::atomic<bool> failed_{false};
  std::string failure_;
  std::thread thread_;  // last: started once the rest is built
};

}  // namespace offheap::detail
