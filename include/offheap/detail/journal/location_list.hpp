// SPDX-License-Identifier: Apache-2.0
// A growable list of Locations in mapped memory (never the heap), oldest
// first: what a file-backed shard frees only once syncs have made that safe
// (durability.hpp). Pushes are made infallible by reserve_one() first, so a
// writer can reserve before its first change and push after its last.
#pragma once

#include <offheap/detail/index/location.hpp>
#include <offheap/detail/memory/os.hpp>

#include <cstdint>
#include <cstring>
#include <string>

namespace offheap::detail {

/// A list of locations in mapped memory (not the heap), grown by doubling:
/// the records a shard frees once syncs have made that safe (periodic).
class LocationList {
 public:
  explicit LocationList(const StoreName& name) : name_(name) {}
  /// What the first reserve maps: a page (memory_floor.hpp).
  static std::uint64_t first_bytes() noexcept { return page_size(); }
  LocationList(const LocationList&) = delete;
  LocationList& operator=(const LocationList&) = delete;
  ~LocationList() { unmap(data_, capacity_ * 8, name_); }

  /// Makes room for one more push; throws Error(out_of_space) (the list
  /// unchanged) if it cannot.
  void reserve_one() {
    if (size_ < capacity_) return;
    const std::uint64_t cap = capacity_ == 0 ? page_size() / 8 : capacity_ * 2;
    auto* d = reinterpret_cast<std::uint64_t*>(map_anonymous(cap * 8, name_, "the deferred-free list"));
    if (size_ != 0) std::memcpy(d, data_, size_ * 8);
    unmap(data_, capacity_ * 8, name_);
    data_ = d;
    capacity_ = cap;
  }
  /// Makes room for n more pushes; throws Error(out_of_space) (the list
  /// unchanged) if it cannot.
  void reserve(std::uint64_t n) {
    while (capacity_ - size_ < n) {
      const std::uint64_t want = size_ + n;
      std::uint64_t cap = capacity_ == 0 ? page_size() / 8 : capacity_ * 2;
      while (cap < want) cap *= 2;
      auto* d = reinterpret_cast<std::uint64_t*>(map_anonymous(cap * 8, name_, "the deferred-free list"));
      if (size_ != 0) std::memcpy(d, data_, size_ * 8);
      unmap(data_, capacity_ * 8, name_);
      data_ = d;
      capacity_ = cap;
    }
  }
  /// Requires: reserve_one() or reserve() made room since the last push.
  void push(Location loc) noexcept { data_[size_++] = loc.raw(); }
  Location operator[](std::uint64_t i) const noexcept { return Location::from_raw(data_[i]); }
  std::uint64_t size() const noexcept { return size_; }
  std::uint64_t mapped_bytes() const noexcept { return capacity_ * 8; }
  /// Removes the first n entries.
  void drop_front(std::uint64_t n) noexcept {
    if (n == 0) return;
    std::memmove(data_, data_ + n, (size_ - n) * 8);
    size_ -= n;
  }

 private:
  const StoreName& name_;
  std::uint64_t* data_ = nullptr;
  std::uint64_t size_ = 0;
  std::uint64_t capacity_ = 0;
};

}  // namespace offheap::detail
