// SPDX-License-Identifier: Apache-2.0
// Expiry: the time a store keeps (Clock) and how long a written entry
// lives (Ttl).
//
// A store's time is milliseconds since the Unix epoch. The default clock
// reads the steady clock, anchored once per process to the wall clock: it
// never goes back while the process runs (a wall-clock step changes
// nothing), and its deadlines mean wall-clock time on disk, so that a
// persisted store's entries expire at the same moment after a restart. A
// program (or a test) that wants to control time gives the store a Clock of
// its own (Options::clock).
//
// What a deadline does. Every write (put, put_if_absent, replace,
// put_value, compute and the rest) takes a Ttl: by default the store's
// Options::default_ttl (0: none), Ttl::never(), a duration, or an absolute
// deadline (Ttl::at, Ttl::at_ms). A deadline is kept to the millisecond in
// the record itself (8 more bytes after the value; a record without one
// pays nothing), and every read compares it with the clock: get, read,
// contains, view, get_value, for_each and scan never return an entry from
// its deadline's millisecond on; put_if_absent writes over an expired
// entry; replace and remove find none (remove still takes it away, and
// returns false). Each shard keeps a hierarchical timing wheel in mapped
// memory (32 bytes per entry; O(1) scheduling, lazy cancelling); the
// maintenance thread sleeps until the wheels' next event (a write with an
// earlier deadline wakes it) and removes each expired record within about
// a millisecond of its deadline, as RemovalCause::expired
// (Stats::expirations, expiry_entries). Every store with a writer lock
// runs that thread (one with nothing else to do sleeps 10 s at a time); a
// SingleWriterPolicy store has none: its program calls maintain().
// Until then an expired record is invisible but stays (counted in size(),
// live_bytes and a cache's capacity), and a writer making room in a full
// cache evicts by its policy, not expired records first. Stale wheel
// entries (records rewritten with TTLs faster than they expire) cost a
// sweep that looks each one up again: about one more index lookup on the
// maintenance thread per TTL'd overwrite.
//
// Reads on the default clock compare deadlines more than 200 ms away with
// the kernel's coarse clock (CLOCK_MONOTONIC_COARSE: a few nanoseconds, at
// most a timer tick behind) and read the precise clock only for closer
// deadlines, so a read could return an entry past its deadline only if the
// kernel's tick stalled for over 200 ms. Persisted stores keep deadlines
// on disk as wall-clock time, so an entry expires at the same moment after
// a restart; what expired while the store was closed (or being recovered
// after a crash) is gone when the open returns, and reported to the
// listener by the first maintenance round. A clean open of a shard that
// never held a deadline reads no record for it.
//
// Thread safety: Ttl is a plain value. A Clock's now_ms() is called from
// any thread (readers, writers, the maintenance thread) at once. Nothing
// here hands out memory.
#pragma once

#include <chrono>
#include <cstdint>
#include <ctime>
#include <limits>

namespace offheap {

/// The time a store reads to decide whether an entry has expired:
/// milliseconds since the Unix epoch.
/// Requires: now_ms() is safe to call from any thread at any time, returns
/// at least 1, and never goes back. (A clock that goes back delays the
/// removal of expired records, and makes one that maintenance has not
/// removed yet readable again until it is: reads compare each entry's
/// deadline with now.)
class Clock {
 public:
  virtual ~Clock() = default;
  virtual std::uint64_t now_ms() const noexcept = 0;
};

namespace detail {

/// The wall clock's lead over the steady clock (CLOCK_MONOTONIC), in ms,
/// taken once per process.
inline std::int64_t wall_lead_ms() noexcept {
  using namespace std::chrono;
  static const std::int64_t lead =
      duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count() -
      duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count();
  return lead;
}

/// The default clock: the steady clock plus the wall clock's lead over it.
inline std::uint64_t default_now_ms() noexcept {
  using namespace std::chrono;
  const std::int64_t now = duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count() + wall_lead_ms();
  return now < 1 ? 1 : static_cast<std::uint64_t>(now);
}

/// The default clock as the kernel's coarse monotonic clock says it, which
/// is the monotonic clock as of the last timer tick: never ahead of
/// default_now_ms(), behind it by up to a tick (1-10 ms), and cheap to read
/// (a few nanoseconds, no time-stamp counter; the precise clock's counter
/// read costs from tens of nanoseconds to far more in some virtual
/// machines, 170 ns where this was measured, and holds back the reads
/// around it).
inline std::uint64_t coarse_now_ms() noexcept {
#if defined(CLOCK_MONOTONIC_COARSE)
  timespec ts{};
  if (::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) == 0) {
    const std::int64_t now = static_cast<std::int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000 + wall_lead_ms();
    return now < 1 ? 1 : static_cast<std::uint64_t>(now);
  }
#endif
  return default_now_ms();
}

/// Readers on the default clock decide with the coarse clock whether a
/// deadline this far or further away has passed (it has not, unless the
/// kernel's tick stalled for as long), and read the precise clock only for
/// deadlines closer than that.
inline constexpr std::uint64_t kCoarseMarginMs = 200;

/// Whether `deadline` (not 0) has passed on `clock` (null: the default).
inline bool deadline_passed(const Clock* clock, std::uint64_t deadline) noexcept {
  if (clock != nullptr) return deadline <= clock->now_ms();
  if (deadline > coarse_now_ms() + kCoarseMarginMs) [[likely]] return false;
  return deadline <= default_now_ms();
}

}  // namespace detail

/// How long an entry lives, given to a write: the store's default
/// (Options::default_ttl, a default-constructed Ttl), never, a duration
/// from the write, or an absolute deadline. A deadline is kept to the
/// millisecond, and an entry is expired from its deadline's millisecond on
/// (deadline <= now). A duration d is rounded up to whole milliseconds and
/// counted from the millisecond after the write's: the entry lives at
/// least d, and at most 1 ms longer (so that a write late in a
/// millisecond still gets all of d). An entry whose deadline is
/// not after the write's time (a duration of 0 or less, a deadline in the
/// past) is written and expired at once: no read returns it, and it leaves
/// as RemovalCause::expired.
class Ttl {
 public:
  /// The latest deadline a store keeps (about the year 6400); later ones
  /// are clamped to it.
  static constexpr std::uint64_t kMaxDeadlineMs = std::uint64_t{1} << 47;

  /// The store's Options::default_ttl (none if that is 0).
  constexpr Ttl() noexcept = default;

  /// Expires `d` after the write (rounded up to milliseconds).
  template <class Rep, class Period>
  constexpr Ttl(std::chrono::duration<Rep, Period> d) noexcept  // NOLINT: implicit on purpose
      : kind_(Kind::after), ms_(to_ms(d)) {}

  /// Never expires, whatever Options::default_ttl says.
  static constexpr Ttl never() noexcept { return Ttl(Kind::never, 0); }

  /// Expires at `deadline` (rounded up to milliseconds; the store's clock
  /// counts milliseconds since the Unix epoch, as system_clock does).
  static constexpr Ttl at(std::chrono::system_clock::time_point deadline) noexcept {
    return Ttl(Kind::at, to_ms(deadline.time_since_epoch()));
  }
  /// Expires at `ms` milliseconds since the Unix epoch, as the store's
  /// clock counts them.
  static constexpr Ttl at_ms(std::uint64_t ms) noexcept {
    return Ttl(Kind::at, static_cast<std::int64_t>(ms > kMaxDeadlineMs ? kMaxDeadlineMs : ms));
  }

  /// The deadline for a write at `now_ms` with the store's default TTL of
  /// `default_ms` (0: none), or 0 for none. At least 1 when there is one.
  constexpr std::uint64_t deadline(std::uint64_t now_ms, std::uint64_t default_ms) const noexcept {
    switch (kind_) {
      case Kind::store_default: return default_ms == 0 ? 0 : add(now_ms, static_cast<std::int64_t>(default_ms));
      case Kind::never: return 0;
      case Kind::after: return add(now_ms, ms_);
      case Kind::at:
        return ms_ < 1 ? 1 : static_cast<std::uint64_t>(ms_) > kMaxDeadlineMs ? kMaxDeadlineMs : static_cast<std::uint64_t>(ms_);
    }
    return 0;
  }

  constexpr bool is_default() const noexcept { return kind_ == Kind::store_default; }

 private:
  enum class Kind : std::uint8_t { store_default, never, after, at };
  constexpr Ttl(Kind k, std::int64_t ms) noexcept : kind_(k), ms_(ms) {}

  template <class Rep, class Period>
  static constexpr std::int64_t to_ms(std::chrono::duration<Rep, Period> d) noexcept {
    using namespace std::chrono;
    // Saturates rather than overflows (a duration of years is "never" in
    // practice, and must not wrap into the past).
    using Wide = duration<long double, std::milli>;
    const long double ms = duration_cast<Wide>(d).count();
    if (!(ms == ms)) return 0;  // NaN: as 0, expired at once
    if (ms >= static_cast<long double>(std::numeric_limits<std::int64_t>::max() / 2)) {
      return std::numeric_limits<std::int64_t>::max() / 2;
    }
    if (ms <= static_cast<long double>(std::numeric_limits<std::int64_t>::min() / 2)) {
      return std::numeric_limits<std::int64_t>::min() / 2;
    }
    const auto whole = static_cast<std::int64_t>(ms);
    return static_cast<long double>(whole) < ms ? whole + 1 : whole;  // rounded up
  }
  static constexpr std::uint64_t add(std::uint64_t now, std::int64_t ms) noexcept {
    if (now > kMaxDeadlineMs) now = kMaxDeadlineMs;
    if (ms <= 0) return now < 1 ? 1 : now;  // expired at once
    const std::uint64_t d = static_cast<std::uint64_t>(ms);
    return d >= kMaxDeadlineMs - now - 1 ? kMaxDeadlineMs : now + d + 1;
  }

  Kind kind_ = Kind::store_default;
  std::int64_t ms_ = 0;
};

}  // namespace offheap
