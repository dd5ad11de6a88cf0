// SPDX-License-Identifier: Apache-2.0
// StoreEngine<P>: what every part of a store works on. It owns the checked
// Options, the name and memory budget every mapping is counted in, the
// directory of a file-backed store, the key hash, the shards, the readers'
// counters and the walk gate; it routes a key to its shard and runs the
// lock-free lookup every read is made of. The checks that calls make
// before they change anything, and the errors they throw, are its second
// file (checks.hpp).
//
// The store (store.hpp) is a thin facade over it, together with the parts
// that own the rest of the store's state:
//   Upkeep<P>     (upkeep.hpp)     the maintenance thread, the memory limit's
//                                  backpressure on writers, periodic syncs;
//   Lifecycle<P>  (lifecycle.hpp)  a file-backed open, sync(), close();
// and the operations that hold no state of their own, built per call on
// the engine (and Upkeep for writes): Writes (writes.hpp: every write,
// compute), Batches (batch.hpp), Walks (scan.hpp), Reads (reads.hpp).
//
// Invariants, set by the constructor and kept until destruction:
//  - options_ are checked and complete (checked_options.hpp): its shard
//    count is shards_.size(), and never changes.
//  - files_ is null exactly for a store in anonymous memory; shard i maps
//    the chunk files of shard i in files_.
//  - a key's shard is shards_.for_hash(hash_(key)); a cache's shards each
//    hold capacity_bytes / shards of it (set_capacity), with a slack of a
//    sixteenth (at least 4 KiB) before writers evict themselves.
// Every member may be read from any thread: options_, store_name_, hash_,
// instance_ never change; the shards, counters and walk gate synchronize
// themselves; files_'s flags (closed, sync_error) are atomics, and its meta
// is changed only by Lifecycle (open and close, on one thread).
#pragma once

#include <offheap/detail/files/store_files.hpp>
#include <offheap/detail/index/hash.hpp>
#include <offheap/detail/journal/record.hpp>
#include <offheap/detail/memory/os.hpp>
#include <offheap/detail/memory/thread_slots.hpp>
#include <offheap/detail/shard/shard.hpp>
#include <offheap/detail/shard/shard_set.hpp>
#include <offheap/detail/store/checked_options.hpp>
#include <offheap/detail/store/maintenance.hpp>
#include <offheap/detail/store/memory_floor.hpp>
#include <offheap/expiry.hpp>
#include <offheap/options.hpp>
#include <offheap/policy.hpp>
#include <offheap/stats.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

namespace offheap::detail {

template <Policy P>
class StoreEngine {
 public:
  using Shard = detail::Shard<P>;
  using Shards = ShardSet<Shard>;
  static constexpr std::size_t kMaxKeyBytes = record::kMaxKeyBytes;
  static constexpr std::uint64_t kMaxValueBytes = record::kMaxValueBytes;

  /// Checks `options`, finds or creates the directory of a file-backed
  /// store (before which a new store's memory limit is checked), and maps
  /// every shard's first structures; a file-backed store's records are
  /// not read yet (Lifecycle::open does that).
  /// Throws: as OffHeapStore's constructor.
  explicit StoreEngine(Options options)
      : options_(checked_options<Shard::kEvicts, Shard::kLocks>(std::move(options))),
        store_name_(options_.name, options_.memory_limit_bytes, options_.huge_pages),
        files_(open_files(options_)),
        hash_(options_.hash_seed ? *options_.hash_seed : random_u64()),
        counters_(store_name_),
        shards_(floor_checked_shards(), shard_config(options_, files_.get()), store_name_, hash_, walks_) {
    if constexpr (Shard::kEvicts) {
      const std::uint64_t share = options_.capacity_bytes / shards_.size();
      for (Shard& s : shards_) s.set_capacity(share, std::max<std::uint64_t>(share / 16, 4096));
    }
  }
  StoreEngine(const StoreEngine&) = delete;
  StoreEngine& operator=(const StoreEngine&) = delete;

  const std::string& name() const noexcept { return options_.name; }
  /// The store's identity for the scopes that refuse re-entry: the
  /// compute and fill functions (t_in_compute) and the removal listener
  /// (t_in_removal_listener) record it while they run.
  const void* id() const noexcept { return this; }

  /// A store in anonymous memory after close(), or a file-backed one whose
  /// files were closed. Relaxed: close() requires that no other thread is
  /// writing; readers only compare.
  bool closed() const noexcept {
    return files_ ? files_->closed.load(std::memory_order_relaxed) : closed_.load(std::memory_order_relaxed);
  }
  /// Nothing may change the records any more: closed, or opened read-only.
  bool writes_stopped() const noexcept { return closed() || (files_ && files_->read_only); }
  /// Whether removed records wait for the listener or a sync (periodic)
  /// before their space is free.
  bool removals_wait() const noexcept {
    return options_.on_removal || (files_ && options_.durability == Durability::periodic);
  }

  /// The store's time: ms since the Unix epoch (Options::clock).
  std::uint64_t now_ms() const noexcept {
    return options_.clock != nullptr ? options_.clock->now_ms() : default_now_ms();
  }
  /// The deadline a write with `ttl` gets (0: none); reads the clock only
  /// when there is one.
  std::uint64_t deadline_for(const Ttl& ttl) const noexcept {
    if (ttl.is_default() && options_.default_ttl.count() == 0) [[likely]] return 0;
    return ttl.deadline(now_ms(), static_cast<std::uint64_t>(options_.default_ttl.count()));
  }
  static std::int64_t now_ns() noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  /// Runs fn(shard number) for every shard on up to one thread per core.
  template <class F>
  void parallel_for_shards(F&& fn) {
    parallel_for(shards_.size(), fn);
  }

  /// Every read: the key's shard, counted as a hit or a miss when `count`
  /// and Options::record_stats. Writes nothing otherwise. on_hit(location,
  /// record, meta, stamp) runs on the record in place and says whether
  /// what it read is valid (record::validate); it may run more than once.
  template <class OnHit>
  [[gnu::always_inline]] bool find(std::string_view key, bool count, OnHit&& on_hit) const {
    return find(key, key.size() <= kMaxKeyBytes ? hash_(key) : 0, count, on_hit);
  }
  /// find() with key's hash already computed (ignored for a key too long).
  template <class OnHit>
  [[gnu::always_inline]] bool find(std::string_view key, std::uint64_t h, bool count, OnHit&& on_hit) const {
    bool hit = false;
    if (key.size() <= kMaxKeyBytes) [[likely]] {
      hit = shards_.for_hash(h).lookup(key, h, on_hit);
    }
    if (count && options_.record_stats) [[unlikely]] {
      counters_.count(ThreadNumbers::current(), hit);
    }
    return hit;
  }

  /// Copies a record's value into `out`, sized to it (a string of that
  /// length already, as in a loop of gets of one size, needs no call).
  /// The caller validates the stamp afterwards.
  [[gnu::always_inline]] static void copy_value(std::string& out, const std::byte* rec, const record::Meta& m) {
    if (out.size() != m.value_len) out.resize(m.value_len);
    record::copy_out(out.data(), rec, m.key_len, m.value_len);
  }

  /// Calls fn on a record's value where it lies, in every build.
  /// ThreadSanitizer cannot see that the stamps, checked after fn, validate
  /// what fn read, and would report fn's plain loads racing a writer's
  /// stores: TSan builds ignore fn's memory accesses (memory/os.hpp;
  /// store.hpp's essay says what TSan then does not check).
  template <class F>
  static decltype(auto) call_in_place(F& fn, const std::byte* rec, const record::Meta& m) {
    const std::string_view value(record::value_bytes(rec, m.key_len), m.value_len);
    const TsanIgnoreAccesses seqlock_race;
    return fn(value);
  }

  /// The engine's figures: the shards', the readers' counters, memory
  /// (the open's and the thread's are added by their owners).
  Stats stats() const {
    Stats s;
    s.name = options_.name;
    s.shards = shards_.size();
    for (const Shard& sh : shards_) sh.add_stats(s);
    counters_.sum(s.hits, s.misses);
    s.gets = s.hits + s.misses;
    for (const Shard& sh : shards_) {
      s.corrupt_records += sh.corrupt_records();
      s.deferred_records += sh.deferred_records();
    }
    s.capacity_bytes = options_.capacity_bytes;
    s.mapped_bytes += ReadCounters::mapped_bytes();
    s.memory_limit_bytes = options_.memory_limit_bytes;
    s.memory_mapped_bytes = store_name_.budget.used();
    std::erase_if(s.free_classes, [](const FreeClassStats& c) { return c.records == 0; });
    s.index_load = s.index_capacity == 0
                       ? 0.0
                       : static_cast<double>(s.records + s.index_tombstones) /
                             static_cast<double>(s.index_capacity);
    return s;
  }

  // ---- checks and their errors (checks.hpp) ---------------------------------
  void check_key(std::string_view key) const;
  /// key and value sizes, and the record they make against max_chunk_bytes.
  void check(std::string_view key, std::size_t value_size) const;
  /// A record with a deadline holds 8 bytes more than check() sized.
  void check_deadline_word(std::string_view key, std::size_t value_size, std::uint64_t deadline) const;
  [[noreturn, gnu::cold, gnu::noinline]] void throw_too_large(std::string_view key, std::size_t value_size,
                                                               bool deadline = false) const;
  /// Writes are refused inside compute(), and by read-only, closed and
  /// failed stores (`upkeep`: the maintenance thread, if any).
  [[gnu::always_inline]] void check_writable(const MaintenanceThread* upkeep) const;
  /// Calls that wait for the writer lock or the listener are refused from
  /// inside compute() or fill (`what`: the call), and `in_listener` ones
  /// also from inside the removal listener.
  void check_not_reentered(const char* what, bool in_listener) const;
  [[noreturn, gnu::cold]] void throw_maintenance_failed(const MaintenanceThread& upkeep) const;
  [[gnu::cold]] void check_files_writable() const;
  [[noreturn, gnu::cold]] void throw_closed() const;
  [[noreturn, gnu::cold]] void throw_sync_failed(int err) const;
  [[noreturn, gnu::cold]] void throw_in_compute(const char* what) const;
  [[noreturn, gnu::cold]] void throw_in_listener(const char* what) const;

  // ---- state (see the invariants above) -------------------------------------
  Options options_;                     // completed by the constructor, then never changed
  StoreName store_name_;                // the name and memory budget every part maps through
  std::unique_ptr<StoreFiles> files_;   // null: anonymous memory
  typename P::Hash hash_;
  mutable WalkGate walks_;              // for_each walks and scan steps in progress
  const std::uint64_t instance_ = random_u64() | 1;  // tells this store's cursors from another's
  ReadCounters counters_;
  Shards shards_;
  // An anonymous store's close() (file-backed stores: files_->closed).
  std::atomic<bool> closed_{false};

 private:
  static std::unique_ptr<StoreFiles> open_files(Options& o) {
    if (o.path.empty()) return nullptr;
    // A new store's limit is checked before anything is created for it
    // (an existing one's shard count is its own: checked once read).
    std::error_code ec;
    if (!o.read_only && o.memory_limit_bytes != 0 && !std::filesystem::exists(o.path / "meta", ec)) {
      Options n = o;
      if (n.shards == 0) n.shards = default_shards();
      check_memory_floor<typename Shard::Eviction>(n);
    }
    return open_store_files(o, P::id, default_shards());
  }
  /// The shard count, once the limit is known to hold a record in each
  /// (Errc::out_of_space naming the least one otherwise): a writable
  /// store's open refuses a limit under which no write could succeed.
  std::uint32_t floor_checked_shards() const {
    if (!options_.read_only) check_memory_floor<typename Shard::Eviction>(options_);
    return options_.shards;
  }
};

}  // namespace offheap::detail

#include <offheap/detail/store/checks.hpp>
