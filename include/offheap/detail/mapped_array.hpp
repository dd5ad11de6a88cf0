// SPDX-License-Identifier: Apache-2.0
// A growable array of trivially copyable elements in mapped memory, never
// the heap: 64 KiB segments found through a directory (itself mapped, its
// pages touched only as segments arrive). Growth maps one more segment and
// moves nothing, so an element keeps its address for life; shrinking gives
// whole segments back. Single-threaded: its owner serializes every call.
#pragma once

#include <offheap/detail/os.hpp>
#include <offheap/error.hpp>

#include <cassert>
#include <cstdint>
#include <string>
#include <type_traits>

namespace offheap::detail {

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

  /// `store` and `what` name the array in an out_of_space error.
  MappedArray(const std::string& store, const char* what) : store_(store), what_(what) {}
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
    if (dir_ == nullptr) {
      dir_ = reinterpret_cast<T**>(map_anonymous(kDirBytes, store_, what_));
#if defined(MADV_NOHUGEPAGE)
      // Address space touched a page at a time: a huge page here would
      // make its first entry cost 2 MiB of memory.
      ::madvise(dir_, kDirBytes, MADV_NOHUGEPAGE);
#endif
    }
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
      unmap(dir_[--segments_], kSegmentBytes);
    }
  }
  void clear() noexcept { release(); }

  std::uint64_t mapped_bytes() const noexcept {
    return segments_ * kSegmentBytes + (dir_ != nullptr ? round_up(segments_ * sizeof(T*), page_size()) : 0);
  }

 private:
  static constexpr std::uint64_t kDirBytes = kMaxSegments * sizeof(T*);  // address space; touched as used

  void release() noexcept {
    for (std::uint64_t s = 0; s < segments_; ++s) unmap(dir_[s], kSegmentBytes);
    unmap(dir_, dir_ != nullptr ? kDirBytes : 0);
    dir_ = nullptr;
    segments_ = 0;
    size_ = 0;
  }

  const std::string& store_;
  const char* what_;
  T** dir_ = nullptr;
  std::uint64_t segments_ = 0;
  std::uint64_t size_ = 0;
};

}  // namespace offheap::detail
