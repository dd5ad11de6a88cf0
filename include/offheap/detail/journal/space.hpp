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
//
// A record a cache write evicts to make its room is handed over to that
// write when it is large enough (Handover): the write takes it as it would
// take a free record, without the free-list round trip (push, merges, the
// neighbours' bits, take: a quarter of an evicting put's instructions).
// The evicted record stays as it was (live, its stamp unchanged, no slot
// leading to it) until allocate() hands it over: there it is stamped free
// (write_free) before the write stores a byte, as a freed record is, so a
// reader that loaded its location before the eviction's erase gets the
// old value whole or fails its stamp check. Only where the removal would
// free the record at once (anonymous memory, no removal listener): there
// is no file for a crash to find it in, and no report that must read it
// whole. The write's guard frees a record it did not take.
//
// ShardSpace<S> holds no state of its own: the journal and the free lists
// it works on are the shard's (S), which lets it in (friend) and forwards
// to it. Every call runs under the shard's writer lock.
#pragma once

#include <offheap/detail/index/index.hpp>
#include <offheap/detail/index/location.hpp>
#include <offheap/detail/journal/free_lists.hpp>
#include <offheap/detail/journal/journal.hpp>
#include <offheap/detail/journal/record.hpp>

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <string_view>

namespace offheap::detail {

/// The record evicted for a write's room, kept for that write (see above;
/// a member of the shard). `want`: the payload the write needs, nonzero
/// only while it makes room.
struct Handover {
  Location loc;
  std::byte* rec = nullptr;  // none kept
  std::uint64_t capacity = 0;
  std::uint64_t want = 0;
};

/// Room for records, freeing and merging (S: the shard).
template <class S>
class ShardSpace {
 public:
  using Slot = typename S::Slot;

  /// Rewrites the record at `loc` (capacity `cap`) in place with key ->
  /// value: the seqlock's odd stamp first, the new words, a new even stamp.
  static void rewrite_in_place(S& sh, Location loc, std::byte* rec, std::uint64_t cap, std::uint64_t need,
                               std::string_view key, std::string_view value, std::uint8_t type,
                               std::uint64_t deadline) noexcept;
  /// Room for a record of `need` payload bytes: a free record, an emptied
  /// chunk of at most `revive_most` bytes brought back, or the tail (a new
  /// chunk only if `grow`; else a none location when nothing else has room).
  static Slot allocate(S& sh, std::uint64_t need, bool grow, std::uint64_t revive_most);
  /// What the shard maps beside its chunks (index, wheel, lists, queues).
  static std::uint64_t companion_bytes(const S& sh) noexcept;
  /// Makes `bytes` at `l` one free record (stamped `stamp`) on its list.
  static void push_free_range(S& sh, Location l, std::byte* r, std::uint64_t bytes, bool prev_free,
                              std::uint64_t stamp) noexcept;
  /// Frees the record at `loc`: merged with free neighbours, given back to
  /// the tail when it ends there, or pushed on its class's list.
  static void release(S& sh, Location loc, std::byte* rec, std::uint64_t cap, bool prev_free) noexcept;
  /// A removal's release(): or, while a write makes its room, the record
  /// kept for it (Handover) if it is the first one that holds the write's
  /// record (and can be freed as one record).
  static void release_or_hand_over(S& sh, Location loc, std::byte* rec, std::uint64_t cap, bool prev_free) noexcept {
    Handover& h = sh.handover_;
    if (h.want != 0 && h.rec == nullptr && cap >= h.want && cap <= record::kMaxFreeCapacity) {
      h.loc = loc;
      h.rec = rec;
      h.capacity = cap;
      return;
    }
    release(sh, loc, rec, cap, prev_free);
  }
  /// Frees the record kept for a write that did not take it.
  static void drop_handover(S& sh) noexcept {
    Handover& h = sh.handover_;
    h.want = 0;
    if (h.rec == nullptr) return;
    std::byte* rec = h.rec;
    h.rec = nullptr;
    release(sh, h.loc, rec, h.capacity, record::read_meta(rec).prev_free());
  }
  /// Frees the record at `loc`, whatever its state, with the capacity and
  /// prev-free bit its header says.
  static void free_record(S& sh, Location loc) noexcept {
    std::byte* rec = sh.journal_.at(loc);
    const record::Meta m = record::read_meta(rec);
    release(sh, loc, rec, m.capacity(), m.prev_free());
  }
  /// release() of a record of a chunk of its own (past max class size).
  static void release_huge(S& sh, Location loc, std::byte* rec, std::uint64_t cap, bool prev_free) noexcept;
  /// The tail retreats over a free record that ends at it.
  static void retract_over_free(S& sh, Location loc, std::byte* rec) noexcept;
};

template <class S>
void ShardSpace<S>::rewrite_in_place(S& sh, Location loc, std::byte* rec, std::uint64_t cap, std::uint64_t need,
                      std::string_view key, std::string_view value, std::uint8_t type,
                      std::uint64_t deadline) noexcept {
  if (cap - need < record::kMinRecord) {
    record::rewrite_value(rec, sh.next_stamp(), key, value, type, cap, deadline);
    return;
  }
  // Shrink, and free the tail of the old payload.
  record::rewrite_value(rec, sh.next_stamp(), key, value, type, need, deadline);
  const Location rest = Location::make(loc.chunk(), loc.offset() + record::kHeaderBytes + need);
  release(sh, rest, sh.journal_.at(rest), cap - need - record::kHeaderBytes, false);
  sh.live_bytes_ -= cap - need;
}

template <class S>
typename S::Slot ShardSpace<S>::allocate(S& sh, std::uint64_t need, bool grow, std::uint64_t revive_most) {
  if (Handover& h = sh.handover_; h.rec != nullptr && h.capacity >= need) {
    // The record evicted for this write: live until now, so the record
    // after it already says its neighbour is not free; the prev-free bit
    // read now (the evictions after it may have freed the record before).
    const Location loc = h.loc;
    std::byte* rec = h.rec;
    const std::uint64_t cap = h.capacity;
    h.rec = nullptr;
    const bool prev_free = record::read_meta(rec).prev_free();
    const bool whole = cap - need < record::kMinRecord;
    // The stamp first, as for a record taken from a free list: a reader
    // that passed the evicted key's slot check before the erase may be
    // copying its value, and the caller may write value bytes before the
    // record's own new stamp (fill_slot(): a fill, a gather, a codec). So
    // the slot reads as free from here (and the rest of a split one is
    // freed behind that).
#if !defined(OFFHEAP_TESTING_HANDOVER_STAMP_LATE)
    record::write_free(rec, sh.next_stamp(), whole ? cap : need, Location::none(), Location::none(), prev_free);
#endif
    if (whole) return {loc, rec, cap, prev_free};
    const Location rest = Location::make(loc.chunk(), loc.offset() + record::kHeaderBytes + need);
    release(sh, rest, sh.journal_.at(rest), cap - need - record::kHeaderBytes, false);
    return {loc, rec, need, prev_free};
  }
  FreeLists::Taken t = sh.free_.take(need);
  if (t.loc.is_none() && sh.journal_.emptied_chunks() != 0 && need <= record::kMaxFreeCapacity &&
      !sh.journal_.tail_fits(record::kHeaderBytes + need) && sh.compaction_.revive_chunk(sh, record::kHeaderBytes + need, revive_most)) {
    t = sh.free_.take(need);  // an emptied chunk before a new one (compaction.hpp)
  }
  if (!t.loc.is_none()) {
    const bool prev_free = record::read_meta(t.rec).prev_free();
    if (t.capacity - need < record::kMinRecord) {
      // Taken whole: the record after it no longer follows a free one.
      if (std::byte* next = sh.journal_.record_after(t.loc, record::kHeaderBytes + t.capacity)) {
        record::set_prev_free(next, false);
      }
      return {t.loc, t.rec, t.capacity, prev_free};
    }
    const Location rest =
        Location::make(t.loc.chunk(), t.loc.offset() + record::kHeaderBytes + need);
    release(sh, rest, sh.journal_.at(rest), t.capacity - need - record::kHeaderBytes, false);
    return {t.loc, t.rec, need, prev_free};
  }
  if (!grow && !sh.journal_.tail_fits(record::kHeaderBytes + need)) return {Location::none(), nullptr, 0, false};
  sh.free_.reserve_chunks(sh.journal_.chunks() + 1);  // may throw; nothing has changed yet
  if (sh.journal_.store_name().budget.limit() != 0 && !sh.journal_.tail_fits(record::kHeaderBytes + need)) {
    sh.journal_.set_companions(companion_bytes(sh));  // a chunk may be added: see Journal::keep_beside()
  }
  Location loc;
  try {
    loc = sh.journal_.append(  // may throw; nothing has changed yet
        record::kHeaderBytes + need, [&sh](Location l, std::byte* r, std::uint64_t bytes) {
          // Space the tail skips, after a live record (a free record never
          // ends at the tail: release() hands it back).
          push_free_range(sh, l, r, bytes, false, sh.next_stamp());
        });
  } catch (LimitReached& e) {
    // A cache's evictions free space in the chunks there are: no help to a
    // record none of them could hold.
    e.evicting_helps = sh.journal_.a_chunk_holds(record::kHeaderBytes + need);
    throw;
  }
  if (sh.journal_.take_spare_request()) [[unlikely]] sh.want_spare_chunk();
  return {loc, sh.journal_.at(loc), need, false};
}

/// What the shard maps beside its journal that grows with its records: the
/// index's table (which doubles), the policy's structures and read rings,
/// the expiry wheel, the lists and queue of removals waiting for a sync or
/// the listener.
template <class S>
std::uint64_t ShardSpace<S>::companion_bytes(const S& sh) noexcept {
  std::uint64_t b = sh.index_.mapped_bytes() + sh.expiry_.mapped_bytes() + sh.durability_.mapped_bytes() + sh.removals_.mapped_bytes() + sh.pages_.mapped_bytes();
  if constexpr (S::kEvicts) b += sh.cache_.mapped_bytes();
  return b;
}

/// Makes `bytes` (>= kMinRecord) at `l` free records, in pieces that fit
/// the 32-bit capacity field; `prev_free`: the record before is free.
template <class S>
void ShardSpace<S>::push_free_range(S& sh, Location l, std::byte* r, std::uint64_t bytes, bool prev_free,
                     std::uint64_t stamp) noexcept {
  if (sh.durable_) sh.journal_.mark_dirty(l.chunk());
  while (bytes != 0) {
    const std::uint64_t piece = record::free_piece(bytes);
    sh.free_.push(r, l, piece - record::kHeaderBytes, stamp, prev_free);
    sh.pages_.note_freed(sh, l, stamp, piece - record::kHeaderBytes);
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
template <class S>
void ShardSpace<S>::release(S& sh, Location loc, std::byte* rec, std::uint64_t cap, bool prev_free) noexcept {
  constexpr std::uint64_t kHeader = record::kHeaderBytes;
  if (sh.durable_) sh.journal_.mark_dirty(loc.chunk());
  if (cap > record::kMaxFreeCapacity) [[unlikely]] {
    release_huge(sh, loc, rec, cap, prev_free);
    return;
  }
  // The slot's own stamp changes before anything else, even if it is about
  // to vanish into the free record before it: a reader still copying it
  // must fail its second check before a footer or link lands in its bytes.
  record::write_free(rec, sh.next_stamp(), cap, Location::none(), Location::none(), prev_free);
  bool merged = false;
  if (prev_free && loc.offset() >= record::kMinRecord) {
    // The footer says where the free record before starts; in a file it
    // may say anything, so it is followed only to a sound free record on
    // its list (else no merge: always so but in a damaged file).
    const std::uint64_t pcap = record::capacity_from_footer(load_relaxed(word_at(rec - 8)));
    if (FreeLists::valid_capacity(pcap) && pcap + kHeader <= loc.offset() &&
        pcap + kHeader + cap <= record::kMaxFreeCapacity) {
      const Location ploc = Location::make(loc.chunk(), loc.offset() - kHeader - pcap);
      const bool sound = sh.free_.may_follow(ploc, FreeLists::class_of(pcap));
      assert(sound || sh.durable_);
      if (sound && sh.free_.unlink(ploc, pcap)) {
        std::byte* prec = sh.journal_.at(ploc);
        merged = true;
        prev_free = record::read_meta(prec).prev_free();
        loc = ploc;
        rec = prec;
        cap += kHeader + pcap;
      }
    }
  }
  for (;;) {
    std::byte* next = sh.journal_.record_after(loc, kHeader + cap);
    if (next == nullptr) break;
    const record::Meta m = record::read_meta(next);
    if (m.state() != record::State::free) break;
    const std::uint64_t ncap = m.value_len;
    if (!FreeLists::valid_capacity(ncap) || cap + kHeader + ncap > record::kMaxFreeCapacity) break;
    const Location nloc = Location::make(loc.chunk(), loc.offset() + kHeader + cap);
    if (!sh.free_.may_follow(nloc, FreeLists::class_of(ncap)) || !sh.free_.unlink(nloc, ncap)) {
      assert(sh.durable_);
      break;
    }
    merged = true;
    cap += kHeader + ncap;
  }
  // Record starts inside the merged record are gone: its space may now be
  // reused for values shaped like headers, at locations readers may hold.
  // So are the starts a tail moved back over: the next appends cover them,
  // along with any start an earlier retreat left past the tail.
  const bool retracted = sh.journal_.retract_tail(loc, kHeader + cap);
  if (merged || retracted) sh.index_.invalidate_readers();
  if (retracted) {
    // Beyond the tail now; still stamped afresh for readers holding it.
    record::write_free(rec, sh.next_stamp(), cap, Location::none(), Location::none(), prev_free);
    if (prev_free) retract_over_free(sh, loc, rec);
    // Pages past the tail may go back to the OS (page_release.hpp).
    if (sh.journal_.tail_high() >= sh.journal_.tail_offset() + page_size()) sh.want_round();
    return;
  }
  const std::uint64_t stamp = sh.next_stamp();
  sh.free_.push(rec, loc, cap, stamp, prev_free);
  if (std::byte* next = sh.journal_.record_after(loc, kHeader + cap)) record::set_prev_free(next, true);
  sh.pages_.note_freed(sh, loc, stamp, cap);  // its whole pages may go back to the OS
  sh.compaction_.note_freed(sh);  // a round once compaction is due
}

/// release() of a record whose payload passes what a free record's 32-bit
/// capacity can say (a value near 4 GiB): freed as several free records,
/// the first at its start (its stamp changes first), merged with nothing.
template <class S>
void ShardSpace<S>::release_huge(S& sh, Location loc, std::byte* rec, std::uint64_t cap, bool prev_free) noexcept {
  constexpr std::uint64_t kHeader = record::kHeaderBytes;
  if (sh.journal_.retract_tail(loc, kHeader + cap)) {
    sh.index_.invalidate_readers();
    record::write_free(rec, sh.next_stamp(), record::kMaxFreeCapacity, Location::none(),
                       Location::none(), prev_free);
    if (prev_free) retract_over_free(sh, loc, rec);
    if (sh.journal_.tail_high() >= sh.journal_.tail_offset() + page_size()) sh.want_round();
    return;
  }
  push_free_range(sh, loc, rec, kHeader + cap, prev_free, sh.next_stamp());
  if (std::byte* next = sh.journal_.record_after(loc, kHeader + cap)) record::set_prev_free(next, true);
}

/// After the tail moved back to `loc` (`rec`): a free record that ends
/// there (one a merge could not absorb: past the 32-bit capacity, or
/// damaged) leaves its list and the tail moves back over it too, so that no
/// free record ends at the tail and the next record appended has no free
/// record before it. (The caller has moved the generation.)
template <class S>
void ShardSpace<S>::retract_over_free(S& sh, Location loc, std::byte* rec) noexcept {
  constexpr std::uint64_t kHeader = record::kHeaderBytes;
  while (loc.offset() >= record::kMinRecord) {
    const std::uint64_t pcap = record::capacity_from_footer(load_relaxed(word_at(rec - 8)));
    if (!FreeLists::valid_capacity(pcap) || pcap + kHeader > loc.offset()) return;
    const Location ploc = Location::make(loc.chunk(), loc.offset() - kHeader - pcap);
    if (!sh.free_.may_follow(ploc, FreeLists::class_of(pcap)) || !sh.free_.unlink(ploc, pcap)) return;
    std::byte* prec = sh.journal_.at(ploc);
    const bool before_free = record::read_meta(prec).prev_free();
    if (!sh.journal_.retract_tail(ploc, kHeader + pcap)) return;  // it ends at the tail: always
    record::write_free(prec, sh.next_stamp(), pcap, Location::none(), Location::none(), before_free);
    if (!before_free) return;
    loc = ploc;
    rec = prec;
  }
}

}  // namespace offheap::detail
