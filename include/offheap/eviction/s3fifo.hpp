// SPDX-License-Identifier: Apache-2.0
// S3-FIFO (Yang et al., "FIFO queues are all you need for cache eviction",
// SOSP 2023): the default policy of offheap::Cache.
//
// Three FIFO queues: small (10% of the capacity, in bytes), main (the rest)
// and a ghost of the key hashes recently evicted from small (as many as
// main holds records). A new record goes to small, or to main if its key is
// in the ghost. Each record has a 2-bit frequency (policy bits 0-1) that a
// read raises while it is below 3; bit 2 says "in main". Eviction takes
// from small while small holds at least its share (or main is empty):
// small's oldest moves to main if it was read at least twice since it came
// in, else it leaves the cache and its hash goes to the ghost. From main,
// the oldest goes back to main's end with its frequency lowered by one if
// it was read since it came in or last went round, else it leaves.
//
// Queues hold a location and a stamp per record, 16 bytes, in mapped
// memory; a record removed or replaced leaves its entry behind, skipped
// when it reaches the front (host.current() fails) and swept out in one
// pass when a queue holds twice as many entries as live records, so that
// the work stays proportional to the writes that made the entries. A
// replacement keeps its record's queue and frequency.
//
// Warm restarts: a file-backed cache rebuilds its queues at open from the
// records, oldest first, with each record's frequency from its saved index
// slot (clean close) or from the copy in the record's header (crash).
// Readers' hits raise only the slot's copy (the header's is written when
// the policy itself sets the bits), so after a crash the cache comes back
// a little less warm than after a close (bench/README.md, warm restarts).
//
// Thread safety: every call runs under the shard's writer lock (the host
// calls it); readers touch only the frequency bits in the index slot, with
// one compare-and-swap. Nothing here hands out memory: queues hold
// locations and stamps, never pointers a caller could keep.
#pragma once

#include <offheap/detail/cache/ghost_set.hpp>
#include <offheap/detail/memory/mapped_fifo.hpp>
#include <offheap/error.hpp>
#include <offheap/eviction/policy.hpp>

#include <cstdint>
#include <string>

namespace offheap::eviction {

class S3Fifo {
 public:
  static constexpr std::uint8_t id = 1;
  static constexpr ReaderHits reader_hits = ReaderHits::frequency_bits;
  static constexpr std::uint8_t kFrequencyMask = 3;
  static constexpr std::uint8_t kInMain = 4;

  explicit S3Fifo(const detail::StoreName& store)
      : small_(store, "the S3-FIFO small queue"), main_(store, "the S3-FIFO main queue"), ghost_(store) {}

  /// Small gets 10% of `bytes`, main the rest.
  void set_capacity(std::uint64_t bytes) {
    capacity_ = bytes;
    small_target_ = bytes / 10;
  }

  /// What the first reserve() maps: a segment of each queue
  /// (Options::memory_limit_bytes' floor; the ghost is optional).
  static std::uint64_t first_bytes() noexcept { return 2 * Queue::kSegmentBytes; }

  void reserve() {
    small_.reserve_one();
    // Main's room is not required: a ghost hit that finds none (under
    // Options::memory_limit_bytes) enters small, as a new key would.
    try {
      main_.reserve_one();
      main_ready_ = true;
    } catch (const Error&) {
      main_ready_ = false;
    }
  }

  /// Drops the entries of records gone since (removed, replaced,
  /// evicted while waiting) from both queues, handing back the segments
  /// they leave empty; true if any went. For a reserve() that
  /// Options::memory_limit_bytes refused: a queue of overwrites holds up to
  /// twice its records before its own sweep, and no eviction shrinks it.
  template <class Host>
  bool drop_stale(Host& host) {
    // Each live record has one entry, counted: when the queues hold no
    // more, nothing is stale and the pass is skipped (a rebuild at open
    // that evicts at the limit asks before each record it restores: a
    // pass each time made that open quadratic). (An entry let go because
    // its record turned out damaged, at the front or in a sweep, stays
    // counted and hides a stale one: the writer then evicts to make room,
    // compaction stops for want of room, as when nothing is stale. Only a
    // file damaged while the cache has it open does that.)
    if (small_.size() <= small_count_ && main_.size() <= main_count_) return false;
    const std::uint64_t before = small_.size() + main_.size();
    const auto current = [&host](const Entry& e) {
      Handle h{e.loc, e.stamp, 0, 0};
      return host.current(h);
    };
    small_.retain_if(current);
    main_.retain_if(current);
    return small_.size() + main_.size() < before;
  }

  template <class Host>
  void admit(const Handle& h, Host& host) {
    if (ghost_.take(h.hash) && main_ready_) {
      push(main_, h, host, kInMain);
    } else {
      push(small_, h, host, 0);
    }
    size_ghost();
  }

  /// At open, oldest first: back to the queue its bits name (main, or
  /// small), its frequency kept.
  template <class Host>
  void restore(const Handle& h, Host& host) {
    push_reserved(h, host, host.bits(h));
    size_ghost();
  }

  template <class Host>
  void replace(const Handle& old, const Handle& h, Host& host) {
    const std::uint8_t bits = host.bits(h);  // carried over from old by the host
    take_bytes(old, bits);
    push_reserved(h, host, bits);
  }

  template <class Host>
  void forget(const Handle& h, Host& host) {
    take_bytes(h, host.bits(h));
  }

  template <class Host>
  void hit(const Handle& h, Host& host) {
    const std::uint8_t bits = host.bits(h);
    if ((bits & kFrequencyMask) < 3) host.set_bits(h, static_cast<std::uint8_t>(bits + 1));
  }

  /// Evicts one record; false if the queues hold none.
  template <class Host>
  bool evict_one(Host& host) {
    // Main while it holds more than its share (or small is empty), else
    // small; either falls back to the other when it turns out empty (all
    // its entries stale).
    if (main_bytes_ > capacity_ - small_target_ || small_count_ == 0) {
      return evict_main(host) || evict_small(host);
    }
    return evict_small(host) || evict_main(host);
  }

  void clear() noexcept {
    small_.clear();
    main_.clear();
    ghost_.clear();
    small_bytes_ = main_bytes_ = 0;
    small_count_ = main_count_ = 0;
    ghost_refused_ = 0;
  }

  template <class F>
  void for_each_entry(F&& fn) const {
    small_.for_each([&](const Entry& e) { fn(e.loc, e.stamp); });
    main_.for_each([&](const Entry& e) { fn(e.loc, e.stamp); });
  }

  PolicyStats stats() const noexcept {
    PolicyStats s;
    s.entries = small_.size() + main_.size();
    s.bytes = small_bytes_ + main_bytes_;
    s.small_bytes = small_bytes_;
    s.main_bytes = main_bytes_;
    s.ghost_entries = ghost_.entries();
    s.mapped_bytes = small_.mapped_bytes() + main_.mapped_bytes() + ghost_.mapped_bytes();
    return s;
  }

 private:
  struct Entry {
    std::uint64_t loc;
    std::uint64_t stamp;
  };
  using Queue = detail::MappedFifo<Entry>;

  template <class Host>
  void push(Queue& q, const Handle& h, Host& host, std::uint8_t bits) {
    sweep_if_stale(q, host);
    q.push_back(Entry{h.loc, h.stamp});  // cannot fail after reserve(); else throws, nothing counted
    host.set_bits(h, bits);
    if (&q == &main_) {
      main_bytes_ += h.bytes;
      ++main_count_;
    } else {
      small_bytes_ += h.bytes;
      ++small_count_;
    }
  }
  /// To the queue `bits` names, after reserve(): to small (its frequency
  /// kept) when main had no room.
  template <class Host>
  void push_reserved(const Handle& h, Host& host, std::uint8_t bits) {
    if ((bits & kInMain) != 0 && main_ready_) return push(main_, h, host, bits);
    push(small_, h, host, static_cast<std::uint8_t>(bits & ~kInMain));
  }
  void take_bytes(const Handle& h, std::uint8_t bits) noexcept {
    if ((bits & kInMain) != 0) {
      main_bytes_ -= h.bytes;
      --main_count_;
    } else {
      small_bytes_ -= h.bytes;
      --small_count_;
    }
  }

  // An eviction that throws (host.evict: a store's dead marker finds no
  // room) leaves the policy as it was: the entry is popped and its bytes
  // counted out only once the record is gone.
  template <class Host>
  bool evict_small(Host& host) {
    while (!small_.empty()) {
      const Entry e = small_.front();
      Handle h{e.loc, e.stamp, 0, 0};
      if (!host.current(h)) {  // removed or replaced since: its bytes already left
        small_.pop_front();
        continue;
      }
      if ((host.bits(h) & kFrequencyMask) >= 2 && requeue(main_, e)) {
        // Read twice or more while in small: to main, its count restarted.
        small_.pop_front();
        small_bytes_ -= h.bytes;
        --small_count_;
        host.set_bits(h, kInMain);
        main_bytes_ += h.bytes;
        ++main_count_;
        continue;
      }
      host.evict(h);  // may throw: nothing changed yet
      small_.pop_front();
      small_bytes_ -= h.bytes;
      --small_count_;
      ghost_.insert(h.hash);
      prefetch_front(small_, host);
      return true;
    }
    return false;
  }

  // Readers raise frequencies while the writer goes round main (a store's
  // slot CAS): a hot main could send it round forever. A frequency is at
  // most 3, so a run without readers requeues fewer than 3 x main_count_
  // entries before it finds one at 0; past that many, the next record
  // leaves whatever its frequency (the same choices as without readers).
  template <class Host>
  bool evict_main(Host& host) {
    std::uint64_t rounds_left = 3 * main_count_;
    while (!main_.empty()) {
      const Entry e = main_.front();
      Handle h{e.loc, e.stamp, 0, 0};
      if (!host.current(h)) {
        main_.pop_front();
        continue;
      }
      const std::uint8_t f = host.bits(h) & kFrequencyMask;
      if (f != 0 && rounds_left != 0 && requeue(main_, e)) {
        main_.pop_front();
        --rounds_left;
        host.set_bits(h, static_cast<std::uint8_t>(kInMain | (f - 1)));
        continue;
      }
      host.evict(h);  // may throw: nothing changed yet
      main_.pop_front();
      main_bytes_ -= h.bytes;
      --main_count_;
      prefetch_front(main_, host);
      return true;
    }
    return false;
  }

  /// The next eviction starts at the front of the queue this one took from
  /// (a cache at its capacity evicts on every write): its record's lines
  /// are brought in now, while the write goes on, where the host offers it
  /// (the shard does). At 64 MiB, puts' p99.9 came out lower in five of six
  /// alternated runs, p50 unchanged (bench/results/s3fifo-victim-prefetch.txt).
  template <class Host>
  static void prefetch_front(const Queue& q, Host& host) noexcept {
    if constexpr (requires { host.prefetch(std::uint64_t{}); }) {
      if (!q.empty()) host.prefetch(q.front().loc);
    }
  }

  /// Puts a popped entry back at the end of `q`; false if no memory could
  /// be mapped for it (the record is then evicted rather than lost to
  /// every queue).
  static bool requeue(Queue& q, const Entry& e) noexcept {
    try {
      q.push_back(e);
      return true;
    } catch (const Error&) {
      return false;
    }
  }

  /// Drops the stale entries of `q` once it holds twice its live records
  /// (and a segment's worth more): one pass, order kept.
  template <class Host>
  void sweep_if_stale(Queue& q, Host& host) {
    const std::uint64_t live = &q == &main_ ? main_count_ : small_count_;
    if (q.size() < 2 * live + 4096) return;
    q.retain_if([&host](const Entry& e) {
      Handle h{e.loc, e.stamp, 0, 0};
      return host.current(h);
    });
  }

  /// The ghost remembers as many keys as main holds records, or would hold
  /// at the records' mean size (while main is still filling).
  void size_ghost() {
    const std::uint64_t count = small_count_ + main_count_;
    const std::uint64_t bytes = small_bytes_ + main_bytes_;
    std::uint64_t want = main_count_;
    if (bytes != 0) {
      // In double, not long double: this runs at every admit, and x87
      // arithmetic cost it ~50 instructions; an estimate of a count needs
      // no more than double's 53 bits.
      const std::uint64_t est = static_cast<std::uint64_t>(
          static_cast<double>(capacity_ - small_target_) * static_cast<double>(count) / static_cast<double>(bytes));
      if (est > want) want = est;
    }
    if (want == ghost_.capacity()) return;
    // After a refusal, a larger table is tried again only for twice the
    // size refused: a refusal costs an exception, not for every admit.
    if (want > ghost_.table_holds() && want < 2 * ghost_refused_) want = ghost_.table_holds();
    try {
      ghost_.set_capacity(want);
    } catch (const Error&) {
      // No memory for a larger ghost (Options::memory_limit_bytes leaves
      // it none, or the OS): it keeps its size (and forgets sooner).
      ghost_refused_ = want;
      ghost_.set_capacity(std::min(want, ghost_.table_holds()));  // maps nothing
    }
  }

  Queue small_;
  Queue main_;
  detail::GhostSet ghost_;
  std::uint64_t capacity_ = 0;
  std::uint64_t small_target_ = 0;
  std::uint64_t small_bytes_ = 0, main_bytes_ = 0;  // of current records
  std::uint64_t small_count_ = 0, main_count_ = 0;
  std::uint64_t ghost_refused_ = 0;  // the ghost capacity last refused a table
  bool main_ready_ = true;           // false: reserve() found no room for a push to main
};

static_assert(EvictionPolicy<S3Fifo>);

}  // namespace offheap::eviction
