// SPDX-License-Identifier: Apache-2.0
// Cursor: where a resumable walk of a store (OffHeapStore::scan,
// scan_keys) stands between two calls.
//
// Thread safety: a Cursor is a plain value, to be used by one walk at a
// time (copy it to fork a walk). It holds no memory of the store and
// nothing between two scan() calls: a cursor kept across writes, a
// clear() or a reopen never points at freed memory (the walk is retaken
// from its shard's start instead; see restarts()).
#pragma once

#include <offheap/policy.hpp>

#include <cstdint>

namespace offheap {

namespace detail {
template <Policy P>
class Walks;
}  // namespace detail

/// A walk's position: the shard it is in, a slot position in that shard's
/// index table, and which table (and which store object) that position is
/// of. Copyable and small (no heap); a default-constructed Cursor is a
/// walk's start. What a walk promises is stated at OffHeapStore::scan.
class Cursor {
 public:
  /// The start of a walk.
  constexpr Cursor() noexcept = default;

  /// True once the walk has passed every shard: scan returns 0 from then on.
  constexpr bool done() const noexcept { return done_; }

  /// The shard the walk is in (0 .. shards; shards when done), for progress.
  constexpr std::uint32_t shard() const noexcept { return shard_; }

  /// How many times keys of a shard may have been handed to fn a second
  /// time: the shard was walked again from its start because its index
  /// table was replaced (a rebuild, clear(), the start of an index
  /// migration) between two calls, or the cursor came from another store
  /// object; or, during an index migration, entries the walk had passed
  /// were moved between two calls to the part of the index it has yet to
  /// walk (the walk goes on where it was).
  constexpr std::uint32_t restarts() const noexcept { return restarts_; }

  friend constexpr bool operator==(const Cursor&, const Cursor&) noexcept = default;

 private:
  template <Policy P>
  friend class detail::Walks;  // the only one that moves a cursor (detail/store/scan.hpp)

  std::uint64_t store_ = 0;        // the walking store object's instance number (0: none yet)
  std::uint64_t position_ = 0;     // 8 per index group, flagged in a drained table (ShardWalk::scan)
  std::uint64_t serial_ = ~std::uint64_t{0};  // the table's serial (none yet)
  std::uint64_t moves_ = 0;        // the shard's index migration steps at the last call
  std::uint32_t shard_ = 0;
  std::uint32_t restarts_ = 0;
  bool done_ = false;
};

}  // namespace offheap
