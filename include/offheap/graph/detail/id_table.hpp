// SPDX-License-Identifier: Apache-2.0
// The traversals' bookkeeping: a set of ids and a map from ids, each one
// flat array (open addressing, linear probing) on the heap, sized by what
// the traversal reached and freed with it. One allocation per doubling,
// none per id: a BFS over a million nodes makes about twenty allocations,
// where a node-based std::unordered_set would make a million.
//
// Id 0 marks an empty slot: no node or edge has it (types.hpp). The tables
// grow at 70% load, doubling; they never shrink (they live for one call).
//
// Thread safety: one traversal's own; not shared between threads.
#pragma once

#include <offheap/detail/index/hash.hpp>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace offheap::graph_detail {

/// A mix of the id's bits (detail::mix64), so that the sequential ids a
/// graph hands out spread over the table.
inline std::uint64_t mix_id(std::uint64_t x) noexcept { return detail::mix64(x); }

/// A map from non-zero ids to V (a trivially copyable value).
template <class V>
class IdMap {
 public:
  /// Returns: the value of `id`, or null. The pointer stays valid until
  /// the next insertion.
  V* find(std::uint64_t id) noexcept {
    if (slots_.empty()) return nullptr;
    for (std::size_t i = mix_id(id) & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].first == id) return &slots_[i].second;
      if (slots_[i].first == 0) return nullptr;
    }
  }
  bool contains(std::uint64_t id) noexcept { return find(id) != nullptr; }

  /// Effects: inserts id -> v if id is absent. Returns: the value of id
  /// (valid until the next insertion) and whether it was inserted.
  std::pair<V*, bool> insert(std::uint64_t id, const V& v) {
    if ((size_ + 1) * 10 > slots_.size() * 7) grow();
    for (std::size_t i = mix_id(id) & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].first == id) return {&slots_[i].second, false};
      if (slots_[i].first == 0) {
        slots_[i] = {id, v};
        ++size_;
        return {&slots_[i].second, true};
      }
    }
  }

  std::size_t size() const noexcept { return size_; }
  /// Heap bytes the table holds.
  std::size_t bytes() const noexcept { return slots_.capacity() * sizeof(Slot); }

 private:
  using Slot = std::pair<std::uint64_t, V>;

  void grow() {
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.assign(old.empty() ? 64 : old.size() * 2, Slot{0, V{}});
    mask_ = slots_.size() - 1;
    for (const Slot& s : old) {
      if (s.first == 0) continue;
      std::size_t i = mix_id(s.first) & mask_;
      while (slots_[i].first != 0) i = (i + 1) & mask_;
      slots_[i] = s;
    }
  }

  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  std::size_t size_ = 0;
};

/// A set of non-zero ids.
class IdSet {
 public:
  bool contains(std::uint64_t id) const noexcept {
    if (slots_.empty()) return false;
    for (std::size_t i = mix_id(id) & mask_;; i = (i + 1) & mask_) {
      if (slots_[i] == id) return true;
      if (slots_[i] == 0) return false;
    }
  }
  /// Returns: whether id was absent (and is now present).
  bool insert(std::uint64_t id) {
    if ((size_ + 1) * 10 > slots_.size() * 7) grow();
    for (std::size_t i = mix_id(id) & mask_;; i = (i + 1) & mask_) {
      if (slots_[i] == id) return false;
      if (slots_[i] == 0) {
        slots_[i] = id;
        ++size_;
        return true;
      }
    }
  }
  std::size_t size() const noexcept { return size_; }
  std::size_t bytes() const noexcept { return slots_.capacity() * sizeof(std::uint64_t); }

 private:
  void grow() {
    std::vector<std::uint64_t> old;
    old.swap(slots_);
    slots_.assign(old.empty() ? 64 : old.size() * 2, 0);
    mask_ = slots_.size() - 1;
    for (const std::uint64_t id : old) {
      if (id == 0) continue;
      std::size_t i = mix_id(id) & mask_;
      while (slots_[i] != 0) i = (i + 1) & mask_;
      slots_[i] = id;
    }
  }

  std::vector<std::uint64_t> slots_;
  std::size_t mask_ = 0;
  std::size_t size_ = 0;
};

}  // namespace offheap::graph_detail
