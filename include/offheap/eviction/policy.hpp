// SPDX-License-Identifier: Apache-2.0
// Eviction policies: what they are told, what they may ask, and the concept
// every policy satisfies (S3Fifo, Lru, WTinyLfu, NoEviction).
//
// A policy decides which record leaves a full cache. It never touches a
// record itself: it keeps Handles (a record's location and stamp, its key's
// hash and its size in bytes) in structures of its own, in mapped memory,
// and asks a Host about them. In a store the host is the shard, and every
// call below runs under the shard's writer lock (the maintenance thread
// takes it too); in tests and in the hit-ratio bench the host is a model of
// records (tests/eviction/, bench/hit_ratio.cpp) and calls come from one
// thread in the order of a trace ("reference mode": every hit applied at
// once, nothing lost, deterministic).
//
// A handle goes stale when its record is removed, replaced or evicted, or
// when the same location is written again (the stamp moves): policies that
// keep handles in queues skip stale ones by asking host.current(), instead
// of searching for them when the record goes (forget() tells them the bytes
// went). Each record also has a few policy bits that the host keeps beside
// it (in a store: the low bits of the record's index slot, so that a reader
// can raise a frequency with one compare-and-swap on a word that is never a
// value byte): bits(), set_bits(); and a node word, a number the policy
// gives it (in a store: 31 bits of the record's header), by which a policy
// that keeps a node per record finds it without a table of its own:
// node(), set_node().
//
// How a reader's hit reaches a policy (Policy::reader_hits):
//   frequency_bits: the reader raises bits 0-1 of the record's policy bits,
//     at most to 3, and only if they are below 3 (a hot record's reads
//     write nothing); hit() is the same thing done by the host in reference
//     mode.
//   buffered: the reader puts the handle in a lossy per-thread buffer that
//     the maintenance thread drains into hit() (a full buffer drops hits).
//   none: hits are not recorded.
//
// Thread safety: a policy object belongs to one shard and is called only
// under that shard's writer lock (or from one thread in reference mode);
// it needs no synchronization of its own. Memory: a policy hands out
// Handles (values), never pointers into its structures.
#pragma once

#include <concepts>
#include <cstdint>

namespace offheap::eviction {

/// One record, as a policy keeps it.
struct Handle {
  std::uint64_t loc = ~std::uint64_t{0};  // the record's location (detail::Location::raw())
  std::uint64_t stamp = 0;                // its stamp when handed over
  std::uint64_t hash = 0;                 // its key's hash (the store's Policy::Hash)
  std::uint64_t bytes = 0;                // what it counts against the capacity

  friend constexpr bool operator==(const Handle&, const Handle&) noexcept = default;
};

enum class ReaderHits : std::uint8_t { none, frequency_bits, buffered };

/// Host::node()'s answer when no current record is at the handle's place.
inline constexpr std::uint32_t kNoNode = 0xFFFFFFFFu;
/// Node words a host keeps: 0 to kMaxNode.
inline constexpr std::uint32_t kMaxNode = 0x7FFFFFFDu;

/// The sizes a policy reports (Stats).
struct PolicyStats {
  std::uint64_t entries = 0;           // handles held, stale ones included
  std::uint64_t bytes = 0;             // bytes of the records it holds (current ones)
  std::uint64_t small_bytes = 0;       // S3Fifo: small queue; WTinyLfu: window
  std::uint64_t main_bytes = 0;        // S3Fifo: main queue; WTinyLfu: probation + protected
  std::uint64_t protected_bytes = 0;   // WTinyLfu
  std::uint64_t ghost_entries = 0;     // S3Fifo
  std::uint64_t window_target = 0;     // WTinyLfu: the climber's window size, bytes
  std::uint64_t sketch_resets = 0;     // WTinyLfu
  std::uint64_t mapped_bytes = 0;      // the policy's own mapped memory
};

/// What a policy may ask of the records it keeps. A model for concept
/// checks; the real hosts are the shard and the tests' record model.
struct HostArchetype {
  /// The record `h` names (h.loc, h.stamp) is still there, live, with h's
  /// stamp; if so, also fills in h.hash and h.bytes (queues keep only the
  /// location and the stamp).
  bool current(Handle& h);
  /// Its policy bits (0-7). Requires current(h).
  std::uint8_t bits(const Handle& h);
  void set_bits(const Handle& h, std::uint8_t bits);
  /// The record's node word: what set_node() last stored for it, carried
  /// over to a record that replaces or moves it (as its bits are), if a
  /// live record with h's stamp lies at h.loc; else kNoNode. Callable with
  /// any handle (a drained hit's may be stale). A record nobody gave one,
  /// or one damaged in a file, may answer any value up to kMaxNode: the
  /// policy checks the answer against its own node before it trusts it.
  std::uint32_t node(const Handle& h);
  /// Stores `n` (at most kMaxNode) as the record's node word. Requires
  /// current(h).
  void set_node(const Handle& h, std::uint32_t n);
  /// Removes it from the store (reported as evicted). Requires current(h).
  void evict(const Handle& h);
  // Optional (a policy tests for it with `requires`): prefetch(loc), a
  // hint that the record at `loc` is the next one it will ask about (the
  // shard brings its first lines into the cache; no effect on anything a
  // call returns).
};

/// Every eviction policy. `P::id` is written into a persisted store and
/// checked on reopen. Calls:
///   set_capacity(bytes)  the cache's capacity (its queues' shares follow)
///   reserve()            makes the next admit() or replace() unable to
///                        fail (maps what they may need); throws
///                        Error(out_of_space), nothing changed, if it cannot
///   admit(h, host)       a new record (an insert) is in the store
///   replace(old, h, host) a record replaced by a new one of the same key,
///                        called once h is written (old is no longer
///                        current; the host carries old's policy bits and
///                        node word over to h, as a store's index slot
///                        does): its place and frequency carry over
///   relocate(old, h, host) optional: the record moved (compaction), its
///                        key and value the same: not an access (without
///                        it, replace() is called)
///   restore(h, host)     a record found at open (calls come in stamp
///                        order, oldest first): like admit, but its policy
///                        bits and node word as stored are kept (a node
///                        word is a hint: checked, and replaced if taken)
///   begin_restore(n)     optional: n restore() calls follow
///   for_each_node(fn)    optional: fn(n, loc, stamp) for every handle held
///                        under node word n (audits: a current record's
///                        node word must be n)
///   forget(h, host)      a record about to be removed (not by evict()),
///                        still current: its bytes leave
///   hit(h, host)         a read of a record (reference mode: current; from
///                        a drained buffer, h.loc, h.stamp and h.hash as
///                        the reader saw them, h.bytes 0, and the record
///                        may have gone since: applied only if the policy
///                        holds h.loc with h.stamp)
///   evict_one(host)      evicts one record (host.evict), false if it holds
///                        none; may skip and recycle others first
///   clear()              the store was cleared
///   stats()
///   drop_stale(host)     optional: lets go of what it holds for records gone
///                        since (entries of a lazy queue), giving back the
///                        memory; true if anything went. The store calls it
///                        when Options::memory_limit_bytes refused reserve()
///   for_each_entry(fn)   fn(loc, stamp) for every handle it holds, stale
///                        ones included (for audits: the store checks that
///                        each live record is held once, and the bytes)
template <class P>
concept EvictionPolicy = requires(P& p, const P& cp, const Handle& h, HostArchetype& host,
                                  std::uint64_t n, void (*fn)(std::uint64_t, std::uint64_t)) {
  { P::id } -> std::convertible_to<std::uint8_t>;
  { P::reader_hits } -> std::convertible_to<ReaderHits>;
  p.set_capacity(n);
  p.reserve();
  p.admit(h, host);
  p.restore(h, host);
  p.replace(h, h, host);
  p.forget(h, host);
  p.hit(h, host);
  { p.evict_one(host) } -> std::same_as<bool>;
  p.clear();
  { cp.stats() } -> std::same_as<PolicyStats>;
  cp.for_each_entry(fn);
};

}  // namespace offheap::eviction
