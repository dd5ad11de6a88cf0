// SPDX-License-Identifier: Apache-2.0
// Policies: what a store decides at compile time.
//
// A Policy names the key hash, the writer lock and a persisted id. Users
// inherit a ready policy and override one member:
//
//   struct MyPolicy : offheap::StorePolicy {
//     using Lock = offheap::NullLock;   // one writer thread at a time
//     static constexpr std::uint8_t id = 200;
//   };
//
// Optional members are filled in by PolicyTraits:
//   static constexpr bool in_place_updates  (default true): an overwrite
//     whose record fits the old slot rewrites it under the seqlock instead of
//     writing a new record.
//   using Eviction  (default eviction::NoEviction): what a full cache
//     evicts with (eviction/policy.hpp): eviction::S3Fifo (readers count
//     hits in the index slot), eviction::Lru or eviction::WTinyLfu
//     (readers' hits go through per-thread buffers). A policy with
//     eviction needs Options::capacity_bytes.
//
// The ready policies and their names (store.hpp declares the aliases):
//
//   Store        = OffHeapStore<StorePolicy>        WriterLock, no eviction:
//                                                   a database
//   OffHeapStore<SingleWriterPolicy>                NullLock: one writer
//                                                   thread at a time; it calls
//                                                   maintain() when the store
//                                                   has maintenance work
//                                                   (Options::background_maintenance)
//   Cache        = OffHeapStore<CachePolicy>        S3-FIFO
//   LruCache     = OffHeapStore<LruCachePolicy>     LRU
//   TinyLfuCache = OffHeapStore<TinyLfuCachePolicy> W-TinyLFU
//
// Thread safety: a policy is a set of types and constants, read at compile
// time; the writer lock it names serializes a shard's writers, and readers
// take no lock whatever the policy. A policy's id is stored in a
// file-backed store's meta file and checked at every reopen: a store of
// another policy is refused (Errc::invalid_argument), except that ids 1
// and 2 (StorePolicy, SingleWriterPolicy: the same records) open each
// other's files.
//
// Caches. Options::capacity_bytes counts what Stats::live_bytes counts and
// is split evenly among the shards. A write to a shard past its share
// evicts about as much as it adds; the maintenance thread evicts the rest
// down to it in each shard no write changed since its last round (and
// maintain(), with background_maintenance = false, in every shard), 256
// records per shard at a time (the thread lets the lock go to a writer
// that waits), back to back while a backlog remains, 1 ms after a
// round that found work, backing off to a round every 16 ms while it finds
// none (an idle cache wakes about 60 times a second; for LRU and W-TinyLFU
// a reader that found its hit ring full counts as work, so a cache that is
// being read keeps its 1 ms rounds; no sleep runs past the next periodic
// sync). Stats shows maintenance_rounds, maintenance_lag_seconds,
// maintenance_backlog_bytes and removals_pending. A writer that finds its
// shard past its share evicts from it first, records of up to twice its
// own bytes (about one per write in a cache at its capacity), and past the
// share plus a slack of 1/16 (at least 4 KiB) as much as its record needs,
// so live bytes never pass capacity_bytes * 17/16 (+ 4 KiB per shard). A record larger
// than a shard's share plus the slack is refused (Errc::value_too_large);
// one that fits only in the slack is stored and evicted again at the first
// round after its shard's writes pause. So a shard being written holds up
// to about a record over its share (maintenance_backlog_bytes stays above
// 0 while writes keep coming: a write that replaces a record by one of
// the same size evicts nothing), and none a round or two after they stop.
//
// How a reader's hit reaches the policy. S3-FIFO: the reader raises the
// record's 2-bit frequency, kept in the low bits of its index slot, with
// one compare-and-swap only while it is below 3, so a hot record's reads
// write nothing and every hit counts. LRU and W-TinyLFU need hits in order:
// a reader puts each hit in a ring of its own per shard (32 entries, mapped
// memory) that the maintenance thread drains every round, as does a writer
// about to evict. With a maintenance thread a reader never drains: a hit
// that finds its ring full is dropped (the record keeps its place) and
// counted (Stats::policy_hits_dropped, beside policy_hits_applied), so the
// policy's work stays off the read path. Under a read-heavy load these two
// policies see a sample of the hits (the first 32 per thread and shard
// after each round), and LRU drifts toward FIFO as the sample shrinks;
// W-TinyLFU loses far less (its sketch still counts what it is given).
// Without a maintenance thread a reader whose ring is full drains the
// shard's rings itself if the lock is free at once (try_lock), else drops
// the hit; readers never wait. Pick S3-FIFO (the default) where the hit
// ratio under heavy reads matters most (bench/README.md has the figures).
//
// Warm reopen. A file-backed cache reopens warm, after a clean close or a
// crash: its policy is rebuilt from the records, oldest first, with the
// frequencies its saved index (clean) or the records' headers (crash)
// kept. The rebuild reads every record, so a cache's clean open is
// O(records), unlike a store's.
#pragma once

#include <offheap/detail/index/hash.hpp>
#include <offheap/eviction/lru.hpp>
#include <offheap/eviction/none.hpp>
#include <offheap/eviction/s3fifo.hpp>
#include <offheap/eviction/w_tiny_lfu.hpp>

#include <atomic>
#include <concepts>
#include <cstdint>
#include <string_view>
#include <thread>
#include <type_traits>

namespace offheap {

/// A lock that does nothing: for stores written by one thread at a time.
/// Readers stay lock-free whatever the lock.
struct NullLock {
  void lock() noexcept {}
  void unlock() noexcept {}
};

/// The default writer lock: one atomic exchange to take it, a plain release
/// store to give it back. A waiter spins briefly on a local read of the word,
/// then yields its time slice between tries, so a preempted holder does not
/// burn its waiters' slices. Writer critical sections are short (a record
/// copy and a few index words), which is what makes spinning the right call.
///
/// Optional for a Policy's Lock: `contended()`, whether a thread waits for
/// it. The maintenance thread asks it between the hits and evictions of
/// its batches, and lets the lock go at once to a waiting writer (a writer
/// then waits for one hit's or one eviction's work, not a batch's).
class WriterLock {
 public:
  void lock() noexcept {
    // Acquire pairs with the release store in unlock(): the previous holder's
    // writes are visible to the next.
    if (!locked_.exchange(true, std::memory_order_acquire)) return;
    lock_slow();
  }
  bool try_lock() noexcept { return !locked_.exchange(true, std::memory_order_acquire); }
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }
  /// Whether a thread is waiting for the lock (a hint: relaxed, and a
  /// waiter counts from its first failed try).
  bool contended() const noexcept { return waiting_.load(std::memory_order_relaxed) != 0; }

 private:
  void lock_slow() noexcept {
    // Relaxed: a hint the holder polls (contended()); the lock's own
    // ordering is locked_'s acquire and release.
    waiting_.fetch_add(1, std::memory_order_relaxed);
    for (unsigned spins = 0;; ++spins) {
      if (!locked_.load(std::memory_order_relaxed) &&
          !locked_.exchange(true, std::memory_order_acquire)) {
        waiting_.fetch_sub(1, std::memory_order_relaxed);
        return;
      }
      if (spins < 128) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
      } else {
        std::this_thread::yield();
      }
    }
  }

  std::atomic<bool> locked_{false};
  std::atomic<std::uint32_t> waiting_{0};  // threads in lock_slow()
};

/// What a Policy must provide.
template <class P>
concept Policy = requires {
  typename P::Hash;
  typename P::Lock;
  { P::id } -> std::convertible_to<std::uint8_t>;
} && std::constructible_from<typename P::Hash, std::uint64_t> &&
    requires(const typename P::Hash& h, std::string_view key, typename P::Lock& lock) {
      { h(key) } noexcept -> std::same_as<std::uint64_t>;
      lock.lock();
      lock.unlock();
    } && std::default_initializable<typename P::Lock>;

namespace detail {
template <class P>
struct EvictionOf {
  using type = eviction::NoEviction;
};
template <class P>
  requires requires { typename P::Eviction; }
struct EvictionOf<P> {
  using type = typename P::Eviction;
};
}  // namespace detail

/// Optional policy members with their defaults.
template <class P>
struct PolicyTraits {
  static constexpr bool in_place_updates = [] {
    if constexpr (requires { P::in_place_updates; }) {
      return static_cast<bool>(P::in_place_updates);
    } else {
      return true;
    }
  }();
  using Eviction = typename detail::EvictionOf<P>::type;
  static_assert(eviction::EvictionPolicy<Eviction>);
  static constexpr bool evicts = !std::is_same_v<Eviction, eviction::NoEviction>;
};

/// A database: no eviction, thread-safe writers, seeded hash.
struct StorePolicy {
  using Hash = SeededHash;
  using Lock = WriterLock;
  static constexpr std::uint8_t id = 1;
};

/// StorePolicy for programs that write from one thread at a time (readers
/// may still be many): no writer lock at all.
struct SingleWriterPolicy : StorePolicy {
  using Lock = NullLock;
  static constexpr std::uint8_t id = 2;
};

/// A cache: byte capacity (Options::capacity_bytes), S3-FIFO eviction.
struct CachePolicy : StorePolicy {
  using Eviction = eviction::S3Fifo;
  static constexpr std::uint8_t id = 3;
};

/// A cache that evicts the least recently used record. Readers' hits reach
/// the list through per-thread buffers that maintenance drains (lossy).
struct LruCachePolicy : StorePolicy {
  using Eviction = eviction::Lru;
  static constexpr std::uint8_t id = 4;
};

/// A cache with W-TinyLFU: a window LRU, a segmented main LRU, admission by
/// a frequency sketch, and a hill climber that sizes the window. Readers'
/// hits go through per-thread buffers, as LruCachePolicy's.
struct TinyLfuCachePolicy : StorePolicy {
  using Eviction = eviction::WTinyLfu;
  static constexpr std::uint8_t id = 5;
};

static_assert(Policy<StorePolicy>);
static_assert(Policy<LruCachePolicy>);
static_assert(Policy<TinyLfuCachePolicy>);
static_assert(Policy<SingleWriterPolicy>);
static_assert(Policy<CachePolicy>);

}  // namespace offheap
