// SPDX-License-Identifier: Apache-2.0
// What a store reports about itself (OffHeapStore::stats()).
//
// Thread safety: stats() may be called from any thread beside readers and
// writers (not from inside a compute() function of the same store, where
// it throws Errc::invalid_argument). It takes each shard's writer lock briefly, one shard at
// a time, so the figures of different shards are of slightly different
// moments. Memory: Stats is a copy, with its own strings and vectors (it
// allocates: keep it off hot paths). gets, hits and misses are counted only
// with Options::record_stats.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace offheap {

/// Free records of one size class.
struct FreeClassStats {
  std::uint64_t min_capacity = 0;  ///< smallest payload capacity the class holds
  std::uint64_t records = 0;
  std::uint64_t bytes = 0;  ///< payload bytes
};

struct Stats {
  std::string name;
  // Operations since the store was created (file-backed: puts and removes
  // are carried over by a clean close and restart from 0 after a rebuild;
  // gets since this open). gets = hits + misses, counting every lookup:
  // get, read, view, contains, get_value; counted only when
  // Options::record_stats is set (else 0: readers write nothing).
  std::uint64_t puts = 0;     ///< records written: put, put_value, and the successful
                              ///< put_if_absent and replace calls
  std::uint64_t gets = 0;
  std::uint64_t hits = 0;
  std::uint64_t misses = 0;
  std::uint64_t removes = 0;  ///< records removed by remove()
  // Removals by cause (each also counted once when the removal listener,
  // Options::on_removal, has been told of it): removes (explicit_remove),
  // removals_replaced, evictions (in the cache section).
  std::uint64_t removals_replaced = 0;    ///< records a write replaced with a new value
  std::uint64_t expirations = 0;          ///< records removed because their deadline passed
                                          ///< (by the timing wheel, or by a write or remove
                                          ///< that met them)
  std::uint64_t expiry_entries = 0;       ///< entries in the timing wheels (records with a
                                          ///< deadline, and stale entries not yet dropped)
  std::uint64_t removals_reported = 0;    ///< listener calls made (errors included)
  std::uint64_t removals_pending = 0;     ///< removed records queued for the listener: its backlog
  std::uint64_t removals_unreported = 0;  ///< queued removals that clear() dropped unreported
  std::uint64_t listener_errors = 0;      ///< listener calls that threw
  std::uint64_t retired_records = 0;       ///< removed records kept whole for the listener
                                           ///< (queued or being reported), not yet free
  std::uint64_t retired_record_bytes = 0;  ///< their journal bytes (not in live_bytes)

  // Contents.
  std::uint64_t records = 0;          ///< live records (== size())
  std::uint64_t key_value_bytes = 0;  ///< bytes of the keys and values of live records
  std::uint64_t live_bytes = 0;       ///< journal bytes of live records: headers,
                                      ///< keys, values, padding to 8 bytes, and
                                      ///< the spare bytes of a free record too
                                      ///< small to split that a record took
                                      ///< whole (0-32 bytes a record)
  std::uint64_t free_records = 0;
  std::uint64_t free_bytes = 0;             ///< payload bytes of free records
  std::vector<FreeClassStats> free_classes;  ///< non-empty classes, smallest first

  // Memory.
  /// journal bytes in use by records, live or free, plus the end of each
  /// chunk the tail left that was too short for a record (under 40 bytes);
  /// emptied chunks not counted
  std::uint64_t journal_bytes = 0;
  std::uint64_t mapped_bytes = 0;   ///< everything mapped: chunks, index, free-list
                                    ///< tables, counters
  std::uint64_t chunks = 0;
  /// Bytes of pages handed back to the OS while the store ran (inside free
  /// records and past the journal's tail; clear()'s are not counted): they
  /// stay mapped (in mapped_bytes) but cost no memory until written again.
  /// A free record merged into a larger one is handed back again with it,
  /// and counted again.
  std::uint64_t released_bytes = 0;
  // Compaction (Options::compaction_factor). An emptied chunk keeps its
  // address range (readers may still hold locations in it) without pages
  // or, file-backed, disk blocks: counted here, not in mapped_bytes (nor
  // in journal_bytes or chunks' memory), until a writer takes it back.
  std::uint64_t emptied_chunks = 0;   ///< chunks emptied now
  std::uint64_t emptied_bytes = 0;    ///< their address space
  std::uint64_t compacted_records = 0;  ///< records compaction moved, ever
  std::uint64_t compacted_bytes = 0;    ///< their journal bytes
  std::uint64_t chunks_emptied = 0;     ///< times compaction emptied a chunk
  std::uint64_t chunks_revived = 0;     ///< times a writer took an emptied chunk back
  /// Options::memory_limit_bytes (0: none), and what counts against it:
  /// every byte mapped, emptied chunks included (mapped_bytes +
  /// emptied_bytes, read at one moment).
  std::uint64_t memory_limit_bytes = 0;
  std::uint64_t memory_mapped_bytes = 0;
  std::uint64_t release_pending = 0;  ///< free records queued to give their pages back
  std::uint64_t release_dropped = 0;  ///< queued ones dropped (the queue full: no rounds ran;
                                      ///< or the free space fell under an eighth of the journal)

  // Index.
  std::uint64_t index_capacity = 0;  ///< slots
  std::uint64_t index_tombstones = 0;
  double index_load = 0;  ///< (live + tombstones) / capacity
  // A table past 448 slots grows by migration: the new table is published
  // beside it and every write moves a few of its groups (the maintenance
  // thread the rest, once writes stop), instead of one rebuild that every
  // writer of the shard would wait for.
  std::uint64_t index_migrations = 0;         ///< begun since the store was opened
  std::uint64_t index_migrating = 0;          ///< shards whose index is migrating now
  std::uint64_t index_migrating_entries = 0;  ///< entries still in the tables they drain

  // Index tables that growth or clear() replaced: their address ranges stay
  // mapped for readers that may still be inside (their pages go back to the
  // OS once no for_each walk is in progress) and are reused by later tables
  // of their size. Bounded: at most four times the current tables' bytes,
  // plus what was replaced at once while for_each walks held it.
  std::uint64_t retired_tables = 0;
  std::uint64_t retired_bytes = 0;  ///< address space, included in mapped_bytes

  std::uint32_t shards = 0;

  // Caches (zero in a store).
  std::uint64_t capacity_bytes = 0;   ///< Options::capacity_bytes (compare live_bytes)
  std::uint64_t evictions = 0;        ///< records the policy evicted
  /// of evictions: by writers that Options::memory_limit_bytes refused a
  /// new chunk
  std::uint64_t limit_evictions = 0;
  /// Durability::periodic, at memory_limit_bytes: evictions of settled
  /// records (written before the sync before last) made without a dead
  /// marker, for want of room for one: a power loss may bring such a
  /// record back (its key's latest value), never an older one.
  std::uint64_t markerless_evictions = 0;
  std::uint64_t policy_entries = 0;   ///< handles the policy holds (stale ones included)
  std::uint64_t policy_small_bytes = 0;      ///< S3-FIFO: small queue; W-TinyLFU: window
  std::uint64_t policy_main_bytes = 0;       ///< S3-FIFO: main queue; W-TinyLFU: main
  std::uint64_t policy_protected_bytes = 0;  ///< W-TinyLFU: protected segment
  std::uint64_t policy_ghost_entries = 0;    ///< S3-FIFO: hashes in the ghost
  std::uint64_t policy_window_target = 0;    ///< W-TinyLFU: the climber's window, bytes
  std::uint64_t policy_sketch_resets = 0;    ///< W-TinyLFU
  // Lru, WTinyLfu: readers' hits go to the policy through per-thread rings
  // (lossy): those drained into it, and those dropped because a reader's
  // ring was full (a maintenance thread drains the rings every round; with
  // it, readers never drain them themselves).
  std::uint64_t policy_hits_applied = 0;
  std::uint64_t policy_hits_dropped = 0;
  std::uint64_t policy_mapped_bytes = 0;     ///< the policy's own structures, in mapped_bytes

  // The maintenance thread (Options::background_maintenance: every store
  // with a writer lock; a single-writer policy's only with what it is
  // allowed). Its other backlog is removals_pending.
  bool maintenance_running = false;        ///< started and not stopped by a failure
  std::uint64_t maintenance_rounds = 0;    ///< rounds run since the open
  double maintenance_lag_seconds = 0;      ///< since its last round ended: at most about
                                           ///< 16 ms while it keeps up (a cache's thread
                                           ///< backs off to a round every 16 ms when idle;
                                           ///< a periodic store's runs every sync_interval;
                                           ///< another store's sleeps 10 s at a time, woken
                                           ///< for deadlines),
                                           ///< growing while a round is slow (a listener)
  std::uint64_t maintenance_backlog_bytes = 0;  ///< caches: live bytes above each shard's share
                                                ///< of capacity_bytes, summed: still to evict (up
                                                ///< to about a record a shard while it is being
                                                ///< written; 0 a round or two after writes pause)

  // Files (file-backed stores).
  std::uint64_t corrupt_records = 0;  ///< damaged records met: dropped by recovery (a
                                      ///< checksum that fails where a record was due,
                                      ///< e.g. a write torn by a crash), refused by a
                                      ///< read, or passed over and dropped from the index
  bool rebuilt = false;  ///< the open scanned the records to rebuild the index (the last
                         ///< close was not clean, or its state files failed their checks)
  std::uint64_t superseded_records = 0;  ///< recovery: older records of a key found beside
                                         ///< a newer one (a crash during an update), freed
  double open_seconds = 0;  ///< how long the open took (files: mapping, loading or rebuilding)
  std::uint64_t deferred_records = 0;  ///< Durability::periodic: old records of updates kept
                                       ///< whole until the next sync makes the new ones durable
};

}  // namespace offheap
