// SPDX-License-Identifier: Apache-2.0
// Lifecycle<P>: a store's open, sync() and close(), and the figures of its
// open. It owns the close mutex (close() holds it through its syncs, and a
// sync() that finds the store closing waits on it) and what the open found
// (rebuilt, superseded records, its duration); it works on the engine
// (engine.hpp) and on Upkeep (upkeep.hpp: the thread it stops, the reports
// it sends, the syncs it runs), which outlive it.
//
// open(): a file-backed store's shards map their chunks, then each loads
// its saved state (after a clean close) or rebuilds it from its records,
// shards in parallel; deadlines and cache policies are learned again; a
// writable store is then marked in use (not clean), durably, before any
// write, and what expired while it was closed leaves.
// close(): stops the thread, reports the removals still waiting, writes
// every record to disk (three passes: records, the frees they allow, the
// dead markers those free), saves each shard's state and marks the store
// clean, unless it met damage (then its next open rebuilds it).
//
// Thread safety: open() runs in the constructor; close() requires that no
// other thread writes; sync() may run on any number of threads, also while
// close() runs (it then waits for close()'s syncs and says if they failed).
#pragma once

#include <offheap/detail/store/engine.hpp>
#include <offheap/detail/store/upkeep.hpp>
#include <offheap/stats.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <mutex>
#include <string>
#include <vector>

namespace offheap::detail {

template <Policy P>
class Lifecycle {
 public:
  using Engine = StoreEngine<P>;
  using Shard = typename Engine::Shard;

  Lifecycle(Engine& e, Upkeep<P>& u) noexcept : e_(e), u_(u) {}
  Lifecycle(const Lifecycle&) = delete;
  Lifecycle& operator=(const Lifecycle&) = delete;

  /// Maps every shard's chunks, then loads each shard's state (clean close)
  /// or rebuilds it from its records, shards in parallel; then marks the
  /// store in use (not clean) before any write can happen. File-backed
  /// stores only.
  void open();
  /// OffHeapStore::close() (store.hpp says what it promises).
  void close();
  /// OffHeapStore::sync().
  void sync();
  /// What the open found, into `s`.
  void add_stats(Stats& s) const noexcept {
    s.rebuilt = rebuilt_;
    s.superseded_records = superseded_;
    s.open_seconds = open_seconds_;
  }

 private:
  Engine& e_;
  Upkeep<P>& u_;
  std::mutex close_mutex_;  // held by close() through its syncs (see sync())
  bool rebuilt_ = false;
  std::uint64_t superseded_ = 0;
  double open_seconds_ = 0;
};

template <Policy P>
void Lifecycle<P>::open() {
  const auto start = std::chrono::steady_clock::now();
  StoreFiles& f = *e_.files_;
  for (std::uint32_t i = 0; i < e_.shards_.size(); ++i) {
    e_.shards_.begin()[i].journal().attach(f.chunk_counts[i], e_.store_name_);
  }
  const bool clean = f.meta.clean == 1 && !f.created;
  std::vector<std::uint8_t> rebuilt(e_.shards_.size(), 0);
  std::vector<std::uint64_t> superseded(e_.shards_.size(), 0);
  const bool writable = !f.read_only;
  e_.parallel_for_shards([&](std::uint32_t i) {
    Shard& s = e_.shards_.begin()[i];
    std::string why;
    if (clean && s.load_state(f.meta.generation, why)) return;
    const typename Shard::Recovery r = s.recover(writable);
    rebuilt[i] = 1;
    superseded[i] = r.superseded;
  });
  for (std::uint32_t i = 0; i < e_.shards_.size(); ++i) {
    rebuilt_ = rebuilt_ || (rebuilt[i] != 0 && !f.created);
    superseded_ += superseded[i];
  }
  // Deadlines are kept in the records: the wheels learn them again, before
  // the policies (under Options::memory_limit_bytes, the wheel's entries
  // are not optional; a policy's ghost or sketch may do with less).
  if (writable) e_.parallel_for_shards([&](std::uint32_t i) { e_.shards_.begin()[i].rebuild_expiry(); });
  if constexpr (Shard::kEvicts) {
    if (writable) {
      for (Shard& s : e_.shards_) s.prepare_policy_rebuild();
      e_.parallel_for_shards([&](std::uint32_t i) { e_.shards_.begin()[i].rebuild_policy(rebuilt[i] != 0); });
    }
  }
  if (writable) {
    // Not clean from here on, durably, before the first write.
    f.meta.generation += 1;
    f.meta.clean = 0;
    write_meta(f, e_.name());
    for (std::uint32_t i = 0; i < e_.shards_.size(); ++i) {
      ::unlinkat(f.dir.get(), format::state_file_name(i).c_str(), 0);
    }
    // What expired while the store was closed leaves now (reported to the
    // listener, if any, by the first maintenance round).
    const std::uint64_t now = e_.now_ms();
    // Under Options::memory_limit_bytes, removals need dead markers and list
    // entries before a sync or a report frees anything: what finds no room
    // is left to the maintenance rounds.
    e_.parallel_for_shards([&](std::uint32_t i) {
      try {
        (void)e_.shards_.begin()[i].expire(now, ~std::uint64_t{0});
      } catch (const LimitReached&) {
        // (Not limited(): shards run on threads of their own here.)
      }
    });
  }
  u_.mark_synced();
  open_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

template <Policy P>
void Lifecycle<P>::close() {
  e_.check_not_reentered("close()", true);
  if (!e_.files_) {
    const std::lock_guard<std::mutex> closing(close_mutex_);
    if (e_.closed_.exchange(true, std::memory_order_relaxed)) return;
    u_.stop();
    u_.report_all();  // the removals still waiting (anonymous memory: no room to map for them)
    return;
  }
  // Held through the syncs and the saved state: a sync() from another
  // thread that sees the store closing waits for them (see sync()).
  const std::lock_guard<std::mutex> closing(close_mutex_);
  if (e_.files_->closed.exchange(true)) return;
  u_.stop();
  // A spare chunk made ahead of need goes with its file: the saved state
  // counts the chunks the directory holds (a spare left by a crash is an
  // empty chunk to the next open).
  if (!e_.files_->read_only) {
    for (Shard& s : e_.shards_) s.close_spare_chunks();
  }
  // Removals still waiting are reported (and their records freed) before
  // anything is saved: a saved store holds no retired record. If room to
  // free them cannot be mapped, the records are still written to disk and
  // the store left unclean (rebuilt at its next open); then close throws.
  std::exception_ptr report_error;
  if (!e_.files_->read_only) {
    try {
      u_.report_all();
    } catch (const Error&) {
      report_error = std::current_exception();
    }
  }
  if (e_.files_->read_only || e_.options_.durability == Durability::none) {
    e_.files_->close_synced.store(true, std::memory_order_relaxed);  // nothing to write
    return;
  }
  if (const int err = e_.files_->sync_error.load(std::memory_order_relaxed)) {
    throw Error(Errc::io_error, e_.name() + ": not closed cleanly: an earlier sync failed (" +
                                    errno_text(err) + ")");
  }
  // An index migration under way ends first: its moves read every record
  // left in the drained table, and one that meets damage counts it before
  // the check below (the state file then holds one table, as always).
  for (Shard& s : e_.shards_) (void)s.help_index_migration(~std::uint64_t{0}, true);
  // Three passes: the first writes the records and frees the old records
  // of updates (periodic), the second writes those frees and frees the
  // removals' dead markers, the third writes those.
  for (int pass = 0; pass < 3; ++pass) {
    for (Shard& s : e_.shards_) {
      if (const int err = s.sync(true)) {
        throw_os(err, e_.name(), "writing the records to disk at close (msync)");
      }
    }
  }
  e_.files_->close_synced.store(true, std::memory_order_relaxed);  // read under close_mutex_
  // A store that met damage (a record failing its checksum, a free list
  // dropped) is left unclean: its next open rebuilds every shard from its
  // records, which steps over the damage instead of trusting it.
  for (const Shard& s : e_.shards_) {
    if (s.damage_left() != 0) return;
    // Removed records the listener has not seen (report_all() failed to
    // map room to free them): in no list a saved state would keep.
    if (s.retired_left() != 0) {
      if (report_error) std::rethrow_exception(report_error);
      return;
    }
  }
  for (Shard& s : e_.shards_) s.save_state(e_.files_->meta.generation);
  sync_dir(e_.files_->dir.get(), e_.name(), e_.files_->path);
  e_.files_->meta.clean = 1;
  write_meta(*e_.files_, e_.name());
}

template <Policy P>
void Lifecycle<P>::sync() {
  e_.check_not_reentered("sync()", false);
  if (!e_.files_ || e_.files_->read_only) return;
  // From inside the listener while close() reports: close() makes it all
  // durable (and waiting for it here would wait for ourselves).
  if (t_in_removal_listener == e_.id() && e_.files_->closed.load()) return;
#if defined(OFFHEAP_TESTING_NO_SYNC)
  return;  // a broken build for tests only (tests/power_loss_test.cpp's twin)
#endif
  if (!u_.sync_shards()) {
    // close() began: its syncs make everything written before durable;
    // wait for them (it holds close_mutex_ throughout), and say if they
    // failed.
    const std::lock_guard<std::mutex> closed(close_mutex_);
    if (!e_.files_->close_synced.load(std::memory_order_relaxed)) {
      const int err = e_.files_->sync_error.load(std::memory_order_relaxed);
      throw Error(Errc::io_error, e_.name() + ": sync() during close(), whose writes to disk failed (" +
                                      errno_text(err != 0 ? err : EIO) + ")");
    }
  }
}

}  // namespace offheap::detail
