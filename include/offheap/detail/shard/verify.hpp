// SPDX-License-Identifier: Apache-2.0
// Shard::verify(): the writer's invariants checked record by record, for
// tests and debugging (OffHeapStore::verify()). O(journal), under the
// writer lock. Every length read from a record is bounds-checked before it
// is followed, so a damaged store is reported, never crashed on.
#pragma once

#include <offheap/detail/index/index.hpp>
#include <offheap/detail/journal/free_lists.hpp>
#include <offheap/detail/journal/record.hpp>

namespace offheap::detail {

/// Shard::verify() (S: the shard, which lets it in and forwards to it): the
/// writer's invariants record by record; no state of its own.
template <class S>
class ShardVerify {
 public:
  static std::string verify(const S& sh);
  static std::string verify_index(const S& sh);
  static bool finds(const S& sh, std::string_view key, Location loc);
};

/// Walks every chunk record by record and checks the writer's invariants:
/// lengths stay inside chunks, prev-free bits and footers match the records
/// before them, free records add up to the free lists' totals, live records
/// to the index and the counters. Returns "" or the first violation.
/// O(journal); takes the lock.
template <class S>
std::string ShardVerify<S>::verify(const S& sh) {
  // No report() batch in flight: its records are neither queued nor freed.
  const std::lock_guard<std::mutex> reporting(sh.removals_.mutex());
  std::lock_guard<typename S::Lock> guard(sh.lock_);
  if (!sh.normalized_) return verify_index(sh);
  std::uint64_t free_records = 0, free_bytes = 0, live = 0, live_bytes = 0, pending_found = 0;
  // Records waiting for syncs (periodic): old live records and dead markers;
  // and removed records waiting for their report (with their markers).
  std::vector<std::uint64_t> pending;
  sh.durability_.for_each_waiting([&](Location loc) { pending.push_back(loc.raw()); });
  std::uint64_t retired_bytes = 0;
  std::string bad_retired;
  sh.removals_.for_each([&](const typename S::Retired& r) {
    const Location loc = r.loc();
    pending.push_back(loc.raw());
    if (!Location::from_raw(r.marker).is_none()) pending.push_back(r.marker);
    std::uint64_t avail = 0;
    const std::byte* rec = sh.journal_.resolve(loc, record::kMinRecord, avail);
    if (rec == nullptr) {
      bad_retired = "a removed record waiting for its report lies outside the journal";
      return;
    }
    const record::Meta m = record::read_meta(rec);
    if (m.state() != record::State::live) bad_retired = "a removed record waiting for its report is not whole";
    retired_bytes += record::kHeaderBytes + m.capacity();
  });
  if (!bad_retired.empty()) return bad_retired;
  if (sh.removals_.queued() != sh.removals_.retired_records() || retired_bytes != sh.removals_.retired_bytes()) {
    return "removed records waiting for their report (" + std::to_string(sh.removals_.queued()) + ", " +
           std::to_string(retired_bytes) + " bytes) differ from the counters (" +
           std::to_string(sh.removals_.retired_records()) + ", " + std::to_string(sh.removals_.retired_bytes()) + " bytes)";
  }
  std::sort(pending.begin(), pending.end());
  auto is_pending = [&](Location l) {
    return std::binary_search(pending.begin(), pending.end(), l.raw());
  };
  for (std::uint32_t c = 0; c < sh.journal_.chunks(); ++c) {
    if (sh.journal_.emptied(c)) {
      // Compaction emptied it: free pieces on no list, to the chunk's end
      // (the layout an open checks before it trusts the mark).
      if (!sh.journal_.emptied_layout(c)) {
        return "chunk " + std::to_string(c) + ": an emptied chunk holds something other than its free pieces";
      }
      if (c >= sh.journal_.tail_chunk()) return "chunk " + std::to_string(c) + ": emptied, at or past the tail";
      continue;
    }
    bool prev_is_free = false;
    std::uint64_t prev_cap = 0;
    std::uint64_t chunk_free = 0;  // headers included, as FreeLists::chunk_free() counts
    for (Location loc = Location::make(c, 0);;) {
      const std::byte* rec = sh.journal_.record_after(loc, 0);
      if (rec == nullptr || record::read_stamp(rec) == 0) break;
      const record::Meta m = record::read_meta(rec);
      const std::string where = "chunk " + std::to_string(c) + " offset " +
                                std::to_string(loc.offset()) + ": ";
      if (m.state() == record::State::none) return where + "no record";
      if (m.state() == record::State::free && !FreeLists::valid_capacity(m.capacity())) {
        return where + "free record of an impossible capacity";
      }
      const std::uint64_t next = loc.offset() + record::kHeaderBytes + m.capacity();
      if (next > sh.journal_.chunk_size(c)) return where + "record runs past its chunk";
      if (m.prev_free() != prev_is_free) return where + "prev-free bit is wrong";
      if (prev_is_free &&
          record::capacity_from_footer(load_relaxed(word_at(rec - 8))) != prev_cap) {
        return where + "the footer before it is wrong";
      }
      if (m.state() == record::State::free) {
        ++free_records;
        free_bytes += m.capacity();
        chunk_free += record::kHeaderBytes + m.capacity();
      } else if (m.state() == record::State::dead ||
                 (m.state() == record::State::live && is_pending(loc))) {
        if (!is_pending(loc)) return where + "dead record not waiting to be freed";
        ++pending_found;
      } else {
        ++live;
        live_bytes += record::kHeaderBytes + m.capacity();
        const std::string_view key(reinterpret_cast<const char*>(rec + record::kHeaderBytes),
                                   m.key_len);
        if (!finds(sh, key, loc)) return where + "live record not indexed";
      }
      prev_is_free = m.state() == record::State::free;
      prev_cap = m.capacity();
      loc = Location::make(c, next);
    }
    if (sh.free_.chunks_known() && sh.free_.chunk_free(c) != chunk_free) {
      return "chunk " + std::to_string(c) + ": its free records hold " + std::to_string(chunk_free) +
             " bytes; the free lists' count per chunk says " + std::to_string(sh.free_.chunk_free(c));
    }
  }
  if (free_records != sh.free_.total_records() || free_bytes != sh.free_.total_bytes()) {
    return "free records in the journal (" + std::to_string(free_records) + ", " +
           std::to_string(free_bytes) + " bytes) differ from the free lists (" +
           std::to_string(sh.free_.total_records()) + ", " + std::to_string(sh.free_.total_bytes()) +
           " bytes)";
  }
  if (pending_found != pending.size()) {
    return "records waiting to be freed in the journal (" + std::to_string(pending_found) +
           ") differ from the deferred lists and the removal listener's queue (" +
           std::to_string(pending.size()) + ")";
  }
  if (live != sh.index_.size() || live != sh.size() || live_bytes != sh.live_bytes_) {
    return "live records in the journal (" + std::to_string(live) + ", " +
           std::to_string(live_bytes) + " bytes) differ from the index (" +
           std::to_string(sh.index_.size()) + ") or the counters (" + std::to_string(sh.size()) +
           ", " + std::to_string(sh.live_bytes_) + " bytes)";
  }
  std::string policy = sh.verify_policy();
  if (!policy.empty()) return policy;
  return sh.expiry_.verify(sh);
}

/// verify() after a read-only recovery, which leaves the free space as it
/// found it: every indexed record is live, whole, intact and found by its
/// key, and they add up to the counters.
template <class S>
std::string ShardVerify<S>::verify_index(const S& sh) {
  std::uint64_t live = 0, live_bytes = 0;
  std::string fault;
  // Both tables of a migration (for_each_full).
  sh.index_.for_each_full([&](std::uint64_t, Location loc) {
    if (!fault.empty()) return;
    const std::string where = "chunk " + std::to_string(loc.chunk()) + " offset " +
                              std::to_string(loc.offset()) + ": ";
    std::uint64_t avail = 0;
    const std::byte* rec = sh.journal_.resolve(loc, record::kMinRecord, avail);
    if (rec == nullptr) {
      fault = where + "indexed location outside the chunks";
      return;
    }
    const record::Meta m = record::read_meta(rec);
    if (m.state() != record::State::live || record::kHeaderBytes + m.capacity() > avail) {
      fault = where + "indexed record not live or not whole";
      return;
    }
    if (sh.durable_ && record::checksum_in_place(sh.crc_seed_, rec, loc, load_relaxed(word_at(rec)),
                                              m.encode(), avail) != record::stored_checksum(rec)) {
      fault = where + "indexed record fails its checksum";
      return;
    }
    const std::string_view key(reinterpret_cast<const char*>(rec + record::kHeaderBytes), m.key_len);
    if (!finds(sh, key, loc)) {
      fault = where + "indexed record not found by its key";
      return;
    }
    ++live;
    live_bytes += record::kHeaderBytes + m.capacity();
  });
  if (!fault.empty()) return fault;
  if (live != sh.size() || live_bytes != sh.live_bytes_) return "indexed records differ from the counters";
  return {};
}

/// Whether a lookup of `key` through the index leads to `loc`; every
/// candidate record is bounds-checked before its key is compared (verify()
/// also runs on damaged stores).
template <class S>
bool ShardVerify<S>::finds(const S& sh, std::string_view key, Location loc) {
  const Index::Found f = sh.index_.find(sh.hash_(key), [&](Location l) {
    std::uint64_t avail = 0;
    const std::byte* r = sh.journal_.resolve(l, record::kMinRecord, avail);
    if (r == nullptr) return false;
    const record::Meta m = record::read_meta(r);
    return m.key_len == key.size() && record::kHeaderBytes + key.size() <= avail &&
           equal_bytes(reinterpret_cast<const char*>(r + record::kHeaderBytes), key.data(),
                       key.size());
  });
  return f.found && sh.index_.location(f.slot) == loc;
}

}  // namespace offheap::detail
