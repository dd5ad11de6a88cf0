// SPDX-License-Identifier: Apache-2.0
// Doubly linked lists of records in mapped memory, never the heap: what the
// Lru and WTinyLfu policies order their records with.
//
// A node holds a record's location and stamp, the list it is on and its
// links; nodes live in 64 KiB segments (a node keeps its number for life,
// so growth moves none) and freed nodes are reused first. A record finds
// its node by the number its header keeps (the host's node word,
// eviction/policy.hpp), not by a table: a policy asks the host for the
// word and checks it with holds(), which a stale or forged word fails (the
// node it names does not hold that location and stamp). So the lists cost
// their nodes alone, 32 bytes a record, and no operation rehashes
// anything. Free nodes form a doubly linked list (prev and next), so that
// a restore can take a given node out of it (restore_at()).
// Single-threaded: the owner serializes every call.
#pragma once

#include <offheap/detail/memory/mapped_array.hpp>
#include <offheap/detail/memory/os.hpp>
#include <offheap/error.hpp>

#include <cstdint>
#include <string>

namespace offheap::detail {

class NodeLists {
 public:
  static constexpr std::uint32_t kNone = 0xFFFFFFFFu;
  static constexpr unsigned kMaxLists = 4;
  /// Node numbers stay below this: a record's header keeps number + 1 in
  /// 31 bits (record.hpp, the node word; 0 there: none).
  static constexpr std::uint32_t kMaxNodes = 0x7FFFFFFEu;

  /// What the first reserve_one() maps: a page of directory and a segment
  /// of nodes (memory_floor.hpp).
  static std::uint64_t first_bytes() noexcept { return page_size() + kSegmentBytes; }

  struct Node {
    std::uint64_t loc;
    std::uint64_t stamp;
    std::uint32_t prev;  // toward the head (most recent); kNone at the head
    std::uint32_t next;  // toward the tail (oldest); kNone at the tail
    std::uint32_t list;  // which list, or kNone when free (prev and next link the free nodes)
    std::uint32_t tag;   // the policy's own (W-TinyLFU: its key's hash, folded)
  };
  static_assert(sizeof(Node) == 32);

  NodeLists(const StoreName& store, const char* what) : store_(store), what_(what), dir_(store, what) {}
  NodeLists(const NodeLists&) = delete;
  NodeLists& operator=(const NodeLists&) = delete;
  ~NodeLists() { release(); }

  /// Node n is in use for the record at `loc` with `stamp`: the check of a
  /// node number a record's header gave (any value: a stale or damaged
  /// word names a free node, one beyond those mapped, or another record's).
  bool holds(std::uint32_t n, std::uint64_t loc, std::uint64_t stamp) const noexcept {
    if (n >= used_) return false;
    const Node& x = node(n);
    return x.list != kNone && x.loc == loc && x.stamp == stamp;
  }
  Node& node(std::uint32_t n) noexcept { return segment(n)[n % kPerSegment]; }
  const Node& node(std::uint32_t n) const noexcept { return segment(n)[n % kPerSegment]; }

  /// Room for one more node, so that the next insert() cannot fail; throws
  /// Error(out_of_space) before any change.
  void reserve_one() {
    if (free_ == kNone && used_ == mapped_nodes()) map_segment();
  }
  /// A new node for (loc, stamp) at the head of `list`; its number (which
  /// the caller gives the record: the host's set_node). Throws
  /// Error(out_of_space), nothing changed, if memory cannot be mapped.
  std::uint32_t insert(std::uint64_t loc, std::uint64_t stamp, unsigned list) {
    reserve_one();
    const std::uint32_t n = free_ != kNone ? free_ : static_cast<std::uint32_t>(used_);
    place(n, loc, stamp, list);
    return n;
  }
  /// At open: node `want` (the number the record's header kept: a hint)
  /// if it is free, below the limit begin_restore() set, and its segment
  /// is mapped or (with no Options::memory_limit_bytes, whose room the
  /// other structures need more than a kept number) can be; else a new
  /// one, as insert() (which reserve_one() made sure of: a refusal to map
  /// the wanted segment costs the hint, not the restore). Records restored
  /// after a clean close keep their numbers, so their headers need no write.
  std::uint32_t restore_at(std::uint32_t want, std::uint64_t loc, std::uint64_t stamp, unsigned list) {
    if (want < restore_limit_ && (want >= used_ || node(want).list == kNone) &&
        (want < mapped_nodes() || store_.budget.limit() == 0)) {
      try {
        while (want >= mapped_nodes()) map_segment();
        place(want, loc, stamp, list);
        return want;
      } catch (const Error&) {
        // (the segments mapped stay: free nodes, taken in order)
      }
    }
    return insert(loc, stamp, list);
  }
  /// Restores may take node numbers below records + a segment: the nodes
  /// mapped stay those of the records, and a segment.
  void begin_restore(std::uint64_t records) noexcept {
    const std::uint64_t limit = records + kPerSegment;
    restore_limit_ = limit < kMaxNodes ? limit : kMaxNodes;
  }
  /// Unlinks node n and frees it.
  void erase(std::uint32_t n) noexcept {
    unlink(n);
    Node& x = node(n);
    x.list = kNone;
    push_free(n);
    --count_;
  }
  /// Node n now stands for (loc, stamp) (a replaced or moved record), same
  /// place.
  void rekey(std::uint32_t n, std::uint64_t loc, std::uint64_t stamp) noexcept {
    Node& x = node(n);
    x.loc = loc;
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
  /// Calls fn(number, node) for every node of `list`, head (most recent)
  /// first.
  template <class F>
  void for_each(unsigned list, F&& fn) const {
    for (std::uint32_t n = lists_[list].head; n != kNone; n = node(n).next) fn(n, node(n));
  }

  void clear() noexcept {
    release();
    for (List& l : lists_) l = List{};
  }
  std::uint64_t mapped_bytes() const noexcept { return segments_ * kSegmentBytes + dir_.mapped_bytes(); }

 private:
  struct List {
    std::uint32_t head = kNone;
    std::uint32_t tail = kNone;
    std::uint64_t length = 0;
  };
  static constexpr std::uint64_t kSegmentBytes = 64 * 1024;
  static constexpr std::uint32_t kPerSegment = kSegmentBytes / sizeof(Node);
  static constexpr std::uint64_t kMaxSegments = (std::uint64_t{kMaxNodes} + kPerSegment - 1) / kPerSegment;

  Node* segment(std::uint32_t n) const noexcept { return dir_[n / kPerSegment]; }
  std::uint64_t mapped_nodes() const noexcept {
    const std::uint64_t n = segments_ * kPerSegment;
    return n < kMaxNodes ? n : kMaxNodes;
  }
  /// One more segment, its nodes free (list kNone) but not yet linked:
  /// nodes at or past used_ are taken in order.
  void map_segment() {
    if (segments_ == kMaxSegments) {
      throw Error(Errc::out_of_space, store_ + ": " + what_ + " holds " + std::to_string(kMaxNodes) +
                                          " records, its most");
    }
    dir_.reserve(segments_, kMaxSegments);  // may throw; nothing has changed yet
    auto* seg = reinterpret_cast<Node*>(map_anonymous(kSegmentBytes, store_, what_));
    for (std::uint32_t i = 0; i < kPerSegment; ++i) seg[i].list = kNone;
    dir_[segments_] = seg;
    ++segments_;
  }
  /// Takes node n (free: on the free list, or at or past used_) for (loc,
  /// stamp) at the head of `list`. Nodes skipped between used_ and n go on
  /// the free list.
  void place(std::uint32_t n, std::uint64_t loc, std::uint64_t stamp, unsigned list) noexcept {
    if (n >= used_) {
      for (std::uint64_t k = used_; k < n; ++k) push_free(static_cast<std::uint32_t>(k));
      used_ = std::uint64_t{n} + 1;
    } else {
      pop_free(n);
    }
    ++count_;
    Node& x = node(n);
    x.loc = loc;
    x.stamp = stamp;
    link_head(n, list);
  }
  void push_free(std::uint32_t n) noexcept {
    Node& x = node(n);
    x.prev = kNone;
    x.next = free_;
    if (free_ != kNone) node(free_).prev = n;
    free_ = n;
  }
  void pop_free(std::uint32_t n) noexcept {
    const Node& x = node(n);
    if (x.prev != kNone) node(x.prev).next = x.next; else free_ = x.next;
    if (x.next != kNone) node(x.next).prev = x.prev;
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
  void release() noexcept {
    for (std::uint64_t s = 0; s < segments_; ++s) unmap(dir_[s], kSegmentBytes, store_);
    dir_.release();
    segments_ = 0;
    count_ = 0;
    used_ = 0;
    free_ = kNone;
    restore_limit_ = kPerSegment;
  }

  const StoreName& store_;
  const char* what_;
  SegmentDirectory<Node> dir_;  // segment s's nodes: dir_[s]
  std::uint64_t segments_ = 0;
  std::uint64_t used_ = 0;      // nodes below this were handed out once (the next new number)
  std::uint32_t free_ = kNone;  // freed nodes below used_, linked both ways
  std::uint64_t count_ = 0;     // nodes in use
  std::uint64_t restore_limit_ = kPerSegment;
  List lists_[kMaxLists];
};

}  // namespace offheap::detail
