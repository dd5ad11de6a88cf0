// SPDX-License-Identifier: Apache-2.0
// A shard's index growing under its readers. A small table is rebuilt at
// once; a larger one is migrated: the new table is published empty beside
// it, inserts go to the new one, and every write moves the next few groups
// of the old one (each entry's hash recomputed from its record's key, read
// inside its chunk) until none is left, when the old table is retired:
// its pages go back to the OS once no walk is in progress, its address
// range stays for readers still inside (index.hpp). No write waits for
// work proportional to the shard's entries, unless walks hold a migration
// back until the new table fills (Index::grow).
#pragma once

#include <offheap/detail/index/migration.hpp>
#include <offheap/detail/journal/record.hpp>

namespace offheap::detail {

/// A shard's index grown under its readers (S: the shard, which lets it in
/// and forwards to it); no state of its own.
template <class S>
class IndexGrowth {
 public:
  /// Makes room for one more entry (Index::grow).
  static void grow_index(S& sh);
  /// One migration step, if a migration is under way (Index::migrate):
  /// the writer's, under the lock, before it looks for its key.
  static void migrate_index(S& sh, std::uint64_t groups = Index::kMoveGroups) noexcept;
  /// Moves the rest at once (recovery, a clean close).
  static void finish_index_migration(S& sh) noexcept;

 private:
  static bool rehash(S& sh, Location loc, std::uint64_t& h) noexcept;
};

/// An entry's hash from its record's key, read inside its chunk: an entry
/// whose record a damaged file made unreadable is left out, counted. So is
/// one whose record fails its checksum (when reads check them): its
/// header's key may not be the key the entry was filed under, and rehashing
/// it there would serve the damaged record as another key's (a key length
/// damaged to 0: the empty key's).
template <class S>
bool IndexGrowth<S>::rehash(S& sh, Location loc, std::uint64_t& h) noexcept {
  std::uint64_t avail = 0;
  const std::byte* rec = sh.journal_.resolve(loc, record::kMinRecord, avail);
  const record::Meta m = rec != nullptr ? record::read_meta(rec) : record::Meta{};
  // (Recovery indexes dead markers too, until it has seen every record.)
  if (rec == nullptr ||
      (m.state() != record::State::live && m.state() != record::State::dead) ||
      record::kHeaderBytes + record::payload_for(m.key_len, m.value_len) > avail ||
      (sh.verify_ && record::checksum_in_place(sh.crc_seed_, rec, loc, record::read_stamp(rec),
                                            m.encode(), avail) != record::stored_checksum(rec))) {
    assert(sh.durable_);
    sh.corrupt_.fetch_add(1, std::memory_order_relaxed);
    sh.records_.store(sh.records_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
    if (sh.durable_) sh.journal_.set_records_hint(sh.size());  // (as ShardIntegrity::drop_damaged)
    return false;
  }
  h = sh.hash_(std::string_view(reinterpret_cast<const char*>(rec + record::kHeaderBytes), m.key_len));
  return true;
}

template <class S>
void IndexGrowth<S>::grow_index(S& sh) {
  sh.index_.grow([&sh](Location loc, std::uint64_t& h) { return rehash(sh, loc, h); }, sh.walks_);
  // A migration began: the maintenance thread finishes it if writes stop
  // before they have (Shard::help_index_migration).
  if (sh.index_.migrating()) sh.want_round();
}

template <class S>
void IndexGrowth<S>::migrate_index(S& sh, std::uint64_t groups) noexcept {
  sh.index_.migrate([&sh](Location loc, std::uint64_t& h) { return rehash(sh, loc, h); },
                    [&sh](Location loc) {
                      // The record's first line, ahead of the hash: the
                      // step's record reads overlap instead of queuing.
                      std::uint64_t avail = 0;
                      if (const std::byte* rec = sh.journal_.resolve(loc, record::kMinRecord, avail)) {
                        __builtin_prefetch(rec);
                      }
                    },
                    sh.walks_, groups);
}

template <class S>
void IndexGrowth<S>::finish_index_migration(S& sh) noexcept {
  sh.index_.finish_migration([&sh](Location loc, std::uint64_t& h) { return rehash(sh, loc, h); },
                             sh.walks_);
}

}  // namespace offheap::detail
