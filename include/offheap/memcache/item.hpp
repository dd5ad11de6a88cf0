// SPDX-License-Identifier: Apache-2.0
// A memcached item as the memcache protocols keep it in an offheap store:
// the store's value is a 16-byte header and the item's data.
//
//   byte 0        8          12           16
//        +--------+----------+------------+----------------+
//        | cas    | flags    | deadline   | data           |
//        | u64    | u32      | u32        | (the client's) |
//        +--------+----------+------------+----------------+
//   little-endian, as the store's records
//
//   cas       the item's cas unique (never 0 for an item written here)
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

inline constexpr std::size_t kItemHeaderBytes = 16;
/// memcached's REALTIME_MAXDELTA: exptimes up to this are relative.
inline constexpr std::int64_t kMaxRelativeExptime = 60 * 60 * 24 * 30;

struct ItemHeader {
  std::uint64_t cas = 0;
  std::uint32_t flags = 0;
  std::uint32_t deadline_s = 0;  // 0: never
};

/// The header's bytes.
inline void write_header(char* out, const ItemHeader& h) noexcept {
  std::memcpy(out, &h.cas, 8);
  std::memcpy(out + 8, &h.flags, 4);
  std::memcpy(out + 12, &h.deadline_s, 4);
}

/// A value's header and data; nullopt for a value shorter than a header
/// (not written by the memcache protocols).
struct ItemView {
  ItemHeader header;
  std::string_view data;
};
inline std::optional<ItemView> read_item(std::string_view value) noexcept {
  if (value.size() < kItemHeaderBytes) return std::nullopt;
  ItemView v;
  std::memcpy(&v.header.cas, value.data(), 8);
  std::memcpy(&v.header.flags, value.data() + 8, 4);
  std::memcpy(&v.header.deadline_s, value.data() + 12, 4);
  v.data = value.substr(kItemHeaderBytes);
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
inline Ttl ttl_of_seconds(std::uint32_t deadline_s) noexcept { return ttl_of(Deadline{false, deadline_s}); }

}  // namespace offheap::memcache
