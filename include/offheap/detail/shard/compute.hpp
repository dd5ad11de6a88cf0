// SPDX-License-Identifier: Apache-2.0
// A shard's atomic read-modify-write (Shard::compute): the key's current
// value and the decision on it, taken and applied under one hold of the
// writer lock, so that no other write of the key comes in between. And the
// batches of writes and removals that take the lock once for many keys.
#pragma once

#include <offheap/detail/shard/shard.hpp>
#include <offheap/value_type.hpp>

#include <cstdint>
#include <string_view>

namespace offheap::detail {

template <class P>
template <class Decide>
Computed Shard<P>::compute(std::string_view key, std::uint64_t h, std::uint64_t deadline, Decide& decide) {
  const WriteLock guard(*this);
  std::uint64_t rounds = 0;
  bool evicted_for_wheel = false;
  ComputeDecision d;
  bool decided = false;
  const OwnKey own(*this);
  KeySeen& seen = own.seen();  // the look decide() was given, for the write that follows
  for (;;) {
    try {
      if (!decided) {
        ComputeCurrent cur;
        (void)look_at_key(key, h, seen);
        // A record whose deadline has passed is absent (as for write()).
        if (seen.present()) {
          const std::byte* rec = journal_.at(Location::from_raw(seen.loc));
          const record::Meta m = record::read_meta(rec);
          cur.present = true;
          cur.value = std::string_view(record::value_bytes(rec, m.key_len), m.value_len);
          cur.type = m.type;
          cur.stamp = record::read_stamp(rec);
        }
        d = decide(cur);  // may throw: nothing has changed
        decided = true;
      }
      // Room the limit refuses below is made by evictions under this same
      // hold of the lock: the decision stands (it was taken on the key as
      // it was). An eviction of the key's own record made for this write
      // is reported as the write's own removal (own_key_done()).
      switch (d.action) {
        case ComputeDecision::Action::keep:
          return Computed::unchanged;
        case ComputeDecision::Action::remove:
          if (!seen.present()) return Computed::unchanged;
          if (erase_locked(key, h, nullptr)) return Computed::removed;
          if (!seen.evicted) return Computed::unchanged;
          own_key_done(seen, RemovalCause::explicit_remove);  // (its marker's room evicted it)
          return Computed::removed;
        case ComputeDecision::Action::write:
          (void)write_locked(key, h, d.value, d.type, Mode::upsert, {}, deadline, seen);
          return seen.present() ? Computed::updated : Computed::inserted;
      }
      return Computed::unchanged;
    } catch (const LimitReached& e) {
      const std::uint64_t need = d.action == ComputeDecision::Action::write
                                     ? record::payload_for(key.size(), d.value.size(), deadline != 0)
                                     : record::payload_for(key.size(), 0);
      if (!room_for_retry(e, need, rounds, evicted_for_wheel)) throw;
    }
  }
}

template <class P>
template <class Entry>
void Shard<P>::write_batch(std::size_t n, std::size_t& done, std::size_t& inserted, std::uint64_t deadline,
                           Entry&& entry) {
  const WriteLock guard(*this);
  std::uint64_t rounds = 0;
  bool evicted_for_wheel = false;
  const OwnKey own(*this);
  KeySeen& seen = own.seen();  // the current entry's look at its key (kept over its tries)
  while (done < n) {
    const auto [key, h, value] = entry(done);
    try {
      inserted += write_locked(key, h, value, type_tag::bytes, Mode::upsert, {}, deadline, seen) ==
                  Computed::inserted;
      ++done;
      own.renew();
      rounds = 0;
      evicted_for_wheel = false;
    } catch (const LimitReached& e) {
      if (!room_for_retry(e, record::payload_for(key.size(), value.size(), deadline != 0), rounds,
                          evicted_for_wheel)) {
        throw;
      }
    }
  }
}

template <class P>
template <class Key>
void Shard<P>::erase_batch(std::size_t n, std::size_t& done, std::size_t& removed, Key&& key) {
  const WriteLock guard(*this);
  while (done < n) {
    const auto [k, h] = key(done);
    removed += erase_locked(k, h, nullptr);  // may throw (a marker's room): done says where
    ++done;
  }
}

}  // namespace offheap::detail
