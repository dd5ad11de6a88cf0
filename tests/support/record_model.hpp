// SPDX-License-Identifier: Apache-2.0
// The reference-mode host: a model of a store's records that an eviction
// policy runs against in tests and in the hit-ratio bench, and simulate(),
// which replays a trace through it (on a fresh model, or on one the caller
// keeps, so that a second trace can follow the first).
//
// Each resident object has one record in a slot; the slot's index is the
// record's location (Handle::loc). Locations are recycled last-freed first,
// and every write takes a new stamp from one counter, so a handle the policy
// still holds for an evicted record soon names a location that holds another
// object's record: only the stamp tells them apart, as in a store. Policies
// that skip stale handles by host.current() are exercised on exactly that.
//
//   slot[loc]: live, object id, stamp, hash (key_hash(id) unless told), bytes, 3 policy bits,
//              the node word (carried over by replace)
//   loc_of[id]: the object's slot, or kNone when it is not resident
//
// The model checks what a store would only assume: every bits(), set_bits()
// and evict() names a current record, bits fit in 3, and (in simulate())
// evictions happen only inside evict_one(), exactly one per call that
// returns true, and only while the records pass the capacity. A breach
// throws HostError with what happened, so a test fails and the bench stops
// instead of reporting a miss ratio from a broken run.
#pragma once

#include <offheap/eviction/policy.hpp>

#include "support/zipf.hpp"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace offheap_test {

/// A policy broke the host's contract (or the host's own invariants broke).
struct HostError : std::logic_error {
  using std::logic_error::logic_error;
};

class RecordModel {
 public:
  using Handle = offheap::eviction::Handle;
  static constexpr std::uint64_t kNone = ~std::uint64_t{0};
  /// Object ids index a vector: traces use dense ids (a Zipf trace's are
  /// below its object count); a wild id is a bug in the caller.
  static constexpr std::uint64_t kMaxId = std::uint64_t{1} << 32;

  /// An object's key hash, from its id.
  using KeyHash = std::uint64_t (*)(std::uint64_t);

  /// `ids`: ids below it are expected (the vector indexed by id is sized
  /// once); larger ones still work. `hash`: the key hash of each object
  /// (a test whose thresholds were measured with other hashes keeps them).
  explicit RecordModel(std::uint64_t ids = 0, KeyHash hash = key_hash) : hash_(hash), loc_of_(ids, kNone) {}

  // --- The host interface (HostArchetype) ---

  /// The record h names is live with h's stamp; if so, fills in h.hash and
  /// h.bytes.
  bool current(Handle& h) const noexcept {
    if (h.loc >= slots_.size()) return false;
    const Slot& s = slots_[h.loc];
    if (!s.live || s.stamp != h.stamp) return false;
    h.hash = s.hash;
    h.bytes = s.bytes;
    return true;
  }

  std::uint8_t bits(const Handle& h) const { return slots_[current_loc(h, "bits")].bits; }

  void set_bits(const Handle& h, std::uint8_t bits) {
    if (bits > 7) throw HostError("set_bits(" + std::to_string(bits) + "): policy bits are 3 bits");
    slots_[current_loc(h, "set_bits")].bits = bits;
  }

  /// The node word set_node() stored (carried over by replace()), or
  /// kNoNode: any handle.
  std::uint32_t node(const Handle& h) const noexcept {
    Handle probe = h;
    if (!current(probe) || slots_[h.loc].node == 0) return offheap::eviction::kNoNode;
    return slots_[h.loc].node - 1;
  }

  void set_node(const Handle& h, std::uint32_t n) {
    if (n > offheap::eviction::kMaxNode) throw HostError("set_node(" + std::to_string(n) + "): above kMaxNode");
    slots_[current_loc(h, "set_node")].node = n + 1;
  }

  /// Removes the record (an eviction). Requires current(h).
  void evict(const Handle& h) {
    const std::uint64_t loc = current_loc(h, "evict");
    ++evictions_;
    eviction_digest_ = mix64(eviction_digest_ ^ key_hash(slots_[loc].id));
    release(loc, slots_[loc]);
  }

  // --- Driving the model (what a store's writers and readers do) ---

  bool resident(std::uint64_t id) const noexcept { return id < loc_of_.size() && loc_of_[id] != kNone; }

  /// The current handle of a resident object. Requires resident(id).
  Handle handle(std::uint64_t id) const {
    if (!resident(id)) throw HostError("handle(" + std::to_string(id) + "): not resident");
    const std::uint64_t loc = loc_of_[id];
    const Slot& s = slots_[loc];
    return Handle{loc, s.stamp, s.hash, s.bytes};
  }

  /// Writes a new record for `id` (not resident) and returns its handle; the
  /// caller tells the policy (admit).
  Handle insert(std::uint64_t id, std::uint64_t bytes) {
    if (id >= kMaxId) throw HostError("insert: object id " + std::to_string(id) + " out of range");
    if (resident(id)) throw HostError("insert(" + std::to_string(id) + "): already resident");
    if (id >= loc_of_.size()) loc_of_.resize(id + 1, kNone);
    std::uint64_t loc;
    if (!free_.empty()) {
      loc = free_.back();
      free_.pop_back();
    } else {
      loc = slots_.size();
      slots_.emplace_back();
    }
    Slot& s = slots_[loc];
    s = Slot{true, 0, 0, id, ++last_stamp_, hash_(id), bytes};
    loc_of_[id] = loc;
    resident_bytes_ += bytes;
    resident_records_ += 1;
    return Handle{loc, s.stamp, s.hash, bytes};
  }

  /// Replaces `id`'s record by a new one (a new location and stamp, as a
  /// store's put writes elsewhere); returns {old, new} for policy.replace.
  std::pair<Handle, Handle> replace(std::uint64_t id, std::uint64_t bytes) {
    const Handle old = handle(id);
    const std::uint32_t node = slots_[old.loc].node;
    release(old.loc, slots_[old.loc]);
    const Handle now = insert(id, bytes);
    slots_[now.loc].node = node;  // the node word carries over, as in a store
    return {old, now};
  }

  /// Removes `id`'s record (not an eviction); returns its handle for
  /// policy.forget.
  Handle remove(std::uint64_t id) {
    const Handle old = handle(id);
    release(old.loc, slots_[old.loc]);
    return old;
  }

  std::uint64_t resident_bytes() const noexcept { return resident_bytes_; }
  std::uint64_t resident_records() const noexcept { return resident_records_; }
  std::uint64_t evictions() const noexcept { return evictions_; }
  /// The ids of the evicted objects, in eviction order, folded into one
  /// word: two runs evicted the same objects in the same order when their
  /// digests are equal (but for a chance of about 2^-64).
  std::uint64_t eviction_digest() const noexcept { return eviction_digest_; }

 private:
  struct Slot {
    bool live = false;
    std::uint8_t bits = 0;
    std::uint32_t node = 0;  // the node word + 1; 0: none
    std::uint64_t id = 0;
    std::uint64_t stamp = 0;
    std::uint64_t hash = 0;
    std::uint64_t bytes = 0;
  };

  /// h's location, checked to hold h's record.
  std::uint64_t current_loc(const Handle& h, const char* what) const {
    Handle probe = h;
    if (!current(probe)) {
      throw HostError(std::string(what) + ": handle {loc " + std::to_string(h.loc) + ", stamp " +
                      std::to_string(h.stamp) + "} names no current record");
    }
    return h.loc;
  }

  void release(std::uint64_t loc, Slot& s) {
    s.live = false;
    loc_of_[s.id] = kNone;
    resident_bytes_ -= s.bytes;
    resident_records_ -= 1;
    free_.push_back(loc);
  }

  KeyHash hash_;
  std::vector<Slot> slots_;             // by location
  std::vector<std::uint64_t> free_;     // free locations, reused last-freed first
  std::vector<std::uint64_t> loc_of_;   // by object id
  std::uint64_t last_stamp_ = 0;
  std::uint64_t resident_bytes_ = 0;
  std::uint64_t resident_records_ = 0;
  std::uint64_t evictions_ = 0;
  std::uint64_t eviction_digest_ = 0;
};

/// What one replay of a trace measured.
struct Result {
  std::uint64_t requests = 0;
  std::uint64_t misses = 0;
  std::uint64_t evictions = 0;           // host.evict calls
  std::uint64_t max_resident_bytes = 0;  // after each miss's evictions
  double miss_ratio() const noexcept {
    return requests == 0 ? 0.0 : static_cast<double>(misses) / static_cast<double>(requests);
  }
};

/// Throws std::invalid_argument unless an object of `object_bytes` fits a
/// cache of `capacity` bytes.
inline void check_object_fits(std::uint64_t capacity, std::uint64_t object_bytes) {
  if (object_bytes == 0 || object_bytes > capacity) {
    throw std::invalid_argument("simulate: an object must fit the capacity (" +
                                std::to_string(object_bytes) + " > " + std::to_string(capacity) + ")");
  }
}

/// Replays `trace` through `policy` on `host` as the caller keeps it: the
/// host holds exactly the records the policy holds (none, or what an
/// earlier simulate() on the two left), and the policy already has the
/// capacity (this overload does not call set_capacity). A second trace so
/// follows the first through one policy, and the caller can look at the
/// host afterwards; the Result counts this trace alone. Otherwise as the
/// overload below.
template <class P>
Result simulate(P& policy, RecordModel& host, const std::vector<std::uint64_t>& trace, std::uint64_t capacity,
                std::uint64_t object_bytes = 1) {
  check_object_fits(capacity, object_bytes);
  const std::uint64_t evictions_before = host.evictions();
  const std::uint64_t records_before = host.resident_records();
  Result r;
  const auto no_eviction_in = [&](const char* call, std::uint64_t before) {
    if (host.evictions() != before) throw HostError(std::string("policy evicted inside ") + call);
  };
  for (const std::uint64_t id : trace) {
    ++r.requests;
    std::uint64_t before = host.evictions();
    if (host.resident(id)) {
      policy.hit(host.handle(id), host);
      no_eviction_in("hit()", before);
      continue;
    }
    ++r.misses;
    before = host.evictions();
    policy.admit(host.insert(id, object_bytes), host);
    no_eviction_in("admit()", before);
    while (host.resident_bytes() > capacity) {
      before = host.evictions();
      const bool evicted = policy.evict_one(host);
      const std::uint64_t n = host.evictions() - before;
      if (!evicted && n == 0) {
        throw HostError("evict_one() found nothing to evict with " + std::to_string(host.resident_bytes()) +
                        " bytes resident, capacity " + std::to_string(capacity));
      }
      if (n != (evicted ? 1u : 0u)) {
        throw HostError("evict_one() returned " + std::string(evicted ? "true" : "false") + " after " +
                        std::to_string(n) + " evictions");
      }
    }
    r.max_resident_bytes = std::max(r.max_resident_bytes, host.resident_bytes());
  }
  r.evictions = host.evictions() - evictions_before;
  // Every miss wrote one record, every eviction removed one.
  if (host.resident_records() != records_before + r.misses - r.evictions) throw HostError("simulate: records lost");
  return r;
}

/// Replays `trace` through `policy` on a fresh RecordModel of `capacity`
/// bytes, every object `object_bytes` long, after telling the policy the
/// capacity (set_capacity: host and policy agree by construction). A
/// request for a resident object is a hit (policy.hit); otherwise a miss:
/// the record is written and admitted, then policy.evict_one(host) while
/// the records pass the capacity. That is a cache's order: a write goes in
/// and the maintenance thread evicts down to the capacity after it
/// (detail/cache/cache_host.hpp), so the policy may also let the new record go
/// at once (an admission policy's refusal).
/// Throws HostError when the policy breaks the host's contract: evicting a
/// record that is not current, evicting outside evict_one() or more than
/// once per call, or holding nothing to evict while the cache is over.
template <class P>
Result simulate(P& policy, const std::vector<std::uint64_t>& trace, std::uint64_t capacity,
                std::uint64_t object_bytes = 1) {
  check_object_fits(capacity, object_bytes);
  policy.set_capacity(capacity);
  RecordModel host(trace.empty() ? 0 : *std::max_element(trace.begin(), trace.end()) + 1);
  return simulate(policy, host, trace, capacity, object_bytes);
}

}  // namespace offheap_test
