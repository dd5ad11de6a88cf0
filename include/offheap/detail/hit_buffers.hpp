// SPDX-License-Identifier: Apache-2.0
// Readers' hits on the way to a cache policy that needs them in order (Lru,
// WTinyLfu: ReaderHits::buffered): per shard, one small ring per reader
// thread (ThreadNumbers), in mapped memory, drained under the shard's lock by
// whoever maintains the shard, by a writer about to evict, or by a reader
// that finds its ring full and the lock free (try_lock, as Caffeine's read
// buffers): a reader never waits. Lossy: a full ring whose shard is locked
// drops the hit (the record simply keeps its place).
//
// A ring is single-producer (its thread) single-consumer (the drainer, one
// at a time under the shard lock): the producer stores an entry, then
// publishes it with a release store of `head`; the drainer loads `head`
// with acquire, reads the entries, then hands the space back with a release
// store of `tail`, which the producer loads with acquire before it reuses a
// slot. A thread number given back at thread exit and taken by a new thread
// carries its ring over; the pool's mutex orders the two threads.
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
  static constexpr std::uint64_t kEntries = 42;  // a ring is 1 KiB: two words of counters, 42 entries

  explicit HitBuffers(const std::string& store)
      : rings_(reinterpret_cast<Ring*>(map_anonymous(kBytes, store, "the read buffers"))) {}
  HitBuffers(const HitBuffers&) = delete;
  HitBuffers& operator=(const HitBuffers&) = delete;
  ~HitBuffers() { unmap(rings_, kBytes); }

  /// A reader's hit on the record at `loc` with `stamp`, of the key whose
  /// hash is `hash` (the policy's drain needs no second look at the record
  /// to find it). Returns false,
  /// having recorded nothing, if this thread's ring is full (the caller may
  /// drain and try again, or drop the hit); a thread without a number drops
  /// it (true).
  bool record(std::uint64_t loc, std::uint64_t stamp, std::uint64_t hash) noexcept {
    const std::uint32_t n = ThreadNumbers::current();
    if (n >= kMaxThreads) return true;
    Ring& r = rings_[n];
    const std::uint64_t head = r.head.load(std::memory_order_relaxed);  // this thread's own
    // Pairs with the release store of tail in drain(): the drainer is done
    // with the slot this overwrites.
    if (head - r.tail.load(std::memory_order_acquire) >= kEntries) return false;
    std::uint64_t* e = r.entries[head % kEntries];
    store_relaxed(e, loc);
    store_relaxed(e + 1, stamp);
    store_relaxed(e + 2, hash);
    // Pairs with the acquire load of head in drain(): the entry is visible.
    r.head.store(head + 1, std::memory_order_release);
    return true;
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
        const std::uint64_t* e = r.entries[i % kEntries];
        fn(load_relaxed(e), load_relaxed(e + 1), load_relaxed(e + 2));
      }
      n += head - tail;
      r.tail.store(head, std::memory_order_release);
    }
    return n;
  }

  std::uint64_t mapped_bytes() const noexcept { return kBytes; }

 private:
  struct alignas(64) Ring {
    std::atomic<std::uint64_t> head;  // written by the reader thread
    std::atomic<std::uint64_t> tail;  // written by the drainer
    std::uint64_t entries[kEntries][3];  // location, stamp, key hash
  };
  static_assert(sizeof(Ring) == 1024);
  static constexpr std::uint64_t kBytes = std::uint64_t{kMaxThreads} * sizeof(Ring);

  Ring* rings_;
};

}  // namespace offheap::detail
