// SPDX-License-Identifier: Apache-2.0
// Readers' hits on the way to a cache policy that needs them in order (Lru,
// WTinyLfu: ReaderHits::buffered): per shard, one small ring per reader
// thread (ThreadNumbers), in mapped memory, drained under the shard's lock by
// whoever maintains the shard or by a writer about to evict. A reader never
// drains while a maintenance thread runs (the drain's work stays off the
// read path, as Caffeine's read buffers hand it to an executor); without
// one, a reader that finds its ring full drains it if the shard's lock is
// free at once (try_lock). Lossy: a hit that finds its ring full and is not
// drained is dropped and counted (the record simply keeps its place).
//
// A ring is single-producer (its thread) single-consumer (the drainer, one
// at a time under the shard lock): the producer stores an entry, then
// publishes it with a release store of `head`; the drainer loads `head`
// with acquire, reads the entries, then hands the space back with a release
// store of `tail`, which the producer loads with acquire before it reuses a
// slot (only when the tail it saw last says the ring is full: the drainer's
// line is read once per drain, not once per hit). A thread number given
// back at thread exit and taken by a new thread carries its ring over; the
// pool's mutex orders the two threads.
//
// A reader that drops a hit also marks the shard (take_full()): the
// maintenance thread then keeps its short interval instead of backing off,
// so that a cache that is only read still has its hits drained every
// millisecond.
//
// Memory: kMaxThreads rings of 1 KiB per shard mapped up front without
// swap reservation; a ring's page is touched only once its thread reads.
#pragma once

#include <offheap/detail/atomic_word.hpp>
#include <offheap/detail/os.hpp>
#include <offheap/detail/thread_slots.hpp>

#include <atomic>
#include <cstdint>
#include <string>

namespace offheap::detail {

class HitBuffers {
 public:
  // A ring is 1 KiB: the reader's line (head, the tail it saw last, hits
  // dropped), the drainer's line (tail), 32 entries of three words (a power
  // of two: the slot is a mask away).
  static constexpr std::uint64_t kEntries = 32;

  explicit HitBuffers(const StoreName& store)
      : store_(store), rings_(reinterpret_cast<Ring*>(map_anonymous(kBytes, store, "the read buffers"))) {}
  HitBuffers(const HitBuffers&) = delete;
  HitBuffers& operator=(const HitBuffers&) = delete;
  ~HitBuffers() { unmap(rings_, kBytes, store_); }

  /// A reader's hit on the record at `loc` with `stamp`, of the key whose
  /// hash is `hash` (the policy's drain needs no second look at the record
  /// to find it). If this thread's ring is full: returns false, having
  /// recorded nothing, when `may_drain` (the caller may drain and try
  /// again, or drop the hit); else drops the hit, counting it. A thread
  /// without a number drops it uncounted.
  [[gnu::always_inline]] bool record(std::uint64_t loc, std::uint64_t stamp, std::uint64_t hash,
                                     bool may_drain) noexcept {
    const std::uint32_t n = ThreadNumbers::current();
    if (n >= kMaxThreads) [[unlikely]] return true;
    Ring& r = rings_[n];
    const std::uint64_t head = r.head.load(std::memory_order_relaxed);  // this thread's own
    if (head - r.seen_tail >= kEntries) [[unlikely]] {
      if (!room(r, head)) return full(r, may_drain);
    }
    std::uint64_t* e = r.entries[head & (kEntries - 1)];
    store_relaxed(e, loc);
    store_relaxed(e + 1, stamp);
    store_relaxed(e + 2, hash);
    // Pairs with the acquire load of head in drain(): the entry is visible.
    r.head.store(head + 1, std::memory_order_release);
    return true;
  }

  /// Counts a hit this thread dropped (its ring was full).
  void note_dropped() noexcept {
    const std::uint32_t n = ThreadNumbers::current();
    if (n < kMaxThreads) count_drop(rings_[n]);
  }
  /// Hits dropped since the store was created (a racy sum: statistics).
  std::uint64_t dropped() const noexcept {
    std::uint64_t n = 0;
    const std::uint32_t threads = ThreadNumbers::high_water();
    for (std::uint32_t t = 0; t < threads; ++t) n += rings_[t].dropped.load(std::memory_order_relaxed);
    return n;
  }

  /// Calls fn(loc, stamp, hash) for every hit recorded since the last drain.
  /// One drainer at a time (the shard's lock).
  template <class F>
  std::uint64_t drain(F&& fn) {
    std::uint64_t n = 0;
    const std::uint32_t threads = ThreadNumbers::high_water();
    for (std::uint32_t t = 0; t < threads; ++t) {
      Ring& r = rings_[t];
      const std::uint64_t tail = r.tail.load(std::memory_order_relaxed);  // the drainer's own
      const std::uint64_t head = r.head.load(std::memory_order_acquire);
      for (std::uint64_t i = tail; i != head; ++i) {
        const std::uint64_t* e = r.entries[i & (kEntries - 1)];
        fn(load_relaxed(e), load_relaxed(e + 1), load_relaxed(e + 2));
      }
      if (head == tail) continue;  // (the line the reader loads in room() stays clean)
      n += head - tail;
      r.tail.store(head, std::memory_order_release);
    }
    return n;
  }

  /// Whether a reader dropped a hit on a full ring since the last call, and
  /// clears the mark (the drainer, under the shard's lock): the rings fill
  /// faster than they are drained.
  bool take_full() noexcept {
    // Relaxed: a hint (see full()).
    return full_.load(std::memory_order_relaxed) && full_.exchange(false, std::memory_order_relaxed);
  }

  /// Forgets every hit recorded (clear(): they name records that are gone).
  /// One drainer at a time (the shard's lock).
  void discard() {
    drain([](std::uint64_t, std::uint64_t, std::uint64_t) {});
  }

  std::uint64_t mapped_bytes() const noexcept { return kBytes; }

 private:
  struct Ring;
  /// Whether the drainer has made room since the reader last looked.
  static bool room(Ring& r, std::uint64_t head) noexcept {
    // Pairs with the release store of tail in drain(): the drainer is
    // done with the slots up to it, the one the reader overwrites next
    // included.
    r.seen_tail = r.tail.load(std::memory_order_acquire);
    return head - r.seen_tail < kEntries;
  }
  /// (Not cold: while maintenance drains every few milliseconds, a read-
  /// heavy thread finds its ring full on most hits.)
  bool full(Ring& r, bool may_drain) noexcept {
    if (may_drain) return false;
    count_drop(r);
    return true;
  }
  /// Counts a dropped hit and marks the shard for take_full().
  void count_drop(Ring& r) noexcept {
    // Relaxed: a count on this thread's own line, summed by stats().
    r.dropped.store(r.dropped.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    // Relaxed: a hint to the drainer (the rings' head and tail order the
    // entries); loaded first so that a full ring's later hits write no
    // shared line until a drain clears the mark.
    if (!full_.load(std::memory_order_relaxed)) full_.store(true, std::memory_order_relaxed);
  }

  struct alignas(64) Ring {
    // The reader thread's line.
    std::atomic<std::uint64_t> head;
    std::uint64_t seen_tail;  // the reader's last look at tail
    std::atomic<std::uint64_t> dropped;
    // The drainer's line.
    alignas(64) std::atomic<std::uint64_t> tail;
    alignas(64) std::uint64_t entries[kEntries][3];  // location, stamp, key hash
    std::uint64_t unused[16];
  };
  static_assert(sizeof(Ring) == 1024);
  static constexpr std::uint64_t kBytes = std::uint64_t{kMaxThreads} * sizeof(Ring);

  const StoreName& store_;
  Ring* rings_;
  std::atomic<bool> full_{false};  // a reader found its ring full (full())
};

}  // namespace offheap::detail
