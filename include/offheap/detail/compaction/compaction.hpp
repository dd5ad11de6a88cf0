// SPDX-License-Identifier: Apache-2.0
// Compaction: when a shard's journal (outside emptied chunks) holds more
// than Options::compaction_factor times its live records' bytes, the
// maintenance thread (or maintain()) empties its sparsest chunks, under
// the shard's writer lock, one whole chunk at a time:
//
//   1. examine: every record of the chunk is free (on its list) or live and
//      led to by its key's index slot (file-backed: its checksum right);
//      a record waiting to be freed (an update's old record in periodic,
//      a dead marker, a removal waiting for the listener) or damage makes
//      the chunk wait (another is tried);
//   2. its free records leave their lists (no record moves into it);
//   3. each live record is written afresh elsewhere (a free record, the
//      tail's room, or an emptied or new chunk no larger) and
//      its slot pointed there: the move is an overwrite, which readers
//      holding the old location meet as any overwrite (the slot no longer
//      leads there, or the stamp moved) and retry (a RecordView of it
//      turns stale, as after an update);
//   4. file-backed (every mode): the chunks written are synced (and, with
//      Durability::none, which syncs a new chunk file's name only at
//      sync(), the directory) before anything of the old records
//      changes, so that a power loss finds
//      every record in one place or the other (recovery keeps the higher
//      stamp where it finds both); then every moved record's header turns
//      free (recovery, stepping over torn bytes, meets no old record);
//   5. the chunk becomes one free record (in pieces of at most 4 GiB) on no
//      list, the index generation moves (record starts are gone), it is
//      marked emptied (file-backed: in its header page, synced), and its
//      pages go back to the OS: MADV_DONTNEED, and for a file a hole
//      punched (FALLOC_FL_PUNCH_HOLE): its disk blocks too.
//
// An open trusts an emptied mark only before the tail and over the layout
// step 5 leaves (Journal::emptied_layout); a writable recovery reserves
// every other chunk's blocks again (a hole under a mark that was lost).
//
// An emptied chunk keeps its address range (readers may hold locations in
// it: they read zeros, which no stamp accepts), is counted apart from
// mapped_bytes (Stats::emptied_bytes), and is skipped by recovery, audits
// and the free lists. A writer that finds no free record and no room at the
// tail brings the smallest fitting one back (revive_chunk(): a file's
// blocks reserved again first) before it maps a new chunk.
//
// No round runs while a walk (for_each, a scan step) is in progress
// (WalkGate::active(), checked under the lock): a walk goes on through a
// table replaced under it, whose slots lead where records were when it was
// replaced, so a record moved under such a walk would leave its key out.
//
// A chunk's records move into free records, the tail, an emptied chunk
// brought back or a new chunk; the last two only if that chunk is no
// larger than the one being emptied (whose bytes then go: mapped bytes do
// not grow). So the tail being full never stalls compaction: a full tail
// with holes too small for a chunk's largest record left it stuck for good.
// A chunk that cannot be emptied for lack of room elsewhere (a small chunk
// when every emptied or new chunk would be larger) gets its free space
// back on its lists, its moved records' old places merged into it. The
// round goes on with the next sparsest chunk, which may be large enough
// to find room, so one small chunk never holds every larger one up; a
// chunk at least as large as every emptied chunk and as a new one that
// finds no room ends the round, and compaction waits a second. So does a
// failed sync (the store refuses writes from then on).
//
// Compaction<S> owns this: a component of the shard (S), which holds one
// and lets it in (friend). Its state: the factor, when compaction may try
// again, the chunks found waiting, whether a round was asked for, and its
// figures. Every call runs under the shard's writer lock (compact() takes
// it; the others are called by writers that hold it).
#pragma once

#include <offheap/detail/index/index.hpp>
#include <offheap/detail/index/location.hpp>
#include <offheap/detail/journal/free_lists.hpp>
#include <offheap/detail/journal/journal.hpp>
#include <offheap/detail/journal/record.hpp>
#include <offheap/detail/memory/os.hpp>
#include <offheap/error.hpp>
#include <offheap/eviction/policy.hpp>
#include <offheap/stats.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <iterator>
#include <string_view>

#include <unistd.h>

namespace offheap::detail {

template <class S>
class Compaction {
 public:
  /// `factor`: Options::compaction_factor (0: never; a read-only store 0).
  explicit Compaction(double factor) noexcept : compact_factor_(factor) {}
  Compaction(const Compaction&) = delete;
  Compaction& operator=(const Compaction&) = delete;

  /// Whether the journal outside emptied chunks holds more than
  /// compaction_factor times the live records' bytes (and 1 MiB more).
  bool compaction_due(const S& sh) const noexcept;
  /// Shard::compact (shard.hpp says what it does). Takes the lock.
  std::uint64_t compact(S& sh, std::uint64_t max_bytes, bool* more, bool now_anyway);
  /// A writer that found no room: brings back the smallest emptied chunk
  /// of at most `most` bytes that holds `bytes`; whether it did.
  bool revive_chunk(S& sh, std::uint64_t bytes, std::uint64_t most) noexcept;
  /// A record was freed: asks for a round once compaction is due (once
  /// until compact() runs).
  void note_freed(S& sh) noexcept {
    if (!compact_wanted_ && compaction_due(sh)) {
      compact_wanted_ = true;  // (compact() lowers it)
      sh.want_round();
    }
  }
  /// When (ms, the store's clock) compaction may next run, if it is due.
  std::uint64_t retry_ms() const noexcept { return compact_retry_ms_; }
  void add_stats(Stats& st) const noexcept {
    st.compacted_records += compacted_records_;
    st.compacted_bytes += compacted_bytes_;
    st.chunks_emptied += emptied_events_;
    st.chunks_revived += revived_events_;
  }

 private:
  struct Evacuated {
    enum Outcome { emptied, waits, no_room } outcome = emptied;
    std::uint64_t moved = 0;  // journal bytes written elsewhere
  };
  Evacuated evacuate(S& sh, std::uint32_t c);
  static constexpr std::uint64_t kCompactFloor = std::uint64_t{1} << 20;
  static constexpr std::uint64_t kCompactRetryMs = 1000;
  /// After a round a walk held back (compact()).
  static constexpr std::uint64_t kWalkRetryMs = 100;
  static constexpr std::uint64_t kCompactMinHoles = 8;  // free records a chunk needs to be emptied

  double compact_factor_;
  std::uint64_t compact_retry_ms_ = 0;  // no compaction before (ms, the store's clock)
  bool compact_wanted_ = false;         // a freed record asked for a round
  std::uint64_t revived_ms_ = 0;        // when a writer last took an emptied chunk back
  std::uint64_t waited_[16] = {};       // chunk << 48 | its free bytes, when it had to wait
  unsigned waited_next_ = 0;
  std::uint64_t compacted_records_ = 0;
  std::uint64_t compacted_bytes_ = 0;
  std::uint64_t emptied_events_ = 0;
  std::uint64_t revived_events_ = 0;
};

template <class S>
bool Compaction<S>::compaction_due(const S& sh) const noexcept {
  if (!(compact_factor_ > 0)) return false;
  const std::uint64_t active = sh.journal_.active_bytes();
  const std::uint64_t held = sh.live_bytes_ + sh.removals_.retired_bytes();
  return active > held + kCompactFloor &&
         static_cast<double>(active) > compact_factor_ * static_cast<double>(held);
}

template <class S>
std::uint64_t Compaction<S>::compact(S& sh, std::uint64_t max_bytes, bool* more, bool now_anyway) {
  const typename S::WriteLock guard(sh);
  if (more != nullptr) *more = false;
  const std::uint64_t now = sh.now_ms();
  // (While it waits, release() asks for no round: compact_wanted_ stays.)
  if (now < compact_retry_ms_ && !now_anyway) return 0;
  // Not while a walk (for_each, a scan step) is in progress: a table
  // replaced under the walk is frozen, its slots lead where the records
  // were, and a record moved now would leave its key, left alone, out of
  // the walk. Checked under the lock, which a replacement also needs: a
  // walk that enters after this check keeps a live table throughout this
  // call (its slots follow the moves). Seq_cst, as WalkGate::active().
  // The round stays wanted and tries again kWalkRetryMs later (not at
  // once: the maintenance thread would run round after round, each taking
  // the lock, for as long as the walk lasts); maintain() tries at once.
  if (sh.walks_.active()) {
    compact_retry_ms_ = now + kWalkRetryMs;
    sh.plan_next_round(now);
    return 0;
  }
  compact_wanted_ = false;
  // A failed sync: the store refuses writes; nothing more is moved.
  if (!compaction_due(sh) || sh.durability_.failed()) return 0;
  if (!sh.free_.chunks_known()) {
    try {
      sh.free_.recount_chunks();
    } catch (const Error&) {
      compact_retry_ms_ = now + kCompactRetryMs;  // no memory for the count: later
      return 0;
    }
  }
  std::uint64_t moved = 0;
  std::uint32_t waiting[8];  // chunks passed over in this round (a record waiting to be freed, damage, no room)
  unsigned waits = 0;
  while (moved < max_bytes && compaction_due(sh)) {
    // The sparsest chunk before the tail whose live share is under 1/factor.
    std::uint32_t victim = sh.journal_.chunks();
    double best = 1.0 / compact_factor_;
    for (std::uint32_t c = 0; c < sh.journal_.tail_chunk() && c < sh.journal_.chunks(); ++c) {
      if (sh.journal_.emptied(c) || std::find(waiting, waiting + waits, c) != waiting + waits) continue;
      const std::uint64_t free = std::min(sh.free_.chunk_free(c), sh.journal_.chunk_size(c));
      // A chunk found waiting (a record waiting to be freed, damage) is
      // examined again only once its free space has changed.
      if (std::find(std::begin(waited_), std::end(waited_), (std::uint64_t{c} << 48) | free) != std::end(waited_)) {
        continue;
      }
      // Free space in a few records is not fragmented (a chunk just taken
      // back is one free record being filled): writers use it as it is.
      // A chunk with nothing else in it is emptied at no cost, unless a
      // chunk was taken back lately (it would be taken back again soon).
      if (sh.free_.chunk_free_records(c) < kCompactMinHoles &&
          (sh.journal_.chunk_size(c) - free >= record::kMinRecord || now < revived_ms_ + 10 * kCompactRetryMs)) {
        continue;
      }
      const double size = static_cast<double>(sh.journal_.chunk_size(c));
      const double used = size - static_cast<double>(free);
      if (used / size < best) {
        best = used / size;
        victim = c;
      }
    }
    if (victim == sh.journal_.chunks()) break;
    const Evacuated e = evacuate(sh, victim);
    moved += e.moved;
    if (e.outcome == Evacuated::waits) {
      waited_[waited_next_++ % std::size(waited_)] =
          (std::uint64_t{victim} << 48) | std::min(sh.free_.chunk_free(victim), sh.journal_.chunk_size(victim));
      if (waits == std::size(waiting)) break;
      waiting[waits++] = victim;
      continue;
    }
    if (sh.durability_.failed()) break;  // a sync failed: nothing more is moved
    if (e.outcome == Evacuated::no_room) {
      // Held back by its own size only (an emptied chunk to bring back, or
      // the new chunk, is larger than it): not this chunk again in this
      // round, and a larger one may still find room. (Not remembered in
      // waited_: room comes back with any removal.)
      const std::uint64_t size = sh.journal_.chunk_size(victim);
      const bool larger_emptied = sh.journal_.emptied_fitting(size + 1) != sh.journal_.chunks();
      if ((larger_emptied || sh.journal_.new_chunk_size(0) > size) && waits < std::size(waiting)) {
        waiting[waits++] = victim;
        continue;
      }
      compact_retry_ms_ = now + kCompactRetryMs;
      break;
    }
  }
  const bool left = moved >= max_bytes && compaction_due(sh);
  // Still due, with nothing more to do now (no chunk sparse enough, or
  // those left must wait): again in a while, not every round.
  if (!left && compaction_due(sh)) compact_retry_ms_ = now + kCompactRetryMs;
  if (more != nullptr) *more = left;
  sh.plan_next_round(now);
  return moved;
}

template <class S>
typename Compaction<S>::Evacuated Compaction<S>::evacuate(S& sh, std::uint32_t c) {
  constexpr std::uint64_t kHeader = record::kHeaderBytes;
  const std::uint64_t end = sh.journal_.records_end(c);  // the chunk's size: c is before the tail
  std::byte* const base = sh.journal_.chunk_start(c);
  Evacuated out;
  // 1. Examine (nothing changes).
  for (std::uint64_t off = 0; end - off >= record::kMinRecord;) {
    const Location loc = Location::make(c, off);
    std::byte* rec = base + off;
    const record::Meta m = record::read_meta(rec);
    const std::uint64_t cap = m.capacity();
    if (kHeader + cap > end - off) return {Evacuated::waits, 0};  // damage: left as it is
    if (m.state() == record::State::free) {
      // On its list (one a damaged file's list dropped is not: unlinking
      // it would drop its class's healthy list).
      if (!FreeLists::valid_capacity(cap) || !sh.free_.sound(loc, FreeLists::class_of(cap)) ||
          !sh.free_.links_sound(loc, FreeLists::class_of(cap), record::free_next(rec), record::free_prev(rec))) {
        return {Evacuated::waits, 0};
      }
    } else if (m.state() == record::State::live) {
      if (sh.durable_ && !sh.intact(loc, rec)) return {Evacuated::waits, 0};
      const std::string_view key(reinterpret_cast<const char*>(rec + kHeader), m.key_len);
      if (!sh.index_.find(sh.hash_(key), [&](Location l) { return l == loc; }).found) {
        return {Evacuated::waits, 0};  // waiting to be freed (periodic, or the listener)
      }
    } else {
      return {Evacuated::waits, 0};  // a dead marker
    }
    off += kHeader + cap;
  }
  // 2. No record moves into the chunk.
  for (std::uint64_t off = 0; end - off >= record::kMinRecord;) {
    const record::Meta m = record::read_meta(base + off);
    if (m.state() == record::State::free) sh.free_.unlink(Location::make(c, off), m.capacity());
    off += kHeader + m.capacity();
  }
  // 3. Move each live record, in order; `stop`: the first one not moved.
  std::uint64_t stop = end;
  std::uint32_t lo = ~0u, hi = 0;  // the chunks written to: [lo, hi], and the first few of them
  std::uint32_t written[32];
  unsigned n_written = 0;
  for (std::uint64_t off = 0; end - off >= record::kMinRecord;) {
    const Location loc = Location::make(c, off);
    std::byte* rec = base + off;
    const record::Meta m = record::read_meta(rec);
    const std::uint64_t cap = m.capacity();
    if (m.state() != record::State::live) {
      off += kHeader + cap;
      continue;
    }
    const std::string_view key(reinterpret_cast<const char*>(rec + kHeader), m.key_len);
    const std::string_view value(record::value_bytes(rec, m.key_len), m.value_len);
    const std::uint64_t deadline = record::deadline_of(rec, m, kHeader + cap);
    const std::uint64_t need = record::payload_for(m.key_len, m.value_len, deadline != 0);
    typename S::Slot s{Location::none(), nullptr, 0, false};
    try {
      if constexpr (S::kEvicts) sh.reserve_policy();
      if (deadline != 0) sh.expiry_.reserve_one();
      // An emptied chunk brought back, or a new one mapped, only if it is
      // no larger than c: c's records all fit it (c is sparse), and c's
      // bytes go once it is emptied, so mapped bytes do not grow.
      const std::uint64_t size = sh.journal_.chunk_size(c);
      s = sh.allocate(need, sh.journal_.new_chunk_size(kHeader + need) <= size, size);
    } catch (...) {
      // No memory for the policy, the wheel or the free lists' count, a
      // new chunk refused (its file, the disk, memory_limit_bytes), or no
      // heap for its file's name: the records not moved stay (5').
      s.loc = Location::none();
    }
    if (s.loc.is_none()) {
      stop = off;
      out.outcome = Evacuated::no_room;
      break;
    }
    const std::uint64_t h = sh.hash_(key);
    const Index::Found f = sh.index_.find(h, [&](Location l) { return l == loc; });
    const std::uint64_t old_stamp = record::read_stamp(rec);
    sh.write_record(s, key, value, m.type, record::State::live, deadline);
    if (sh.durable_ && S::kEvicts) record::set_policy_bits(s.rec, sh.index_.bits(f.slot));  // (a copy of the slot's)
    sh.index_.update(f.slot, s.loc);  // release: readers find the copy whole
    if constexpr (S::kEvicts) {
      sh.cache_replaced(eviction::Handle{loc.raw(), old_stamp, h, kHeader + cap}, f.slot, s.loc, h, true);
    }
    if (deadline != 0) sh.schedule_expiry(s.loc, deadline);
    sh.live_bytes_ += s.capacity;
    sh.live_bytes_ -= cap;
    ++compacted_records_;
    compacted_bytes_ += kHeader + s.capacity;
    out.moved += kHeader + s.capacity;
    lo = std::min(lo, s.loc.chunk());
    hi = std::max(hi, s.loc.chunk());
    if (n_written <= std::size(written) &&
        std::find(written, written + std::min<unsigned>(n_written, std::size(written)), s.loc.chunk()) ==
            written + std::min<unsigned>(n_written, std::size(written))) {
      if (n_written < std::size(written)) written[n_written] = s.loc.chunk();
      ++n_written;  // past the array's size: the whole range [lo, hi] is synced
    }
    off += kHeader + cap;
  }
  // 4. File-backed, in every mode: the copies are on disk before anything
  // of the old records changes (a record durable at the last sync() must
  // survive a power loss, wherever compaction moved it since).
  if (sh.durable_ && lo <= hi) {
    const bool few = n_written <= std::size(written);  // else every chunk in [lo, hi]
    const std::uint32_t count = few ? n_written : hi - lo + 1;
    int err = 0;
    for (std::uint32_t i = 0; i < count && err == 0; ++i) {
      const std::uint32_t d = few ? written[i] : lo + i;
      if (d != c) err = sh.journal_.sync_chunk(d);
    }
    // A copy may be in a chunk file made since the last sync() (by a
    // writer, or by this move): with Durability::none its name reaches
    // the disk only with a sync of the directory, which sync() does; so
    // here too, or a power loss could take the file, and the copies of
    // records durable at the last sync() with it. (Cheap beside the
    // chunks' sync when the directory has nothing new.)
    if (const FileBacking* f = sh.journal_.files(); err == 0 && f != nullptr && !f->sync_new_files) {
      if (::fsync(f->dir_fd) != 0) err = errno;
    }
    if (err != 0) {
      // The old records stay as they are (recovery prefers the copies);
      // the chunk's free records go back on their lists; the store
      // refuses writes from now on.
      sh.note_sync_error(err);
      for (std::uint64_t off = 0; end - off >= record::kMinRecord;) {
        const record::Meta m = record::read_meta(base + off);
        if (m.state() == record::State::free) {
          sh.free_.push(base + off, Location::make(c, off), m.capacity(), sh.next_stamp(), m.prev_free());
        }
        off += kHeader + m.capacity();
      }
      return {Evacuated::no_room, out.moved};
    }
  }
  if (sh.durable_) sh.journal_.mark_dirty(c);
  sh.index_.invalidate_readers();  // record starts inside the chunk are going
  // 4'. No moved record's header stays live (recovery steps through free
  // space word by word after a torn record: it must meet no old record of
  // a key removed since).
  for (std::uint64_t off = 0; (sh.durable_ || out.outcome == Evacuated::no_room) && off < stop &&
                              end - off >= record::kMinRecord;) {
    std::byte* rec = base + off;
    const record::Meta m = record::read_meta(rec);
    if (m.state() == record::State::live) {
      record::write_free(rec, sh.next_stamp(), m.capacity(), Location::none(), Location::none(), m.prev_free());
    }
    off += kHeader + m.capacity();
  }
  if (out.outcome == Evacuated::no_room) {
    // 5'. Not emptied: the free records and the moved records' old places
    // go back on the lists, merged into runs; the records not moved stay.
    std::uint64_t run = end;  // where the current run of free space began (end: none)
    std::uint64_t off = 0;
    while (end - off >= record::kMinRecord) {
      std::byte* rec = base + off;
      const record::Meta m = record::read_meta(rec);
      const std::uint64_t bytes = kHeader + m.capacity();
      const bool stays = m.state() == record::State::live;  // (the moved ones are free now)
      if (!stays) {
        if (run == end) run = off;
      } else {
        record::set_prev_free(rec, run != end);
        if (run != end) sh.push_free_range(Location::make(c, run), base + run, off - run, false, sh.next_stamp());
        run = end;
      }
      off += bytes;
    }
    // To the last record's end (a rest under kMinRecord after it stays unused).
    if (run != end) sh.push_free_range(Location::make(c, run), base + run, off - run, false, sh.next_stamp());
    // The moved records' free headers on disk now (every_write: a later
    // removal of a copy syncs only the copy; the original must not come
    // back after a power loss).
    if (sh.durable_) {
      if (const int err = sh.journal_.sync_chunk(c)) sh.note_sync_error(err);
    }
    return out;
  }
  // 5. Emptied: one free record on no list, its pages back to the OS.
  const std::uint64_t size = sh.journal_.chunk_size(c);
  const std::uint64_t stamp = sh.next_stamp();
  for (std::uint64_t off = 0; off < size;) {
    const std::uint64_t piece = record::free_piece(size - off);  // as revive_chunk() will push them
    record::write_free(base + off, stamp, piece - kHeader, Location::none(), Location::none(), off != 0);
    off += piece;
  }
  sh.journal_.set_emptied(c, true);
  ++emptied_events_;
  if (sh.journal_.files() != nullptr) {
    // The pieces and the mark on disk before the hole (every mode).
    if (const int err = sh.journal_.sync_chunk(c)) {
      sh.note_sync_error(err);  // the blocks stay reserved
      return out;
    }
  }
  const std::uint64_t page = page_size();
  for (std::uint64_t off = 0; off < size;) {
    const std::uint64_t piece = kHeader + record::read_meta(base + off).value_len;
    // Between the header and links (first page) and the footer (last page).
    const std::uint64_t from = round_up(off + kHeader + 24, page);  // (links and token: see PageRelease::queue_freed())
    const std::uint64_t to = (off + piece - 8) / page * page;
    if (to > from) {
      discard_pages(base + from, to - from);
      if (sh.journal_.files() != nullptr) sh.journal_.chunk_blocks(c, from, to - from, true);  // best effort
    }
    off += piece;
  }
  return out;
}

template <class S>
bool Compaction<S>::revive_chunk(S& sh, std::uint64_t bytes, std::uint64_t most) noexcept {
  const std::uint32_t c = sh.journal_.emptied_fitting(bytes);
  if (c == sh.journal_.chunks() || sh.journal_.chunk_size(c) > most) return false;
  // A file's blocks are reserved again first: no store through the mapping
  // may meet a full disk.
  if (sh.journal_.files() != nullptr && sh.journal_.chunk_blocks(c, 0, sh.journal_.chunk_size(c), false) != 0) {
    return false;
  }
  sh.journal_.set_emptied(c, false);
  // The same pieces as the emptied record, now on lists. (The generation
  // moves all the same: no reader concludes anything from what it read
  // there before.)
  sh.index_.invalidate_readers();
  sh.push_free_range(Location::make(c, 0), sh.journal_.chunk_start(c), sh.journal_.chunk_size(c), false,
                  sh.next_stamp());
  ++revived_events_;
  revived_ms_ = sh.now_ms();
  return true;
}

}  // namespace offheap::detail
