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
// Memory: kMaxThreads rings of 1 KiB per shard, as address space reserved
// up front (inaccessible, not counted against Options::memory_limit_bytes)
// and opened a page (4 rings) at a time as reader threads come: the first
// hit of a thread whose ring is on a page not open yet takes the page from
// the budget and opens it (grant()), or, if the limit leaves no room, drops
// the hit (uncounted) and tries again at its next hit. Only open rings are
// read or written (granted_ bounds every loop). So a cache read by a few
// threads maps a few pages, not 1 MiB a shard (a small limit would hold
// nothing else).
#pragma once

#include <offheap/detail/atomic_word.hpp>
#include <offheap/detail/os.hpp>
#include <offheap/detail/thread_slots.hpp>

#include <algorithm>
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
      : store_(store), rings_(reinterpret_cast<Ring*>(reserve_address_space(kBytes, store, "the read buffers"))) {}
  HitBuffers(const HitBuffers&) = delete;
  HitBuffers& operator=(const HitBuffers&) = delete;
  ~HitBuffers() {
    unmap_reserved(rings_, kBytes);
    store_.budget.give(granted_.load(std::memory_order_relaxed) * sizeof(Ring));
  }

  /// A reader's hit on the record at `loc` with `stamp`, of the key whose
  /// hash is `hash` (the policy's drain needs no second look at the record
  /// to find it). If this thread's ring is full: returns false, having
  /// recorded nothing, when `may_drain` (the caller may drain and try
  /// again, or drop the hit); else drops the hit, counting it. A thread
  /// without a number drops it uncounted.
  [[gnu::always_inline]] bool record(std::uint64_t loc, std::uint64_t stamp, std::uint64_t hash,
                                     bool may_drain) noexcept {
    const std::uint32_t n = ThreadNumbers::current();
    // (granted_ <= kMaxThreads: also the bound of the ring array.)
    // Acquire: pairs with grant()'s release, after another thread opened
    // this thread's page.
    if (n >= granted_.load(std::memory_order_acquire)) [[unlikely]] {
      if (!grant(n)) return true;
    }
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
    if (n < granted_.load(std::memory_order_acquire)) count_drop(rings_[n]);  // (as record())
  }
  /// Hits dropped since the store was created (a racy sum: statistics).
  std::uint64_t dropped() const noexcept {
    std::uint64_t n = 0;
    // Open rings only (pairs with grant()'s release): the others cannot be read.
    const std::uint32_t threads =
        std::min(ThreadNumbers::high_water(), granted_.load(std::memory_order_acquire));
    for (std::uint32_t t = 0; t < threads; ++t) n += rings_[t].dropped.load(std::memory_order_relaxed);
    return n;
  }

  /// Calls fn(loc, stamp, hash) for every hit recorded since the last drain.
  /// One drainer at a time (the shard's lock).
  template <class F>
  std::uint64_t drain(F&& fn) {
    std::uint64_t n = 0;
    // Open rings only (pairs with grant()'s release): the others cannot be read.
    const std::uint32_t threads =
        std::min(ThreadNumbers::high_water(), granted_.load(std::memory_order_acquire));
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

  /// What the first reader thread's hit counts: a page of rings
  /// (memory_floor.hpp).
  static std::uint64_t first_bytes() noexcept { return kRingsPerPage * sizeof(Ring); }
  /// The rings' pages counted against the budget (those of the reader
  /// threads so far).
  std::uint64_t mapped_bytes() const noexcept { return granted_.load(std::memory_order_relaxed) * sizeof(Ring); }

 private:
  static constexpr std::uint32_t kRingsPerPage = 4;  // 4 KiB pages: counted a page at a time

  /// Counts the pages of the rings up to thread `n`'s against the budget
  /// (a thread's first hit; at most kMaxThreads / 4 times per shard in
  /// all). False if `n` is past the rings or the limit refused a page.
  [[gnu::cold, gnu::noinline]] bool grant(std::uint32_t n) noexcept {
    if (n >= kMaxThreads) return false;
    std::uint32_t have = granted_.load(std::memory_order_relaxed);
    while (n >= have) {
      const std::uint32_t want = std::min<std::uint32_t>(have + kRingsPerPage, kMaxThreads);
      const std::uint64_t bytes = (want - have) * sizeof(Ring);
      if (!store_.budget.take(bytes)) return false;
      // (Two threads that race open the same page: the loser's call
      // changes nothing.)
      if (!open_reserved(rings_ + have, bytes)) {
        store_.budget.give(bytes);
        return false;
      }
      // Release: pairs with the acquire loads of granted_ by the drainer
      // and stats (drain(), dropped()), which then read only open pages.
      // On a lost race the page's count goes back and `have` is the
      // winner's count.
      if (!granted_.compare_exchange_strong(have, want, std::memory_order_release, std::memory_order_relaxed)) {
        store_.budget.give(bytes);
        continue;
      }
      have = want;
    }
    return true;
  }

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
  std::atomic<std::uint32_t> granted_{0};  // rings whose pages the budget counts (grant())
  std::atomic<bool> full_{false};  // a reader found its ring full (full())
};

}  // namespace offheap::detail
