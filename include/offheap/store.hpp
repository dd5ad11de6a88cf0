// SPDX-License-Identifier: Apache-2.0
// OffHeapStore<Policy>: the public key-value API over shards of mapped memory.
//
// The path of a key:
//
//   key --hash(seed)--> shard --> Index (open addressing, detail/index/index.hpp)
//       --> Location (16-bit chunk | 48-bit offset, detail/index/location.hpp)
//       --> Journal chunk (mmap, detail/journal/journal.hpp)
//       --> Record (stamp, header, key, value, padding; detail/journal/record.hpp)
//       --> seqlock-validated read: copy out (get), callback on the bytes in
//           place (read), or a RecordView (view.hpp)
//
// A write takes its shard's writer lock, finds room (detail/journal/free_lists.hpp or
// the journal's tail), writes the record, points the index at it, then frees
// the old record (detail/shard/shard.hpp). Records, index tables, free-list heads
// and counters all live in mapped memory: the heap holds a few objects per
// store and none per record.
//
// File-backed stores (Options::path): the same chunks are files mapped
// shared (detail/files/format.hpp lays them out, detail/files/store_files.hpp finds and
// locks the directory); records carry CRC32C checksums checked on every
// read; a clean close saves each shard's index and free lists, which the
// next open maps, and any other open rebuilds them from the records
// (Shard::recover). Options::durability says when records reach the disk.
//
// Thread safety: every member may be called from any number of threads at
// once. Readers (get, read, view, contains, get_value, get_as, size,
// for_each, scan) take no lock and write nothing (unless
// Options::record_stats, which counts on a line of the reader's thread):
// they validate what they read with record stamps and the index generation
// (detail/shard/shard.hpp, detail/index/index.hpp); walks alone announce themselves (a
// store-wide count, once per for_each or scan step). Writers serialize per
// shard on the Policy's lock; writers to different shards never wait for
// each other. With NullLock the program must
// keep writers of a store to one thread at a time.
// A reader that loses 256 races in a row to writers of its record reads it
// once under the shard's writer lock, so even a key under continuous
// rewrite is read in bounded time (with NullLock there is no lock to take:
// such a reader keeps yielding). An index table replaced by growth or
// clear() is never unmapped while the store lives: its pages go back to the
// OS (a reader still inside reads zeros, or a later table's slots, and
// concludes nothing from them) and its address range is kept for the next
// table of its size; only while a for_each walk is in progress do replaced
// tables keep their contents, since the walk goes on through them.
//
// Memory handed out, and how long it stays valid (as lmdb.h says for
// mdb_get):
//   get(key, out), get(key), get_value, get_as, get_all,
//   put_if_absent(key, value, existing)
//                   copies into the caller's objects: the caller's to keep.
//   read(key, fn)   fn's string_view points at the value in the store's
//                   mapped memory, valid only during that call of fn. A
//                   call whose result read() throws away may have seen
//                   torn bytes (bound every offset by its size()).
//   view(key)       a RecordView, usable while the store object lives; the
//                   string_view its read(fn) / try_read(fn) hands to fn is
//                   valid only during that call (view.hpp).
//   for_each, for_each_key, scan, scan_keys
//                   fn's string_views point into copies in buffers of the
//                   call (or the thread), valid only during that call of fn.
//   compute and its kin
//                   the old value's string_view points at the record in
//                   place, valid during the call; a result that views it is
//                   copied into the new record before the lock goes.
//   put(key, size, fill), put_if_absent(key, size, fill)
//                   fill's span is the new record's value bytes, valid only
//                   during the call; fill must write every byte.
//   put_as / get_as a codec's encode() writes into a span of the new record,
//                   valid during the call; decode() reads a span over a
//                   whole, checked copy, valid during the call (codec.hpp).
//   Options::on_removal
//                   the listener's key and value point into the removed
//                   record, valid during the call (removal.hpp).
//   stats(), verify(), name(), options()
//                   values (name() and options() refer to the store's own
//                   copies: valid while the store object lives).
//
// Heap-free hot path: after a thread's first call, get(key, out), read,
// contains, view + RecordView::read, put, put_if_absent, replace, remove,
// put_value and get_value (with TTLs too, and the timing wheel's expiries)
// perform zero heap allocations, and the process heap does not grow with
// the number of records (tests/alloc/alloc_test.cpp counts malloc and
// operator new and checks mallinfo2). Allocating on purpose: get(key)
// returning std::optional<std::string>, view() of a key over 64 bytes (the
// view keeps a copy of its key), stats(), and for_each (two reusable
// buffers per call); get_all, put_all, remove_all and scan allocate nothing
// once the caller's buffers, and the thread's copy buffers, are large
// enough.
//
// What ThreadSanitizer does not check: the inside of read(key, fn) and
// RecordView::read(fn) callbacks. They run on the record's bytes in place
// and race with writers by design (the seqlock: the stamps, checked after
// the callback, decide whether what it read counts), so the library wraps
// each callback in TSan's AnnotateIgnoreReadsBegin/End. The runtime then
// ignores every plain memory access the callback makes, and those of
// everything it calls: reads of the record, but also reads and writes of
// the program's own memory. A data race inside a read callback is therefore
// not reported; atomics and locks used inside it still order what comes
// after. The same goes for the writer side's callbacks that fill a new
// record in place (put(key, size, fill), put_if_absent(key, size, fill),
// the gather put, and codecs' encode under put_as): a reader still holding
// the slot's old location may load those words while they are written, and
// the stamps decide. Nor the copies that get, get_value, get_as,
// get_all, for_each and scan make (values, and a walk's keys: plain
// 16-byte loads, validated by the stamps in the same way, and the stores
// into the caller's buffer; record::copy_out). Everything else is
// checked: lookups, key comparisons, stamp checks, the sizing of the
// caller's buffers, writers, reclamation, and the caller's code around
// the callbacks.
#pragma once

#include <offheap/codec.hpp>
#include <offheap/compute.hpp>
#include <offheap/cursor.hpp>
#include <offheap/detail/store/engine.hpp>
#include <offheap/detail/store/lifecycle.hpp>
#include <offheap/detail/store/upkeep.hpp>
#include <offheap/detail/store/batch.hpp>
#include <offheap/detail/store/nothrow.hpp>
#include <offheap/detail/store/reads.hpp>
#include <offheap/detail/store/scan.hpp>
#include <offheap/detail/store/writes.hpp>
#include <offheap/error.hpp>
#include <offheap/expiry.hpp>
#include <offheap/options.hpp>
#include <offheap/policy.hpp>
#include <offheap/stats.hpp>
#include <offheap/value_type.hpp>
#include <offheap/view.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <concepts>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <vector>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <type_traits>
#include <utility>
#include <new>

namespace offheap {

template <Policy P = StorePolicy>
class OffHeapStore {
 public:
  using PolicyType = P;
  using View = RecordView<P>;

  /// Limits. One rule for keys over kMaxKeyBytes: no record can have one,
  /// so the calls that only look (get, contains, read, view, get_value,
  /// get_as, get_all) answer absent, counting a miss, and every call that
  /// may write (put and its forms, remove, compute and its kin, put_as, the
  /// batches) throws Error(key_too_large) before it changes anything.
  static constexpr std::size_t kMaxKeyBytes = detail::record::kMaxKeyBytes;
  static constexpr std::uint64_t kMaxValueBytes = detail::record::kMaxValueBytes;

  /// Effects: with an empty options.path, creates an empty store in
  /// anonymous memory, mapping little until records arrive (a chunk table,
  /// an index sized for options.expected_entries, the free-list table and
  /// counters). With a path, creates the store there or reopens it: after a
  /// clean close by mapping the saved index (no record is read), otherwise
  /// by scanning every shard's records in parallel (stats().rebuilt).
  /// Throws: Error(invalid_argument) for options out of range or that
  /// contradict the store on disk; Error(locked) if the store is open
  /// elsewhere; Error(format_version) for a store of another on-disk
  /// format; Error(corrupt_file) for damage that recovery cannot step over;
  /// Error(io_error), Error(out_of_space) when the OS refuses.
  explicit OffHeapStore(Options options = {}) : e_(std::move(options)), upkeep_(e_), life_(e_, upkeep_) {
    if (e_.files_) life_.open();
    const bool writable = !e_.files_ || !e_.files_->read_only;
    // Every store with a writer lock gets a thread (it sleeps until the
    // next deadline or sync); without one, only what options ask for, which
    // checked_options refused with background_maintenance.
    if (writable && e_.options_.background_maintenance &&
        (Shard::kLocks || Shard::kEvicts || e_.options_.on_removal ||
         (e_.files_ && e_.options_.durability == Durability::periodic))) {
      for (Shard& s : e_.shards_) s.leave_drains_to_maintenance();
      upkeep_.start();
    }
  }

  /// Effects: close(), ignoring its errors (a store that cannot close
  /// cleanly is rebuilt at its next open). Requires: no other thread is
  /// using the store.
  ~OffHeapStore() {
    try {
      close();
    } catch (...) {
    }
  }

  /// Effects, for every store: stops the maintenance thread, reports the
  /// removals still waiting to Options::on_removal, and refuses every later
  /// write (put, remove, clear, compute, ...) with Errc::closed; reads go on
  /// working, on the records as they were, until the object goes (nothing
  /// expires or is evicted any more). File-backed stores, unless read-only
  /// or Durability::none, then write every record to disk, save each
  /// shard's index and free lists, and mark the store clean, so that the
  /// next open maps them instead of scanning. A store that met damage its
  /// open did not already step over (a record failing its checksum, a
  /// damaged free list) is written to disk but not marked clean: its next
  /// open rebuilds it from the records. The second call does nothing.
  /// Throws: Error(io_error), Error(out_of_space) (file-backed stores); the
  /// store is then left unclean and the next open rebuilds it, losing
  /// nothing.
  /// Requires: no other thread is writing to the store.
  void close() { life_.close(); }

  /// Returns: whether close() has been called (writes get Errc::closed).
  bool closed() const noexcept { return e_.closed(); }

  /// Effects (file-backed stores): a durability point: every record written
  /// before the call is on disk when it returns (msync of the chunks written
  /// since the last sync), so that it survives a power loss. Does nothing
  /// for anonymous or read-only stores.
  /// Throws: Error(io_error) if the OS reports a failed write-back; the
  /// store then refuses further writes (a retried sync can falsely succeed).
  void sync() { life_.sync(); }

 public:
  OffHeapStore(const OffHeapStore&) = delete;
  OffHeapStore& operator=(const OffHeapStore&) = delete;

  /// Returns: a store opened as OffHeapStore(options) does, on the heap:
  /// the unique_ptr moves, returns from functions and keeps in an
  /// optional or a container. (The store itself does not move: its readers,
  /// views and maintenance thread hold its address.) Throws: as the
  /// constructor.
  static std::unique_ptr<OffHeapStore> open(Options options) {
    return std::make_unique<OffHeapStore>(std::move(options));
  }
  /// Effects: as open(options), for code that does not throw: on failure
  /// returns nullptr, sets ec (an offheap::Errc, compared as `ec ==
  /// offheap::Errc::locked`; std::errc::not_enough_memory if the heap
  /// refused) and, if `message` is given, *message to the error's text.
  /// Clears ec on success (detail/store/nothrow.hpp).
  static std::unique_ptr<OffHeapStore> open(Options options, std::error_code& ec,
                                            std::string* message = nullptr) noexcept {
    return detail::no_throw(ec, message, std::unique_ptr<OffHeapStore>(),
                            [&] { return std::make_unique<OffHeapStore>(std::move(options)); });
  }

  /// Returns: the smallest Options::memory_limit_bytes under which a store
  /// of this policy, opened with `options` (their memory_limit_bytes
  /// aside), holds a record in each shard, of up to `largest_entry` bytes
  /// of key and value (beyond min_chunk_bytes a larger record needs a
  /// larger first chunk) with or without a TTL. An open with a limit below
  /// it (for records of any size) is refused with Errc::out_of_space naming
  /// it. How it is made up (per shard: the index and free-list tables, the
  /// policy's first segments, read buffers, the removal listener's queue,
  /// the first journal chunk and the room a chunk keeps beside it; 1/16 of
  /// the limit for optional structures; never below capacity_bytes):
  /// detail/store/memory_floor.hpp and Options::memory_limit_bytes. A store
  /// reopened from files also maps its chunk files; its shard count is
  /// its own (options.shards 0 counts the default for a new store: pass
  /// the store's, Stats::shards). Throws: Error(invalid_argument) for
  /// options the constructor refuses; Error(value_too_large) for an entry
  /// no store of these options could hold (past max_chunk_bytes, or a
  /// cache shard's share plus its slack).
  static std::uint64_t minimum_memory_limit(Options options, std::uint64_t largest_entry = 0) {
    options.memory_limit_bytes = 0;
    const Options o = detail::checked_options<Shard::kEvicts, Shard::kLocks>(std::move(options));
    return detail::memory_floor<typename Shard::Eviction>(o, largest_entry);
  }

  // ---- writes ---------------------------------------------------------------

  /// Effects: key now maps to value (type tag 0: bytes), replacing any
  /// value, until `ttl` says it expires (default: Options::default_ttl; see
  /// Ttl). Every write below takes a Ttl the same way; a replaced value's
  /// deadline goes with it.
  /// Throws: Error(key_too_large), Error(value_too_large), Error(out_of_space);
  /// the store is unchanged then, but for a cache's evictions: a write to
  /// a cache past its capacity evicts first (Options::capacity_bytes), and
  /// what it evicted stays evicted (reported as evictions) if it throws.
  /// Thread safety: serialized with other writers of the shard.
  /// Returns: Computed::inserted (the key was absent or expired) or
  /// Computed::updated (it held a value, now replaced).
  Computed put(std::string_view key, std::string_view value, Ttl ttl = {}) {
    check_writable();
    e_.check(key, value.size());
    return writes().write(key, value, type_tag::bytes, Shard::Mode::upsert, {}, ttl);
  }

  /// Reserve-then-fill (as LMDB's MDB_RESERVE, CacheLib's allocate, fill,
  /// insert): writes a value of `size` bytes that fill(std::span<std::byte>)
  /// writes straight into the new record, under the key's shard's writer
  /// lock, before any reader can see it; nothing is copied on the way.
  /// fill must write every byte (what it leaves is unspecified) and may
  /// not call this store's writes (as compute()'s function); if it throws,
  /// nothing changes (but a cache's evictions, as for put()) and the
  /// exception propagates. Under
  /// Options::memory_limit_bytes it may run again if the write had to wait
  /// for room. Returns and throws as put().
  template <class Fill>
    requires std::invocable<Fill&, std::span<std::byte>>
  Computed put(std::string_view key, std::size_t size, Fill&& fill, Ttl ttl = {}) {
    return writes().put_fill(key, size, fill, ttl);
  }
  /// put_if_absent() with a value that fill writes in place, as put(key,
  /// size, fill): fill runs only if the key is absent.
  template <class Fill>
    requires std::invocable<Fill&, std::span<std::byte>>
  bool put_if_absent(std::string_view key, std::size_t size, Fill&& fill, Ttl ttl = {}) {
    return writes().put_if_absent_fill(key, size, fill, ttl);
  }
  /// A gather write: the value is `parts` one after the other, copied once,
  /// straight into the record. Returns and throws as put().
  Computed put(std::string_view key, std::span<const std::string_view> parts, Ttl ttl = {}) {
    return writes().put_parts(key, parts, ttl);
  }

  /// Effects: stores key -> value only if key is absent (an expired entry
  /// is absent: it is replaced, and leaves as RemovalCause::expired).
  /// Returns: true if it stored. Throws: as put().
  bool put_if_absent(std::string_view key, std::string_view value, Ttl ttl = {}) {
    check_writable();
    e_.check(key, value.size());
    return writes().write(key, value, type_tag::bytes, Shard::Mode::insert, {}, ttl) == Computed::inserted;
  }

  /// put_if_absent() that hands back what the key holds when it does not
  /// store: `existing` then receives the current value (a whole one, copied
  /// under the shard's writer lock; its buffer is reused when large
  /// enough), and is left as it was when it stores.
  bool put_if_absent(std::string_view key, std::string_view value, std::string& existing, Ttl ttl = {}) {
    return writes().put_if_absent_copy(key, value, existing, ttl);
  }

  /// Effects: replaces key's value only if key is present (and not expired).
  /// Returns: true if it replaced. Throws: as put().
  bool replace(std::string_view key, std::string_view value, Ttl ttl = {}) {
    check_writable();
    e_.check(key, value.size());
    return writes().write(key, value, type_tag::bytes, Shard::Mode::replace, {}, ttl) != Computed::unchanged;
  }

  /// Effects: replaces key's value with desired only if it currently equals
  /// expected (byte for byte; the type tag is not compared; an expired
  /// entry equals nothing).
  /// Returns: true if it replaced. Throws: as put().
  bool replace(std::string_view key, std::string_view expected, std::string_view desired, Ttl ttl = {}) {
    check_writable();
    e_.check(key, desired.size());
    return writes().write(key, desired, type_tag::bytes, Shard::Mode::replace_if, expected, ttl) != Computed::unchanged;
  }

  /// Effects: removes key. Returns: true if it was present (an expired
  /// entry is not: it leaves as RemovalCause::expired, and remove returns
  /// false). Throws: Error(key_too_large).
  bool remove(std::string_view key) {
    check_writable();
    e_.check_key(key);
    const std::uint64_t h = e_.hash_(key);
    Shard& s = e_.shards_.for_hash(h);
    const bool removed = upkeep_.at_limit(s, [&] { return s.erase(key, h, nullptr); });
    upkeep_.nudge(s);
    return removed;
  }

  /// Effects: removes key only if its value equals expected.
  /// Returns: true if it removed. Throws: Error(key_too_large).
  bool remove(std::string_view key, std::string_view expected) {
    check_writable();
    e_.check_key(key);
    const std::uint64_t h = e_.hash_(key);
    Shard& s = e_.shards_.for_hash(h);
    const bool removed = upkeep_.at_limit(s, [&] { return s.erase(key, h, &expected); });
    upkeep_.nudge(s);
    return removed;
  }

  /// Requires: T has no padding (PaddingFreeValue, value_type.hpp: integers,
  /// enums, floating point, and structs of them without gaps; a struct
  /// holding floats is declared with ValueTypeTag<T>::padding_free).
  /// Effects: stores value's bytes (its object representation; an 80-bit
  /// long double's 6 padding bytes as zeros) with T's type tag.
  /// Returns and throws as put().
  template <class T>
    requires PaddingFreeValue<T>
  Computed put_value(std::string_view key, const T& value, Ttl ttl = {}) {
    return writes().put_value(key, value, ttl);
  }

  // ---- many keys at once (detail/store/batch.hpp, reads.hpp) -----------------
  //
  // Keys are taken in slices of 64, grouped by shard within a slice. Each
  // call checks every key and value first (key_too_large, value_too_large:
  // nothing done). A write the memory limit refuses throws as put(); what
  // was written before it stays (earlier slices, and the shards of its
  // slice done before it: get_all() tells which), the rest is not written.

  /// values[i] receives keys[i]'s value, or nullopt if absent (a string
  /// already there is reused: no allocation once large enough). Lookups are
  /// lock-free, as get(); the index lines of a slice are prefetched first,
  /// then the records they lead to (at 10M keys a batch reads 2.4-4.7x as
  /// fast as single gets: bench/README.md).
  /// Returns how many were present. Throws: Error(invalid_argument) if
  /// values is shorter than keys.
  std::size_t get_all(std::span<const std::string_view> keys, std::span<std::optional<std::string>> values) const {
    return detail::Reads<P>(e_).get_all(keys, values);
  }
  /// put() of every entry {key, value}, one hold of a shard's writer lock
  /// for the entries of a slice in that shard, in their order (a key given
  /// twice ends with its last value). Returns how many were inserted (the
  /// rest updated).
  std::size_t put_all(std::span<const std::pair<std::string_view, std::string_view>> entries, Ttl ttl = {}) {
    return detail::Batches<P>(e_, upkeep_).put_all(entries, ttl);
  }
  /// remove() of every key, as put_all() groups them. Returns how many were
  /// present.
  std::size_t remove_all(std::span<const std::string_view> keys) {
    return detail::Batches<P>(e_, upkeep_).remove_all(keys);
  }

  // ---- atomic read-modify-write (detail/store/writes.hpp) ---------------------
  //
  // Each runs its function once, under the key's shard's writer lock, on
  // what the key holds then, and applies the result before the lock goes:
  // no other write of the key comes in between (two threads incrementing
  // one counter lose nothing). An expired record counts as absent. The
  // function sees the old value where it lies (valid during the call) and
  // may return it, or part of it. It may read this store (reads take no
  // lock) but not call anything that writes or locks it (put, remove,
  // compute, clear, maintain, sync, close, stats, verify): those throw
  // Error(invalid_argument) rather than deadlock. Other stores are fine,
  // in an order the application keeps. If it throws, nothing changes and
  // the exception propagates. Only under Options::memory_limit_bytes, a
  // write that must wait outside the lock for room (removals waiting for
  // a sync or the listener) may call it again, if another writer changed
  // the key meanwhile. A new value equal to the old one (same bytes, same
  // type) writes nothing: the key keeps its deadline. Throws: as put().

  /// fn(std::optional<std::string_view> old) returns std::optional<V>, V
  /// convertible to std::string_view (std::string, std::string_view into
  /// the caller's or the old value's bytes): the key's new value, or
  /// nullopt to remove it. The value is stored untyped, as by put().
  template <class F>
  Computed compute(std::string_view key, F&& fn, Ttl ttl = {}) {
    return writes().compute(key, std::forward<F>(fn), ttl);
  }
  /// If the key is absent: make() returns its value (V, as above); else
  /// nothing is called. Returns inserted or unchanged.
  template <class F>
  Computed compute_if_absent(std::string_view key, F&& make, Ttl ttl = {}) {
    return writes().compute_if_absent(key, std::forward<F>(make), ttl);
  }
  /// If the key is present: fn(std::string_view old) returns
  /// std::optional<V>, as compute()'s fn; else nothing is called.
  template <class F>
  Computed compute_if_present(std::string_view key, F&& fn, Ttl ttl = {}) {
    return writes().compute_if_present(key, std::forward<F>(fn), ttl);
  }
  /// Stores `value` if the key is absent; else combine(old, value) returns
  /// std::optional<V>: the new value, or nullopt to remove the key.
  template <class F>
  Computed merge(std::string_view key, std::string_view value, F&& combine, Ttl ttl = {}) {
    return writes().merge(key, value, std::forward<F>(combine), ttl);
  }
  /// compute() on a typed value: fn(std::optional<T> old) returns
  /// std::optional<T>, stored with T's type tag (as put_value<T>).
  /// Throws: Error(type_mismatch) if the key holds another type (before
  /// fn is called).
  template <class T, class F>
    requires PaddingFreeValue<T>
  Computed compute_value(std::string_view key, F&& fn, Ttl ttl = {}) {
    return writes().template compute_value<T>(key, std::forward<F>(fn), ttl);
  }
  /// Stores value with T's type tag if the key holds a T; returns whether
  /// it did (false: absent). Throws: Error(type_mismatch) for another type.
  template <class T>
    requires PaddingFreeValue<T>
  bool replace_value(std::string_view key, const T& value, Ttl ttl = {}) {
    return writes().replace_value(key, value, ttl);
  }
  /// Stores value with T's type tag if the key is absent; returns whether
  /// it did (false: it holds a T). Throws: Error(type_mismatch) for
  /// another type.
  template <class T>
    requires PaddingFreeValue<T>
  bool put_value_if_absent(std::string_view key, const T& value, Ttl ttl = {}) {
    return writes().put_value_if_absent(key, value, ttl);
  }

  /// Effects: removes every record, shard by shard (a concurrent reader may
  /// see some shards cleared and others not); memory stays mapped for reuse
  /// but its pages go back to the OS (file-backed: the files keep their
  /// size, and their space is reused).
  /// Throws: Error(read_only) for a read-only store, Error(closed) after close().
  void clear() {
    if (detail::t_in_removal_listener == e_.id()) [[unlikely]] e_.throw_in_listener("clear()");
    check_writable();
    for (Shard& s : e_.shards_) s.clear();
  }

  /// Effects: one maintenance round on this thread: removes the records
  /// whose deadline has passed (RemovalCause::expired); frees index tables that
  /// growth replaced once no reader can still be inside them (writers also
  /// do this as they go; call it after growth when writes stop); with
  /// Durability::periodic and no background maintenance, syncs when
  /// options().sync_interval has passed since the last sync; caches evict
  /// down to their capacity; with Options::on_removal and no background
  /// maintenance, calls the listener for every removal waiting.
  /// Throws: as sync().
  void maintain() {
    e_.check_not_reentered("maintain()", false);
    if (upkeep_.maintain()) sync();
  }

  // ---- the same writes for code that does not throw -------------------------
  // Each does what its throwing form does; where that throws, it changes
  // nothing, sets ec (ec == offheap::Errc::..., or std::errc::
  // not_enough_memory if the heap refused) and returns false,
  // Computed::unchanged or nothing. Clears ec on success
  // (detail/store/nothrow.hpp).

  Computed put(std::string_view key, std::string_view value, std::error_code& ec, Ttl ttl = {}) noexcept {
    return detail::no_throw(ec, nullptr, Computed::unchanged, [&] { return put(key, value, ttl); });
  }
  bool put_if_absent(std::string_view key, std::string_view value, std::error_code& ec, Ttl ttl = {}) noexcept {
    return detail::no_throw(ec, nullptr, false, [&] { return put_if_absent(key, value, ttl); });
  }
  bool replace(std::string_view key, std::string_view value, std::error_code& ec, Ttl ttl = {}) noexcept {
    return detail::no_throw(ec, nullptr, false, [&] { return replace(key, value, ttl); });
  }
  bool replace(std::string_view key, std::string_view expected, std::string_view desired,
               std::error_code& ec, Ttl ttl = {}) noexcept {
    return detail::no_throw(ec, nullptr, false, [&] { return replace(key, expected, desired, ttl); });
  }
  bool remove(std::string_view key, std::error_code& ec) noexcept {
    return detail::no_throw(ec, nullptr, false, [&] { return remove(key); });
  }
  bool remove(std::string_view key, std::string_view expected, std::error_code& ec) noexcept {
    return detail::no_throw(ec, nullptr, false, [&] { return remove(key, expected); });
  }
  template <class T>
    requires PaddingFreeValue<T>
  Computed put_value(std::string_view key, const T& value, std::error_code& ec, Ttl ttl = {}) noexcept {
    return detail::no_throw(ec, nullptr, Computed::unchanged, [&] { return put_value(key, value, ttl); });
  }
  void clear(std::error_code& ec) noexcept { detail::no_throw_void(ec, [&] { clear(); }); }
  void sync(std::error_code& ec) noexcept { detail::no_throw_void(ec, [&] { sync(); }); }
  void close(std::error_code& ec) noexcept { detail::no_throw_void(ec, [&] { close(); }); }

  // ---- reads ------------------------------------------------------------------

  /// Returns: whether key is present. Thread safety: lock-free.
  bool contains(std::string_view key) const {
    return e_.find(key, true, [](detail::Location, const std::byte*, const detail::record::Meta&,
                              std::uint64_t) { return true; });
  }

  /// Returns: a copy of key's value, or nullopt. Allocates the string; use
  /// get(key, out) on hot paths.
  std::optional<std::string> get(std::string_view key) const {
    std::string out;
    if (!get(key, out)) return std::nullopt;
    return out;
  }

  /// Effects: copies key's value into out, reusing out's capacity (no
  /// allocation when it is large enough). out is unspecified on a miss.
  /// Returns: whether key was present. Thread safety: lock-free.
  [[gnu::always_inline]] bool get(std::string_view key, std::string& out) const {
    return e_.find(key, true, [&](detail::Location, const std::byte* rec,
                               const detail::record::Meta& m, std::uint64_t stamp) __attribute__((always_inline)) {
      Engine::copy_value(out, rec, m);
      return detail::record::validate(rec, stamp);
    });
  }

  /// Effects: calls fn(std::string_view value) on key's value in place, with
  /// no copy. fn may be called more than once: if a writer changed or
  /// removed the record while fn ran, that call's bytes may be mixed or
  /// another record's, and read() looks again (calling fn on the new value,
  /// if the key is still there). Only the last call, and only if read()
  /// returns true, saw the key's value: fn should only read and compute (no
  /// side effects it cannot repeat), and must not trust lengths inside the
  /// value on the calls whose result is thrown away.
  /// Returns: if fn returns void, whether key was present (if false,
  /// discard what fn produced); else std::optional<R> holding what the
  /// validated call of fn returned (the results of the calls thrown away
  /// are dropped, never returned), or nullopt if key was absent.
  /// Requires: fn does not write to this store (a reader that lost many
  /// races to writers runs fn under the shard's writer lock).
  /// The string_view is valid only during the call.
  template <class F>
  auto read(std::string_view key, F&& fn) const {
    return detail::Reads<P>(e_).read(key, std::forward<F>(fn));
  }

  /// Returns: a RecordView of key's current record, or an empty view if the
  /// key is absent (view.hpp). Allocates only for keys over 64 bytes.
  View view(std::string_view key) const {
    View v;
    const bool found = e_.find(key, true,
                               [&](detail::Location loc, const std::byte*, const detail::record::Meta& m,
                                   std::uint64_t stamp) {
                                 v = View(this, loc, stamp, key, m.value_len, m.type);
                                 return true;
                               });
    // (on_hit may have run for a read that the lookup then threw away.)
    return found ? v : View();
  }

  /// Returns: key's value as T, or nullopt if key is absent.
  /// Throws: Error(type_mismatch) if the record's type tag or size is not T's.
  template <class T>
  std::optional<T> get_value(std::string_view key) const {
    return detail::Reads<P>(e_).template get_value<T>(key);
  }

  /// Effects: stores `value` as its codec writes it (codec.hpp), straight
  /// into the record, after 2 bytes of the codec's layout version, with the
  /// codec's type tag; for a type without a codec that put_value takes, is
  /// put_value. Returns and throws as put(), and what the codec throws
  /// (the store is then unchanged).
  template <StorableAs T>
  Computed put_as(std::string_view key, const T& value, Ttl ttl = {}) {
    return writes().put_as(key, value, ttl);
  }

  /// Returns: key's value decoded as T (codec.hpp), or nullopt if key is
  /// absent; for a type without a codec, get_value<T>. The value is copied
  /// and checked whole before decode() sees it.
  /// Throws: Error(type_mismatch) if the record was not written by T's
  /// codec (another type tag) or by another layout version of it; what
  /// decode() throws.
  template <StorableAs T>
  std::optional<T> get_as(std::string_view key) const {
    return detail::Reads<P>(e_).template get_as<T>(key);
  }

  /// Returns: the number of live records. Thread safety: lock-free.
  std::uint64_t size() const noexcept {
    std::uint64_t n = 0;
    for (const Shard& s : e_.shards_) n += s.size();
    return n;
  }
  bool empty() const noexcept { return size() == 0; }

  /// Effects: calls fn(std::string_view key, std::string_view value) once for
  /// every record present throughout the walk, on copies validated against
  /// their stamps (so fn always sees whole values). fn may read and write
  /// the store; records written meanwhile may or may not be visited. The walk
  /// keeps index tables replaced meanwhile as they are (address space, not
  /// memory given back) until it ends. fn may also take a third argument,
  /// the record's type tag (std::uint8_t; 0: bytes). What fn returns is
  /// ignored (a walk that stops early is scan's). In a file-backed store
  /// with Options::verify_checksums, a record whose checksum fails is
  /// skipped and counted (Stats::corrupt_records), so that a walk salvages
  /// what is intact; a get() of its key throws Error(corrupt_file).
  /// The string_views are valid only during each call.
  template <class F>
  void for_each(F&& fn) const {
    detail::Walks<P>(e_).for_each(std::forward<F>(fn));
  }

  /// Effects: as for_each, with fn(std::string_view key) or fn(key,
  /// std::uint8_t type): no value is copied (a file-backed store with
  /// Options::verify_checksums still reads each value once, to check it).
  template <class F>
  void for_each_key(F&& fn) const {
    detail::Walks<P>(e_).for_each_key(std::forward<F>(fn));
  }

  /// A resumable walk, in steps (detail/store/scan.hpp). Effects: from where
  /// `cursor` stands (Cursor{}: the start), calls fn(std::string_view key,
  /// std::string_view value, std::uint8_t type) (or fn(key, value)) on a
  /// validated copy of each record, until it has called it max_records
  /// times, fn returns false (a fn returning bool; the record it returned
  /// false for counts as visited), or the walk ends (cursor.done()); leaves
  /// `cursor` where it stopped. Never blocks writers; holds nothing between
  /// calls.
  /// What a walk promises (it is weakly consistent): every key present and
  /// left alone (not written or removed) from the walk's first call to its
  /// last is handed to fn at least once; exactly once, unless a shard's
  /// index table was replaced between two calls (the start of a growth, a
  /// rebuild that drops tombstones, clear()) or the cursor passed to
  /// another store object (a reopen of the same files): the walk then
  /// takes that shard again from its start, so its keys may come twice,
  /// never missed; or, while a shard's index grows, entries the walk had
  /// passed were moved between two calls to the part it has yet to walk
  /// (they may come twice; the walk goes on). cursor.restarts() counts both.
  /// Keys written or removed during the walk
  /// may come or not, with whatever value they had when the walk got there;
  /// a value written is never seen torn. A damaged record: as for_each. A shard whose table keeps being
  /// replaced faster than a step walks it is retaken each time: steps of
  /// more records finish sooner.
  /// Returns: how many records fn was called for.
  /// Throws: Error(invalid_argument) for a cursor from a store with fewer
  /// shards; what fn throws (the record it threw for counts as visited:
  /// the next call goes on after it). fn may scan with the same cursor:
  /// the outer call's position then wins, so keys may come again.
  /// The string_views are valid only during each call.
  template <class F>
  std::size_t scan(Cursor& cursor, std::size_t max_records, F&& fn) const {
    return detail::Walks<P>(e_).scan(cursor, max_records, std::forward<F>(fn));
  }

  /// Effects: as scan, keys only: fn(std::string_view key, std::uint8_t
  /// type) or fn(key), no value copied (as for_each_key).
  template <class F>
  std::size_t scan_keys(Cursor& cursor, std::size_t max_records, F&& fn) const {
    return detail::Walks<P>(e_).scan_keys(cursor, max_records, std::forward<F>(fn));
  }

  /// Returns: counters, contents, memory and index figures (stats.hpp).
  Stats stats() const {
    e_.check_not_reentered("stats()", false);
    Stats s = e_.stats();
    upkeep_.add_stats(s);
    life_.add_stats(s);
    return s;
  }

  /// Effects: checks the store's internal invariants record by record (for
  /// tests and debugging; O(journal), blocks writers meanwhile): records,
  /// free lists, index, counters, and the removed records waiting for the
  /// removal listener. Throws Error(invalid_argument) from inside the
  /// listener (it would wait for the listener's own batch).
  /// Returns: "" if they hold, else a description of the first violation.
  std::string verify() const {
    e_.check_not_reentered("verify()", true);
    for (const Shard& s : e_.shards_) {
      std::string problem = s.verify();
      if (!problem.empty()) return problem;
    }
    return {};
  }

  /// The store's name, as used in error messages.
  const std::string& name() const noexcept { return e_.options_.name; }
  const Options& options() const noexcept { return e_.options_; }

 private:
  using Engine = detail::StoreEngine<P>;
  using Shard = typename Engine::Shard;
  friend class RecordView<P>;

  /// Writes are refused inside compute(), and by read-only, closed and
  /// failed stores (detail/store/checks.hpp).
  [[gnu::always_inline]] void check_writable() const { e_.check_writable(upkeep_.thread()); }

  /// The store's writes, made per call on the engine and Upkeep
  /// (detail/store/writes.hpp).
  [[gnu::always_inline]] detail::Writes<P> writes() noexcept { return detail::Writes<P>(e_, upkeep_); }

  /// For RecordView: runs fn on key's value if key's current record is the
  /// one at `loc` stamped `stamp`; says what became of that record. The
  /// callback may run more than once; only the run that ends the lookup
  /// counts, and none does if the key went away meanwhile.
  template <class F>
  ViewStatus visit_version(std::string_view key, detail::Location loc, std::uint64_t stamp, F&& fn) const {
    ViewStatus status = ViewStatus::removed;
    const bool found = e_.find(key, false, [&](detail::Location l, const std::byte* rec,
                                               const detail::record::Meta& m, std::uint64_t s) {
      if (l != loc || s != stamp) {
        status = ViewStatus::updated;
        return true;
      }
      status = ViewStatus::live;
      Engine::call_in_place(fn, rec, m);
      return detail::record::validate(rec, s);
    });
    return found ? status : ViewStatus::removed;
  }

  // The parts that own the store's state, in the order they are made;
  // destroyed in reverse (the maintenance thread joined while the shards
  // still exist).
  Engine e_;                    // options, files, hash, shards (detail/store/engine.hpp)
  detail::Upkeep<P> upkeep_;    // maintenance thread, backpressure, syncs (detail/store/upkeep.hpp)
  detail::Lifecycle<P> life_;   // open, sync, close (detail/store/lifecycle.hpp)
};

/// A database: no eviction; readers lock-free, writers serialized.
using Store = OffHeapStore<StorePolicy>;
/// A cache of Options::capacity_bytes: S3-FIFO eviction.
using Cache = OffHeapStore<CachePolicy>;
/// A cache that evicts the least recently used record.
using LruCache = OffHeapStore<LruCachePolicy>;
/// A cache with W-TinyLFU eviction.
using TinyLfuCache = OffHeapStore<TinyLfuCachePolicy>;

}  // namespace offheap
