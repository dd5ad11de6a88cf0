// SPDX-License-Identifier: Apache-2.0
// Belady's MIN, the offline optimum, as an eviction policy that replays one
// known trace: on eviction it removes the resident object whose next request
// is farthest away (or never comes). No policy that keeps each requested
// object at least until the next miss (every policy simulate() runs) misses
// less, so it is the floor the bench prints beside the others.
//
// It keeps every object it admits until a later miss (demand paging: the
// object just admitted is never the victim, though simulate() evicts after
// the admit), as the published figures count it. The variant that may
// decline a new object would be lower still; W-TinyLFU's admission is such
// a policy, which still misses far more on the traces here. Next-use times come from
// next_uses(); the policy follows the trace by counting admit() and hit()
// calls, one per request, and checks each handle's hash against the trace
// so that it cannot fall out of step silently. Resident objects sit in a
// max-heap keyed by next use; an entry left behind by a later request of the
// same object is skipped when it surfaces, and the heap is rebuilt from the
// live entries when stale ones outnumber them.
#pragma once

#include <offheap/eviction/policy.hpp>

#include "support/zipf.hpp"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <utility>
#include <vector>

namespace offheap_test {

inline constexpr std::uint64_t kNeverAgain = ~std::uint64_t{0};

/// next[t]: the position of the next request for trace[t] after t, or
/// kNeverAgain. Ids must be dense (they index a vector).
inline std::vector<std::uint64_t> next_uses(const std::vector<std::uint64_t>& trace) {
  std::vector<std::uint64_t> next(trace.size());
  const std::uint64_t ids = trace.empty() ? 0 : *std::max_element(trace.begin(), trace.end()) + 1;
  std::vector<std::uint64_t> seen_at(ids, kNeverAgain);
  for (std::uint64_t t = trace.size(); t-- > 0;) {
    next[t] = seen_at[trace[t]];
    seen_at[trace[t]] = t;
  }
  return next;
}

class BeladyPolicy {
 public:
  using Handle = offheap::eviction::Handle;
  static constexpr std::uint8_t id = 0xF2;  // test-only; never persisted
  static constexpr offheap::eviction::ReaderHits reader_hits = offheap::eviction::ReaderHits::none;

  /// Both vectors must outlive the policy; `next` is next_uses(trace).
  BeladyPolicy(const std::vector<std::uint64_t>& trace, const std::vector<std::uint64_t>& next)
      : trace_(trace), next_(next) {
    const std::uint64_t ids = trace.empty() ? 0 : *std::max_element(trace.begin(), trace.end()) + 1;
    objects_.resize(ids);
  }

  void set_capacity(std::uint64_t) noexcept {}
  void reserve() noexcept {}

  template <class Host>
  void restore(const Handle& h, Host& host) {
    admit(h, host);
  }
  template <class Host>
  void admit(const Handle& h, Host&) {
    const std::uint64_t t = step(h);
    Object& o = objects_[trace_[t]];
    o = Object{true, next_[t], h.loc, h.stamp};
    newest_ = trace_[t];
    ++resident_;
    bytes_ += h.bytes;
    push(o.next, trace_[t]);
  }
  template <class Host>
  void hit(const Handle& h, Host&) {
    const std::uint64_t t = step(h);
    Object& o = objects_[trace_[t]];
    if (!o.resident) throw std::logic_error("BeladyPolicy: hit on an object it does not hold");
    o.next = next_[t];  // the heap's older entry for it is now stale
    push(o.next, trace_[t]);
  }
  // Writes and removals are not requests of a replayed trace.
  template <class Host>
  void replace(const Handle&, const Handle&, Host&) {
    throw std::logic_error("BeladyPolicy replays a read trace: no replace()");
  }
  template <class Host>
  void forget(const Handle&, Host&) {
    throw std::logic_error("BeladyPolicy replays a read trace: no forget()");
  }

  template <class Host>
  bool evict_one(Host& host) {
    // The object just admitted stays (demand paging): its heap entry is set
    // aside while the next farthest goes, then put back.
    std::pair<std::uint64_t, std::uint64_t> newest{0, 0};
    bool set_aside = false;
    bool evicted = false;
    while (!evicted && !heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end());
      const auto [next, obj] = heap_.back();
      heap_.pop_back();
      Object& o = objects_[obj];
      if (!o.resident || o.next != next) continue;  // stale
      if (obj == newest_) {
        newest = {next, obj};
        set_aside = true;
        continue;
      }
      Handle h{o.loc, o.stamp};
      if (!host.current(h)) throw std::logic_error("BeladyPolicy: a held record is not current");
      o.resident = false;
      --resident_;
      bytes_ -= h.bytes;
      host.evict(h);
      evicted = true;
    }
    if (set_aside) push(newest.first, newest.second);
    return evicted;
  }
  void clear() noexcept {
    heap_.clear();
    std::fill(objects_.begin(), objects_.end(), Object{});
    resident_ = 0;
    bytes_ = 0;
    newest_ = ~std::uint64_t{0};
  }

  template <class F>
  void for_each_entry(F&& fn) const {
    for (const Object& o : objects_) {
      if (o.resident) fn(o.loc, o.stamp);
    }
  }

  offheap::eviction::PolicyStats stats() const noexcept {
    offheap::eviction::PolicyStats s;
    s.entries = heap_.size();
    s.bytes = bytes_;
    return s;
  }

 private:
  struct Object {
    bool resident = false;
    std::uint64_t next = kNeverAgain;  // its next request; its live heap entry
    std::uint64_t loc = 0;
    std::uint64_t stamp = 0;
  };

  /// The position of the request this call belongs to.
  std::uint64_t step(const Handle& h) {
    if (cursor_ >= trace_.size() || h.hash != key_hash(trace_[cursor_])) {
      throw std::logic_error("BeladyPolicy: calls out of step with its trace");
    }
    return cursor_++;
  }

  void push(std::uint64_t next, std::uint64_t obj) {
    heap_.emplace_back(next, obj);
    std::push_heap(heap_.begin(), heap_.end());
    if (heap_.size() > 2 * resident_ + 1024) {
      std::erase_if(heap_, [this](const std::pair<std::uint64_t, std::uint64_t>& e) {
        const Object& o = objects_[e.second];
        return !o.resident || o.next != e.first;
      });
      std::make_heap(heap_.begin(), heap_.end());
    }
  }

  const std::vector<std::uint64_t>& trace_;
  const std::vector<std::uint64_t>& next_;
  std::vector<Object> objects_;                                // by object id
  std::vector<std::pair<std::uint64_t, std::uint64_t>> heap_;  // (next use, object id), max first
  std::uint64_t cursor_ = 0;
  std::uint64_t newest_ = ~std::uint64_t{0};  // the object the latest admit() took in
  std::uint64_t resident_ = 0;
  std::uint64_t bytes_ = 0;
};

static_assert(offheap::eviction::EvictionPolicy<BeladyPolicy>);

}  // namespace offheap_test
