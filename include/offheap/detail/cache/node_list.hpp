// SPDX-License-Identifier: Apache-2.0
// Doubly linked lists of records in mapped memory, never the heap: what the
// Lru and WTinyLfu policies order their records with.
//
// A node holds a record's location and stamp, the list it is on and its
// links; nodes live in 64 KiB segments (a node keeps its number for life,
// so growth moves none) and freed nodes are reused first. A location finds
// its node through an open-addressing table (location + 1 -> node number,
// linear probing, backward-shift deletion, so no tombstones): doubled with
// a full rehash when it passes 70% full, a pause under the shard's lock
// that grows with the records (about 10 ns per record), amortized over the
// inserts that filled it. Single-threaded: the owner serializes every call.
#pragma once

#include <offheap/detail/index/hash.hpp>
#include <offheap/detail/memory/mapped_array.hpp>
#include <offheap/detail/memory/os.hpp>
#include <offheap/error.hpp>

#include <cassert>
#include <cstdint>
#include <string>

namespace offheap::detail {

class NodeLists {
 public:
  static constexpr std::uint32_t kNone = 0xFFFFFFFFu;
  static constexpr unsigned kMaxLists = 4;

  /// What the first reserve_one() maps: a page of directory, a segment of
  /// nodes and the first page of the location table (memory_floor.hpp).
  static std::uint64_t first_bytes() noexcept {
    return page_size() + kSegmentBytes + table_bytes(page_size() / sizeof(Slot));
  }

  struct Node {
    std::uint64_t loc;
    std::uint64_t stamp;
    std::uint32_t prev;  // toward the head (most recent); kNone at the head
    std::uint32_t next;  // toward the tail (oldest); kNone at the tail
    std::uint32_t list;  // which list, or kNone when free (next links the free nodes)
    std::uint32_t pad;
  };
  static_assert(sizeof(Node) == 32);

  NodeLists(const StoreName& store, const char* what) : store_(store), what_(what), dir_(store, what) {}
  NodeLists(const NodeLists&) = delete;
  NodeLists& operator=(const NodeLists&) = delete;
  ~NodeLists() { release(); }

  /// The node of location `loc`, or kNone.
  std::uint32_t find(std::uint64_t loc) const noexcept {
    if (slots_ == 0) return kNone;
    for (std::uint64_t i = slot_of(loc);; i = (i + 1) & (slots_ - 1)) {
      const Slot& s = table_[i];
      if (s.key == 0) return kNone;
      if (s.key == loc + 1) return s.node;
    }
  }
  Node& node(std::uint32_t n) noexcept { return segment(n)[n % kPerSegment]; }
  const Node& node(std::uint32_t n) const noexcept { return segment(n)[n % kPerSegment]; }

  /// Room for one more node and one more slot, so that the next insert()
  /// cannot fail; throws Error(out_of_space) before any change.
  void reserve_one() {
    if (free_ == kNone && used_ == segments_ * kPerSegment) {
      if (segments_ == kMaxSegments) {
        throw Error(Errc::out_of_space, store_ + ": " + what_ + " holds 2^32 records, its most");
      }
      dir_.reserve(segments_, kMaxSegments);  // may throw; nothing has changed yet
      dir_[segments_] = reinterpret_cast<Node*>(map_anonymous(kSegmentBytes, store_, what_));
      ++segments_;
    }
    if ((count_ + 1) * 10 > slots_ * 7) grow_table();
  }
  /// A new node for (loc, stamp) at the head of `list`. Throws
  /// Error(out_of_space), nothing changed, if memory cannot be mapped.
  /// Requires: no node has `loc`.
  std::uint32_t insert(std::uint64_t loc, std::uint64_t stamp, unsigned list) {
    reserve_one();
    const std::uint32_t n = take_node();
    Node& x = node(n);
    x.loc = loc;
    x.stamp = stamp;
    put_slot(loc, n);
    link_head(n, list);
    return n;
  }
  /// Unlinks node n and frees it.
  void erase(std::uint32_t n) noexcept {
    unlink(n);
    erase_slot(node(n).loc);
    Node& x = node(n);
    x.list = kNone;
    x.next = free_;
    free_ = n;
    --count_;
  }
  /// Node n now stands for (loc, stamp) (a replaced record), same place.
  void rekey(std::uint32_t n, std::uint64_t loc, std::uint64_t stamp) noexcept {
    Node& x = node(n);
    if (x.loc != loc) {
      erase_slot(x.loc);
      put_slot(loc, n);  // room: a slot was just freed
      x.loc = loc;
    }
    x.stamp = stamp;
  }
  /// Moves node n to the head of `list`.
  void move_to_head(std::uint32_t n, unsigned list) noexcept {
    unlink(n);
    link_head(n, list);
  }
  std::uint32_t tail(unsigned list) const noexcept { return lists_[list].tail; }
  std::uint32_t head(unsigned list) const noexcept { return lists_[list].head; }
  std::uint64_t length(unsigned list) const noexcept { return lists_[list].length; }
  std::uint64_t size() const noexcept { return count_; }
  /// Calls fn(node) for every node of `list`, head (most recent) first.
  template <class F>
  void for_each(unsigned list, F&& fn) const {
    for (std::uint32_t n = lists_[list].head; n != kNone; n = node(n).next) fn(node(n));
  }

  void clear() noexcept {
    release();
    for (List& l : lists_) l = List{};
  }
  std::uint64_t mapped_bytes() const noexcept {
    return segments_ * kSegmentBytes + table_bytes(slots_) + dir_.mapped_bytes();
  }

 private:
  struct Slot {
    std::uint64_t key;  // location + 1; 0: empty
    std::uint32_t node;
    std::uint32_t pad;
  };
  struct List {
    std::uint32_t head = kNone;
    std::uint32_t tail = kNone;
    std::uint64_t length = 0;
  };
  static constexpr std::uint64_t kSegmentBytes = 64 * 1024;
  static constexpr std::uint32_t kPerSegment = kSegmentBytes / sizeof(Node);
  static constexpr std::uint64_t kMaxSegments = (std::uint64_t{1} << 32) / kPerSegment;

  Node* segment(std::uint32_t n) const noexcept { return dir_[n / kPerSegment]; }
  std::uint64_t slot_of(std::uint64_t loc) const noexcept { return mix64(loc) & (slots_ - 1); }
  static std::uint64_t table_bytes(std::uint64_t slots) noexcept {
    return slots == 0 ? 0 : round_up(slots * sizeof(Slot), page_size());
  }

  std::uint32_t take_node() noexcept {
    ++count_;
    if (free_ != kNone) {
      const std::uint32_t n = free_;
      free_ = node(n).next;
      return n;
    }
    return static_cast<std::uint32_t>(used_++);
  }
  void link_head(std::uint32_t n, unsigned list) noexcept {
    Node& x = node(n);
    List& l = lists_[list];
    x.list = list;
    x.prev = kNone;
    x.next = l.head;
    if (l.head != kNone) node(l.head).prev = n;
    l.head = n;
    if (l.tail == kNone) l.tail = n;
    ++l.length;
  }
  void unlink(std::uint32_t n) noexcept {
    Node& x = node(n);
    List& l = lists_[x.list];
    if (x.prev != kNone) node(x.prev).next = x.next; else l.head = x.next;
    if (x.next != kNone) node(x.next).prev = x.prev; else l.tail = x.prev;
    --l.length;
  }
  void put_slot(std::uint64_t loc, std::uint32_t n) noexcept {
    std::uint64_t i = slot_of(loc);
    while (table_[i].key != 0) i = (i + 1) & (slots_ - 1);
    table_[i] = Slot{loc + 1, n, 0};
  }
  void erase_slot(std::uint64_t loc) noexcept {
    std::uint64_t i = slot_of(loc);
    while (table_[i].key != loc + 1) {
      assert(table_[i].key != 0);
      i = (i + 1) & (slots_ - 1);
    }
    // Backward shift: pull later entries of the run into the hole when
    // their home is not between the hole and them.
    for (std::uint64_t j = i;;) {
      j = (j + 1) & (slots_ - 1);
      if (table_[j].key == 0) break;
      const std::uint64_t home = slot_of(table_[j].key - 1);
      if (((j - home) & (slots_ - 1)) >= ((j - i) & (slots_ - 1))) {
        table_[i] = table_[j];
        i = j;
      }
    }
    table_[i] = Slot{};
  }
  void grow_table() {
    const std::uint64_t slots = slots_ == 0 ? page_size() / sizeof(Slot) : slots_ * 2;
    auto* t = reinterpret_cast<Slot*>(map_anonymous(table_bytes(slots), store_, what_));
    Slot* old = table_;
    const std::uint64_t old_slots = slots_;
    table_ = t;
    slots_ = slots;
    for (std::uint64_t i = 0; i < old_slots; ++i) {
      if (old[i].key != 0) put_slot(old[i].key - 1, old[i].node);
    }
    unmap(old, table_bytes(old_slots), store_);
  }
  void release() noexcept {
    for (std::uint64_t s = 0; s < segments_; ++s) unmap(dir_[s], kSegmentBytes, store_);
    dir_.release();
    unmap(table_, table_bytes(slots_), store_);
    table_ = nullptr;
    segments_ = 0;
    slots_ = 0;
    count_ = 0;
    used_ = 0;
    free_ = kNone;
  }

  const StoreName& store_;
  const char* what_;
  SegmentDirectory<Node> dir_;  // segment s's nodes: dir_[s]
  std::uint64_t segments_ = 0;
  std::uint64_t used_ = 0;      // nodes ever handed out (the next new number)
  std::uint32_t free_ = kNone;  // freed nodes, linked by next
  std::uint64_t count_ = 0;     // nodes in use
  Slot* table_ = nullptr;
  std::uint64_t slots_ = 0;     // a power of two
  List lists_[kMaxLists];
};

}  // namespace offheap::detail
