// SPDX-License-Identifier: Apache-2.0
// A growable array of trivially copyable elements in mapped memory, never
// the heap: 64 KiB segments found through a directory (itself mapped, a
// page first, doubled as it fills: its address space follows the segments,
// as Options::memory_limit_bytes counts address space). Growth maps one
// more segment and moves nothing, so an element keeps its address for
// life; shrinking gives whole segments back. Single-threaded: its owner
// serializes every call.
#pragma once

#include <offheap/detail/memory/os.hpp>
#include <offheap/error.hpp>

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

namespace offheap::detail {

/// Segment pointers in mapped memory: a page of them first, then twice as
/// many each time they fill (copied over; the old directory unmapped).
/// Single-threaded: its owner serializes every call (no reader holds it).
template <class Seg>
class SegmentDirectory {
 public:
  SegmentDirectory(const StoreName& store, const char* what) noexcept : store_(store), what_(what) {}
  SegmentDirectory(const SegmentDirectory&) = delete;
  SegmentDirectory& operator=(const SegmentDirectory&) = delete;
  ~SegmentDirectory() { release(); }

  Seg*& operator[](std::uint64_t s) noexcept { return dir_[s]; }
  Seg* operator[](std::uint64_t s) const noexcept { return dir_[s]; }

  /// Room for entry `s` (entries 0..s-1 are in use), up to `most` entries
  /// in all. Throws Error(out_of_space) (LimitReached under the memory
  /// limit), the directory unchanged, if it cannot map.
  void reserve(std::uint64_t s, std::uint64_t most) {
    if (s < slots_) return;
    const std::uint64_t per_page = page_size() / sizeof(Seg*);
    const std::uint64_t slots = std::min(slots_ == 0 ? per_page : slots_ * 2, round_up(most, per_page));
    auto** d = reinterpret_cast<Seg**>(map_anonymous(bytes_for(slots), store_, what_));
    if (slots_ != 0) std::memcpy(d, dir_, slots_ * sizeof(Seg*));
    unmap(dir_, bytes_for(slots_), store_);
    dir_ = d;
    slots_ = slots;
  }
  std::uint64_t mapped_bytes() const noexcept { return bytes_for(slots_); }
  /// Unmaps the directory (not the segments it leads to).
  void release() noexcept {
    unmap(dir_, bytes_for(slots_), store_);
    dir_ = nullptr;
    slots_ = 0;
  }

 private:
  static std::uint64_t bytes_for(std::uint64_t slots) noexcept {
    return round_up(slots * sizeof(Seg*), page_size());
  }

  const StoreName& store_;
  const char* what_;
  Seg** dir_ = nullptr;
  std::uint64_t slots_ = 0;
};

template <class T>
class MappedArray {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  static constexpr std::uint64_t kSegmentBytes = 64 * 1024;
  static constexpr std::uint64_t kPerSegment = kSegmentBytes / sizeof(T);
  /// Elements at most: 2^32 - 1, so that a 32-bit element number always
  /// leaves 0xFFFFFFFF free to mean "none" (the directory's address space
  /// is sized for them).
  static constexpr std::uint64_t kMaxElements = (std::uint64_t{1} << 32) - 1;
  static constexpr std::uint64_t kMaxSegments = (kMaxElements + kPerSegment - 1) / kPerSegment;

  /// What the first element maps: a page of directory and a segment
  /// (Options::memory_limit_bytes' floor, memory_floor.hpp).
  static std::uint64_t first_bytes() noexcept { return page_size() + kSegmentBytes; }

  /// `store` and `what` name the array in an out_of_space error.
  MappedArray(const StoreName& store, const char* what) : store_(store), what_(what), dir_(store, what) {}
  MappedArray(const MappedArray&) = delete;
  MappedArray& operator=(const MappedArray&) = delete;
  ~MappedArray() { release(); }

  std::uint64_t size() const noexcept { return size_; }
  T& operator[](std::uint64_t i) noexcept {
    assert(i < size_);
    return dir_[i / kPerSegment][i % kPerSegment];
  }
  const T& operator[](std::uint64_t i) const noexcept {
    assert(i < size_);
    return dir_[i / kPerSegment][i % kPerSegment];
  }

  /// Makes the next push_back() map nothing, so that it cannot fail; throws
  /// Error(out_of_space), the array unchanged, if it cannot.
  void reserve_one() {
    if (size_ >= kMaxElements) {
      throw Error(Errc::out_of_space, store_ + ": " + what_ + " holds 2^32 - 1 entries, its most");
    }
    if (size_ < segments_ * kPerSegment) return;
    dir_.reserve(segments_, kMaxSegments);  // may throw; nothing has changed yet
    dir_[segments_] = reinterpret_cast<T*>(map_anonymous(kSegmentBytes, store_, what_));
    ++segments_;
  }
  /// Appends v. Throws as reserve_one() (never after it).
  void push_back(const T& v) {
    reserve_one();
    ++size_;
    (*this)[size_ - 1] = v;
  }
  /// Drops the last element; a segment left empty with another empty one
  /// after it goes back (one spare is kept, so that an array that hovers
  /// at a boundary maps nothing).
  void pop_back() noexcept {
    assert(size_ != 0);
    --size_;
    while (segments_ >= 2 && size_ + 2 * kPerSegment <= segments_ * kPerSegment) {
      unmap(dir_[--segments_], kSegmentBytes, store_);
    }
  }
  void clear() noexcept { release(); }

  std::uint64_t mapped_bytes() const noexcept {
    return segments_ * kSegmentBytes + dir_.mapped_bytes();
  }

 private:
  void release() noexcept {
    for (std::uint64_t s = 0; s < segments_; ++s) unmap(dir_[s], kSegmentBytes, store_);
    dir_.release();
    segments_ = 0;
    size_ = 0;
  }

  const StoreName& store_;
  const char* what_;
  SegmentDirectory<T> dir_;
  std::uint64_t segments_ = 0;
  std::uint64_t size_ = 0;
};

}  // namespace offheap::detail
