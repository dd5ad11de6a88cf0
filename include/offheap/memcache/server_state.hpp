// SPDX-License-Identifier: Apache-2.0
// What the connections of one memcache server share besides the store: the
// cas uniques, the counters that "stats" reports, and a delayed flush_all.
//
// Cas uniques. Each write takes the next value of one counter, so no two
// writes of a server share one. A restarted server must not hand out a
// unique it handed out before its restart (a client holding an old gets's
// unique would else pass a cas against another value): the server starts
// the counter past every unique it may have used, from what it kept on
// disk (ServerState's first_cas: the server's part).
//
// Thread safety: every member is an atomic, used from every connection's
// thread; the counters are relaxed (statistics, ordered with nothing).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

namespace offheap::memcache {

/// The counters of "stats", with memcached's names.
struct Counters {
  std::atomic<std::uint64_t> cmd_get{0}, cmd_set{0}, cmd_flush{0}, cmd_touch{0};
  std::atomic<std::uint64_t> get_hits{0}, get_misses{0};
  std::atomic<std::uint64_t> delete_hits{0}, delete_misses{0};
  std::atomic<std::uint64_t> incr_hits{0}, incr_misses{0}, decr_hits{0}, decr_misses{0};
  std::atomic<std::uint64_t> cas_hits{0}, cas_misses{0}, cas_badval{0};
  std::atomic<std::uint64_t> touch_hits{0}, touch_misses{0};
  std::atomic<std::uint64_t> store_too_large{0}, store_no_memory{0};
  std::atomic<std::uint64_t> total_items{0};
  std::atomic<std::uint64_t> bytes_read{0}, bytes_written{0};
  std::atomic<std::uint64_t> curr_connections{0}, total_connections{0}, rejected_connections{0};

  /// "stats reset": the counters since the start go back to 0 (the
  /// connection gauges stay).
  void reset() noexcept {
    for (auto* c : {&cmd_get, &cmd_set, &cmd_flush, &cmd_touch, &get_hits, &get_misses, &delete_hits,
                    &delete_misses, &incr_hits, &incr_misses, &decr_hits, &decr_misses, &cas_hits, &cas_misses,
                    &cas_badval, &touch_hits, &touch_misses, &store_too_large, &store_no_memory, &total_items,
                    &bytes_read, &bytes_written, &total_connections, &rejected_connections}) {
      c->store(0, std::memory_order_relaxed);
    }
  }
};

/// How the server runs, for "stats" and "stats settings".
struct ServerSettings {
  std::string version = "1.6.18";  // what "version" and "stats" answer (clients parse it: a 1.6 one)
  std::uint64_t max_connections = 1024;
  std::uint64_t limit_maxbytes = 64ull << 20;
  std::uint64_t threads = 1;
  std::uint64_t item_size_max = 1ull << 20;
};

class ServerState {
 public:
  explicit ServerState(std::uint64_t first_cas = 1, ServerSettings settings = {})
      : settings_(std::move(settings)), next_cas_(first_cas == 0 ? 1 : first_cas),
        started_(std::chrono::steady_clock::now()) {}

  /// A cas unique no write of this server had (relaxed: uniqueness needs
  /// only the atomicity of the increment).
  std::uint64_t next_cas() noexcept { return next_cas_.fetch_add(1, std::memory_order_relaxed); }
  /// The next unique next_cas() would give (for the server's epoch file).
  std::uint64_t peek_cas() const noexcept { return next_cas_.load(std::memory_order_relaxed); }

  Counters& counters() noexcept { return counters_; }
  const Counters& counters() const noexcept { return counters_; }
  const ServerSettings& settings() const noexcept { return settings_; }
  std::uint64_t uptime_seconds() const noexcept {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started_).count());
  }

  /// flush_all with a delay: the store is cleared at `at_s` (seconds since
  /// the Unix epoch), by the first command a connection runs at or after it.
  /// A later flush_all replaces an earlier pending one; one without a delay
  /// clears at once and cancels it, as in memcached.
  void schedule_flush(std::uint64_t at_s) noexcept { flush_at_.store(at_s, std::memory_order_relaxed); }
  void cancel_flush() noexcept { flush_at_.store(0, std::memory_order_relaxed); }
  /// Whether a flush is scheduled (a relaxed load: every command asks).
  bool flush_pending() const noexcept { return flush_at_.load(std::memory_order_relaxed) != 0; }
  /// Whether a scheduled flush is due at `now_s`; true for one caller only
  /// (which then clears the store). Relaxed: the store's clear() orders
  /// itself with every write.
  bool take_due_flush(std::uint64_t now_s) noexcept {
    std::uint64_t at = flush_at_.load(std::memory_order_relaxed);
    return at != 0 && at <= now_s && flush_at_.compare_exchange_strong(at, 0, std::memory_order_relaxed);
  }

 private:
  ServerSettings settings_;
  std::atomic<std::uint64_t> next_cas_;
  std::atomic<std::uint64_t> flush_at_{0};
  Counters counters_;
  std::chrono::steady_clock::time_point started_;
};

}  // namespace offheap::memcache
