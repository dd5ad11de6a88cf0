// SPDX-License-Identifier: Apache-2.0
// A shard's index growing under its readers: the new table is built from
// the records' keys (each read inside its chunk), published, and the old one
// retired to the epoch domain, which frees it once every reader that may
// hold it has left (epoch.hpp). AddressSanitizer builds keep freed tables
// mapped but poisoned, so that a reader that outlived its grace period is
// reported.
#pragma once

#include <offheap/detail/shard.hpp>

#include <cassert>
#include <cstdint>
#include <string_view>

namespace offheap::detail {

/// Grows (or rebuilds) the index; every entry's key is read from its
/// record, inside its chunk: an entry whose record a damaged file made
/// unreadable is left out, counted. So is one whose record fails its
/// checksum (when reads check them): its header's key may not be the key
/// the entry was filed under, and rehashing it there would serve the
/// damaged record as another key's (a key length damaged to 0: the empty
/// key's).
template <class P>
void Shard<P>::grow_index() {
  retire(index_.grow([this](Location loc, std::uint64_t& h) {
    std::uint64_t avail = 0;
    const std::byte* rec = journal_.resolve(loc, record::kMinRecord, avail);
    const record::Meta m = rec != nullptr ? record::read_meta(rec) : record::Meta{};
    // (Recovery indexes dead markers too, until it has seen every record.)
    if (rec == nullptr ||
        (m.state() != record::State::live && m.state() != record::State::dead) ||
        record::kHeaderBytes + record::payload_for(m.key_len, m.value_len) > avail ||
        (verify_ && record::checksum_in_place(crc_seed_, rec, loc, record::read_stamp(rec),
                                              m.encode()) != record::stored_checksum(rec))) {
      assert(durable_);
      corrupt_.fetch_add(1, std::memory_order_relaxed);
      records_.store(records_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
      return false;
    }
    h = hash_(std::string_view(reinterpret_cast<const char*>(rec + record::kHeaderBytes), m.key_len));
    return true;
  }));
}

/// Hands an index table that growth replaced to the epoch domain: it is
/// freed once no reader can still be inside it. The lock is held.
template <class P>
void Shard<P>::retire(IndexTable* t) noexcept {
  t->retire_epoch = domain_.advance();
  t->next_retired = retired_;
  retired_ = t;
  reclaim();
}

/// Frees the retired tables that every reader has left. The lock is held
/// (or the shard is being destroyed).
template <class P>
void Shard<P>::reclaim() noexcept {
  if (retired_ == nullptr) return;
#if defined(OFFHEAP_TESTING_NO_GRACE_PERIOD)
  // Test-only build: frees at once, to prove the reclamation test can fail.
  free_retired(~std::uint64_t{0});
#elif defined(OFFHEAP_TESTING_GRACE_OFF_BY_ONE)
  // Test-only build: also frees what readers of the oldest epoch inside may
  // still hold (one epoch early), to prove the test sees an off-by-one.
  const std::uint64_t safe = domain_.safe_epoch();
  free_retired(safe == 0 ? 0 : safe + 1);
#else
  free_retired(domain_.safe_epoch());
#endif
}

template <class P>
void Shard<P>::free_retired(std::uint64_t safe) noexcept {
  for (IndexTable** link = &retired_; *link != nullptr;) {
    IndexTable* t = *link;
    if (t->retire_epoch <= safe) {
      *link = t->next_retired;
#if defined(OFFHEAP_ASAN)
      // Kept mapped but poisoned (all but the header), so that a reader
      // that outlived its grace period is reported; unmapped with the shard.
      asan_poison(t + 1, t->mapped_bytes - sizeof(IndexTable));
      t->next_retired = quarantine_;
      quarantine_ = t;
#else
      IndexTable::destroy(t);
#endif
    } else {
      link = &t->next_retired;
    }
  }
}

}  // namespace offheap::detail
