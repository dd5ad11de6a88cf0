// SPDX-License-Identifier: Apache-2.0
// Where a shard's records go: room for a new record from the free lists
// (split when the rest can hold a free record) or from the journal's tail,
// and freed slots merged with free neighbours, given back to the tail when
// they end there, or pushed on their class's list.
//
// A merge destroys record starts: the freed record (and any free record it
// absorbs) no longer begins where a reader holding its old location looks,
// and the merged space may soon hold another record's value bytes, which a
// writer may shape like a header. So a merge moves the index generation
// (Index::invalidate_readers) before the merged record can be reused: a
// reader that loaded the older generation concludes nothing from what it
// read. Every neighbour a merge follows is checked first (FreeLists::sound):
// in a store reopened from its state files, a footer, a capacity or a link
// may say anything.
#pragma once

#include <offheap/detail/shard/shard.hpp>

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <string_view>

namespace offheap::detail {

template <class P>
void Shard<P>::rewrite_in_place(Location loc, std::byte* rec, std::uint64_t cap, std::uint64_t need,
                      std::string_view key, std::string_view value, std::uint8_t type,
                      std::uint64_t deadline) noexcept {
  if (cap - need < record::kMinRecord) {
    record::rewrite_value(rec, next_stamp(), key, value, type, cap, deadline);
    return;
  }
  // Shrink, and free the tail of the old payload.
  record::rewrite_value(rec, next_stamp(), key, value, type, need, deadline);
  const Location rest = Location::make(loc.chunk(), loc.offset() + record::kHeaderBytes + need);
  release(rest, journal_.at(rest), cap - need - record::kHeaderBytes, false);
  live_bytes_ -= cap - need;
}

template <class P>
typename Shard<P>::Slot Shard<P>::allocate(std::uint64_t need, bool grow, std::uint64_t revive_most) {
  FreeLists::Taken t = free_.take(need);
  if (t.loc.is_none() && journal_.emptied_chunks() != 0 && need <= record::kMaxFreeCapacity &&
      !journal_.tail_fits(record::kHeaderBytes + need) && compaction_.revive_chunk(*this, record::kHeaderBytes + need, revive_most)) {
    t = free_.take(need);  // an emptied chunk before a new one (compaction.hpp)
  }
  if (!t.loc.is_none()) {
    const bool prev_free = record::read_meta(t.rec).prev_free();
    if (t.capacity - need < record::kMinRecord) {
      // Taken whole: the record after it no longer follows a free one.
      if (std::byte* next = journal_.record_after(t.loc, record::kHeaderBytes + t.capacity)) {
        record::set_prev_free(next, false);
      }
      return {t.loc, t.rec, t.capacity, prev_free};
    }
    const Location rest =
        Location::make(t.loc.chunk(), t.loc.offset() + record::kHeaderBytes + need);
    release(rest, journal_.at(rest), t.capacity - need - record::kHeaderBytes, false);
    return {t.loc, t.rec, need, prev_free};
  }
  if (!grow && !journal_.tail_fits(record::kHeaderBytes + need)) return {Location::none(), nullptr, 0, false};
  free_.reserve_chunks(journal_.chunks() + 1);  // may throw; nothing has changed yet
  if (journal_.store_name().budget.limit() != 0 && !journal_.tail_fits(record::kHeaderBytes + need)) {
    journal_.set_companions(companion_bytes());  // a chunk may be added: see Journal::keep_beside()
  }
  Location loc;
  try {
    loc = journal_.append(  // may throw; nothing has changed yet
        record::kHeaderBytes + need, [this](Location l, std::byte* r, std::uint64_t bytes) {
          // Space the tail skips, after a live record (a free record never
          // ends at the tail: release() hands it back).
          push_free_range(l, r, bytes, false, next_stamp());
        });
  } catch (LimitReached& e) {
    // A cache's evictions free space in the chunks there are: no help to a
    // record none of them could hold.
    e.evicting_helps = journal_.a_chunk_holds(record::kHeaderBytes + need);
    throw;
  }
  return {loc, journal_.at(loc), need, false};
}

/// What the shard maps beside its journal that grows with its records: the
/// index's table (which doubles), the policy's structures and read rings,
/// the expiry wheel, the lists and queue of removals waiting for a sync or
/// the listener.
template <class P>
std::uint64_t Shard<P>::companion_bytes() const noexcept {
  std::uint64_t b = index_.mapped_bytes() + expiry_.mapped_bytes() + deferred_.mapped_bytes() +
                    dead_.mapped_bytes() + removals_.mapped_bytes() + pages_.mapped_bytes();
  if constexpr (kEvicts) b += policy_.stats().mapped_bytes + hits_.mapped_bytes();
  return b;
}

/// Makes `bytes` (>= kMinRecord) at `l` free records, in pieces that fit
/// the 32-bit capacity field; `prev_free`: the record before is free.
template <class P>
void Shard<P>::push_free_range(Location l, std::byte* r, std::uint64_t bytes, bool prev_free,
                     std::uint64_t stamp) noexcept {
  if (durable_) journal_.mark_dirty(l.chunk());
  while (bytes != 0) {
    const std::uint64_t piece = record::free_piece(bytes);
    free_.push(r, l, piece - record::kHeaderBytes, stamp, prev_free);
    pages_.note_freed(*this, l, stamp, piece - record::kHeaderBytes);
    prev_free = true;
    l = Location::make(l.chunk(), l.offset() + piece);
    r += piece;
    bytes -= piece;
  }
}

/// Frees the slot at `loc` (payload `cap` bytes; `prev_free`: the record
/// before it is free). Merges it with the free records on either side in
/// its chunk (up to the 32-bit capacity), then gives the whole back to the
/// journal's tail if it ends there, else pushes it on a free list and marks
/// the record after it. Either way the slot's stamp changes first.
template <class P>
void Shard<P>::release(Location loc, std::byte* rec, std::uint64_t cap, bool prev_free) noexcept {
  constexpr std::uint64_t kHeader = record::kHeaderBytes;
  if (durable_) journal_.mark_dirty(loc.chunk());
  if (cap > record::kMaxFreeCapacity) [[unlikely]] {
    release_huge(loc, rec, cap, prev_free);
    return;
  }
  // The slot's own stamp changes before anything else, even if it is about
  // to vanish into the free record before it: a reader still copying it
  // must fail its second check before a footer or link lands in its bytes.
  record::write_free(rec, next_stamp(), cap, Location::none(), Location::none(), prev_free);
  bool merged = false;
  if (prev_free && loc.offset() >= record::kMinRecord) {
    // The footer says where the free record before starts; in a file it
    // may say anything, so it is followed only to a sound free record on
    // its list (else no merge: always so but in a damaged file).
    const std::uint64_t pcap = record::capacity_from_footer(load_relaxed(word_at(rec - 8)));
    if (FreeLists::valid_capacity(pcap) && pcap + kHeader <= loc.offset() &&
        pcap + kHeader + cap <= record::kMaxFreeCapacity) {
      const Location ploc = Location::make(loc.chunk(), loc.offset() - kHeader - pcap);
      const bool sound = free_.may_follow(ploc, FreeLists::class_of(pcap));
      assert(sound || durable_);
      if (sound && free_.unlink(ploc, pcap)) {
        std::byte* prec = journal_.at(ploc);
        merged = true;
        prev_free = record::read_meta(prec).prev_free();
        loc = ploc;
        rec = prec;
        cap += kHeader + pcap;
      }
    }
  }
  for (;;) {
    std::byte* next = journal_.record_after(loc, kHeader + cap);
    if (next == nullptr) break;
    const record::Meta m = record::read_meta(next);
    if (m.state() != record::State::free) break;
    const std::uint64_t ncap = m.value_len;
    if (!FreeLists::valid_capacity(ncap) || cap + kHeader + ncap > record::kMaxFreeCapacity) break;
    const Location nloc = Location::make(loc.chunk(), loc.offset() + kHeader + cap);
    if (!free_.may_follow(nloc, FreeLists::class_of(ncap)) || !free_.unlink(nloc, ncap)) {
      assert(durable_);
      break;
    }
    merged = true;
    cap += kHeader + ncap;
  }
  // Record starts inside the merged record are gone: its space may now be
  // reused for values shaped like headers, at locations readers may hold.
  // So are the starts a tail moved back over: the next appends cover them,
  // along with any start an earlier retreat left past the tail.
  const bool retracted = journal_.retract_tail(loc, kHeader + cap);
  if (merged || retracted) index_.invalidate_readers();
  if (retracted) {
    // Beyond the tail now; still stamped afresh for readers holding it.
    record::write_free(rec, next_stamp(), cap, Location::none(), Location::none(), prev_free);
    if (prev_free) retract_over_free(loc, rec);
    // Pages past the tail may go back to the OS (page_release.hpp).
    if (journal_.tail_high() >= journal_.tail_offset() + page_size()) want_round();
    return;
  }
  const std::uint64_t stamp = next_stamp();
  free_.push(rec, loc, cap, stamp, prev_free);
  if (std::byte* next = journal_.record_after(loc, kHeader + cap)) record::set_prev_free(next, true);
  pages_.note_freed(*this, loc, stamp, cap);  // its whole pages may go back to the OS
  compaction_.note_freed(*this);  // a round once compaction is due
}

/// release() of a record whose payload passes what a free record's 32-bit
/// capacity can say (a value near 4 GiB): freed as several free records,
/// the first at its start (its stamp changes first), merged with nothing.
template <class P>
void Shard<P>::release_huge(Location loc, std::byte* rec, std::uint64_t cap, bool prev_free) noexcept {
  constexpr std::uint64_t kHeader = record::kHeaderBytes;
  if (journal_.retract_tail(loc, kHeader + cap)) {
    index_.invalidate_readers();
    record::write_free(rec, next_stamp(), record::kMaxFreeCapacity, Location::none(),
                       Location::none(), prev_free);
    if (prev_free) retract_over_free(loc, rec);
    if (journal_.tail_high() >= journal_.tail_offset() + page_size()) want_round();
    return;
  }
  push_free_range(loc, rec, kHeader + cap, prev_free, next_stamp());
  if (std::byte* next = journal_.record_after(loc, kHeader + cap)) record::set_prev_free(next, true);
}

/// After the tail moved back to `loc` (`rec`): a free record that ends
/// there (one a merge could not absorb: past the 32-bit capacity, or
/// damaged) leaves its list and the tail moves back over it too, so that no
/// free record ends at the tail and the next record appended has no free
/// record before it. (The caller has moved the generation.)
template <class P>
void Shard<P>::retract_over_free(Location loc, std::byte* rec) noexcept {
  constexpr std::uint64_t kHeader = record::kHeaderBytes;
  while (loc.offset() >= record::kMinRecord) {
    const std::uint64_t pcap = record::capacity_from_footer(load_relaxed(word_at(rec - 8)));
    if (!FreeLists::valid_capacity(pcap) || pcap + kHeader > loc.offset()) return;
    const Location ploc = Location::make(loc.chunk(), loc.offset() - kHeader - pcap);
    if (!free_.may_follow(ploc, FreeLists::class_of(pcap)) || !free_.unlink(ploc, pcap)) return;
    std::byte* prec = journal_.at(ploc);
    const bool before_free = record::read_meta(prec).prev_free();
    if (!journal_.retract_tail(ploc, kHeader + pcap)) return;  // it ends at the tail: always
    record::write_free(prec, next_stamp(), pcap, Location::none(), Location::none(), before_free);
    if (!before_free) return;
    loc = ploc;
    rec = prec;
  }
}

}  // namespace offheap::detail
