// SPDX-License-Identifier: Apache-2.0
// A trivial FIFO eviction policy: the harness's own subject. It proves that
// simulate() counts what a policy does (its miss ratio must equal a plain
// FIFO simulator's exactly, tests/eviction/harness_test.cpp) and gives the
// hit-ratio bench a floor. It keeps only location and stamp, as the real
// queues do, and learns a record's bytes from host.current(); a stale entry
// (a record removed or replaced) is skipped when it reaches the head.
#pragma once

#include <offheap/eviction/policy.hpp>

#include <cstdint>
#include <deque>

namespace offheap_test {

class FifoPolicy {
 public:
  using Handle = offheap::eviction::Handle;
  static constexpr std::uint8_t id = 0xF1;  // test-only; never persisted
  static constexpr offheap::eviction::ReaderHits reader_hits = offheap::eviction::ReaderHits::none;

  void set_capacity(std::uint64_t) noexcept {}  // the host decides when to evict
  void reserve() noexcept {}

  template <class Host>
  void restore(const Handle& h, Host& host) {
    admit(h, host);
  }
  template <class Host>
  void admit(const Handle& h, Host&) {
    queue_.push_back({h.loc, h.stamp});
    bytes_ += h.bytes;
  }
  /// A replacement joins the tail (FIFO order is write order); the old
  /// entry goes stale and is skipped.
  template <class Host>
  void replace(const Handle& old, const Handle& h, Host& host) {
    forget(old, host);
    admit(h, host);
  }
  template <class Host>
  void forget(const Handle& h, Host&) noexcept {
    bytes_ -= h.bytes;
  }
  template <class Host>
  void hit(const Handle&, Host&) noexcept {}

  template <class Host>
  bool evict_one(Host& host) {
    while (!queue_.empty()) {
      Handle h{queue_.front().loc, queue_.front().stamp};
      queue_.pop_front();
      if (!host.current(h)) continue;
      bytes_ -= h.bytes;  // filled in by current()
      host.evict(h);
      return true;
    }
    return false;
  }

  void clear() noexcept {
    queue_.clear();
    bytes_ = 0;
  }

  template <class F>
  void for_each_entry(F&& fn) const {
    for (const Entry& e : queue_) fn(e.loc, e.stamp);
  }

  offheap::eviction::PolicyStats stats() const noexcept {
    offheap::eviction::PolicyStats s;
    s.entries = queue_.size();
    s.bytes = bytes_;
    return s;
  }

 private:
  struct Entry {
    std::uint64_t loc;
    std::uint64_t stamp;
  };
  std::deque<Entry> queue_;
  std::uint64_t bytes_ = 0;
};

static_assert(offheap::eviction::EvictionPolicy<FifoPolicy>);

}  // namespace offheap_test
