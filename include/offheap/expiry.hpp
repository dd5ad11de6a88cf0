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
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>

namespace offheap {

/// The time a store reads to decide whether an entry has expired:
/// milliseconds since the Unix epoch, never going back (a clock that goes
/// back delays expiry, it never brings an expired entry back: a read
/// compares the entry's deadline with now).
/// Requires: now_ms() is safe to call from any thread at any time, and
/// returns at least 1.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual std::uint64_t now_ms() const noexcept = 0;
};

namespace detail {

/// The default clock: the steady clock plus the wall clock's lead over it,
/// taken once per process.
inline std::uint64_t default_now_ms() noexcept {
  using namespace std::chrono;
  static const std::int64_t lead =
      duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count() -
      duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count();
  const std::int64_t now = duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count() + lead;
  return now < 1 ? 1 : static_cast<std::uint64_t>(now);
}

}  // namespace detail

/// How long an entry lives, given to a write: the store's default
/// (Options::default_ttl, a default-constructed Ttl), never, a duration
/// from the write, or an absolute deadline. A deadline is kept to the
/// millisecond: a duration is rounded up to whole milliseconds, so that an
/// entry never expires before it was asked to. An entry whose deadline is
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
    return d >= kMaxDeadlineMs - now ? kMaxDeadlineMs : now + d;
  }

  Kind kind_ = Kind::store_default;
  std::int64_t ms_ = 0;
};

}  // namespace offheap
