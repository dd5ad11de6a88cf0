// SPDX-License-Identifier: Apache-2.0
// Least recently used: the record read or written longest ago leaves first.
//
// One list in mapped memory (detail/cache/node_list.hpp), most recent at its
// head. Readers do not touch it: their hits reach the maintenance thread
// through lossy per-thread buffers (ReaderHits::buffered), which it drains
// into hit(); a hit dropped by a full buffer leaves the record where it
// was. In reference mode every hit is applied, which makes it exactly LRU.
// A replaced record keeps its node and moves to the head (a write is a use).
// A record finds its node by the number its header keeps (the host's node
// word), checked against the node (NodeLists::holds): no table.
//
// Warm restarts: the list is rebuilt at open in the order the records were
// written, not the order they were last read, so hot records written long
// ago start at the cold end and some are evicted before their next hit:
// LRU comes back the least warm of the three policies (bench/README.md).
// Under heavy reads the buffers drop hits (Stats::policy_hits_dropped),
// and LRU drifts toward FIFO as the share applied falls.
//
// Thread safety: every call runs under the shard's writer lock; readers
// only append to their own hit buffers. Nothing here hands out memory.
#pragma once

#include <offheap/detail/cache/node_list.hpp>
#include <offheap/eviction/policy.hpp>

#include <cstdint>
#include <string>

namespace offheap::eviction {

class Lru {
 public:
  static constexpr std::uint8_t id = 2;
  static constexpr ReaderHits reader_hits = ReaderHits::buffered;

  explicit Lru(const detail::StoreName& store) : nodes_(store, "the LRU list") {}

  void set_capacity(std::uint64_t bytes) noexcept { capacity_ = bytes; }
  void reserve() { nodes_.reserve_one(); }
  /// What the first reserve() maps (Options::memory_limit_bytes' floor).
  static std::uint64_t first_bytes() noexcept { return detail::NodeLists::first_bytes(); }

  template <class Host>
  void admit(const Handle& h, Host& host) {
    host.set_node(h, nodes_.insert(h.loc, h.stamp, kList));
    bytes_ += h.bytes;
  }
  /// Restores may keep the node numbers the records' headers kept.
  void begin_restore(std::uint64_t records) noexcept { nodes_.begin_restore(records); }
  template <class Host>
  void restore(const Handle& h, Host& host) {
    const std::uint32_t want = host.node(h);
    host.set_node(h, nodes_.restore_at(want, h.loc, h.stamp, kList));
    bytes_ += h.bytes;
  }
  /// h carries old's node word (the host's): its node moves to the head.
  template <class Host>
  void replace(const Handle& old, const Handle& h, Host& host) {
    const std::uint32_t n = host.node(h);
    if (!nodes_.holds(n, old.loc, old.stamp)) {
      admit(h, host);  // (a policy call skipped: tests' hooks)
      return;
    }
    nodes_.rekey(n, h.loc, h.stamp);
    nodes_.move_to_head(n, kList);
    bytes_ -= old.bytes;
    bytes_ += h.bytes;
  }
  /// The record moved from old.loc to h.loc (compaction): its node keeps
  /// its place in the order.
  template <class Host>
  void relocate(const Handle& old, const Handle& h, Host& host) {
    const std::uint32_t n = host.node(h);
    if (!nodes_.holds(n, old.loc, old.stamp)) {
      admit(h, host);
      return;
    }
    nodes_.rekey(n, h.loc, h.stamp);
    bytes_ -= old.bytes;
    bytes_ += h.bytes;
  }
  template <class Host>
  void forget(const Handle& h, Host& host) noexcept {
    const std::uint32_t n = host.node(h);
    if (!nodes_.holds(n, h.loc, h.stamp)) return;
    nodes_.erase(n);
    bytes_ -= h.bytes;
  }
  /// A drained hit: applied if h's record is still the one its node holds.
  template <class Host>
  void hit(const Handle& h, Host& host) noexcept {
    const std::uint32_t n = host.node(h);
    if (nodes_.holds(n, h.loc, h.stamp)) nodes_.move_to_head(n, kList);
  }
  template <class Host>
  bool evict_one(Host& host) {
    while (nodes_.size() != 0) {
      const std::uint32_t n = nodes_.tail(kList);
      Handle h{nodes_.node(n).loc, nodes_.node(n).stamp, 0, 0};
      if (!host.current(h)) {
        nodes_.erase(n);
        continue;  // (never under the lock: forget() came first)
      }
      host.evict(h);  // may throw (no room for a dead marker): the node stays, as the record does
      nodes_.erase(n);
      bytes_ -= h.bytes;
      return true;
    }
    return false;
  }
  void clear() noexcept {
    nodes_.clear();
    bytes_ = 0;
  }
  template <class F>
  void for_each_entry(F&& fn) const {
    nodes_.for_each(kList, [&](std::uint32_t, const detail::NodeLists::Node& n) { fn(n.loc, n.stamp); });
  }
  /// fn(node word, loc, stamp) for every record held (audits: the host
  /// checks each current record keeps its node's number).
  template <class F>
  void for_each_node(F&& fn) const {
    nodes_.for_each(kList, [&](std::uint32_t i, const detail::NodeLists::Node& n) { fn(i, n.loc, n.stamp); });
  }

  PolicyStats stats() const noexcept {
    PolicyStats s;
    s.entries = nodes_.size();
    s.bytes = bytes_;
    s.main_bytes = bytes_;
    s.mapped_bytes = nodes_.mapped_bytes();
    return s;
  }

 private:
  static constexpr unsigned kList = 0;
  detail::NodeLists nodes_;
  std::uint64_t capacity_ = 0;
  std::uint64_t bytes_ = 0;
};

static_assert(EvictionPolicy<Lru>);
// The node words a host keeps (policy.hpp) are NodeLists' numbers.
static_assert(detail::NodeLists::kMaxNodes - 1 == kMaxNode && detail::NodeLists::kNone == kNoNode);

}  // namespace offheap::eviction
