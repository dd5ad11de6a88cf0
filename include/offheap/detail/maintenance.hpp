// SPDX-License-Identifier: Apache-2.0
// The maintenance thread: one per store that needs one (a cache, or a
// file-backed store in Durability::periodic), running rounds of the store's
// work (evicting down to capacity, syncing when the interval has passed,
// dropping replaced index tables).
//
// A round says whether it found work. While rounds find work the thread
// runs them back to back (a backlog is worked off event by event); once a
// round finds none it sleeps `idle` before the next (light load is served
// in batches). Writers never wait for it. A round that throws stops the
// thread for good: the error is kept (failure()) and the store's writes fail
// with it from then on; nothing restarts the thread silently.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

namespace offheap::detail {

class MaintenanceThread {
 public:
  /// Starts the thread; `round()` returns whether it found work.
  template <class Round>
  MaintenanceThread(Round round, std::chrono::nanoseconds idle) {
    thread_ = std::thread([this, round = std::move(round), idle]() mutable {
      std::unique_lock<std::mutex> lock(mutex_);
      bool busy = false;
      for (;;) {
        if (!busy && cv_.wait_for(lock, idle, [&] { return stop_; })) return;
        if (stop_) return;
        lock.unlock();
        try {
          busy = round();
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
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  /// Whether a round threw (the thread has stopped).
  bool failed() const noexcept { return failed_.load(std::memory_order_acquire); }
  /// What it threw. Requires failed().
  std::string failure() const {
    std::lock_guard<std::mutex> g(mutex_);
    return failure_;
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::atomic<bool> failed_{false};
  std::string failure_;
  std::thread thread_;  // last: started once the rest is built
};

}  // namespace offheap::detail
