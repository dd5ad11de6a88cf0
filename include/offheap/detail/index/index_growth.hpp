// SPDX-License-Identifier: Apache-2.0
// A shard's index growing under its readers: the new table is built from
// the records' keys (each read inside its chunk), published, and the old one
// retired: its pages go back to the OS once no walk is in progress, its
// address range stays for readers still inside (index.hpp).
#pragma once

#include <offheap/detail/index/index.hpp>
#include <offheap/detail/journal/record.hpp>

namespace offheap::detail {

/// A shard's index grown under its readers (S: the shard, which lets it in
/// and forwards to it); no state of its own.
template <class S>
class IndexGrowth {
 public:
  static void grow_index(S& sh);
};

/// Grows (or rebuilds) the index; every entry's key is read from its
/// record, inside its chunk: an entry whose record a damaged file made
/// unreadable is left out, counted. So is one whose record fails its
/// checksum (when reads check them): its header's key may not be the key
/// the entry was filed under, and rehashing it there would serve the
/// damaged record as another key's (a key length damaged to 0: the empty
/// key's).
template <class S>
void IndexGrowth<S>::grow_index(S& sh) {
  sh.index_.grow([&sh](Location loc, std::uint64_t& h) {
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
      return false;
    }
    h = sh.hash_(std::string_view(reinterpret_cast<const char*>(rec + record::kHeaderBytes), m.key_len));
    return true;
  }, sh.walks_);
}

}  // namespace offheap::detail
