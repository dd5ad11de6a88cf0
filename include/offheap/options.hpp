// SPDX-License-Identifier: Apache-2.0
// What a user configures when creating a store: Options (where the store
// lives, durability, a cache's capacity, shards, chunk sizes, compaction,
// the memory limit, expiry's default and clock, the removal listener) and
// Durability. The constructor checks every field and refuses one out of
// range, or one that does not apply, with Errc::invalid_argument and a
// message naming the field. Options is a plain value: copy it freely; a
// store keeps its own copy (OffHeapStore::options()). Nothing here hands
// out memory. Options::clock is not owned and must outlive the store.
//
// Options that do not apply. An anonymous store (empty path) refuses
// Durability::periodic and every_write (nothing of it reaches a disk: those
// promises could not be kept) and read_only; none and on_close make no
// difference to it, nor does verify_checksums (its records carry no
// checksums). A policy without a writer lock (SingleWriterPolicy) refuses
// background_maintenance together with anything that needs the thread
// (periodic files, on_removal, default_ttl, eviction): the thread would be
// a second writer; its program calls maintain() from the writing thread.
//
// Files. A file-backed store is a directory: `meta` (magic, format
// version, policy, hash seed, shard count, clean flag), one file per
// journal chunk per shard (`s0003-c00012.chunk`: a 4 KiB header, then the
// records exactly as in memory, reserved whole with posix_fallocate, so
// that a full disk is an Errc::out_of_space from put, never a SIGBUS) and,
// after a clean close only, one `s0003.state` per shard (counters, free
// lists and the index table, which the next open maps copy-on-write
// instead of scanning). The directory is locked (flock): one writable
// store at a time in any process, or any number of read-only ones; a
// second open gets Errc::locked. flock does not lock across NFS: keep the
// files local.
//
// Durability. Records live in shared file mappings, so a process crash
// (SIGKILL included) loses no completed write in any mode; the modes say
// what survives a power loss:
//
//   mode          a write returns     survives a power loss          clean close
//   none          in memory           nothing promised until sync()  no: every open rebuilds
//   on_close      in memory           what sync() or close() wrote,  yes
//                                     unless overwritten or removed
//                                     since
//   periodic      in memory           what the last sync wrote       yes
//   every_write   record on disk      every completed write          yes
//                 (msync)
//
// sync() is a durability point in every mode, also while another thread
// (the maintenance thread) syncs: syncs of a shard run one at a time, so
// none returns before what was written before it is on disk. In periodic
// and every_write an update's old record is freed (its space reused) only
// once the new one is durable, so a power loss finds one or the other; in
// periodic a removal leaves a checksummed dead marker, which outranks the
// key's older records on disk and is freed two syncs later (only a cache at
// memory_limit_bytes with no room for one evicts a record without it, when
// every older record of its key is free on disk:
// Stats::markerless_evictions). In on_close and none the old record is
// freed at once, so a key updated after the last sync can vanish in a
// power loss (never a wrong value: the torn record fails its checksum). A
// durable removal stays removed whatever mode the store is reopened in. After
// the first failed msync the store refuses writes (Errc::io_error) until it
// is reopened, since a retried sync can falsely succeed.
// tests/power_loss_test.cpp builds crash images from exactly the ranges the
// library msynced (never the page cache), plus a random subset of the pages
// written after, some torn mid-page, and checks what each mode promises.
//
// clear() on a file-backed store keeps the files' size for reuse. A crash
// inside it leaves each shard untouched or empty: it first stores a clear
// mark in the shard's first chunk header, and an open that finds the mark
// finishes the clear (a read-only open reads the shard as empty). In
// periodic and every_write each step is on disk before the next (n + 2
// msyncs for n chunks), so a power loss also finds every shard untouched or
// empty; in on_close and none it may leave a shard partly cleared (records
// of the time before it, never a removed key back).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include <offheap/expiry.hpp>
#include <offheap/removal.hpp>

namespace offheap {

/// When a file-backed store forces its records to disk. A process crash
/// (even SIGKILL) loses no completed write in any mode: records live in
/// shared file mappings, which the kernel keeps. These modes are about the
/// machine: what survives a power loss or a kernel crash.
enum class Durability : std::uint8_t {
  /// Never waits for the disk, not even at close: the OS writes back when it
  /// likes. A close persists nothing for a fast reopen, so every open scans
  /// the records (rebuild). sync() still works. For scratch stores and caches.
  none,
  /// close() (and the destructor) writes everything and the index for a
  /// fast reopen; sync() is the only other durability point.
  on_close,
  /// As on_close, and the maintenance thread syncs every sync_interval.
  periodic,
  /// Every write returns after its record is on disk (msync of its pages);
  /// space freed by an update is reused only once the new record is durable.
  every_write,
};

constexpr const char* to_string(Durability d) noexcept {
  switch (d) {
    case Durability::none: return "none";
    case Durability::on_close: return "on_close";
    case Durability::periodic: return "periodic";
    case Durability::every_write: return "every_write";
  }
  return "unknown";
}

struct Options {
  /// Names the store in error messages and Stats. Empty: the path, or
  /// "anonymous store".
  std::string name;

  /// Empty: the store lives in anonymous memory and goes with the object.
  /// Else a directory that holds the store's files: created (with the
  /// store) if missing, reopened with every record if it holds a store.
  /// Its parent must exist. A directory that holds other files and no
  /// store is refused (Errc::invalid_argument). One writable store object
  /// at a time, in any process (Errc::locked).
  std::filesystem::path path;

  /// File-backed stores: map the files read-only and refuse every write
  /// with Errc::read_only. Several read-only opens may share a store, but
  /// not with a writable one. The store must exist.
  bool read_only = false;

  /// File-backed stores: when records are forced to disk (see Durability).
  /// An anonymous store refuses periodic and every_write
  /// (Errc::invalid_argument): nothing of it reaches a disk; none and
  /// on_close make no difference to it.
  Durability durability = Durability::on_close;

  /// Durability::periodic: the interval between the maintenance thread's
  /// syncs. Range 1 ms - 1 h.
  std::chrono::milliseconds sync_interval{1000};

  /// true: a thread per store runs maintenance (expiry, a cache's
  /// evictions, the removal listener's reports, periodic syncs, memory back
  /// to the OS, compaction). false: the program calls maintain(), which then
  /// also syncs when the interval has passed. A policy without a writer lock
  /// (SingleWriterPolicy) refuses true (Errc::invalid_argument) when the
  /// thread would have work that writes: Durability::periodic on disk,
  /// on_removal, default_ttl, or eviction. The thread would be a second
  /// writer; its one writer calls maintain() instead.
  bool background_maintenance = true;

  /// File-backed stores: check each record's CRC32C on every read, so that
  /// a record damaged on disk is reported (Errc::corrupt_file) instead of
  /// returned. Costs about one pass over the key and value per read.
  /// Anonymous stores compute and check no checksums (their memory is
  /// never read back from a disk) and accept either value, with no effect.
  bool verify_checksums = true;

  /// Count hits and misses for stats() (as Caffeine's recordStats()): each
  /// lookup then stores to a counter line of its thread's. Off by default:
  /// a read writes nothing, and stats() reports gets, hits and misses as 0.
  bool record_stats = false;

  /// Caches (a policy with eviction, e.g. offheap::Cache): the most bytes of
  /// records the cache holds, counted as Stats::live_bytes counts them (each
  /// record's 24-byte header, key, value and padding to 8 bytes, plus up to
  /// 32 spare bytes when it took a free record too small to split), split
  /// evenly among the shards. A write to a shard that earlier writes left
  /// past its share evicts from that shard first, by the policy, records
  /// of up to twice its own bytes (bounded work per write: a cache at its
  /// capacity evicts about a record per write of records alike, and holds
  /// up to a record more than its share between writes); the maintenance
  /// thread (or maintain()) evicts the rest down to the share: when maintain() returns
  /// (no other thread writing), live bytes are at most capacity_bytes,
  /// compaction's moves included. Past a slack of 1/16 (at least 4 KiB
  /// per shard) a write evicts as much as its record needs, so live bytes
  /// never pass capacity_bytes * 17/16 (+ 4 KiB per shard). A write that
  /// replaces a value counts the old record as leaving: one that does not
  /// grow it evicts nothing. The index,
  /// free space and the policy's structures are not counted (Stats shows
  /// them). Required (> 0) for a cache; a store (no eviction) refuses
  /// anything but 0 (Errc::invalid_argument).
  std::uint64_t capacity_bytes = 0;

  /// Told of every record that leaves the store (remove, replacement,
  /// eviction), with its key and value, from the maintenance thread (see
  /// RemovalListener for the contract). Empty: nobody is told, and a
  /// record's space is reused at once. Set: a removed record stays whole
  /// (retired, Stats::retired_records) until the listener has seen it, so
  /// memory held by retired records grows while the listener falls behind
  /// (Stats::removals_pending). Updates then write a new record instead of
  /// rewriting one in place. File-backed stores: a removal also writes a
  /// small dead marker (so that a crash cannot bring the record back while
  /// it waits), and removals still waiting at a crash are not reported after
  /// the reopen (at most once). clear() reports nothing: the records it
  /// drops and the reports still waiting go unreported
  /// (Stats::removals_unreported).
  RemovalListener on_removal;

  /// How long an entry written without a Ttl of its own (a write's
  /// default Ttl{}) lives: 0, no expiry (the default). Range 0 - 100 years.
  /// An entry's deadline is kept to the millisecond in its record (8 more
  /// bytes), checked by every read: no read, walk or put_if_absent ever
  /// sees an entry past its deadline. The maintenance thread (or
  /// maintain()) removes expired records within a millisecond of their
  /// deadline, as RemovalCause::expired. A single-writer policy refuses a
  /// default TTL with background_maintenance (the thread would be a second
  /// writer); its program calls maintain().
  std::chrono::milliseconds default_ttl{0};

  /// The clock expiry reads (milliseconds since the Unix epoch, see
  /// offheap::Clock); null: the steady clock anchored to the wall clock
  /// once per process. Not owned: it must outlive the store. File-backed
  /// stores keep deadlines on disk in this clock's terms, so a store
  /// reopened with another clock must agree with it on what the time is.
  const Clock* clock = nullptr;

  /// Pre-sizes the index for this many entries, so that a store filled up to
  /// it never rehashes (and new keys allocate nothing). 0: start small.
  /// Range 0 - kMaxExpectedEntries (2^40); a larger value is refused with
  /// Errc::invalid_argument. The index maps about 10-20 bytes per entry up
  /// front (pages are touched only as entries arrive), so near the limit the
  /// OS may refuse the address space: Errc::out_of_space.
  std::uint64_t expected_entries = 0;
  static constexpr std::uint64_t kMaxExpectedEntries = std::uint64_t{1} << 40;

  /// Shards, each with its own index, journal, free lists, stamp counter and
  /// writer lock: writers to different shards never wait for each other.
  /// 0: four per hardware thread, rounded up to a power of two, at most 64.
  /// Range 0-1024.
  std::uint32_t shards = 0;

  /// Seed of the key hash. Unset: a random seed per store (recommended: keys
  /// chosen by an attacker cannot be aimed at one bucket).
  std::optional<std::uint64_t> hash_seed;

  /// The first journal chunk maps max(min_chunk_bytes, the first record);
  /// each later chunk twice the previous, up to max_chunk_bytes. Both are
  /// rounded up to the page size. A record (24-byte header + key + value,
  /// padded to 8) larger than max_chunk_bytes is refused with
  /// Errc::value_too_large. Ranges: 4 KiB <= min <= max <= 2^48.
  std::uint64_t min_chunk_bytes = std::uint64_t{64} << 10;
  std::uint64_t max_chunk_bytes = std::uint64_t{1} << 30;

  /// true: journal chunks and index tables of 4 MiB or more ask for
  /// transparent huge pages (madvise(MADV_HUGEPAGE): anonymous memory where
  /// the system's THP mode is "madvise"; chunk files only on a tmpfs whose
  /// shmem THP mode honours it). Fewer TLB misses on reads of a
  /// large store (gets at 20M entries about a fifth faster here), but the
  /// first touch of each 2 MiB may make the kernel compact memory for it,
  /// inside the put that touches it: with THP defrag "madvise" (Debian's
  /// default), puts of 1-17 ms by the hundred while a store grows to 20M
  /// entries (bench/offheap_latency), none without. Off by default: a store
  /// on a request path keeps its tail; turn it on for throughput, or with
  /// defrag set to "defer+madvise".
  bool huge_pages = false;

  /// Compaction: once a shard's journal (records, free space, outside
  /// emptied chunks) passes compaction_factor times its live records'
  /// bytes, and by 1 MiB or more, the maintenance thread (or maintain())
  /// moves the live records out of its sparsest chunks (those whose live
  /// share is under 1 / compaction_factor), one whole chunk at a time
  /// under the shard's writer lock (into free records, the tail, or an
  /// emptied or new chunk no larger than the one being emptied, so that
  /// mapped bytes do not grow), and empties them: their pages (and a
  /// file's disk blocks) go back to the OS, their address ranges stay
  /// (Stats::emptied_bytes, not in mapped_bytes), and writers take them
  /// back before they map new chunks. A chunk is the unit: with chunks of
  /// up to max_chunk_bytes per shard, mapped bytes can stay that much
  /// above the factor (set max_chunk_bytes to a small share of a shard's
  /// data where that matters). 0: never. Range: 0, or 1.1 - 100.
  /// Only chunks whose live share is under 1 / factor and whose free space
  /// is in 8 or more pieces, or that hold nothing live, are emptied; chunks
  /// holding records that wait to be freed (periodic's old records until
  /// the next sync, removals waiting for the listener) wait for them, and
  /// no chunk is emptied while a for_each or a scan step is in progress
  /// (the round waits for the walk: walks that keep overlapping hold
  /// compaction back, as they hold back an index migration's moves). A
  /// shard's writers wait while a chunk's live records are copied (0.7-1.2
  /// ms per MiB moved with 1 KiB values). In a cache, LruCache and
  /// TinyLfuCache keep a moved record's place in their order; S3-FIFO
  /// queues it again as after an update. tests/compaction_test.cpp churns
  /// 20,000 keys of 16 B-64 KiB values (max_chunk_bytes 4 MiB, factor 1.2):
  /// the store ends at 1.21-1.23 times its live bytes mapped (1.98 with
  /// compaction off), having moved 340-440 MiB for 1.6 GB written.
  double compaction_factor = 1.5;

  /// A hard ceiling on the bytes the store maps, everything counted: journal
  /// chunks (free space in them and emptied chunks included: their address
  /// ranges stay mapped), chunk tables, the index and the replaced index
  /// tables kept for readers (up to three times the current table's size
  /// just after growth), free-list tables, the eviction policy's
  /// structures, the expiry wheel and the read counters; in file-backed
  /// stores the chunk files' and the saved index's mappings. Nothing is
  /// mapped that would pass it (Stats::memory_mapped_bytes <=
  /// memory_limit_bytes at every moment). Journal chunks, which stay mapped
  /// once mapped, leave room beside them for what grows with the records
  /// (the policy's structures, the expiry wheel, lists of removals waiting)
  /// and, with a removal listener or Durability::periodic, for the dead
  /// markers removals need. A write that would need more: a cache evicts
  /// from the writer's shard (by its policy) until the record fits in space
  /// already mapped (with a listener or periodic, the writer then reports
  /// the removals waiting, calling the listener on its own thread, or
  /// syncs the shard twice, and tries again), and gives up with
  /// Errc::out_of_space only when nothing is left to evict or evicting
  /// cannot help (a record no chunk could hold, an index that must grow);
  /// expiry-wheel entries of records gone are swept first; a store refuses
  /// it with Errc::out_of_space and keeps every record. Opening needs the fixed part (per shard: an index table,
  /// the free-list and chunk tables; per store: read counters) and, for a
  /// store on disk, its chunk files' size: Errc::out_of_space otherwise.
  /// Growing the index needs the old and the new table at once: pre-size
  /// it with expected_entries where the limit is tight. A cache's
  /// capacity_bytes may not be more than the limit (Errc::invalid_argument):
  /// its policy's structures are sized from it.
  ///
  /// The least limit a store can work under: OffHeapStore::minimum_memory_limit(
  /// options, largest_entry), which a writable open checks (Errc::out_of_space,
  /// the message naming it). Made up of, per shard: the index table for
  /// expected_entries and its spare, the free-list and per-chunk tables,
  /// the policy's first segments (S3-FIFO 128 KiB, LRU and W-TinyLFU
  /// 68 KiB), a page of read buffers (LRU, W-TinyLFU: each reader thread's
  /// ring, 1 KiB, on a page counted at its first read), the expiry wheel's first
  /// segments, the removal listener's queue (64 KiB) and lists, the first
  /// journal chunk (min_chunk_bytes, or the largest record), and the room a
  /// chunk keeps beside it for those to grow; per store: the read counters
  /// (16 KiB), the dead markers' reserve (with a listener or periodic
  /// durability: min_chunk_bytes + 64 KiB per shard, at most 1/8), and
  /// 1/16 for optional structures. In memory, without a listener, with
  /// 64 KiB chunks: 0.46 MiB for a Store, 0.61 MiB for LRU and W-TinyLFU,
  /// 0.73 MiB for S3-FIFO with one shard; 1.35, 1.72 and 2.02 MiB with
  /// four (more with files, a listener or larger records). 0: no limit.
  ///
  /// At the limit, in more detail. Structures that can do with less
  /// (S3-FIFO's ghost, W-TinyLFU's sketch) hold at most 1/16 of the limit
  /// together and grow only while another 1/16 stays free (else they keep
  /// their size and forget sooner). The index doubles only with room for
  /// the new table and its spare; otherwise it rebuilds at the same size
  /// while live entries stay under 3/4 of its capacity. A cache's writer
  /// evicts by its policy the record's size and about 1% of the shard more
  /// (1/16 with a listener or periodic), doubled on each retry of the same
  /// write (Stats::limit_evictions); where evicted records free their space
  /// only later, it wakes the maintenance thread and waits for its reports
  /// (two of its rounds without one, or 5 s without one, end a wait; 30 s at
  /// most), or without that thread reports them itself, or syncs its shard
  /// twice in periodic files. Rounds go on while each frees something, for
  /// 30 s at most once 16 have run; a write that still finds no room, or
  /// after two rounds in a row that freed nothing, gets out_of_space (so
  /// does a write from inside the store's own listener, which cannot
  /// report). At the limit a cache write that needs a new chunk costs an
  /// exception caught inside the library and an eviction round: set
  /// capacity_bytes below the limit to keep that off the usual path. LRU's
  /// and W-TinyLFU's read buffers count the page of a reader thread's ring
  /// at its first read of the shard: a thread whose page the limit refuses
  /// drops its hits until there is room.
  ///
  /// Reopening under a lower limit than the files were written with: each
  /// shard first maps its policy's first segments, then, while its policy
  /// is rebuilt, evicts by the policy until the rest fits; evictions give
  /// back only policy room (chunks stay mapped), so a limit a fifth lower
  /// can evict most small records, and the open is refused whole
  /// (out_of_space, nothing changed) when the chunks, the index table or the
  /// expiry wheel's entries alone do not fit. Not right yet after such an
  /// open: with its chunks filling the lower limit, a cache's writes can be
  /// refused (out_of_space) when its policy needs one more segment although
  /// most of the journal is free (seen at 0.8 of the limit with 256-byte
  /// values and no maintenance thread: the writer evicts and syncs, which
  /// frees no chunk, and does not compact); with 2 shards at 0.7 of the
  /// limit one shard's policy can find no segment for its rebuild, and the
  /// open is refused. Reopen under the limit the files were written with.
  /// tests/memory_limit_test.cpp checks the count against the process's own
  /// mappings (/proc/self/smaps) to the byte, each cache under small limits
  /// with listeners, TTLs, periodic files and the maintenance thread, and
  /// reopens (also after a SIGKILL at the limit).
  std::uint64_t memory_limit_bytes = 0;
};

}  // namespace offheap
