// SPDX-License-Identifier: Apache-2.0
// The walks (for_each, scan steps) in progress in a store, counted so that
// an index table replaced under a walk keeps its pages until the walk has
// left (Index::drop_retired) and so that a migration moves no entry under a
// walk (Index::migrate).
#pragma once

#include <atomic>
#include <cstdint>

namespace offheap::detail {

/// Walks (Store::for_each) in progress in a store. A walk goes on through a
/// table that growth replaced under it, so a replaced table is kept as it
/// was until every walk that may be inside it has ended (Index::drop_retired).
///
/// Two counts, by the parity of an epoch (a grace period for walks only;
/// lookups never touch the gate): a walk counts itself in the count of the
/// epoch it entered; a replaced table is tagged with the epoch current
/// after its successor was published; the epoch moves from E to E + 1 only
/// when no walk of E - 1 is left (their count, of E + 1's parity, is 0), so
/// at epoch E every walk of E - 2 or before has ended, and a table tagged r
/// may go at epoch r + 2. Walks that keep overlapping (the count of walks
/// in progress never 0) hold back only the tables replaced while they ran.
/// Every operation is seq_cst (walks and replacements are rare): one total
/// order, so a tag read after a walk's entry is at least that walk's epoch.
class WalkGate {
 public:
  /// Before the walk loads any table; returns the ticket to give leave().
  /// The fence pairs with the one in Index::retire(): either the writer's
  /// tag is at least this walk's epoch (read before this fence), or the
  /// walk sees the table the writer published before its fence.
  [[nodiscard]] unsigned enter() noexcept {
    std::uint64_t e = epoch_.load();
    for (;;) {
      active_[e & 1].fetch_add(1);
      // Counted in e's parity while the epoch was still e: flips past e + 1
      // wait for this walk. (A flip between the load and the count would
      // not have seen it: counted again, in the new epoch.)
      const std::uint64_t now = epoch_.load();
      if (now == e) break;
      active_[e & 1].fetch_sub(1);
      e = now;
    }
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return static_cast<unsigned>(e & 1);
  }
  /// Release (seq_cst): the walk's reads of tables happen before a writer
  /// that sees its count fall drops their pages.
  void leave(unsigned ticket) noexcept { active_[ticket].fetch_sub(1); }

  /// The epoch a table replaced now is tagged with. The caller published
  /// the replacement first; the fence pairs with the one in enter().
  std::uint64_t tag() const noexcept {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return epoch_.load();
  }
  /// Whether any walk is in progress. Seq_cst: pairs with the walk's count
  /// in enter() (Index::migrate()'s handshake with Index::wait_moves()).
  bool active() const noexcept { return active_[0].load() + active_[1].load() != 0; }

  /// Moves the epoch on as far as ended walks allow (at most twice) and
  /// says whether a table tagged `tag` may go: no walk of `tag` or before
  /// is still in progress.
  bool passed(std::uint64_t tag) noexcept {
    for (int i = 0; i < 2; ++i) {
      std::uint64_t e = epoch_.load();
      if (e >= tag + 2) return true;
      if (active_[(e + 1) & 1].load() != 0) return false;
      epoch_.compare_exchange_strong(e, e + 1);  // another writer may have moved it: fine
    }
    return epoch_.load() >= tag + 2;
  }

 private:
  std::atomic<std::uint64_t> epoch_{2};
  std::atomic<std::uint64_t> active_[2] = {};
};

}  // namespace offheap::detail
