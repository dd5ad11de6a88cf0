// SPDX-License-Identifier: Apache-2.0
// A store's Options checked and completed before anything is opened
// (every refusal an Error(invalid_argument) naming the option), and the
// configuration each shard gets from them.
#pragma once

#include <offheap/detail/memory/os.hpp>
#include <offheap/detail/shard/shard.hpp>
#include <offheap/detail/files/store_files.hpp>
#include <offheap/error.hpp>
#include <offheap/options.hpp>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>
#include <thread>

namespace offheap::detail {

/// Four shards per hardware thread, a power of two, at most 64: two
/// writers then meet on one shard's lock once in eight puts.
inline std::uint32_t default_shards() noexcept {
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  return std::min<std::uint32_t>(64, std::bit_ceil(4 * hw));
}

/// `o` with its name and chunk sizes completed (and, for an anonymous
/// store, its shard count); `kEvicts`: the policy evicts (a cache),
/// `kLocks`: it has a writer lock.
/// Throws: Error(invalid_argument) naming the option that is wrong.
template <bool kEvicts, bool kLocks>
Options checked_options(Options o) {
  if (o.name.empty()) o.name = o.path.empty() ? "anonymous store" : o.path.string();
  if (o.shards > 1024) {
    throw Error(Errc::invalid_argument, o.name + ": Options::shards is " +
                                            std::to_string(o.shards) + "; the limit is 1024");
  }
  if (o.expected_entries > Options::kMaxExpectedEntries) {
    // 2^40 entries need tens of TiB: beyond that, the index arithmetic
    // (a double, then doubling a power of two) would overflow.
    throw Error(Errc::invalid_argument,
                o.name + ": Options::expected_entries is " +
                    std::to_string(o.expected_entries) + "; the limit is 2^40 (" +
                    std::to_string(Options::kMaxExpectedEntries) + ")");
  }
  if (kEvicts && o.capacity_bytes == 0) {
    throw Error(Errc::invalid_argument,
                o.name + ": a cache needs Options::capacity_bytes (the most bytes of records it holds)");
  }
  if (!kEvicts && o.capacity_bytes != 0) {
    throw Error(Errc::invalid_argument,
                o.name + ": Options::capacity_bytes is set but this store's policy evicts nothing "
                         "(use offheap::Cache, or a policy with an Eviction)");
  }
  if (o.path.empty() && o.read_only) {
    throw Error(Errc::invalid_argument,
                o.name + ": Options::read_only needs a file-backed store (Options::path)");
  }
  if (o.path.empty() &&
      (o.durability == Durability::periodic || o.durability == Durability::every_write)) {
    // Nothing of an anonymous store reaches a disk: a promise of records
    // on disk while it runs would not be kept. (none and on_close promise
    // nothing an anonymous store breaks: it keeps nothing past its life.)
    throw Error(Errc::invalid_argument,
                o.name + ": Options::durability " + std::string(to_string(o.durability)) +
                    " needs a file-backed store (Options::path); an anonymous store keeps "
                    "nothing on disk (use none or on_close)");
  }
  if (o.sync_interval < std::chrono::milliseconds(1) || o.sync_interval > std::chrono::hours(1)) {
    throw Error(Errc::invalid_argument, o.name + ": Options::sync_interval must be 1 ms - 1 h");
  }
  if (!kLocks && !o.path.empty() && !o.read_only && o.durability == Durability::periodic &&
      o.background_maintenance) {
    // The maintenance thread's syncs free the records they made obsolete:
    // without a writer lock it would be a second writer.
    throw Error(Errc::invalid_argument,
                o.name + ": Durability::periodic with background_maintenance needs a policy "
                         "with a writer lock; with a single-writer policy set "
                         "background_maintenance = false and call maintain() from the writing thread");
  }
  if (!kLocks && o.on_removal && !o.read_only && o.background_maintenance) {
    // The maintenance thread calls the listener and frees the records:
    // without a writer lock it would be a second writer.
    throw Error(Errc::invalid_argument,
                o.name + ": Options::on_removal with background_maintenance needs a policy with a "
                         "writer lock; with a single-writer policy set background_maintenance = false "
                         "and call maintain() from the writing thread");
  }
  if (o.default_ttl < std::chrono::milliseconds(0) || o.default_ttl > std::chrono::hours(24 * 365 * 100)) {
    throw Error(Errc::invalid_argument,
                o.name + ": Options::default_ttl must be 0 (no expiry) to 100 years");
  }
  if (!kLocks && o.default_ttl.count() != 0 && !o.read_only && o.background_maintenance) {
    // The maintenance thread removes expired records: without a writer
    // lock it would be a second writer.
    throw Error(Errc::invalid_argument,
                o.name + ": Options::default_ttl with background_maintenance needs a policy with a "
                         "writer lock; with a single-writer policy set background_maintenance = false "
                         "and call maintain() from the writing thread");
  }
  if (!kLocks && kEvicts && !o.read_only && o.background_maintenance) {
    // The maintenance thread evicts: without a writer lock it would be a
    // second writer.
    throw Error(Errc::invalid_argument,
                o.name + ": a cache with background_maintenance needs a policy with a writer "
                         "lock; with a single-writer policy set background_maintenance = false "
                         "and call maintain() from the writing thread");
  }
  // A file-backed store's shard count comes from its files when it exists
  // (open_files); a new one takes the default then.
  if (o.shards == 0 && o.path.empty()) o.shards = default_shards();
  const std::uint64_t page = page_size();
  o.min_chunk_bytes = round_up(o.min_chunk_bytes, page);
  o.max_chunk_bytes = round_up(o.max_chunk_bytes, page);
  if (o.min_chunk_bytes < 4096 || o.min_chunk_bytes > o.max_chunk_bytes ||
      o.max_chunk_bytes > (std::uint64_t{1} << 48)) {
    throw Error(Errc::invalid_argument,
                o.name + ": chunk sizes must satisfy 4 KiB <= min_chunk_bytes (" +
                    std::to_string(o.min_chunk_bytes) + ") <= max_chunk_bytes (" +
                    std::to_string(o.max_chunk_bytes) + ") <= 2^48");
  }
  if (!(o.compaction_factor == 0 || (o.compaction_factor >= 1.1 && o.compaction_factor <= 100))) {
    throw Error(Errc::invalid_argument,
                o.name + ": compaction_factor must be 0 (never) or within 1.1 - 100 (it is " +
                    std::to_string(o.compaction_factor) + ")");
  }
  if (o.memory_limit_bytes != 0 && o.capacity_bytes > o.memory_limit_bytes) {
    // The policy's structures are sized from the capacity (a W-TinyLFU
    // sketch, an S3-FIFO ghost): they alone could pass the limit.
    throw Error(Errc::invalid_argument,
                o.name + ": capacity_bytes (" + std::to_string(o.capacity_bytes) +
                    ") is more than memory_limit_bytes (" + std::to_string(o.memory_limit_bytes) +
                    "), which counts the records and everything else the cache maps");
  }
  return o;
}

/// Removals that free their space only after a sync or a report need a
/// dead marker (and list entries) first: under a memory limit, record
/// chunks leave room for a marker chunk and a few list pages per shard,
/// at most an eighth of the limit. The room wanted before that eighth: 0
/// where removals free at once.
inline std::uint64_t marker_reserve_wanted(const Options& o, bool durable) noexcept {
  const bool reports = static_cast<bool>(o.on_removal) && !o.read_only;
  const bool periodic = durable && o.durability == Durability::periodic;
  if (!reports && !periodic) return 0;
  return (o.min_chunk_bytes + (std::uint64_t{64} << 10)) * o.shards;
}

/// Keys spread over shards binomially: room for four standard deviations
/// above the mean, so that a store filled to expected_entries never grows.
inline std::uint64_t expected_per_shard(const Options& o) noexcept {
  if (o.expected_entries == 0) return 0;
  const double per = static_cast<double>(o.expected_entries) / o.shards;
  return static_cast<std::uint64_t>(per + 4 * std::sqrt(per) + 16);
}

inline ShardConfig shard_config(const Options& o, StoreFiles* files) {
  ShardConfig c;
  c.journal.min_chunk_bytes = o.min_chunk_bytes;
  c.journal.max_chunk_bytes = o.max_chunk_bytes;
  if (files != nullptr) {
    c.journal.files = &files->backing;
    c.durable = true;
    c.verify_reads = o.verify_checksums;
    c.sync_each_write = o.durability == Durability::every_write;
    c.defer_frees = o.durability == Durability::periodic;
    c.store_id = files->meta.store_id;
    c.sync_error = &files->sync_error;
  }
  c.clock = o.clock;
  c.compaction_factor = o.compaction_factor;
  c.report_removals = static_cast<bool>(o.on_removal) && !o.read_only;
  if (o.memory_limit_bytes != 0) {
    c.journal.limit_reserve = std::min(o.memory_limit_bytes / 8, marker_reserve_wanted(o, c.durable));
  }
  c.expected_entries = expected_per_shard(o);
  return c;
}

}  // namespace offheap::detail
