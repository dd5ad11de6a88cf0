// SPDX-License-Identifier: Apache-2.0
// Memory back to the OS while the store runs: the whole pages inside free
// records, and those past the journal's tail, are handed back
// (MADV_DONTNEED) by the maintenance thread (or maintain()), under the
// shard's writer lock, so that no writer fills a free record meanwhile.
//
//   release() / push_free_range() ──note_freed()──> freed_ (mapped FIFO of
//        (under the writer lock)                    location + stamp)
//   release_pages(): pops; a record still free with that stamp gives back
//        its pages between its links and its footer (both stay: the free
//        lists and the merges still read them), then the tail's.
//
// Addresses stay mapped: a reader holding an old location reads zeros (an
// anonymous chunk; no stamp check accepts 0) or the file's bytes (a
// file-backed chunk, as the freed record left them), and the index
// generation or the stamp turns it away as before. A writer that takes the
// free record later faults the pages in afresh. File-backed stores keep
// their disk space: the pages leave the process's memory (and the page
// cache may drop them once written back), but no hole is punched in the
// files, so that a store through the mapping never meets a full disk.
#pragma once

#include <offheap/detail/shard.hpp>

#include <cstdint>

namespace offheap::detail {

template <class P>
void Shard<P>::note_freed(Location loc, std::uint64_t stamp, std::uint64_t cap) noexcept {
  // Only a free record with a whole page between its links (the first 16
  // payload bytes) and its footer (the last 8): at least two pages of
  // payload covers every alignment.
  if (cap < 2 * page_size()) return;
  try {
    freed_.push_back(Freed{loc.raw(), stamp});
  } catch (...) {
    ++freed_dropped_;  // no room for the queue: these pages stay until the record is freed again
    return;
  }
  want_round();
}

template <class P>
std::uint64_t Shard<P>::release_pages(std::uint64_t max_bytes, bool* more) {
  const WriteLock guard(*this);
  const std::uint64_t page = page_size();
  std::uint64_t released = 0;
  while (!freed_.empty() && released < max_bytes) {
    const Freed f = freed_.front();
    freed_.pop_front();
    const Location loc = Location::from_raw(f.loc);
    std::uint64_t avail = 0;
    std::byte* rec = const_cast<std::byte*>(journal_.resolve(loc, record::kMinRecord, avail));
    // Still the free record that was queued: same stamp (a merge, a split
    // or a reuse since drew a new one; the new record was queued then).
    if (rec == nullptr || record::read_stamp(rec) != f.stamp) continue;
    const record::Meta m = record::read_meta(rec);
    if (m.state() != record::State::free || record::kHeaderBytes + m.value_len > avail) continue;
    const auto start = reinterpret_cast<std::uintptr_t>(rec);
    const std::uint64_t from = round_up(start + record::kHeaderBytes + record::kMinPayload, page);
    const std::uint64_t to = (start + record::kHeaderBytes + m.value_len - 8) / page * page;
    if (to <= from) continue;
    if (discard_pages(reinterpret_cast<void*>(from), to - from)) released += to - from;
  }
  released += journal_.release_past_tail();
  released_bytes_ += released;
  plan_next_round(now_ms());
  if (more != nullptr) *more = !freed_.empty();
  return released;
}

}  // namespace offheap::detail
