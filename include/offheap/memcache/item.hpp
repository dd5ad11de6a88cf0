// SPDX-License-Identifier: Apache-2.0
// A memcached item as the memcache protocols keep it in an offheap store:
// the store's value is a header of 13 to 21 bytes and the item's data.
//
//   byte 0       1        9        13         17          21
//        +-------+--------+--------+----------+-----------+------------+
//        | shape | cas    | atime  | [flags]  | [deadline] | data       |
//        | u8    | u64    | u32    | u32      | u32        | (client's) |
//        +-------+--------+--------+----------+-----------+------------+
//   little-endian, as the store's records; [..]: present when the shape
//   says so (a zero is left out: most items have no flags or no TTL)
//
//   shape     0b10SSSSSS: the top two bits mark an item (a value whose top
//             bits differ was not written here, and every command treats
//             it as absent); the others: kHasFlags, kHasDeadline, and the
//             item's state bits (kFetched, kWon, kStale, kKeyBinary)
//   cas       the item's cas unique (never 0 for an item written here)
//   atime     seconds since the Unix epoch of its write, or of a later
//             fetch (see ItemHeader::atime_s)
//   flags     the client's 32-bit flags, kept with the value
//   deadline  when it expires, in seconds since the Unix epoch; 0: never.
//             The store expires the record at the same time (its Ttl is
//             the deadline in milliseconds): the copy here is what touch,
//             gat and the meta commands' TTL read, and what append,
//             prepend, incr and decr keep.
//
// Expiry times as memcached reads them (exptime): 0 never; up to 30 days
// (2,592,000 s) relative to now; beyond that an absolute Unix time; a
// negative one, or an absolute one not after now, is already expired.
// Thread safety: plain functions and values.
#pragma once

#include <offheap/expiry.hpp>

#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace offheap::memcache {

/// The header's size without its optional words, and with both.
inline constexpr std::size_t kMinItemHeaderBytes = 13;
inline constexpr std::size_t kMaxItemHeaderBytes = 21;
/// memcached's REALTIME_MAXDELTA: exptimes up to this are relative.
inline constexpr std::int64_t kMaxRelativeExptime = 60 * 60 * 24 * 30;
/// memcached's ITEM_UPDATE_INTERVAL: a fetch moves an item's access time
/// once it is this old.
inline constexpr std::uint32_t kAccessUpdateSeconds = 60;

/// The shape byte's bits.
enum : std::uint8_t {
  kShapeMark = 0x80,      ///< with kShapeMarkMask: 0b10 in the top bits
  kShapeMarkMask = 0xC0,
  kHasFlags = 0x01,
  kHasDeadline = 0x02,
  kFetched = 0x04,        ///< read since written (the meta protocol's h)
  kWon = 0x08,            ///< a client was handed the win token (mg's W; Z after)
  kStale = 0x10,          ///< marked stale by md I or ms I (mg's X)
  kKeyBinary = 0x20,      ///< written by ms with a base64 key (the key goes back base64)
};

struct ItemHeader {
  std::uint64_t cas = 0;  ///< never 0 in a stored item
  std::uint32_t flags = 0;
  std::uint32_t deadline_s = 0;  ///< 0: never
  /// When it was written, or fetched kAccessUpdateSeconds or more after the
  /// time recorded (memcached 1.6's rule without its segmented LRU, whose
  /// moves between queues decide it there): mg's l, me's la.
  std::uint32_t atime_s = 0;
  bool fetched = false;
  bool won = false;
  bool stale = false;
  bool key_binary = false;

  bool operator==(const ItemHeader&) const = default;
};

/// The bytes write_header() writes for `h`.
constexpr std::size_t header_bytes(const ItemHeader& h) noexcept {
  return kMinItemHeaderBytes + (h.flags != 0 ? 4 : 0) + (h.deadline_s != 0 ? 4 : 0);
}

/// Writes the header's bytes at `out` (room for header_bytes(h)); returns
/// how many.
inline std::size_t write_header(char* out, const ItemHeader& h) noexcept {
  std::uint8_t shape = kShapeMark;
  if (h.flags != 0) shape |= kHasFlags;
  if (h.deadline_s != 0) shape |= kHasDeadline;
  if (h.fetched) shape |= kFetched;
  if (h.won) shape |= kWon;
  if (h.stale) shape |= kStale;
  if (h.key_binary) shape |= kKeyBinary;
  out[0] = static_cast<char>(shape);
  std::memcpy(out + 1, &h.cas, 8);
  std::memcpy(out + 9, &h.atime_s, 4);
  std::size_t n = kMinItemHeaderBytes;
  if (h.flags != 0) {
    std::memcpy(out + n, &h.flags, 4);
    n += 4;
  }
  if (h.deadline_s != 0) {
    std::memcpy(out + n, &h.deadline_s, 4);
    n += 4;
  }
  return n;
}

/// A value's header and data; nullopt for a value these protocols did not
/// write (its shape's mark differs, it is shorter than its header, or its
/// cas is 0). A value another program wrote can still pass these checks
/// (one in four of random first bytes, a cas not 0): a store the memcache
/// protocols share with other writers keeps them to keys of their own.
/// `data` views the value's bytes: valid as long as they are.
struct ItemView {
  ItemHeader header;
  std::string_view data;
};
inline std::optional<ItemView> read_item(std::string_view value) noexcept {
  if (value.size() < kMinItemHeaderBytes) return std::nullopt;
  const auto shape = static_cast<std::uint8_t>(value[0]);
  if ((shape & kShapeMarkMask) != kShapeMark) return std::nullopt;
  ItemView v;
  std::memcpy(&v.header.cas, value.data() + 1, 8);
  std::memcpy(&v.header.atime_s, value.data() + 9, 4);
  std::size_t n = kMinItemHeaderBytes;
  if ((shape & kHasFlags) != 0) {
    if (value.size() < n + 4) return std::nullopt;
    std::memcpy(&v.header.flags, value.data() + n, 4);
    n += 4;
  }
  if ((shape & kHasDeadline) != 0) {
    if (value.size() < n + 4) return std::nullopt;
    std::memcpy(&v.header.deadline_s, value.data() + n, 4);
    n += 4;
  }
  if (v.header.cas == 0) return std::nullopt;  // (never an item's: see ItemHeader)
  v.header.fetched = (shape & kFetched) != 0;
  v.header.won = (shape & kWon) != 0;
  v.header.stale = (shape & kStale) != 0;
  v.header.key_binary = (shape & kKeyBinary) != 0;
  v.data = value.substr(n);
  return v;
}

/// An exptime's deadline at `now_s` (seconds since the Unix epoch).
struct Deadline {
  bool expired = false;       // already expired: the write leaves nothing to read
  std::uint32_t seconds = 0;  // 0: never; 1 when expired (a header that differs from a live item's)
};
constexpr Deadline deadline_of(std::int32_t exptime, std::uint64_t now_s) noexcept {
  if (exptime == 0) return {};
  if (exptime < 0) return {true, 1};
  if (exptime <= kMaxRelativeExptime) {
    const std::uint64_t d = now_s + static_cast<std::uint64_t>(exptime);
    return {false, d > 0xFFFFFFFFu ? 0xFFFFFFFFu : static_cast<std::uint32_t>(d)};
  }
  if (static_cast<std::uint64_t>(exptime) <= now_s) return {true, 1};
  return {false, static_cast<std::uint32_t>(exptime)};
}

/// The store's Ttl for a deadline (an expired one: the earliest deadline
/// the store keeps, long past).
inline Ttl ttl_of(const Deadline& d) noexcept {
  if (d.expired) return Ttl::at_ms(1);
  return d.seconds == 0 ? Ttl::never() : Ttl::at_ms(std::uint64_t{d.seconds} * 1000);
}
inline Ttl ttl_of_seconds(std::uint32_t deadline_s) noexcept {
  return ttl_of(Deadline{deadline_s == 1, deadline_s});
}

}  // namespace offheap::memcache
