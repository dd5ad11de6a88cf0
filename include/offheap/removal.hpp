// SPDX-License-Identifier: Apache-2.0
// The removal listener (Options::on_removal): told of every record that
// leaves a store, with its key, its value and why it left.
//
// Memory: the key and value handed to the listener point into the removed
// record itself, in the store's mapped memory, and are valid only during
// the call: copy what you keep. The record is kept whole (retired, not
// freed) until its report, so a listener that falls behind holds memory
// outside a cache's capacity (Stats::retired_record_bytes,
// removals_pending); while a listener is set, updates write a new record
// instead of rewriting one in place, and a file-backed store writes a
// small dead marker with each removal (so that a crash never brings back a
// record that waited for its report; no counter shows those markers).
// Removals waiting at a crash are not reported after the reopen (at most
// once); a clean close() (or the destructor) reports everything first,
// and the listener's writes fail meanwhile (Errc::closed, counted in
// Stats::listener_errors). clear() reports nothing
// (Stats::removals_unreported counts the reports it dropped).
//
// Thread safety: see RemovalListener below (which thread calls it, and
// when calls may run at once).
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

namespace offheap {

/// Why a record left the store.
enum class RemovalCause : std::uint8_t {
  explicit_remove = 1,  ///< remove() (either form), remove_all(), or compute() or one of its kin returning nullopt
  replaced = 2,         ///< a write gave its key a new value (put, replace, ...)
  evicted = 3,          ///< a cache's policy chose it to hold the capacity
  expired = 4,          ///< its deadline passed (Ttl, Options::default_ttl)
};

/// "explicit_remove", "replaced", "evicted", "expired".
constexpr const char* to_string(RemovalCause c) noexcept {
  switch (c) {
    case RemovalCause::explicit_remove: return "explicit_remove";
    case RemovalCause::replaced: return "replaced";
    case RemovalCause::evicted: return "evicted";
    case RemovalCause::expired: return "expired";
  }
  return "unknown";
}

/// Called once per removed record, from the maintenance thread, or, when
/// there is none (background_maintenance off), from OffHeapStore::maintain(),
/// close(), and a writer's thread whose write Options::memory_limit_bytes
/// held up until the records waiting are reported and freed (then calls
/// for different shards may run at once on different writers' threads,
/// and the listener must be thread-safe), in the order
/// the records left their shard, with the key and the value the record held:
/// both views point into the record's own mapped memory and are valid for
/// the call only. The record's space is reused only after the call returns.
/// It may read and write the store, but not call clear() or close() on it
/// (Errc::invalid_argument). An exception it throws is caught and counted
/// (Stats::listener_errors); the record counts as reported.
///
/// One cause per removal, the one the write or the policy gave it:
///  - A write that gives a key a new value (put, put_if_absent over an
///    expired record, replace, compute, the batches) reports the value it
///    replaced as `replaced` (`expired` if its deadline had passed), also
///    when the room a cache made for the write evicted that very record
///    first; a compute() that removes reports `explicit_remove` likewise.
///  - `evicted` is heard for the other records that room took, and for a
///    key's own record when its write then failed (it threw: the key is
///    then absent), or when the write waited at
///    Options::memory_limit_bytes for removals to be reported or synced:
///    it lets go of the shard's lock to wait, and looks at its key again
///    afterwards, as a new call.
/// Writes decide on the key as they find it before they make room: a
/// put_if_absent of a present key returns false and evicts nothing; a
/// replace of a present key returns true and writes, whatever the room it
/// made evicted; put() and compute() return Computed::updated.
using RemovalListener = std::function<void(std::string_view key, std::string_view value, RemovalCause cause)>;

}  // namespace offheap
