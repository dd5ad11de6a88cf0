// SPDX-License-Identifier: Apache-2.0
// W-TinyLFU (Einziger, Friedman and Manes, "TinyLFU: a highly efficient
// cache admission policy", 2017), with the adaptive window of Caffeine:
// recency in a small window, frequency for what stays.
//
//   admit ──> window (LRU) ──candidate──> probation ──hit──> protected
//                 │                        (20% of main)      (80% of main)
//                 └── rejected: evicted     victim: evicted     <──demoted── tail
//
// Three lists in mapped memory (detail/cache/node_list.hpp), most recent at the
// head, and a count-min sketch (detail/cache/count_min.hpp) that counts every
// access (admit, hit and replace) by key hash. A new record goes to the
// window's head. Eviction (evict_one):
//   - while the window holds more than its target and main (probation +
//     protected) less than its own, the window's LRU record moves to
//     probation without a contest (also done by admit: the window spills);
//   - while the window holds more than its target, its LRU record (the
//     candidate) contests probation's LRU record (the victim, protected's
//     if probation is empty): the candidate enters probation and the
//     victim leaves if the sketch counts the candidate more often; if not,
//     but the candidate is warm (count >= 6), it still enters with
//     probability 1/128 (otherwise an attacker who keeps a victim's count
//     high with colliding keys would keep every newcomer out: hash
//     flooding); otherwise the candidate leaves;
//   - else probation's LRU record leaves (protected's, then the window's if
//     those are empty).
// A hit moves a record to its list's head, from probation to protected's
// head; protected past 80% of main demotes its LRU record to probation.
//
// The window's target starts at 1% of the capacity and is moved by a hill
// climber (after Caffeine's). It counts hits (hit()) and misses (admit())
// over periods of 10 * R accesses (R the capacity in records, estimated
// from the records' mean size) and compares each period's hit ratio with
// the last one's: better, the target moves on by the step in the same
// direction; worse, it moves back the other way. The step starts at 6.25%
// of the capacity toward a smaller window, shrinks by 2% a period, and
// starts over at 6.25% when the hit ratio moves by 5 points or more (the
// workload changed). The target stays within 0-80% of the capacity. Two
// changes from Caffeine's, both against noise: two periods of 10 * R
// accesses differ by about 0.7 points of hit ratio by chance alone for
// R = 1,000, more than a step's effect on a skewed workload:
//   - a change of less than half the standard error of the difference of
//     two periods' ratios is no signal: the target holds still (the step
//     still shrinks), where Caffeine would move on or back at random;
//   - after a move the first quarter of the next period is not sampled:
//     the lists reach the new target lazily (evictions and spills move
//     records), and sampling the transition made the climber judge the
//     move before last, which let it drift on a workload that wants a
//     small window.
//
// The sketch is sized for R and cleared when the estimate of R doubles or
// drops to a quarter (which happens when the records' sizes change a lot).
// The 1/128 draws come from a splitmix64 sequence with a fixed seed, owned
// by the policy: the same calls give the same evictions (reference mode).
//
// The sketch counts a key by its hash folded to 32 bits (fold(): the two
// halves xored), which its node keeps (Node::tag): the contest compares the
// candidate's and the victim's counts from their nodes, so a candidate
// that loses leaves without the victim's record being read (a cache miss
// saved on most evicting writes of a cache-aside workload). A victim
// whose record has gone unnoticed (a damaged record: forget() drops every
// other) is found out only when a candidate wins against it; until then
// it contests as its key did.
//
// Records carry no policy bits: a record's list is its node's. Reader hits
// are buffered (ReaderHits::buffered) and drained into hit(); a dropped hit
// is neither counted nor applied.
//
// Thread safety: every call runs under the shard's writer lock; readers
// only append to their own hit buffers. Nothing here hands out memory.
#pragma once

#include <offheap/detail/cache/count_min.hpp>
#include <offheap/detail/cache/node_list.hpp>
#include <offheap/error.hpp>
#include <offheap/eviction/policy.hpp>

#include <cmath>
#include <cstdint>
#include <string>

namespace offheap::eviction {

class WTinyLfu {
 public:
  static constexpr std::uint8_t id = 3;
  static constexpr ReaderHits reader_hits = ReaderHits::buffered;

  static constexpr unsigned kWarm = 6;                  // a candidate this frequent may win by chance
  static constexpr std::uint64_t kFloodOdds = 128;      // ... once in this many contests
  static constexpr double kInitialWindow = 0.01;        // of the capacity
  static constexpr double kMaxWindow = 0.80;
  static constexpr double kProtectedShare = 0.80;       // of main
  static constexpr double kStep = 0.0625;               // of the capacity
  static constexpr double kStepDecay = 0.98;
  static constexpr double kRestartThreshold = 0.05;     // hit-ratio change that restarts the step
  static constexpr double kNoiseBand = 0.5;             // a change below this many standard errors: hold

  explicit WTinyLfu(const detail::StoreName& store)
      : nodes_(store, "the W-TinyLFU lists"), sketch_(store, "the W-TinyLFU sketch") {}

  /// The window's target (and the climber's step) scale with the capacity.
  void set_capacity(std::uint64_t bytes) {
    if (capacity_ == 0) {
      window_target_ = static_cast<std::uint64_t>(static_cast<double>(bytes) * kInitialWindow);
      step_ = -kStep * static_cast<double>(bytes);  // first toward a smaller window, as Caffeine
    } else {
      window_target_ = static_cast<std::uint64_t>(static_cast<long double>(window_target_) * bytes / capacity_);
      step_ = step_ * static_cast<double>(bytes) / static_cast<double>(capacity_);
    }
    capacity_ = bytes;
    resize_sketch_if_needed();
  }

  /// Maps what the next admit() or replace() needs: a node and its table
  /// slot (the sketch's first table is mapped at the first admit).
  void reserve() { nodes_.reserve_one(); }
  /// What the first reserve() maps (Options::memory_limit_bytes' floor;
  /// the sketch is optional: map_optional()).
  static std::uint64_t first_bytes() noexcept { return detail::NodeLists::first_bytes(); }

  /// At open, oldest first: into the window, as a new record (the window
  /// spills to probation as it fills, so the oldest records end there),
  /// under the node number its header kept if that is free.
  template <class Host>
  void restore(const Handle& h, Host& host) {
    enter(h, host, host.node(h));
  }
  /// Restores may keep the node numbers the records' headers kept.
  void begin_restore(std::uint64_t records) noexcept { nodes_.begin_restore(records); }

  /// Throws Error(out_of_space), nothing changed but the sketch's first
  /// table maybe mapped, if memory for the record's node (or for the
  /// sketch's first table) cannot be mapped.
  template <class Host>
  void admit(const Handle& h, Host& host) {
    enter(h, host, detail::NodeLists::kNone);
  }

  /// h carries old's node word (the host's): its node keeps its list and
  /// moves to that list's head.
  template <class Host>
  void replace(const Handle& old, const Handle& h, Host& host) {
    const std::uint32_t n = host.node(h);
    if (!nodes_.holds(n, old.loc, old.stamp)) {
      admit(h, host);  // (a policy call skipped: tests' hooks)
      return;
    }
    const unsigned list = nodes_.node(n).list;
    nodes_.rekey(n, h.loc, h.stamp);
    nodes_.move_to_head(n, list);
    bytes_[list] += h.bytes;
    bytes_[list] -= old.bytes;
    nodes_.node(n).tag = fold(h.hash);
    sketch_.increment(fold(h.hash));
  }

  /// The record moved from old.loc to h.loc (compaction): its node keeps
  /// its list and place, and the sketch counts no access.
  template <class Host>
  void relocate(const Handle& old, const Handle& h, Host& host) {
    const std::uint32_t n = host.node(h);
    if (!nodes_.holds(n, old.loc, old.stamp)) {
      replace(old, h, host);
      return;
    }
    const unsigned list = nodes_.node(n).list;
    nodes_.rekey(n, h.loc, h.stamp);
    bytes_[list] += h.bytes;
    bytes_[list] -= old.bytes;
  }
  template <class Host>
  void forget(const Handle& h, Host& host) noexcept {
    const std::uint32_t n = host.node(h);
    if (!nodes_.holds(n, h.loc, h.stamp)) return;
    bytes_[nodes_.node(n).list] -= h.bytes;
    nodes_.erase(n);
  }

  template <class Host>
  void hit(const Handle& h, Host& host) {
    sketch_.increment(fold(h.hash));
    ++sample_hits_;
    const std::uint32_t n = host.node(h);
    if (nodes_.holds(n, h.loc, h.stamp)) {
      const unsigned list = nodes_.node(n).list;
      if (list != kProbation) {
        nodes_.move_to_head(n, list);
      } else {
        Handle c = handle_of(n);
        if (host.current(c)) {
          move(n, kProtected, c.bytes);
          demote_protected(host);
        }
      }
    }
    climb(host);
  }

  /// Evicts exactly one record (host.evict once); false if the lists hold
  /// none. If host.evict throws, the record is still in its list.
  template <class Host>
  bool evict_one(Host& host) {
    for (;;) {
      if (bytes_[kWindow] > window_target_ && nodes_.length(kWindow) != 0) {
        const std::uint32_t c = nodes_.tail(kWindow);
        Handle candidate = handle_of(c);
        if (!host.current(candidate)) {
          drop_stale(c);
          continue;
        }
        if (main_bytes() < main_target()) {
          move(c, kProbation, candidate.bytes);  // main has room: no contest
          continue;
        }
        std::uint32_t v = nodes_.tail(kProbation);
        if (v == detail::NodeLists::kNone) v = nodes_.tail(kProtected);
        if (v == detail::NodeLists::kNone) return evict(host, c, candidate);
        // The contest from the nodes' tags: a candidate that loses leaves
        // without the victim's record read.
        if (!admits(nodes_.node(c).tag, nodes_.node(v).tag)) return evict(host, c, candidate);
        Handle victim = handle_of(v);
        if (!host.current(victim)) {
          drop_stale(v);
          continue;
        }
        evict(host, v, victim);  // may throw: the candidate stays in the window
        move(c, kProbation, candidate.bytes);
        return true;
      }
      std::uint32_t n = nodes_.tail(kProbation);
      if (n == detail::NodeLists::kNone) n = nodes_.tail(kProtected);
      if (n == detail::NodeLists::kNone) n = nodes_.tail(kWindow);
      if (n == detail::NodeLists::kNone) return false;
      Handle h = handle_of(n);
      if (!host.current(h)) {
        drop_stale(n);
        continue;
      }
      return evict(host, n, h);
    }
  }

  /// Forgets every record and what the sketch counted; the window's target
  /// and the climber start over. The capacity stays.
  void clear() noexcept {
    nodes_.clear();
    sketch_.zero();
    bytes_[kWindow] = bytes_[kProbation] = bytes_[kProtected] = 0;
    window_target_ = static_cast<std::uint64_t>(static_cast<double>(capacity_) * kInitialWindow);
    step_ = -kStep * static_cast<double>(capacity_);
    previous_hit_ratio_ = 0;
    sample_hits_ = sample_misses_ = 0;
    settle_left_ = 0;
    sketch_refused_ = 0;
  }

  template <class F>
  void for_each_entry(F&& fn) const {
    for_each_node([&](std::uint32_t, std::uint64_t loc, std::uint64_t stamp) { fn(loc, stamp); });
  }
  /// fn(node word, loc, stamp) for every record held (audits: the host
  /// checks each current record keeps its node's number).
  template <class F>
  void for_each_node(F&& fn) const {
    for (const unsigned list : {kWindow, kProbation, kProtected}) {
      nodes_.for_each(list, [&](std::uint32_t i, const detail::NodeLists::Node& n) { fn(i, n.loc, n.stamp); });
    }
  }

  PolicyStats stats() const noexcept {
    PolicyStats s;
    s.entries = nodes_.size();
    s.bytes = bytes_[kWindow] + main_bytes();
    s.small_bytes = bytes_[kWindow];
    s.main_bytes = main_bytes();
    s.protected_bytes = bytes_[kProtected];
    s.window_target = window_target_;
    s.sketch_resets = sketch_.resets();
    s.mapped_bytes = nodes_.mapped_bytes() + sketch_.mapped_bytes();
    return s;
  }

  /// The sketch's estimated count of a key hash (0-15), for tests and
  /// diagnostics.
  unsigned frequency(std::uint64_t hash) const noexcept { return sketch_.frequency(fold(hash)); }
  /// The capacity in records the sketch (and the climber's period) is
  /// sized for: R.
  std::uint64_t sketch_records() const noexcept { return sketch_.sized_for(); }
  /// Records per list: window, probation, protected.
  std::uint64_t window_records() const noexcept { return nodes_.length(kWindow); }
  std::uint64_t probation_records() const noexcept { return nodes_.length(kProbation); }
  std::uint64_t protected_records() const noexcept { return nodes_.length(kProtected); }

 private:
  static constexpr unsigned kWindow = 0, kProbation = 1, kProtected = 2;

  /// admit() and restore(): a node (`want`, if free: restore_at()) at the
  /// window's head. Throws Error(out_of_space), nothing changed but the
  /// sketch's first table maybe mapped, if memory for the record's node
  /// (or for the sketch's first table) cannot be mapped.
  template <class Host>
  void enter(const Handle& h, Host& host, std::uint32_t want) {
    // The first table: the record is already in the store, so a refusal
    // (Options::memory_limit_bytes, the OS) is not thrown; the sketch reads
    // 0 for every key until a later admit maps it. Later resizes may fail
    // and keep the old one.
    if (!sketch_.mapped()) {
      const std::uint64_t est = estimate_records(h.bytes);
      if (est >= 2 * sketch_refused_) {  // after a refusal, not again for every admit
        try {
          sketch_.resize(est);
        } catch (const Error&) {
          sketch_refused_ = est;
        }
      }
    }
    const std::uint32_t n = want == detail::NodeLists::kNone ? nodes_.insert(h.loc, h.stamp, kWindow)
                                                             : nodes_.restore_at(want, h.loc, h.stamp, kWindow);
    host.set_node(h, n);  // (nodes_ may have thrown: nothing changed yet)
    nodes_.node(n).tag = fold(h.hash);
    bytes_[kWindow] += h.bytes;
    resize_sketch_if_needed();
    sketch_.increment(fold(h.hash));
    ++sample_misses_;
    spill_window(host);
    climb(host);
  }

  /// What the sketch counts and a node keeps of a key's hash.
  static std::uint32_t fold(std::uint64_t hash) noexcept { return static_cast<std::uint32_t>(hash ^ (hash >> 32)); }
  Handle handle_of(std::uint32_t n) const noexcept { return Handle{nodes_.node(n).loc, nodes_.node(n).stamp, 0, 0}; }
  std::uint64_t main_bytes() const noexcept { return bytes_[kProbation] + bytes_[kProtected]; }
  std::uint64_t main_target() const noexcept { return capacity_ - window_target_; }
  std::uint64_t protected_target() const noexcept {
    return static_cast<std::uint64_t>(static_cast<double>(main_target()) * kProtectedShare);
  }

  /// Node n, whose record has `bytes`, to the head of `list`.
  void move(std::uint32_t n, unsigned list, std::uint64_t bytes) noexcept {
    bytes_[nodes_.node(n).list] -= bytes;
    bytes_[list] += bytes;
    nodes_.move_to_head(n, list);
  }
  /// A node whose record went without forget() (never under a store's
  /// lock): its bytes are unknown, so its list's count may stay high.
  void drop_stale(std::uint32_t n) noexcept { nodes_.erase(n); }

  template <class Host>
  bool evict(Host& host, std::uint32_t n, const Handle& h) {
    host.evict(h);  // first: if it throws, nothing changed here
    bytes_[nodes_.node(n).list] -= h.bytes;
    nodes_.erase(n);
    return true;
  }

  /// TinyLFU's admission: the candidate wins if it is more frequent, or,
  /// warm but not more frequent, once in kFloodOdds draws. By folded
  /// hashes (fold(), the nodes' tags).
  bool admits(std::uint32_t candidate, std::uint32_t victim) noexcept {
    const unsigned fc = sketch_.frequency(candidate);
    if (fc > sketch_.frequency(victim)) return true;
    return fc >= kWarm && next_random() % kFloodOdds == 0;
  }
  /// splitmix64 (a fixed seed: deterministic).
  std::uint64_t next_random() noexcept {
    std::uint64_t z = (random_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  /// Window records past its target move to probation while main has room.
  template <class Host>
  void spill_window(Host& host) {
    tail_to_probation(kWindow, host,
                      [&] { return bytes_[kWindow] > window_target_ && main_bytes() < main_target(); });
  }
  /// Protected's LRU records to probation's head while protected passes
  /// its share of main.
  template <class Host>
  void demote_protected(Host& host) {
    tail_to_probation(kProtected, host, [&] { return bytes_[kProtected] > protected_target(); });
  }
  /// Moves the tail of `list` to probation's head while `more()` holds,
  /// dropping stale nodes on the way.
  template <class Host, class More>
  void tail_to_probation(unsigned list, Host& host, More more) {
    while (more()) {
      const std::uint32_t n = nodes_.tail(list);
      if (n == detail::NodeLists::kNone) return;
      Handle h = handle_of(n);
      if (!host.current(h)) {
        drop_stale(n);
        continue;
      }
      move(n, kProbation, h.bytes);
    }
  }

  /// The capacity in records, at the mean size of the records held (and of
  /// one more of `bytes`, if not 0: a record about to be admitted).
  std::uint64_t estimate_records(std::uint64_t bytes = 0) const noexcept {
    const std::uint64_t records = nodes_.size() + (bytes != 0 ? 1 : 0);
    const std::uint64_t total = bytes_[kWindow] + main_bytes() + bytes;
    if (records == 0 || total == 0) return capacity_ != 0 ? capacity_ : 1;
    // In double (an estimate, at every admit: x87's long double costs more).
    const double est = static_cast<double>(capacity_) * static_cast<double>(records) / static_cast<double>(total);
    return est < 1 ? 1 : static_cast<std::uint64_t>(est);
  }
  /// A sketch for the current estimate once it doubles, or drops to a
  /// quarter with enough records held to trust the mean; if no memory can
  /// be mapped for it, the old one stays.
  void resize_sketch_if_needed() noexcept {
    if (!sketch_.mapped()) return;
    const std::uint64_t est = estimate_records();
    const std::uint64_t now = sketch_.sized_for();
    if ((est >= 2 * now && est >= 2 * sketch_refused_) || (est * 4 <= now && nodes_.size() >= 64)) {
      try {
        sketch_.resize(est);
      } catch (const Error&) {
        sketch_refused_ = est;  // tried again at twice the size (a refusal costs an exception)
      }
    }
  }

  /// The hill climber, called on every access: once per period of 10 * R
  /// sampled accesses, the window's target moves by the step (see the top
  /// of the file).
  template <class Host>
  void climb(Host& host) {
    if (settle_left_ != 0) {  // the lists are still moving to the last target
      --settle_left_;
      sample_hits_ = sample_misses_ = 0;
      return;
    }
    const std::uint64_t accesses = sample_hits_ + sample_misses_;
    if (!sketch_.mapped() || accesses < sketch_.sample_size()) return;
    const double ratio = static_cast<double>(sample_hits_) / static_cast<double>(accesses);
    const double change = ratio - previous_hit_ratio_;
    const double noise = std::sqrt(2 * ratio * (1 - ratio) / static_cast<double>(accesses));
    previous_hit_ratio_ = ratio;
    sample_hits_ = sample_misses_ = 0;
    double amount = 0;
    if (std::fabs(change) <= kNoiseBand * noise) {
      step_ *= kStepDecay;  // no signal: hold still
    } else {
      amount = change > 0 ? step_ : -step_;  // better: on; worse: back
      const double restart = kStep * static_cast<double>(capacity_);
      step_ = (change >= kRestartThreshold || change <= -kRestartThreshold) ? (amount >= 0 ? restart : -restart)
                                                                            : amount * kStepDecay;
    }
    double target = static_cast<double>(window_target_) + amount;
    const double most = kMaxWindow * static_cast<double>(capacity_);
    if (target < 0) target = 0;
    if (target > most) target = most;
    if (static_cast<std::uint64_t>(target) == window_target_) return;
    window_target_ = static_cast<std::uint64_t>(target);
    settle_left_ = sketch_.sample_size() / 4;
    demote_protected(host);
  }

  detail::NodeLists nodes_;
  detail::CountMin sketch_;
  std::uint64_t sketch_refused_ = 0;  // the estimate a sketch table was last refused for
  std::uint64_t capacity_ = 0;
  std::uint64_t bytes_[3] = {0, 0, 0};  // window, probation, protected: of current records
  std::uint64_t window_target_ = 0;
  double step_ = 0;                     // signed: its sign is the direction
  double previous_hit_ratio_ = 0;
  std::uint64_t settle_left_ = 0;
  std::uint64_t sample_hits_ = 0, sample_misses_ = 0;
  std::uint64_t random_ = 0x5851F42D4C957F2Dull;
};

static_assert(EvictionPolicy<WTinyLfu>, "WTinyLfu must satisfy the eviction policy concept");

}  // namespace offheap::eviction
