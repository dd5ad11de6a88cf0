// SPDX-License-Identifier: Apache-2.0
// The timing wheel: which records expire when. One per shard, run under
// the shard's writer lock (by the maintenance thread, maintain(), or a
// writer that schedules a deadline).
//
// Time is counted in ticks of 1 ms (the store's clock, expiry.hpp). Six
// levels of 64 slots: level L holds the entries whose deadline first
// differs from the wheel's time in the L-th group of 6 bits, in the slot
// that group names, so level 0 spans 64 ms, level 1 4 s, level 2 4.4 min,
// level 3 4.7 h, level 4 12 days and level 5 2.2 years; deadlines further
// out wait in a min-heap until the wheel's time comes within reach. An
// entry is scheduled in O(1) (a few bit operations and a link). Advancing
// visits only what is due: a 64-bit map per level says which slots hold
// entries, so the next event (an expiry at level 0, or a slot of a higher
// level whose entries move down a level) is found in a few words however
// long the gap; entries are moved down at most once per level.
//
// Entries are (location, stamp, deadline) of a record. Cancelling is lazy:
// a record rewritten or removed leaves its entry, which is dropped by stamp
// when it comes due (the shard checks that the record at the location
// still shows the stamp), or earlier by sweep() once stale entries pile up
// (records rewritten with TTLs faster than they expire).
//
// Memory: nodes of 32 bytes in a mapped array (freed nodes reused first),
// heap entries of 24 bytes in another; the slot heads and maps (about 1.6
// KiB) live in the object. Nothing on the heap grows with the entries.
//
// Expiring costs 3-5 times a removal by key (893 against 187 ns per entry
// at 1M entries, 1,108 against 297 at 10M): the wheel visits entries in
// deadline order, which is random in memory (the node, the record, the
// key's index slot, each a cache miss), and an entry is moved down a level
// or two before it expires.
#pragma once

#include <offheap/detail/memory/mapped_array.hpp>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <string>

namespace offheap::detail {

class ExpiryWheel {
 public:
  struct Entry {
    std::uint64_t loc;
    std::uint64_t stamp;
    std::uint64_t deadline;  // ms (the store's clock)
  };
  static constexpr unsigned kLevels = 6;
  static constexpr unsigned kBits = 6;
  static constexpr unsigned kSlots = 1u << kBits;
  /// Deadlines the wheel keeps exactly (later ones are clamped: never in practice).
  static constexpr std::uint64_t kMaxDeadline = (std::uint64_t{1} << 48) - 1;
  static constexpr std::uint64_t kNever = ~std::uint64_t{0};

  ExpiryWheel(const StoreName& store, std::uint64_t now)
      : nodes_(store, "the expiry wheel"), heap_(store, "the expiry wheel's heap"), now_(now) {
    std::fill(std::begin(heads_), std::end(heads_), kNone);
  }
  ExpiryWheel(const ExpiryWheel&) = delete;
  ExpiryWheel& operator=(const ExpiryWheel&) = delete;

  /// Entries held (stale ones included).
  std::uint64_t size() const noexcept { return size_; }
  std::uint64_t heap_size() const noexcept { return heap_.size(); }
  std::uint64_t mapped_bytes() const noexcept { return nodes_.mapped_bytes() + heap_.mapped_bytes(); }
  /// The wheel's time: every entry due at or before it has been handed out.
  std::uint64_t now() const noexcept { return now_; }

  /// Drops every entry; the wheel's time becomes `now`.
  void reset(std::uint64_t now) noexcept {
    nodes_.clear();
    heap_.clear();
    std::fill(std::begin(heads_), std::end(heads_), kNone);
    std::fill(std::begin(maps_), std::end(maps_), 0);
    free_ = kNone;
    size_ = 0;
    sweep_at_ = 0;
    now_ = now;
  }

  /// What the first reserve_one() maps: a node and a heap entry's arrays
  /// (memory_floor.hpp).
  static std::uint64_t first_bytes() noexcept {
    return MappedArray<Node>::first_bytes() + MappedArray<Entry>::first_bytes();
  }

  /// Makes the next schedule() map nothing, so that it cannot fail; throws
  /// Error(out_of_space), nothing changed, if it cannot.
  void reserve_one() {
    try {
      if (free_ == kNone) nodes_.reserve_one();
      heap_.reserve_one();
    } catch (LimitReached& e) {
      // An eviction frees no node by itself: its entry stays until its
      // deadline comes round or a sweep drops it (Shard::write() sweeps).
      e.evicting_helps = false;
      e.sweep_helps = true;
      throw;
    }
  }

  /// Schedules an entry (after reserve_one(): cannot fail). A deadline at
  /// or before the wheel's time is due at the next advance().
  void schedule(std::uint64_t deadline, std::uint64_t loc, std::uint64_t stamp) noexcept {
    deadline = std::min(deadline, kMaxDeadline);
    const unsigned where = place_of(deadline);
    if (where == kHeapSlot) {
      heap_push(Entry{loc, stamp, deadline});
    } else {
      const std::uint32_t n = take_node();
      Node& x = nodes_[n];
      x.loc = loc;
      x.stamp = stamp;
      x.deadline = deadline & kMaxDeadline;  // (clamped above)
      link(n, where);
    }
    ++size_;
  }

  /// The time of the next thing advance() would do (an expiry, or entries
  /// moving down a level), or kNever when empty.
  std::uint64_t next_event() const noexcept {
    unsigned where = 0;
    return next(where);
  }

  /// Moves the wheel's time up to `to` (never back), calling
  /// `due(const Entry&)` for every entry whose deadline is at or before it,
  /// earliest first (entries of one millisecond in no set order). `due`
  /// returns false to stop there: that entry stays, the wheel's time stays
  /// at its deadline, and the next call starts with it. An exception from
  /// `due` also leaves the entry. Returns the entries handed out.
  template <class Due>
  std::uint64_t advance(std::uint64_t to, Due&& due) {
    std::uint64_t handed = 0;
    for (;;) {
      unsigned where = 0;
      const std::uint64_t t = next(where);
      if (t == kNever || t > to) {
        if (to > now_) now_ = to;
        return handed;
      }
      now_ = std::max(now_, t);
      if (where == kHeapSlot) {
        // The heap's earliest entries come within the wheel's reach.
        while (heap_.size() != 0 && place_of(heap_[0].deadline) != kHeapSlot) {
          if (free_ == kNone) nodes_.reserve_one();  // may throw: the entry stays in the heap
          const Entry e = heap_[0];
          heap_pop_at(0);
          const std::uint32_t n = take_node();
          Node& x = nodes_[n];
          x.loc = e.loc;
          x.stamp = e.stamp;
          x.deadline = e.deadline & kMaxDeadline;  // (heap entries were clamped by schedule())
          link(n, place_of(e.deadline));
        }
      } else if (where >= kSlots) {
        // A slot of a higher level falls due: its entries move down.
        std::uint32_t n = heads_[where];
        heads_[where] = kNone;
        maps_[where / kSlots] &= ~(std::uint64_t{1} << (where % kSlots));
        while (n != kNone) {
          const std::uint32_t after = nodes_[n].next;
          link(n, place_of(nodes_[n].deadline));
          n = after;
        }
      } else {
        // Level 0: these entries are due.
        while (heads_[where] != kNone) {
          const std::uint32_t n = heads_[where];
          const Entry e{nodes_[n].loc, nodes_[n].stamp, nodes_[n].deadline};
          if (!due(e)) return handed;
          unlink(n);
          give_node(n);
          --size_;
          ++handed;
        }
      }
    }
  }

  /// Looks at up to `max` entries from where the last call stopped and drops
  /// those `stale(loc, stamp)` says are stale. Returns true when it has gone
  /// round every entry since the sweep began (the next call starts again).
  template <class Stale>
  bool sweep(std::uint64_t max, Stale&& stale) {
    for (; max != 0; --max) {
      if (sweep_at_ < nodes_.size()) {
        const std::uint32_t n = static_cast<std::uint32_t>(sweep_at_++);
        Node& x = nodes_[n];
        if (x.slot != kFreeSlot && stale(x.loc, x.stamp)) {
          unlink(n);
          give_node(n);
          --size_;
        }
      } else if (sweep_at_ - nodes_.size() < heap_.size()) {
        const std::uint64_t i = sweep_at_ - nodes_.size();
        if (stale(heap_[i].loc, heap_[i].stamp)) {
          heap_pop_at(i);  // the last entry moved here: look at i again
          --size_;
        } else {
          ++sweep_at_;
        }
      } else {
        sweep_at_ = 0;
        return true;
      }
    }
    return false;
  }

  /// Calls fn(const Entry&) for every entry (stale ones included).
  template <class F>
  void for_each(F&& fn) const {
    for (unsigned s = 0; s < kLevels * kSlots; ++s) {
      for (std::uint32_t n = heads_[s]; n != kNone; n = nodes_[n].next) {
        fn(Entry{nodes_[n].loc, nodes_[n].stamp, nodes_[n].deadline});
      }
    }
    for (std::uint64_t i = 0; i < heap_.size(); ++i) fn(heap_[i]);
  }

 private:
  static constexpr std::uint32_t kNone = 0xFFFFFFFFu;
  static constexpr std::uint16_t kFreeSlot = 0xFFFF;
  static constexpr unsigned kHeapSlot = kLevels * kSlots;

  struct Node {
    std::uint64_t loc;
    std::uint64_t stamp;
    std::uint64_t deadline : 48;
    std::uint64_t slot : 16;  // level * 64 + digit; kFreeSlot when free
    std::uint32_t next;       // in its slot's list, or the free list
    std::uint32_t prev;
  };
  static_assert(sizeof(Node) == 32);

  /// Where an entry due at `deadline` goes now: level 0's current slot if
  /// due, else the slot of the highest 6-bit group in which the deadline
  /// differs from the wheel's time, or the heap past level 5.
  unsigned place_of(std::uint64_t deadline) const noexcept {
    if (deadline <= now_) return static_cast<unsigned>(now_ % kSlots);
    const unsigned level = static_cast<unsigned>(63 - std::countl_zero(deadline ^ now_)) / kBits;
    if (level >= kLevels) return kHeapSlot;
    return level * kSlots + static_cast<unsigned>((deadline >> (level * kBits)) % kSlots);
  }

  /// The time of the next event and where (a slot, or kHeapSlot). Level
  /// 0's slots from the wheel's digit on are due at their own times; a
  /// higher level's slots after its digit fall due when the wheel's time
  /// reaches them (lower groups zero): all of level L's come after all of
  /// level L-1's, so the first level with one has the next event.
  std::uint64_t next(unsigned& where) const noexcept {
    for (unsigned level = 0; level < kLevels; ++level) {
      const unsigned shift = level * kBits;
      const unsigned digit = static_cast<unsigned>((now_ >> shift) % kSlots);
      const unsigned from = level == 0 ? digit : digit + 1;
      if (from >= kSlots) continue;
      const std::uint64_t m = maps_[level] & (~std::uint64_t{0} << from);
      if (m == 0) continue;
      const unsigned d = static_cast<unsigned>(std::countr_zero(m));
      where = level * kSlots + d;
      const std::uint64_t above = shift + kBits >= 64 ? 0 : (now_ >> (shift + kBits)) << (shift + kBits);
      return above | std::uint64_t{d} << shift;
    }
    if (heap_.size() != 0) {
      where = kHeapSlot;
      const unsigned span = kLevels * kBits;
      return std::max(now_, (heap_[0].deadline >> span) << span);
    }
    return kNever;
  }

  void link(std::uint32_t n, unsigned slot) noexcept {
    Node& x = nodes_[n];
    x.slot = static_cast<std::uint16_t>(slot);
    x.prev = kNone;
    x.next = heads_[slot];
    if (x.next != kNone) nodes_[x.next].prev = n;
    heads_[slot] = n;
    maps_[slot / kSlots] |= std::uint64_t{1} << (slot % kSlots);
  }
  void unlink(std::uint32_t n) noexcept {
    Node& x = nodes_[n];
    const unsigned slot = static_cast<unsigned>(x.slot);
    if (x.prev != kNone) nodes_[x.prev].next = x.next; else heads_[slot] = x.next;
    if (x.next != kNone) nodes_[x.next].prev = x.prev;
    if (heads_[slot] == kNone) maps_[slot / kSlots] &= ~(std::uint64_t{1} << (slot % kSlots));
  }
  std::uint32_t take_node() noexcept {
    if (free_ != kNone) {
      const std::uint32_t n = free_;
      free_ = nodes_[n].next;
      return n;
    }
    nodes_.push_back(Node{});  // reserved: cannot fail
    return static_cast<std::uint32_t>(nodes_.size() - 1);
  }
  void give_node(std::uint32_t n) noexcept {
    nodes_[n].slot = kFreeSlot;
    nodes_[n].next = free_;
    free_ = n;
  }

  // The heap: a binary min-heap on the deadline.
  void heap_push(const Entry& e) noexcept {
    heap_.push_back(e);  // reserved: cannot fail
    sift_up(heap_.size() - 1);
  }
  /// Removes entry i: the last one takes its place and moves to where it belongs.
  void heap_pop_at(std::uint64_t i) noexcept {
    const std::uint64_t last = heap_.size() - 1;
    if (i != last) heap_[i] = heap_[last];
    heap_.pop_back();
    if (i < heap_.size()) {
      sift_up(i);
      sift_down(i);
    }
  }
  void sift_up(std::uint64_t i) noexcept {
    const Entry e = heap_[i];
    while (i != 0) {
      const std::uint64_t parent = (i - 1) / 2;
      if (heap_[parent].deadline <= e.deadline) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = e;
  }
  void sift_down(std::uint64_t i) noexcept {
    const Entry e = heap_[i];
    const std::uint64_t n = heap_.size();
    for (;;) {
      std::uint64_t c = 2 * i + 1;
      if (c >= n) break;
      if (c + 1 < n && heap_[c + 1].deadline < heap_[c].deadline) ++c;
      if (heap_[c].deadline >= e.deadline) break;
      heap_[i] = heap_[c];
      i = c;
    }
    heap_[i] = e;
  }

  MappedArray<Node> nodes_;
  MappedArray<Entry> heap_;
  std::uint32_t heads_[kLevels * kSlots];
  std::uint64_t maps_[kLevels] = {};
  std::uint32_t free_ = kNone;  // freed nodes, linked by next
  std::uint64_t size_ = 0;
  std::uint64_t sweep_at_ = 0;  // sweep()'s cursor: node numbers, then heap positions
  std::uint64_t now_;
};

}  // namespace offheap::detail
