// SPDX-License-Identifier: Apache-2.0
// The journal: a shard's records, in chunks of mapped memory, appended at a
// tail. Growth adds a chunk (each twice the last, from the size the first
// record needed up to a maximum) and never copies or moves a record, so a
// Location stays valid for as long as the store lives.
//
// A location resolves through the chunk table (chunk_table.hpp), without a
// lock for readers.
//
// File-backed journals (FileBacking set) keep each chunk in a file of its
// own (format.hpp): a 4 KiB header page, then the records, mapped shared so
// that every store reaches the file, made whole before the journal takes it
// (chunk_file.hpp). The header page holds the chunk's end word: once a record past the old
// end is written (publish_tail), the new end is stored there, so that
// recovery knows which bytes of the chunk hold records; bytes past it may be
// stale, even whole records of a cleared store, and are never read.
//
// A spare chunk: making a chunk (a file reserved whole and synced, or a
// large mapping) is the one step of an append whose time grows with the
// store, so the next chunk is made ahead of need, off the writer's path.
// Once the tail chunk (the last one) is half full, take_spare_request()
// says so once; the maintenance thread then makes the next chunk with no
// lock held (make_spare()) and hands it over under the lock (keep_spare());
// the append that needs a chunk takes it (add_chunk()). Not under
// Options::memory_limit_bytes (a chunk's size there depends on the room
// left when it is needed), nor without a maintenance thread or maintain().
#pragma once

#include <offheap/detail/memory/atomic_word.hpp>
#include <offheap/detail/files/file.hpp>
#include <offheap/detail/files/format.hpp>
#include <offheap/detail/index/location.hpp>
#include <offheap/detail/memory/os.hpp>
#include <offheap/detail/journal/chunk_file.hpp>
#include <offheap/detail/journal/chunk_table.hpp>
#include <offheap/detail/journal/record.hpp>
#include <offheap/error.hpp>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <string>

namespace offheap::detail {

#if defined(OFFHEAP_TESTING_CLEAR_HOOK)
/// Test builds only (tests/hooks/clear_crash_test.cpp): called after each
/// step of Journal::reset() on a file-backed journal, with the step.
inline void (*testing_clear_step)(int step) = nullptr;
#endif

struct JournalConfig {
  std::uint64_t min_chunk_bytes = 64 * 1024;
  std::uint64_t max_chunk_bytes = std::uint64_t{1} << 30;
  const FileBacking* files = nullptr;  // null: anonymous memory
  std::uint32_t shard = 0;
  // Under Options::memory_limit_bytes, the bytes of the store's budget
  // that record chunks leave to dead markers and the lists that wait for
  // a sync or a report (Journal::MarkerRoom): 0 where removals free at once.
  std::uint64_t limit_reserve = 0;
};

class Journal {
 public:
  Journal(const JournalConfig& config, const StoreName& name)
      : config_(config), name_(name), table_(name) {}
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;
  ~Journal() {
    const std::uint64_t head = files() ? format::kChunkHeaderBytes : 0;
    for (std::uint32_t c = 0; c < chunks(); ++c) unmap(chunk_base(c) - head, head + chunk_size(c), name_);
    if (spare_.base != nullptr) unmap(spare_.base - head, head + spare_.size, name_);  // (its file: an empty chunk)
  }

  // ---- reader side (no lock) -----------------------------------------------

  /// The record at `loc` if at least `bytes` bytes from its start lie inside
  /// its chunk; nullptr otherwise. `avail` receives the bytes from the
  /// record's start to the end of its chunk.
  [[gnu::always_inline]] const std::byte* resolve(Location loc, std::uint64_t bytes,
                                                  std::uint64_t& avail) const noexcept {
    return table_.resolve(loc, bytes, avail);
  }

  // ---- writer side (the shard's lock is held) -------------------------------

  /// Under Options::memory_limit_bytes: the bytes the shard's structures
  /// that grow with its records map now (the eviction policy, the expiry
  /// wheel, the lists of removals waiting), told before an append that
  /// may add a chunk (keep_beside()).
  void set_companions(std::uint64_t bytes) noexcept { companions_ = bytes; }

  /// While one lives, a chunk the journal adds may take the part of the
  /// memory limit kept for dead markers (JournalConfig::limit_reserve):
  /// around the allocation of a removal's or an eviction's marker.
  class MarkerRoom {
   public:
    explicit MarkerRoom(Journal& j) noexcept : j_(j) { j_.marker_room_ = true; }
    MarkerRoom(const MarkerRoom&) = delete;
    MarkerRoom& operator=(const MarkerRoom&) = delete;
    ~MarkerRoom() { j_.marker_room_ = false; }

   private:
    Journal& j_;
  };

  /// The record at a location the writer itself produced.
  [[gnu::always_inline]] std::byte* at(Location loc) const noexcept {
    return chunk_base(loc.chunk()) + loc.offset();
  }

  /// Reserves `bytes` (a multiple of 8, at least kMinRecord) at the tail and
  /// returns its location. Space the tail skips (the end of a chunk too short
  /// for the record, or a chunk kept by reset() that is too small) is passed
  /// to `on_leftover(Location, std::byte*, bytes)` when it can hold a free
  /// record. Throws Error(value_too_large) when no chunk can hold `bytes` and
  /// Error(out_of_space) when the OS refuses memory or chunk numbers run out;
  /// nothing changes then.
  template <class OnLeftover>
  Location append(std::uint64_t bytes, OnLeftover&& on_leftover) {
    if (tail_chunk_ < chunks() && chunk_size(tail_chunk_) - tail_offset_ >= bytes) {
      const Location loc = Location::make(tail_chunk_, tail_offset_);
      tail_offset_ += bytes;
      if (tail_offset_ > tail_high_) tail_high_ = tail_offset_;
      used_bytes_ += bytes;
      return loc;  // the caller writes the record, then publish_tail()
    }
    check_fits(bytes);
    const bool had_tail = tail_chunk_ < chunks();
    const std::uint32_t first_kept = had_tail ? tail_chunk_ + 1 : 0;
    std::uint32_t target = first_kept;
    while (target < chunks() && chunk_size(target) < bytes) ++target;
    if (target == chunks()) target = add_chunk(bytes);  // the only step that throws
    // From here on nothing throws.
    if (had_tail) give_back(tail_chunk_, tail_offset_, on_leftover);
    for (std::uint32_t c = first_kept; c < target; ++c) give_back(c, 0, on_leftover);
    tail_chunk_ = target;
    tail_offset_ = bytes;
    // The chunk appended into may have been written before (kept by
    // reset() and reused): its whole size may be resident.
    tail_high_ = chunk_size(target);
    used_bytes_ += bytes;
    set_spare_mark();
    return Location::make(target, 0);  // the caller writes the record, then publish_tail()
  }

  /// File-backed journals: stores the tail chunk's end word once the record
  /// append() made room for is written, never before: bytes below an end
  /// word are records or free space, never stale bytes of a cleared chunk.
  void publish_tail() noexcept {
    if (files() && tail_chunk_ < chunks()) set_end(tail_chunk_, tail_offset_);
  }

  /// The record that follows the `bytes` starting at `loc` in the same chunk,
  /// or nullptr at the end of the chunk's records.
  std::byte* record_after(Location loc, std::uint64_t bytes) const noexcept {
    const std::uint32_t c = loc.chunk();
    const std::uint64_t off = loc.offset() + bytes;
    if (off + record::kMinRecord > records_end(c)) return nullptr;
    return chunk_base(c) + off;
  }

  /// Where chunk c's records end: the tail in the tail chunk, the chunk's
  /// size before it, 0 past it (chunks past the tail hold no records: only
  /// after reset()).
  std::uint64_t records_end(std::uint32_t c) const noexcept {
    return c == tail_chunk_ ? tail_offset_ : c > tail_chunk_ ? 0 : chunk_size(c);
  }

  /// If the `bytes` at `loc` end at the tail, moves the tail back to `loc`
  /// and returns true.
  bool retract_tail(Location loc, std::uint64_t bytes) noexcept {
    if (loc.chunk() != tail_chunk_ || loc.offset() + bytes != tail_offset_) return false;
    tail_offset_ = loc.offset();
    used_bytes_ -= bytes;
    set_end(tail_chunk_, tail_offset_);
    return true;
  }

  /// Throws unless a record of `bytes` fits the largest chunk.
  void check_fits(std::uint64_t bytes) const {
    if (bytes > config_.max_chunk_bytes) {
      throw Error(Errc::value_too_large,
                  name_ + ": a record of " + std::to_string(bytes) +
                      " bytes exceeds the largest chunk (" +
                      std::to_string(config_.max_chunk_bytes) +
                      " bytes, Options::max_chunk_bytes)");
    }
  }

  /// Empties the journal: every chunk's pages go back to the OS and read as
  /// zeros (a stamp no reader accepts); the chunks stay mapped for reuse.
  /// File-backed, in steps that a crash may cut anywhere: the clear mark
  /// goes into chunk 0's header (format.hpp: an open that finds it finishes
  /// the clear, so a crash never leaves some chunks emptied and others
  /// not), every end word goes to 0 (recovery reads nothing past an end),
  /// every chunk's records are zeroed in the file, space kept
  /// (FALLOC_FL_ZERO_RANGE; else a punched hole reserved again; else stores
  /// of zeros) so that no stale record of the cleared store is left for any
  /// later end word to cover, and the mark goes. `durable_steps`
  /// (every_write): each step is written to disk before the next, so that a
  /// power loss also finds the store either cleared or whole. Readers
  /// holding old locations are turned away by the index generation, which
  /// clear() moves first. Returns 0, ENOSPC if a hole could not be reserved
  /// again (the caller then refuses writes: a store into a hole could fault
  /// on a full disk), or the errno of a failed msync (the mark then stays,
  /// and the next open finishes the clear).
  int reset(bool durable_steps) noexcept {
    int err = 0;
    // None: the next append starts at chunk 0. (File-backed: chunk 0 at
    // offset 0, so that record_after() sees every other chunk as past the
    // tail.) Set first: the steps below may return early (a failed msync).
    tail_chunk_ = files() && chunks() != 0 ? 0 : chunks();
    tail_offset_ = 0;
    tail_high_ = 0;  // every chunk's pages go back below
    used_bytes_ = 0;
    set_spare_mark();
    if (files()) {
      if (chunks() != 0) {
#if !defined(OFFHEAP_TESTING_NO_CLEAR_MARK)  // (a broken twin: tests/hooks/clear_crash_test.cpp)
        set_clear_mark(true);
#endif
        testing_step(kClearMarked);
        if (durable_steps) {
          if (const int e = sync_range(Location::make(0, 0), 0)) return e;
        }
      }
      for (std::uint32_t c = 0; c < chunks(); ++c) {
        set_end(c, 0);
        testing_step(kClearEndStored);
      }
      for (std::uint32_t c = 0; c < chunks(); ++c) {
        if (const int e = zero_chunk(c); e != 0 && err == 0) err = e;
        testing_step(kClearChunkZeroed);
      }
      // Emptied chunks are plain ones again, once zero_chunk() has reserved
      // their blocks again (ZERO_RANGE, or fallocate).
      for (std::uint32_t c = 0; c < chunks(); ++c) set_emptied(c, false);
      if (durable_steps) {
        for (std::uint32_t c = 0; c < chunks(); ++c) {
          if (const int e = sync_chunk(c)) return e;
        }
      }
      if (chunks() != 0) {
        set_clear_mark(false);
        testing_step(kClearUnmarked);
        if (durable_steps) {
          if (const int e = sync_range(Location::make(0, 0), 0)) return e;
        }
      }
    } else {
      for (std::uint32_t c = 0; c < chunks(); ++c) {
        discard_pages(chunk_base(c), chunk_size(c));
        set_emptied(c, false);
      }
    }
    return err;
  }

  /// Whether chunk 0's header holds the clear mark: a clear() of this
  /// shard was cut short (file-backed journals only).
  bool clear_marked() const noexcept {
    if (!files() || chunks() == 0) return false;
    return load_relaxed(word_at(chunk_base(0) - format::kChunkHeaderBytes + format::kClearMarkOffset)) ==
           format::clear_mark(end_salt(0));
  }

  /// The steps of reset() a test hook sees (OFFHEAP_TESTING_CLEAR_HOOK).
  enum ClearStep : int { kClearMarked, kClearEndStored, kClearChunkZeroed, kClearUnmarked };

  // ---- emptied chunks (compaction.hpp) ----------------------------------------

  /// Whether compaction emptied chunk c: its records moved out, one free
  /// record on no list covers it, its pages (and disk blocks) handed back.
  /// Writer side only.
  bool emptied(std::uint32_t c) const noexcept { return (emptied_[c / 64] >> (c % 64)) & 1u; }
  /// Marks chunk c emptied or not; file-backed, in its header page too
  /// (format::kEmptiedMarkOffset), one 8-byte store.
  void set_emptied(std::uint32_t c, bool on) noexcept {
    if (emptied(c) == on) return;
    emptied_[c / 64] ^= std::uint64_t{1} << (c % 64);
    emptied_bytes_ += on ? chunk_size(c) : 0;
    emptied_bytes_ -= on ? 0 : chunk_size(c);
    emptied_count_ += on ? 1 : 0;
    emptied_count_ -= on ? 0 : 1;
    if (files()) {
      store_relaxed(word_at(chunk_base(c) - format::kChunkHeaderBytes + format::kEmptiedMarkOffset),
                    on ? format::emptied_mark(end_salt(c)) : 0);
      mark_dirty(c);
    }
  }
  /// Whether chunk c holds what compaction leaves in an emptied chunk:
  /// free records linked to nothing, each with its footer, end to end to
  /// the chunk's end (pieces of at most 4 GiB). An emptied mark is trusted
  /// only then (a damaged or forged one over records is not).
  bool emptied_layout(std::uint32_t c) const noexcept {
    const std::uint64_t size = chunk_size(c);
    for (std::uint64_t off = 0; off < size;) {
      if (size - off < record::kMinRecord) return false;
      const std::byte* rec = chunk_base(c) + off;
      const record::Meta m = record::read_meta(rec);
      const std::uint64_t cap = m.value_len;
      if (m.state() != record::State::free || m.key_len != 0 || cap < record::kMinPayload || cap % 8 != 0 ||
          cap > size - off - record::kHeaderBytes || !record::free_next(rec).is_none() ||
          !record::free_prev(rec).is_none() ||
          load_relaxed(record::payload_words(rec) + cap / 8 - 1) != (cap == record::kMinPayload
                                                                         ? Location::none().raw()
                                                                         : (cap << 1 | 1))) {
        return false;
      }
      off += record::kHeaderBytes + cap;
    }
    return true;
  }
  /// Recovery and a clean open: forgets emptied marks at or past chunk
  /// `from` (damage: compaction empties chunks before the tail only) and
  /// those over anything but an emptied chunk's layout (file-backed and
  /// writable: in the header too).
  void check_emptied(std::uint32_t from, bool writable) noexcept {
    for (std::uint32_t c = 0; c < chunks(); ++c) {
      if (!emptied(c) || (c < from && emptied_layout(c))) continue;
      if (writable) {
        set_emptied(c, false);
      } else {
        emptied_[c / 64] &= ~(std::uint64_t{1} << (c % 64));
        emptied_bytes_ -= chunk_size(c);
        --emptied_count_;
      }
    }
  }
  /// Writable recovery: reserves the disk blocks of every chunk not
  /// emptied (a hole left by an emptied mark that was lost must not meet a
  /// store through the mapping on a full disk). Returns 0 or the first
  /// errno.
  int reserve_all_blocks() const noexcept {
    int err = 0;
    for (std::uint32_t c = 0; c < chunks() && files() != nullptr; ++c) {
      if (emptied(c)) continue;
      if (const int e = chunk_blocks(c, 0, chunk_size(c), false); e != 0 && err == 0) err = e;
    }
    return err;
  }
  /// The smallest emptied chunk of at least `bytes`, or chunks() if none.
  std::uint32_t emptied_fitting(std::uint64_t bytes) const noexcept {
    std::uint32_t best = chunks();
    if (emptied_count_ == 0) return best;
    for (std::uint32_t w = 0; w * 64 < chunks(); ++w) {
      for (std::uint64_t bits = emptied_[w]; bits != 0; bits &= bits - 1) {
        const std::uint32_t c = w * 64 + static_cast<std::uint32_t>(std::countr_zero(bits));
        if (chunk_size(c) >= bytes && (best == chunks() || chunk_size(c) < chunk_size(best))) best = c;
      }
    }
    return best;
  }
  std::uint64_t emptied_bytes() const noexcept { return emptied_bytes_; }
  /// Whether a record of `bytes` could be placed at all: some chunk is as
  /// large, or one could be mapped under Options::memory_limit_bytes
  /// (evicting records never gives the limit back what chunks took).
  bool could_hold(std::uint64_t bytes) const noexcept {
    if (name_.budget.limit() == 0 || a_chunk_holds(bytes)) return true;
    const std::uint64_t size = round_up(bytes, page_size()) + (files() ? format::kChunkHeaderBytes : 0);
    return name_.budget.available() >= size + keep_beside(size);
  }
  /// Whether some chunk (emptied or not) is `bytes` or larger.
  bool a_chunk_holds(std::uint64_t bytes) const noexcept {
    for (std::uint32_t c = 0; c < chunks(); ++c) {
      if (chunk_size(c) >= bytes) return true;
    }
    return false;
  }
  std::uint32_t emptied_chunks() const noexcept { return emptied_count_; }
  /// used_bytes() outside emptied chunks.
  std::uint64_t active_bytes() const noexcept {
    return used_bytes_ > emptied_bytes_ ? used_bytes_ - emptied_bytes_ : 0;
  }
  /// The size of the chunk append(bytes) would map if the tail had no room.
  std::uint64_t new_chunk_size(std::uint64_t bytes) const noexcept { return next_chunk_size(bytes); }
  /// Whether append(bytes) would fit the tail chunk (map nothing, revive nothing).
  bool tail_fits(std::uint64_t bytes) const noexcept {
    return tail_chunk_ < chunks() && chunk_size(tail_chunk_) - tail_offset_ >= bytes;
  }
  /// The address of chunk c's first byte (the writer's view).
  std::byte* chunk_start(std::uint32_t c) const noexcept { return chunk_base(c); }
  /// File-backed: hands the disk blocks of chunk c's [from, from + len)
  /// back (`punch`: a hole, which reads as zeros) or reserves them again
  /// (!punch). Returns 0 or an errno (the blocks stay as they were). Not
  /// through a symbolic link, and only the file of the chunk's size.
  int chunk_blocks(std::uint32_t c, std::uint64_t from, std::uint64_t len, bool punch) const noexcept {
    const int fd = open_chunk_file(c);
    if (fd < 0) return errno != 0 ? errno : EIO;
    const auto off = static_cast<off_t>(format::kChunkHeaderBytes + from);
    int err = 0;
    if (punch) {
      if (::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, static_cast<off_t>(len)) != 0) err = errno;
    } else {
      err = ::posix_fallocate(fd, off, static_cast<off_t>(len));
    }
    ::close(fd);
    return err;
  }

  std::uint32_t chunks() const noexcept { return table_.count(); }
  std::uint64_t chunk_size(std::uint32_t c) const noexcept { return table_.size(c); }
  /// Chunks plus the chunk table's blocks.
  std::uint64_t mapped_bytes() const noexcept { return mapped_bytes_ + table_.mapped_bytes(); }
  /// Bytes from the start of every chunk up to its end or the tail: records
  /// and free records, live or not, and the rest of a chunk the tail left
  /// that was too short for a record (under record::kMinRecord bytes).
  std::uint64_t used_bytes() const noexcept { return used_bytes_; }
  const std::string& name() const noexcept { return name_.name; }
  const StoreName& store_name() const noexcept { return name_; }
  const JournalConfig& config() const noexcept { return config_; }
  const FileBacking* files() const noexcept { return config_.files; }
  std::uint32_t tail_chunk() const noexcept { return tail_chunk_; }
  std::uint64_t tail_offset() const noexcept { return tail_offset_; }
  /// How far past the tail the tail chunk may still be resident (records
  /// freed there moved the tail back): up to tail_high().
  std::uint64_t tail_high() const noexcept { return tail_high_; }

  /// Hands the tail chunk's whole pages past the tail back to the OS (they
  /// read as zeros, or a file's bytes: past the tail, nothing is read but
  /// through locations the index generation has already turned away).
  /// Returns the bytes handed back.
  std::uint64_t release_past_tail() noexcept {
    if (tail_chunk_ >= chunks() || tail_high_ <= tail_offset_) return 0;
    const std::uint64_t page = page_size();
    const std::uint64_t from = round_up(tail_offset_, page);
    const std::uint64_t to = std::min(round_up(tail_high_, page), chunk_size(tail_chunk_));
    tail_high_ = tail_offset_;
    if (to <= from || !discard_pages(chunk_base(tail_chunk_) + from, to - from)) return 0;
    return to - from;
  }

  // ---- the spare chunk (see the top of this file) ----------------------------

  /// The next chunk to make ahead of need: its number and size (0: none
  /// wanted: one is kept already, a memory limit, or no numbers left).
  struct SparePlan {
    std::uint32_t chunk = 0;
    std::uint64_t size = 0;
    std::uint64_t attempts = 0;  // the writer's chunk files begun so far (keep_spare())
  };
  /// Writer's side, after an append: whether the tail just passed the
  /// mark (the last chunk half full, no spare kept). Says so once per chunk.
  bool take_spare_request() noexcept {
    if (tail_offset_ < spare_mark_) [[likely]] return false;
    spare_mark_ = ~std::uint64_t{0};
    return true;
  }
  /// Under the lock: what make_spare() should make now.
  SparePlan plan_spare() const noexcept {
    if (spare_.base != nullptr || spares_closed_ || chunks() == 0 || chunks() == Location::kMaxChunks ||
        name_.budget.limit() != 0 || (files() && files()->read_only)) {
      return {};
    }
    return {chunks(), next_chunk_size(0), chunk_files_begun_};
  }
  /// With no lock held (it reads only the configuration and the budget):
  /// makes the chunk `plan` names (a file, or anonymous memory) and returns
  /// the base of its records, or nullptr when it could not (the OS refused,
  /// or the writer made that chunk first): the writer then makes it when
  /// needed, and reports the error if there is one.
  std::byte* make_spare(const SparePlan& plan) const noexcept {
    try {
      if (files()) {
        return detail::create_chunk_file(*files(), config_.shard, plan.chunk, plan.size, end_salt(plan.chunk), name_,
                                          ChunkFileUse::spare) +
               format::kChunkHeaderBytes;
      }
      return map_anonymous(plan.size, name_, "a journal chunk", true);
    } catch (...) {
      return nullptr;
    }
  }
  /// Under the lock: keeps what make_spare(plan) made, unless the writer
  /// began a chunk file meanwhile (made that chunk itself, or failed to:
  /// a failed attempt may have replaced the spare's file under its name,
  /// then removed its own), or the journal is closed; false: the caller
  /// gives it to drop_spare() (with no lock held).
  bool keep_spare(const SparePlan& plan, std::byte* base) noexcept {
    if (chunks() != plan.chunk || chunk_files_begun_ != plan.attempts || spare_.base != nullptr || spares_closed_) {
      return false;
    }
    spare_ = {base, plan.size};
    mapped_bytes_ += (files() ? format::kChunkHeaderBytes : 0) + plan.size;
    return true;
  }
  /// Unmaps a spare keep_spare() refused. Its file, if any, is not touched:
  /// the name is the writer's chunk's by then.
  void drop_spare(const SparePlan& plan, std::byte* base) const noexcept {
    const std::uint64_t head = files() ? format::kChunkHeaderBytes : 0;
    unmap(base - head, head + plan.size, name_);
  }
  /// At a close, under the lock: no spare is kept from now on, the kept
  /// one goes, and so does any file under the next chunk's name (a spare
  /// that was never kept: no chunk of the journal has that number), so
  /// that the saved state counts the chunks the directory holds.
  void close_spares() noexcept {
    spares_closed_ = true;
    spare_mark_ = ~std::uint64_t{0};
    discard_next_chunk();
  }
  /// The kept spare's size (0: none).
  std::uint64_t spare_bytes() const noexcept { return spare_.size; }

  // ---- file-backed journals -------------------------------------------------

  /// The salt of chunk c's end word.
  std::uint64_t end_salt(std::uint32_t c) const noexcept {
    return mix64(config_.files->store_id ^ (std::uint64_t{config_.shard} << 20) ^ c);
  }
  /// The end word of chunk c as the file holds it.
  std::uint64_t end_word(std::uint32_t c) const noexcept {
    return load_relaxed(word_at(chunk_base(c) - format::kChunkHeaderBytes + format::kEndWordOffset));
  }
  /// Stores chunk c's end (file-backed journals; nothing otherwise). One
  /// 8-byte store: recovery sees the old word or the new one.
  void set_end(std::uint32_t c, std::uint64_t end) noexcept {
    if (!files()) return;
    store_relaxed(word_at(chunk_base(c) - format::kChunkHeaderBytes + format::kEndWordOffset),
                  format::end_word(end, end_salt(c)));
    mark_dirty(c);
  }
  /// Stores or removes the clear mark (format.hpp). One 8-byte store.
  void set_clear_mark(bool on) noexcept {
    store_relaxed(word_at(chunk_base(0) - format::kChunkHeaderBytes + format::kClearMarkOffset),
                  on ? format::clear_mark(end_salt(0)) : 0);
    mark_dirty(0);
  }
  static void testing_step([[maybe_unused]] ClearStep step) noexcept {
#if defined(OFFHEAP_TESTING_CLEAR_HOOK)
    if (testing_clear_step != nullptr) testing_clear_step(step);
#endif
  }
  /// The records hint of chunk 0 (format.hpp); file-backed journals only.
  void set_records_hint(std::uint64_t n) noexcept {
    if (files() && chunks() != 0) {
      store_relaxed(word_at(chunk_base(0) - format::kChunkHeaderBytes + format::kRecordsHintOffset), n);
    }
  }
  std::uint64_t records_hint() const noexcept {
    if (!files() || chunks() == 0) return 0;
    return load_relaxed(word_at(chunk_base(0) - format::kChunkHeaderBytes + format::kRecordsHintOffset));
  }
  void mark_dirty(std::uint32_t c) noexcept {
    if (c < dirty_lo_) dirty_lo_ = c;
    if (c + 1 > dirty_hi_) dirty_hi_ = c + 1;
  }
  /// The chunks written since the last take_dirty(), as [lo, hi).
  void take_dirty(std::uint32_t& lo, std::uint32_t& hi) noexcept {
    lo = dirty_lo_;
    hi = dirty_hi_;
    dirty_lo_ = ~0u;
    dirty_hi_ = 0;
  }
  /// Writes chunk c's dirty pages (header page included) to its file and
  /// waits. Returns 0 or the errno. Safe without the lock: chunks stay mapped.
  int sync_chunk(std::uint32_t c) const noexcept {
    return sync_mapping(chunk_base(c) - format::kChunkHeaderBytes,
                        format::kChunkHeaderBytes + chunk_size(c));
  }
  /// Writes the pages of [loc, loc + bytes) and of the chunk's header page
  /// to the file and waits. Returns 0 or the errno.
  int sync_range(Location loc, std::uint64_t bytes) const noexcept {
#if defined(OFFHEAP_TESTING_NO_WRITE_SYNC)
    // A broken build for tests only (tests/power_loss_test.cpp's twin):
    // every_write's writes return before their records are on disk.
    (void)loc, (void)bytes;
    return 0;
#endif
    const std::uint64_t page = page_size();
    std::byte* head = chunk_base(loc.chunk()) - format::kChunkHeaderBytes;
    const std::uint64_t from = (format::kChunkHeaderBytes + loc.offset()) / page * page;
    const std::uint64_t to = round_up(format::kChunkHeaderBytes + loc.offset() + bytes, page);
    if (int err = sync_mapping(head + from, to - from)) return err;
    return from == 0 ? 0 : sync_mapping(head, page);
  }

  /// Maps the existing chunk files 0..count-1 of this shard. Throws
  /// Error(corrupt_file) for a file whose header or size does not check out,
  /// Error(io_error) when the OS refuses.
  void attach(std::uint32_t count, const StoreName& store) {
    const FileBacking& f = *config_.files;
    for (std::uint32_t c = 0; c < count; ++c) {
      const std::string name = format::chunk_file_name(config_.shard, c);
      const std::string path = f.dir_path + "/" + name;
      Fd fd(open_at(f.dir_fd, name, f.read_only ? O_RDONLY : O_RDWR));
      if (!fd) throw_os(errno, store, "opening " + path);
      const std::uint64_t size = file_size(fd.get(), store, path);
      format::ChunkHeader h{};
      if (size < format::kChunkHeaderBytes ||
          read_at(fd.get(), &h, sizeof h, 0, store, path) != sizeof h) {
        throw Error(Errc::corrupt_file, store + ": " + path + " is too short for a chunk (" +
                                            std::to_string(size) + " bytes)");
      }
      if (std::memcmp(h.magic, format::kChunkMagic, 8) != 0) {
        throw Error(Errc::corrupt_file, store + ": " + path + " is not an offheap chunk file");
      }
      if (h.format_version != format::kFormatVersion) {
        throw Error(Errc::format_version,
                    store + ": " + path + " is in format version " +
                        std::to_string(h.format_version) + "; this library reads version " +
                        std::to_string(format::kFormatVersion));
      }
      if (format::header_checksum(h) != h.checksum || h.shard != config_.shard || h.chunk != c ||
          h.store_id != f.store_id || h.data_bytes == 0 || h.data_bytes % page_size() != 0 ||
          h.data_bytes > Location::kMaxOffset || h.data_bytes != size - format::kChunkHeaderBytes) {
        throw Error(Errc::corrupt_file,
                    store + ": the header of " + path +
                        " is damaged or belongs to another store (checksum, shard, chunk "
                        "number, store id or size does not match)");
      }
      std::byte* map = map_file(fd.get(), 0, size, !f.read_only, true, store, path);
      try {
        publish_chunk(map + format::kChunkHeaderBytes, h.data_bytes);  // may map a chunk-table block
      } catch (...) {
        unmap(map, size, store);
        throw;
      }
      if (load_relaxed(word_at(map + format::kEmptiedMarkOffset)) == format::emptied_mark(end_salt(c))) {
        emptied_[c / 64] |= std::uint64_t{1} << (c % 64);  // (the file says so already)
        emptied_bytes_ += h.data_bytes;
        ++emptied_count_;
      }
    }
  }

  /// Sets the tail after recovery or a clean open: chunk `c` (chunks() for
  /// none) at `offset`; `used` is used_bytes().
  void set_tail(std::uint32_t c, std::uint64_t offset, std::uint64_t used) noexcept {
    tail_chunk_ = c;
    tail_offset_ = offset;
    tail_high_ = offset;
    used_bytes_ = used;
    set_spare_mark();
  }

 private:
  /// reset(): zeroes chunk c's records in its file (see reset()).
  int zero_chunk(std::uint32_t c) noexcept {
    const auto from = static_cast<off_t>(format::kChunkHeaderBytes);
    const auto len = static_cast<off_t>(chunk_size(c));
    const int fd = open_chunk_file(c);
    if (fd >= 0) {
      int err = -1;
      if (::fallocate(fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, from, len) == 0) {
        err = 0;
      } else if (::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, from, len) == 0) {
        err = ::posix_fallocate(fd, from, len);  // the hole reads as zeros either way
      }
      ::close(fd);
      if (err >= 0) return err;
    }
    // No file call would do it: zeros through the mapping.
    auto* w = reinterpret_cast<std::uint64_t*>(chunk_base(c));
    for (std::uint64_t i = 0, n = chunk_size(c) / 8; i < n; ++i) store_relaxed(w + i, 0);
    mark_dirty(c);
    return 0;
  }

  /// Opens chunk c's file for writing (-1 and errno if it cannot): not
  /// through a symbolic link, and only the file of the chunk's size, so
  /// that a name swapped since the open gets no other file changed.
  int open_chunk_file(std::uint32_t c) const noexcept {
    char name[32];
    std::snprintf(name, sizeof name, "s%04u-c%05u.chunk", config_.shard, c);
    const int fd = ::openat(config_.files->dir_fd, name, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    struct stat st {};
    if (fd >= 0 && (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
                    static_cast<std::uint64_t>(st.st_size) != format::kChunkHeaderBytes + chunk_size(c))) {
      ::close(fd);
      errno = EBADF;
      return -1;
    }
    return fd;
  }

  /// Makes chunk number chunks() resolve to [base, base + size). Throws
  /// (mapping a block of the table) before anything changes.
  void publish_chunk(std::byte* base, std::uint64_t size) {
    table_.reserve_block();
    table_.publish(base, size);
    mapped_bytes_ += size + (files() ? format::kChunkHeaderBytes : 0);
  }

  /// Creates, reserves and maps the file of chunk number chunks() (the
  /// writer's, under the lock); returns the base of its records.
  std::byte* create_chunk_file(std::uint64_t size) {
    ++chunk_files_begun_;  // before: a spare made meanwhile is refused (keep_spare())
    return detail::create_chunk_file(*config_.files, config_.shard, chunks(), size, end_salt(chunks()), name_,
                                      ChunkFileUse::needed) +
           format::kChunkHeaderBytes;
  }

  template <class OnLeftover>
  void give_back(std::uint32_t c, std::uint64_t from, OnLeftover& on_leftover) noexcept {
    const std::uint64_t rest = chunk_size(c) - from;
    // Counted whole, as an open counts every chunk before the tail (a rest
    // too short for a record, under record::kMinRecord bytes, stays unused).
    used_bytes_ += rest;
    if (rest >= record::kMinRecord) {
      const Location loc = Location::make(c, from);
      on_leftover(loc, at(loc), rest);
    }
    set_end(c, chunk_size(c));  // a chunk the tail left is records to its end (written first)
  }

  std::byte* chunk_base(std::uint32_t c) const noexcept { return table_.base(c); }

  /// The kept spare goes (unmapped, uncounted), and so does any file under
  /// the next chunk's number (a spare's, kept or not: no chunk of the
  /// journal has that number yet).
  void discard_next_chunk() noexcept {
    if (spare_.base != nullptr) {
      const std::uint64_t head = files() ? format::kChunkHeaderBytes : 0;
      unmap(spare_.base - head, head + spare_.size, name_);
      mapped_bytes_ -= head + spare_.size;
      spare_ = {};
    }
    if (files() && !files()->read_only) {
      ::unlinkat(files()->dir_fd, format::chunk_file_name(config_.shard, chunks()).c_str(), 0);
    }
  }
  /// The size of the next chunk for a record of `need` bytes (0: any):
  /// twice the last, at least `need`, whole pages, at most the maximum.
  std::uint64_t next_chunk_size(std::uint64_t need) const noexcept {
    std::uint64_t size = chunks() == 0 ? config_.min_chunk_bytes : chunk_size(chunks() - 1) * 2;
    if (size < need) size = need;
    size = round_up(size, page_size());
    return std::min(size, config_.max_chunk_bytes);
  }
  /// Where take_spare_request() fires in the tail chunk: half of the last
  /// chunk, while no spare is kept and one could be (plan_spare()).
  void set_spare_mark() noexcept {
    spare_mark_ = tail_chunk_ + 1 == chunks() && plan_spare().size != 0 ? chunk_size(tail_chunk_) / 2
                                                                       : ~std::uint64_t{0};
  }

  std::uint32_t add_chunk(std::uint64_t need) {
    if (chunks() == Location::kMaxChunks) {
      throw Error(Errc::out_of_space, name_ + ": all " + std::to_string(Location::kMaxChunks) +
                                          " chunk numbers of a shard are in use");
    }
    std::uint64_t size = next_chunk_size(need);
    const std::uint32_t c = chunks();
    const std::uint64_t head = files() ? format::kChunkHeaderBytes : 0;
    if (spare_.base != nullptr) {
      // (keep_spare() took it for this number; chunks() moves only here.)
      const Spare spare = spare_;
      if (spare.size >= need) {
        publish_chunk(spare.base, spare.size);  // may throw (a chunk-table block): the spare stays
        spare_ = {};
        mapped_bytes_ -= head + spare.size;  // counted by keep_spare(), and now by publish_chunk()
        return c;
      }
      // A record larger than the spare: it goes, its file too (ours: no
      // other maker renames to this number once the spare is kept).
      discard_next_chunk();
    }
    const bool new_block = table_.needs_block();
    // Under Options::memory_limit_bytes: a smaller chunk rather than none,
    // down to min_chunk_bytes or the record if larger (a chunk compaction
    // empties stays fit for any record of that size); at most half the
    // room left, so that the index and policy structures that come with
    // records find some, and the last min_chunk_bytes stay theirs. (Other
    // shards map meanwhile: the mapping itself checks again, and throws
    // LimitReached if it must.)
    const std::uint64_t extra = head + (new_block ? ChunkTable::kBlockBytes : 0);
    const std::uint64_t available = name_.budget.available();
    const std::uint64_t keep = keep_beside(size);
    const std::uint64_t room = available > keep ? available - keep : 0;
    // A chunk for a dead marker, from the reserve: the least.
    if (marker_room_ && config_.limit_reserve != 0) size = std::max(round_up(need, page_size()), config_.min_chunk_bytes);
    if (size + extra > room / 2) {
      const std::uint64_t fits = room / 2 > extra ? (room / 2 - extra) / page_size() * page_size() : 0;
      size = std::max(fits, std::max(round_up(need, page_size()), config_.min_chunk_bytes));
    }
    if (name_.budget.limit() != 0 && size + extra + keep_beside(size) > available) {
      throw_limit_reached(name_, size + extra, "a journal chunk (the rest is kept for the structures that grow with records)");
    }
    table_.reserve_block();  // first, so that a failure leaves no chunk behind
    std::byte* base = files() ? create_chunk_file(size) : map_anonymous(size, name_, "a journal chunk", true);
    publish_chunk(base, size);
    return c;
  }

  /// Under Options::memory_limit_bytes, what a new chunk of `size` bytes
  /// must leave unmapped beside it: the reserve for dead markers
  /// (JournalConfig::limit_reserve), and room for the shard's structures
  /// that grow with its records (set_companions()) to grow as much as the
  /// journal does, in proportion. Chunks stay mapped (emptied ones too),
  /// so what they take is never given back to the rest while the store
  /// runs. A MarkerRoom takes the reserve, not the companions' room.
  std::uint64_t keep_beside(std::uint64_t size) const noexcept {
    if (name_.budget.limit() == 0) return 0;
    const std::uint64_t journal = std::max(mapped_bytes(), config_.min_chunk_bytes);
    // As much again as they map now at least: their sizes move (queues
    // with stale entries until a sweep, lists of removals until a sync).
    const auto grow = static_cast<std::uint64_t>(static_cast<double>(companions_) * static_cast<double>(size) /
                                                 static_cast<double>(journal));
    // A marker's chunk (from the reserve) keeps only their share of it:
    // else the reserve would have to hold as much again as they map.
    return marker_room_ ? grow : config_.limit_reserve + std::max(grow, companions_);
  }

  JournalConfig config_;
  const StoreName& name_;  // the store's name, which outlives the journal
  bool marker_room_ = false;  // a MarkerRoom is open: the reserve may be mapped
  std::uint64_t companions_ = 0;  // set_companions()
  ChunkTable table_;
  std::uint32_t tail_chunk_ = 0;  // == chunks(): no tail yet
  std::uint64_t tail_offset_ = 0;
  std::uint64_t tail_high_ = 0;   // the tail chunk may be resident up to here (past the tail)
  std::uint64_t mapped_bytes_ = 0;
  std::uint64_t used_bytes_ = 0;
  std::uint64_t emptied_[Location::kMaxChunks / 64] = {};  // emptied(c): bit c
  std::uint64_t emptied_bytes_ = 0;  // their sizes (in used_bytes_ and mapped_bytes_)
  std::uint32_t emptied_count_ = 0;
  std::uint32_t dirty_lo_ = ~0u;  // chunks written since the last sync: [lo, hi)
  std::uint32_t dirty_hi_ = 0;
  // The spare chunk (keep_spare()): number chunks() once it is published.
  struct Spare {
    std::byte* base = nullptr;  // its records
    std::uint64_t size = 0;
  };
  Spare spare_;
  std::uint64_t spare_mark_ = ~std::uint64_t{0};  // set_spare_mark()
  std::uint64_t chunk_files_begun_ = 0;  // create_chunk_file() calls (keep_spare())
  bool spares_closed_ = false;           // close_spares()
};

}  // namespace offheap::detail
