// SPDX-License-Identifier: Apache-2.0
// What the connections of one memcache server share besides the store: the
// cas uniques, the counters that "stats" reports, and flush_all's floor.
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
#include <mutex>
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

  // flush_all, as memcached 1.6 does it (its item_is_flushed()): nothing is
  // removed; a flushed item counts as absent to every command (a cache's
  // eviction reclaims its room). memcached keeps two marks: oldest_live, a
  // second (items last written up to its end are flushed once it has
  // come), and oldest_cas (items with a lower unique are flushed), and
  // honours either only while oldest_live is set and not in the future,
  // so that a later delayed flush brings earlier flushed items back until
  // its second, and one naming a time before the server started, back for
  // good. Here: the same two marks; "written up to the end of second S" is
  // every item while S lasts, then every unique below the one the first
  // command after S takes (time_cas). Reads need the clock only while a
  // flush's second has not passed (needs_clock()).
  //
  // Thread safety: the marks change together, under a mutex, and are read
  // together, lock-free (a seqlock): a command racing a flush_all on
  // another connection sees them before or after it, never half of each.

  /// memcached's marks, read together (a seqlock: writers hold flush_mutex_).
  struct FlushMarks {
    std::uint64_t live_s = 0;      // oldest_live (a second; 0: none)
    std::uint64_t oldest_cas = 0;  // 0: none
    std::uint64_t time_cas = 0;    // uniques below were written by the end of live_s (0: not known yet)

    bool needs_clock() const noexcept { return live_s != 0 && time_cas == 0; }
    /// Whether an item of unique `cas` counts at `now_s` (read only while
    /// needs_clock()).
    bool live(std::uint64_t cas, std::uint64_t now_s) const noexcept {
      if (live_s == 0) return true;
      if (time_cas == 0) return live_s > now_s;  // still to come; or its second: everything so far
      if (cas < time_cas) return false;
      return oldest_cas == 0 || cas >= oldest_cas;
    }
  };
  /// The marks as one flush left them. Lock-free: the three words between
  /// two equal even sequence numbers.
  FlushMarks flush_marks() const noexcept {
    for (;;) {
      const std::uint64_t s1 = flush_seq_.load(std::memory_order_acquire);  // pairs with write_marks()'s last add
      if ((s1 & 1) == 0) {
        const FlushMarks m{live_s_.load(std::memory_order_relaxed), oldest_cas_.load(std::memory_order_relaxed),
                           time_cas_.load(std::memory_order_relaxed)};
        std::atomic_thread_fence(std::memory_order_acquire);  // the words before the re-read; pairs with write_marks()'s fence
        if (flush_seq_.load(std::memory_order_relaxed) == s1) return m;
      }
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
  }
  /// Before a command at `now_s`, when its marks need the clock: past the
  /// flush's second, the unique that ends it (taken once, under the lock,
  /// for the flush still in place).
  void note_time(const FlushMarks& seen, std::uint64_t now_s) {
    if (seen.live_s == 0 || seen.live_s >= now_s || seen.time_cas != 0) return;
    const std::lock_guard<std::mutex> hold(flush_mutex_);
    FlushMarks m = flush_marks();
    if (m.live_s == 0 || m.live_s >= now_s || m.time_cas != 0) return;  // (another flush, or another command)
    m.time_cas = next_cas();
    write_marks(m);
  }
  /// flush_all, with memcached's marks: `delay` as sent (0 or less: now),
  /// at `now_s`.
  void flush(std::int32_t delay, std::uint64_t now_s) {
    const std::lock_guard<std::mutex> hold(flush_mutex_);
    FlushMarks m = flush_marks();
    if (delay <= 0) {  // memcached: oldest_live = now - 1, oldest_cas = the next unique
      m.oldest_cas = m.time_cas = next_cas();
      m.live_s = now_s - 1;
      write_marks(m);
      return;
    }
    std::uint64_t second = 0;  // memcached's realtime(delay) - 1
    if (delay <= 60 * 60 * 24 * 30) {
      second = now_s + static_cast<std::uint64_t>(delay) - 1;
    } else if (static_cast<std::uint64_t>(delay) > started_s() - 61) {
      // (memcached's clock starts 62 s before it; an absolute time up to
      // one second after that start flushes nothing there)
      second = static_cast<std::uint64_t>(delay) - 1;
    }
    m.time_cas = 0;
    if (second != 0 && second <= now_s) m.oldest_cas = next_cas();
    m.live_s = second;
    if (second != 0 && second < now_s) m.time_cas = next_cas();
    write_marks(m);
  }

  /// When the server started (seconds since the Unix epoch, on its
  /// store's clock): memcached ignores flush_all times before it.
  std::uint64_t started_s() const noexcept { return started_s_.load(std::memory_order_relaxed); }
  void set_started_s(std::uint64_t s) noexcept { started_s_.store(s, std::memory_order_relaxed); }

 private:
  /// Under flush_mutex_: the marks, between an odd and an even sequence.
  void write_marks(const FlushMarks& m) noexcept {
    flush_seq_.fetch_add(1, std::memory_order_relaxed);   // odd: readers wait
    std::atomic_thread_fence(std::memory_order_release);  // pairs with flush_marks()'s fence
    live_s_.store(m.live_s, std::memory_order_relaxed);
    oldest_cas_.store(m.oldest_cas, std::memory_order_relaxed);
    time_cas_.store(m.time_cas, std::memory_order_relaxed);
    flush_seq_.fetch_add(1, std::memory_order_release);   // even; pairs with flush_marks()'s first load
  }

  ServerSettings settings_;
  std::atomic<std::uint64_t> next_cas_;
  std::mutex flush_mutex_;                     // flush() and note_time()'s writes
  std::atomic<std::uint64_t> flush_seq_{0};    // the marks' seqlock
  std::atomic<std::uint64_t> live_s_{0}, oldest_cas_{0}, time_cas_{0};  // FlushMarks, word by word
  std::atomic<std::uint64_t> started_s_{0};
  Counters counters_;
  std::chrono::steady_clock::time_point started_;
};

}  // namespace offheap::memcache
