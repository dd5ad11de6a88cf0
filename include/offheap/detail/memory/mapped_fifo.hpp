// SPDX-License-Identifier: Apache-2.0
// A FIFO queue of trivially copyable entries in mapped memory, never the
// heap: a chain of 64 KiB segments, pushed at the back and popped at the
// front. Growth maps one more segment and moves nothing (no pause that
// grows with the queue); a segment emptied at the front is kept as the one
// spare (so that a queue that hovers at a segment boundary maps nothing) or
// unmapped. Single-threaded: its owner serializes every call.
#pragma once

#include <offheap/detail/memory/os.hpp>

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

namespace offheap::detail {

template <class T>
class MappedFifo {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  static constexpr std::uint64_t kSegmentBytes = 64 * 1024;

  /// `store` and `what` name the queue in an out_of_space error.
  MappedFifo(const StoreName& store, const char* what) : store_(store), what_(what) {}
  MappedFifo(const MappedFifo&) = delete;
  MappedFifo& operator=(const MappedFifo&) = delete;
  ~MappedFifo() {
    clear();
    unmap(spare_, kSegmentBytes, store_);
  }

  std::uint64_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  /// Segments mapped, the spare included, in bytes.
  std::uint64_t mapped_bytes() const noexcept {
    return (segments_ + (spare_ != nullptr ? 1 : 0)) * kSegmentBytes;
  }

  /// Makes the next push_back() map nothing (so that it cannot fail);
  /// throws Error(out_of_space), the queue unchanged, if it cannot.
  void reserve_one() {
    if ((tail_ == nullptr || tail_pos_ == kPerSegment) && spare_ == nullptr) {
      spare_ = reinterpret_cast<Segment*>(map_anonymous(kSegmentBytes, store_, what_));
    }
  }

  /// Appends `v`; throws Error(out_of_space), the queue unchanged, if a
  /// segment cannot be mapped (never after reserve_one()).
  void push_back(const T& v) {
    if (tail_ == nullptr || tail_pos_ == kPerSegment) {
      Segment* s = take_segment();
      if (tail_ == nullptr) {
        head_ = s;
        head_pos_ = 0;
      } else {
        tail_->next = s;
      }
      tail_ = s;
      tail_pos_ = 0;
    }
    items(tail_)[tail_pos_++] = v;
    ++size_;
  }
  /// The newest entry, which stays where it is until it is popped.
  /// Requires !empty().
  T& back() noexcept {
    assert(size_ != 0);
    return items(tail_)[tail_pos_ - 1];
  }
  /// The oldest entry. Requires !empty().
  const T& front() const noexcept {
    assert(size_ != 0);
    return items(head_)[head_pos_];
  }
  /// Removes the oldest entry. Requires !empty().
  void pop_front() noexcept {
    assert(size_ != 0);
    ++head_pos_;
    --size_;
    if (size_ == 0) {
      // Empty: keep the one segment, reset to its start.
      head_pos_ = tail_pos_ = 0;
      return;
    }
    if (head_pos_ == kPerSegment) {
      Segment* done = head_;
      head_ = head_->next;
      head_pos_ = 0;
      give_back(done);
    }
  }
  /// Calls fn(entry) for every entry, oldest first.
  template <class F>
  void for_each(F&& fn) const {
    const Segment* seg = head_;
    std::uint64_t pos = head_pos_;
    for (std::uint64_t n = size_; n != 0; --n) {
      if (pos == kPerSegment) {
        seg = seg->next;
        pos = 0;
      }
      fn(items(const_cast<Segment*>(seg))[pos++]);
    }
  }
  /// Keeps only the entries for which keep(entry) is true, in order, in
  /// one pass that maps nothing (kept entries move toward the front within
  /// the same segments; segments left empty at the back are given back).
  template <class Keep>
  void retain_if(Keep&& keep) noexcept(noexcept(keep(std::declval<const T&>()))) {
    if (size_ == 0) return;
    Segment* ws = head_;
    std::uint64_t wp = head_pos_;
    std::uint64_t kept = 0;
    Segment* rs = head_;
    std::uint64_t rp = head_pos_;
    for (std::uint64_t n = size_; n != 0; --n) {
      if (rp == kPerSegment) {
        rs = rs->next;
        rp = 0;
      }
      const T v = items(rs)[rp++];
      if (!keep(v)) continue;
      if (wp == kPerSegment) {
        ws = ws->next;
        wp = 0;
      }
      items(ws)[wp++] = v;
      ++kept;
    }
    if (kept == 0) {
      size_ = 1;  // pop_front() of the last entry resets the first segment
      pop_front();
      for (Segment* s = head_->next; s != nullptr;) {
        Segment* next = s->next;
        give_back(s);
        s = next;
      }
      head_->next = nullptr;
      tail_ = head_;
      return;
    }
    for (Segment* s = ws->next; s != nullptr;) {
      Segment* next = s->next;
      give_back(s);
      s = next;
    }
    ws->next = nullptr;
    tail_ = ws;
    tail_pos_ = wp;
    size_ = kept;
  }

  /// Drops every entry (segments unmapped, but for the spare).
  void clear() noexcept {
    for (Segment* s = head_; s != nullptr;) {
      Segment* next = s->next;
      unmap(s, kSegmentBytes, store_);
      --segments_;
      s = next;
    }
    head_ = tail_ = nullptr;
    head_pos_ = tail_pos_ = 0;
    size_ = 0;
  }

 private:
  struct Segment {
    Segment* next;
    std::uint64_t pad;
    // kPerSegment entries follow (items()).
  };
  static_assert(alignof(T) <= 16);
  static constexpr std::uint64_t kPerSegment = (kSegmentBytes - sizeof(Segment)) / sizeof(T);
  static T* items(Segment* s) noexcept {
    return reinterpret_cast<T*>(reinterpret_cast<std::byte*>(s) + sizeof(Segment));
  }

  Segment* take_segment() {
    Segment* s = spare_;
    if (s != nullptr) {
      spare_ = nullptr;
    } else {
      s = reinterpret_cast<Segment*>(map_anonymous(kSegmentBytes, store_, what_));
    }
    s->next = nullptr;
    ++segments_;
    return s;
  }
  void give_back(Segment* s) noexcept {
    --segments_;
    if (spare_ == nullptr) {
      spare_ = s;
    } else {
      unmap(s, kSegmentBytes, store_);
    }
  }

  const StoreName& store_;
  const char* what_;
  Segment* head_ = nullptr;
  Segment* tail_ = nullptr;
  std::uint64_t head_pos_ = 0;
  std::uint64_t tail_pos_ = 0;
  std::uint64_t size_ = 0;
  std::uint64_t segments_ = 0;
  Segment* spare_ = nullptr;
};

}  // namespace offheap::detail
