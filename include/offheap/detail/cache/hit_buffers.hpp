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
// up front (inaccessible, not counted against Options::memory_limit_bytes),
// each page opened as a reader thread whose ring lies on it comes: the
// first hit of such a thread takes the page (4 rings of 4 KiB pages) from
// the budget and opens it (grant()), or, if the limit leaves no room, drops
// the hit (uncounted) and tries again at its next hit. Thread numbers are
// the process's (ThreadNumbers), so the rings a shard opens are those of
// the threads that read it, whatever their numbers: a page per reader
// thread at most, shared by threads numbered alike. Only rings on open
// pages are read or written (the open_ bitmap guards every loop). So a
// cache read by a few threads maps a few pages, not 1 MiB a shard (a small
// limit would hold nothing else).
//
// In offheap_cache_bench's get-hit runs about 98% of hits find their ring
// full and are dropped (hits kept 0.02), and LRU's and W-TinyLFU's get
// hits run at 0.88-0.91 of the store's; when readers drained full rings
// themselves they ran at 0.55 / 0.42 (LRU, 1T / 2T) and 0.36 / 0.24
// (W-TinyLFU). In tests/cache_hit_ratio_test.cpp (two readers, 10% cache,
// quiet machine) about 80% of hits are applied; LRU misses 0.2752 with
// half its hits applied at random, 0.2856 with a fifth, 0.2948 with a
// twentieth, so the test compares production with the reference applying
// the same share of hits (within one point).
#pragma once

#include <offheap/detail/memory/atomic_word.hpp>
#include <offheap/detail/memory/os.hpp>
#include <offheap/detail/memory/thread_slots.hpp>

#include <algorithm>
#include <atomic>
#include <bit>
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
      : store_(store),
        rings_(reinterpret_cast<Ring*>(reserve_address_space(kBytes, store, "the read buffers"))),
        ring_shift_(static_cast<std::uint32_t>(std::countr_zero(page_bytes() / sizeof(Ring)))) {}
  HitBuffers(const HitBuffers&) = delete;
  HitBuffers& operator=(const HitBuffers&) = delete;
  ~HitBuffers() {
    unmap_reserved(rings_, kBytes);
    store_.budget.give(open_pages_.load(std::memory_order_relaxed) * page_bytes());
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
    if (!is_open(n)) [[unlikely]] {
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
    if (is_open(n)) count_drop(rings_[n]);
  }
  /// Hits dropped since the store was created (a racy sum: statistics).
  std::uint64_t dropped() const noexcept {
    std::uint64_t n = 0;
    const std::uint32_t threads = ThreadNumbers::high_water();
    for (std::uint32_t t = 0; t < threads; ++t) {
      if (is_open(t)) n += rings_[t].dropped.load(std::memory_order_relaxed);  // (others cannot be read)
    }
    return n;
  }

  /// Calls fn(loc, stamp, hash) for every hit recorded since the last drain,
  /// ring by ring, until stop() (asked after each hit) says to stop: the
  /// hits left stay for the next drain, which begins with the ring this
  /// one stopped in (so that drains stopped early still reach every
  /// thread's ring in turn). One drainer at a time (the shard's lock).
  template <class F, class Stop>
  std::uint64_t drain(F&& fn, Stop&& stop) {
    std::uint64_t n = 0;
    const std::uint32_t threads = ThreadNumbers::high_water();
    const std::uint32_t first = resume_ < threads ? resume_ : 0;
    resume_ = 0;
    for (std::uint32_t k = 0; k < threads; ++k) {
      const std::uint32_t t = first + k < threads ? first + k : first + k - threads;
      if (!is_open(t)) continue;  // (a ring on a page not open cannot be read; it holds nothing)
      Ring& r = rings_[t];
      const std::uint64_t tail = r.tail.load(std::memory_order_relaxed);  // the drainer's own
      const std::uint64_t head = r.head.load(std::memory_order_acquire);
      std::uint64_t i = tail;
      bool stopped = false;
      while (i != head) {
        const std::uint64_t* e = r.entries[i & (kEntries - 1)];
        fn(load_relaxed(e), load_relaxed(e + 1), load_relaxed(e + 2));
        ++i;
        if (stop()) {
          stopped = true;
          break;
        }
      }
      if (i != tail) {  // (else the line the reader loads in room() stays clean)
        n += i - tail;
        // Pairs with the reader's acquire load of tail in room(): the
        // entries up to i are read before the reader writes over them.
        r.tail.store(i, std::memory_order_release);
      }
      if (stopped) {
        resume_ = t;
        break;
      }
    }
    return n;
  }
  template <class F>
  std::uint64_t drain(F&& fn) {
    return drain(fn, [] { return false; });
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

  /// What the first reader thread's hit counts: the page of its ring
  /// (memory_floor.hpp).
  static std::uint64_t first_bytes() noexcept { return page_bytes(); }
  /// The pages of rings counted against the budget (those of the reader
  /// threads so far).
  std::uint64_t mapped_bytes() const noexcept { return open_pages_.load(std::memory_order_relaxed) * page_bytes(); }

 private:
  /// A page of rings: the OS page, or a ring if that is larger.
  static std::uint64_t page_bytes() noexcept { return std::max<std::uint64_t>(page_size(), sizeof(Ring)); }
  /// The page of thread number `n`'s ring.
  std::uint32_t page_of(std::uint32_t n) const noexcept { return n >> ring_shift_; }
  static constexpr std::uint32_t kMaxPages = kMaxThreads;  // (pages of at least one ring)

  /// Whether thread number `n`'s ring lies on an open page (false past the
  /// rings). Acquire: pairs with grant()'s release, so that a thread that
  /// sees the bit (the reader itself, the drainer, stats) finds the page
  /// open.
  [[gnu::always_inline]] bool is_open(std::uint32_t n) const noexcept {
    if (n >= kMaxThreads) [[unlikely]] return false;
    const std::uint32_t p = page_of(n);
    return (open_[p / 64].load(std::memory_order_acquire) >> (p % 64) & 1) != 0;
  }

  /// Opens the page of thread `n`'s ring and counts it against the budget
  /// (a thread's first hit on this shard). False if `n` is past the rings,
  /// or the limit or the kernel refused the page.
  [[gnu::cold, gnu::noinline]] bool grant(std::uint32_t n) noexcept {
    if (n >= kMaxThreads) return false;
    const std::uint32_t p = page_of(n);
    const std::uint64_t bytes = page_bytes();
    if (!store_.budget.take(bytes)) return false;
    // (Two threads that race open the same page: the second mprotect
    // changes nothing.)
    if (!open_reserved(reinterpret_cast<std::byte*>(rings_) + std::uint64_t{p} * bytes, bytes)) {
      store_.budget.give(bytes);
      return false;
    }
    // Release: pairs with is_open()'s acquire (the page is open before its
    // bit is seen). The thread that sets the bit keeps the count; a racer
    // that finds it set gives its count back.
    const std::uint64_t bit = std::uint64_t{1} << (p % 64);
    if ((open_[p / 64].fetch_or(bit, std::memory_order_release) & bit) != 0) {
      store_.budget.give(bytes);
    } else {
      open_pages_.fetch_add(1, std::memory_order_relaxed);  // a count for stats and the destructor
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
  const std::uint32_t ring_shift_;  // log2 of the rings a page holds (pages are powers of two)
  std::atomic<std::uint64_t> open_[kMaxPages / 64] = {};  // a bit per page of rings opened (grant())
  std::atomic<std::uint32_t> open_pages_{0};               // how many
  std::atomic<bool> full_{false};  // a reader found its ring full (full())
  std::uint32_t resume_ = 0;       // the drainer's: the ring a stopped drain stopped in
};

}  // namespace offheap::detail
