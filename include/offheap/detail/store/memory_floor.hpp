// SPDX-License-Identifier: Apache-2.0
// The smallest Options::memory_limit_bytes under which a store of given
// options can hold a record in each shard (OffHeapStore::minimum_memory_limit,
// and the open's refusal of a limit below it).
//
// Made up, from the structures' own first mappings (each says what it
// maps first, beside the code that maps it):
//
//   per store      read counters;
//   per shard      at open: the index table for expected_entries and its
//                  spare (a limit keeps one), the free-list table, and with
//                  Durability::periodic on disk the two lists of frees
//                  waiting for a sync;
//                  with the first records: the policy's first segments
//                  (S3-FIFO: a page of each queue; LRU and W-TinyLFU: their
//                  node lists), the expiry wheel's first pages (a record
//                  with a TTL), the free-space-per-chunk table, one page of
//                  read buffers (LRU, W-TinyLFU), the removal listener's
//                  queue and its list of dead markers (a listener); and the
//                  first journal chunk: min_chunk_bytes, or the largest
//                  record rounded to pages if larger, plus a header page in
//                  a file;
//   beside them    what a journal chunk leaves unmapped under a limit
//                  (Journal::keep_beside): room for the structures above to
//                  grow with the records (as much as they map, in
//                  proportion to the chunk), and, with a listener or
//                  periodic durability, the dead markers' reserve
//                  (min_chunk_bytes + 64 KiB per shard, at most 1/8 of the
//                  limit);
//   and            1/16 of the limit for the optional structures (an
//                  S3-FIFO ghost, a W-TinyLFU sketch), which never take
//                  more (map_optional()).
//
// Rounded up to a page, and never below capacity_bytes (a cache's
// capacity may not pass its limit). A store reopened from files also maps
// its chunk files: their size comes on top.
#pragma once

#include <offheap/detail/store/checked_options.hpp>
#include <offheap/detail/expiry/wheel.hpp>
#include <offheap/detail/files/format.hpp>
#include <offheap/detail/journal/free_lists.hpp>
#include <offheap/detail/cache/hit_buffers.hpp>
#include <offheap/detail/index/index.hpp>
#include <offheap/detail/journal/location_list.hpp>
#include <offheap/detail/memory/mapped_array.hpp>
#include <offheap/detail/memory/mapped_fifo.hpp>
#include <offheap/detail/memory/os.hpp>
#include <offheap/detail/journal/record.hpp>
#include <offheap/detail/memory/thread_slots.hpp>
#include <offheap/options.hpp>

#include <algorithm>
#include <cstdint>
#include <string>

namespace offheap::detail {

/// The floor for options `o` (shards, chunk sizes, durability, listener
/// and expected_entries as a store would open with them) and a policy
/// whose eviction is `Eviction` (buffered reader hits: `buffered`), so
/// that each shard can hold one record of `largest_entry` bytes of key and
/// value with a TTL.
template <class Eviction>
std::uint64_t memory_floor(Options o, std::uint64_t largest_entry) {
  if (o.shards == 0) o.shards = default_shards();
  const std::uint64_t page = page_size();
  const bool durable = !o.path.empty();
  const bool periodic = durable && o.durability == Durability::periodic;
  const bool reports = static_cast<bool>(o.on_removal) && !o.read_only;
  const bool buffered = Eviction::reader_hits == eviction::ReaderHits::buffered;

  // Per shard, what grows with the records (the journal keeps room
  // beside its chunks for these to grow)...
  const std::uint64_t table = IndexTable::bytes_for(Index::groups_for(expected_per_shard(o)));
  const std::uint64_t lists =
      periodic ? 2 * LocationList::first_bytes() : reports && durable ? LocationList::first_bytes() : 0;
  std::uint64_t policy = 0;
  if constexpr (requires { Eviction::first_bytes(); }) policy = Eviction::first_bytes();
  const std::uint64_t growing = table + lists + policy + ExpiryWheel::first_bytes() +
                                (buffered ? HitBuffers::first_bytes() : 0) +
                                (reports ? MappedFifo<std::uint64_t>::kSegmentBytes : 0);
  // ... and what does not: the index's spare table, the free-list and
  // per-chunk tables, the first chunk.
  const std::uint64_t record = record::kHeaderBytes + record::payload_for(0, largest_entry, true);
  if (record > o.max_chunk_bytes) {
    throw Error(Errc::value_too_large, o.name + ": an entry of " + std::to_string(largest_entry) +
                                           " bytes makes a record larger than Options::max_chunk_bytes (" +
                                           std::to_string(o.max_chunk_bytes) + "): no store of these options holds it");
  }
  if (o.capacity_bytes != 0) {
    // A cache shard refuses a record past its share plus the slack
    // (Shard::make_room, with kMinRecord for a free record it may take).
    const std::uint64_t share = o.capacity_bytes / o.shards;
    if (record + record::kMinRecord > share + std::max<std::uint64_t>(share / 16, 4096)) {
      throw Error(Errc::value_too_large,
                  o.name + ": an entry of " + std::to_string(largest_entry) + " bytes passes what a cache shard holds (" +
                      std::to_string(share) + " bytes of Options::capacity_bytes, plus the slack)");
    }
  }
  const std::uint64_t chunk = std::min(round_up(std::max(o.min_chunk_bytes, record), page), o.max_chunk_bytes);
  const std::uint64_t extra = durable ? format::kChunkHeaderBytes : 0;
  const std::uint64_t per_shard = growing + table + FreeLists::table_mapped_bytes() +
                                  MappedArray<std::uint64_t>::first_bytes() + chunk + extra;
  // The last shard's first chunk keeps room for its structures to grow in
  // proportion (Journal::keep_beside: chunk / min_chunk_bytes of them).
  const auto grow = static_cast<std::uint64_t>(static_cast<double>(growing) * static_cast<double>(chunk) /
                                               static_cast<double>(std::max<std::uint64_t>(o.min_chunk_bytes, 1)));
  const std::uint64_t x = ReadCounters::mapped_bytes() + o.shards * per_shard + std::max(grow, growing);
  // The limit L must hold x, the optional structures' 1/16, and the
  // markers' reserve min(L/8, wanted): the least L that does.
  const std::uint64_t wanted = marker_reserve_wanted(o, durable);
  auto holds = [&](std::uint64_t l) { return l >= x + l / 16 + std::min(l / 8, wanted); };
  std::uint64_t l = (x + wanted) * 16 / 15 + 1;  // the reserve whole
  const std::uint64_t eighth = x * 16 / 13 + 1;  // the reserve at 1/8
  if (holds(eighth) && eighth < l) l = eighth;
  while (!holds(l)) l += page;
  return std::max(round_up(l, page), o.capacity_bytes);
}

/// Refuses (Errc::out_of_space) a limit below memory_floor(), naming it.
template <class Eviction>
void check_memory_floor(const Options& o) {
  if (o.memory_limit_bytes == 0) return;
  const std::uint64_t floor = memory_floor<Eviction>(o, 0);
  if (o.memory_limit_bytes < floor) {
    throw Error(Errc::out_of_space,
                o.name + ": Options::memory_limit_bytes (" + std::to_string(o.memory_limit_bytes) +
                    " bytes) cannot hold a record in each of the " + std::to_string(o.shards) +
                    " shards with these options: they need at least " + std::to_string(floor) +
                    " bytes (minimum_memory_limit(); fewer shards or a smaller min_chunk_bytes need less)");
  }
}

}  // namespace offheap::detail
