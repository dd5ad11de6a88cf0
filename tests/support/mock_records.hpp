// SPDX-License-Identifier: Apache-2.0
// A handful of records for testing one eviction policy alone: each has a
// location (its number), a stamp, a hash, a size, policy bits and a node
// word, and the
// test writes, replaces and removes them by hand. The host interface of
// include/offheap/eviction/policy.hpp; evictions are recorded in order.
// EvictFails: the same records, whose next evict() throws.
#pragma once

#include <offheap/detail/index/hash.hpp>
#include <offheap/error.hpp>
#include <offheap/eviction/policy.hpp>

#include <cstdint>
#include <stdexcept>
#include <vector>

namespace offheap_test {

class MockRecords {
 public:
  using Handle = offheap::eviction::Handle;

  /// Writes record `id` anew (a new stamp), `bytes` long, its hash
  /// hash_of(id); returns its handle. A rewrite of a live record keeps its
  /// policy bits.
  Handle write(std::uint64_t id, std::uint64_t bytes = 1) { return write(id, bytes, hash_of(id)); }
  /// The same with a hash of the test's choosing: the key's when its record
  /// moves to another location, or one that many records share (colliding
  /// keys).
  Handle write(std::uint64_t id, std::uint64_t bytes, std::uint64_t hash) {
    if (id >= recs_.size()) recs_.resize(id + 1);
    Rec& r = recs_[id];
    if (!r.live) resident_ += 1;
    resident_bytes_ += bytes - (r.live ? r.bytes : 0);
    if (!r.live) r.bits = 0, r.node = 0;  // a rewrite keeps them, as a store does
    r.live = true;
    r.stamp = (stamp_ += 2);
    r.bytes = bytes;
    r.hash = hash;
    return handle(id);
  }
  /// Replaces record `old_id` by a new record `new_id` (the same id: in
  /// place), as a store's write does: the node word carries over (the
  /// policy bits do not: a test sets them). Returns the new handle.
  Handle replace(std::uint64_t old_id, std::uint64_t new_id, std::uint64_t bytes, std::uint64_t hash) {
    const std::uint32_t node = recs_.at(old_id).node;
    if (live(old_id)) remove(old_id);
    const Handle h = write(new_id, bytes, hash);
    recs_[new_id].node = node;
    return h;
  }
  /// Removes record `id` (as the store would, before the policy forgets it
  /// the caller takes the handle).
  void remove(std::uint64_t id) {
    Rec& r = recs_.at(id);
    if (!r.live) throw std::logic_error("remove of an absent record");
    r.live = false;
    resident_ -= 1;
    resident_bytes_ -= r.bytes;
  }
  Handle handle(std::uint64_t id) const {
    const Rec& r = recs_.at(id);
    return Handle{id, r.stamp, r.hash, r.bytes};
  }
  bool live(std::uint64_t id) const { return id < recs_.size() && recs_[id].live; }
  static std::uint64_t hash_of(std::uint64_t id) { return offheap::detail::mix64(id * 2 + 1); }

  // The host interface.
  bool current(Handle& h) {
    if (h.loc >= recs_.size()) return false;
    const Rec& r = recs_[h.loc];
    if (!r.live || r.stamp != h.stamp) return false;
    h.hash = r.hash;
    h.bytes = r.bytes;
    return true;
  }
  std::uint8_t bits(const Handle& h) { return checked(h).bits; }
  void set_bits(const Handle& h, std::uint8_t b) {
    if (b > 7) throw std::logic_error("policy bits above 7");
    checked(h).bits = b;
  }
  std::uint32_t node(const Handle& h) const {
    if (h.loc >= recs_.size()) return offheap::eviction::kNoNode;
    const Rec& r = recs_[h.loc];
    if (!r.live || r.stamp != h.stamp || r.node == 0) return offheap::eviction::kNoNode;
    return r.node - 1;
  }
  void set_node(const Handle& h, std::uint32_t n) {
    if (n > offheap::eviction::kMaxNode) throw std::logic_error("node word above kMaxNode");
    checked(h).node = n + 1;
  }
  void evict(const Handle& h) {
    Rec& r = checked(h);
    r.live = false;
    resident_ -= 1;
    resident_bytes_ -= r.bytes;
    evicted_.push_back(h.loc);
  }

  std::uint64_t resident() const { return resident_; }
  std::uint64_t resident_bytes() const { return resident_bytes_; }
  const std::vector<std::uint64_t>& evicted() const { return evicted_; }
  std::uint8_t bits_of(std::uint64_t id) const { return recs_.at(id).bits; }

 private:
  struct Rec {
    std::uint64_t stamp = 0;
    std::uint64_t hash = 0;
    std::uint64_t bytes = 0;
    bool live = false;
    std::uint8_t bits = 0;
    std::uint32_t node = 0;  // the node word + 1; 0: none
  };
  Rec& checked(const Handle& h) {
    Rec& r = recs_.at(h.loc);
    // A policy may ask only about current records.
    if (!r.live || r.stamp != h.stamp) throw std::logic_error("policy asked about a stale handle");
    return r;
  }

  std::vector<Rec> recs_;
  std::uint64_t stamp_ = 2;
  std::uint64_t resident_ = 0;
  std::uint64_t resident_bytes_ = 0;
  std::vector<std::uint64_t> evicted_;
};

/// MockRecords whose next evict() throws (as Shard's does when a dead
/// marker cannot be allocated: Durability::periodic on a full disk).
struct EvictFails : MockRecords {
  bool fail_next = false;
  void evict(const Handle& h) {
    if (fail_next) {
      fail_next = false;
      throw offheap::Error(offheap::Errc::out_of_space, "no room for the dead marker");
    }
    MockRecords::evict(h);
  }
};

}  // namespace offheap_test
