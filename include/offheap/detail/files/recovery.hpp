// SPDX-License-Identifier: Apache-2.0
// Recovery: a shard's index, free lists, counters and tail rebuilt from the
// records in its chunks, at any open that cannot use the state files (after
// a crash, a Durability::none close, or a damaged or missing state file).
//
// Each chunk is walked below its end word (format.hpp). A live record or
// dead marker counts only whole, inside the chunk, with its checksum; any
// other bytes are free space, stepped over 8 bytes at a time until a record
// starts again. Of the records and dead markers of one key the highest
// stamp wins (a dead marker: the key is absent). A writable recovery then
// rewrites the free space as free records, the prev-free bits and the end
// words, and frees the losers and the winning markers the way a running
// store of its durability mode would (durability.hpp): never a marker
// before the frees of the records it outranks are on disk. Records are
// indexed in prefetched batches into an index sized from a hint, so that a
// rebuild runs at memory speed.
//
// tests/crash_test.cpp kills a writing child at random moments, hundreds
// of times (300 cycles in .ci/run), and checks every key against the
// acknowledged history; a rebuild of 10M records (2 threads) takes about
// 0.29 s (offheap_persist_bench, bench/README.md).
//
// ShardRecovery<S> is one recovery of a shard (S, which lets it in as a
// friend): made by Shard::recover() for the call, it holds what only a
// recovery needs (the batch of records waiting to be indexed, the dead
// markers met) and changes the shard's own state as it goes.
#pragma once

#include <offheap/detail/files/format.hpp>
#include <offheap/detail/index/index.hpp>
#include <offheap/detail/index/location.hpp>
#include <offheap/detail/journal/record.hpp>
#include <offheap/detail/memory/atomic_word.hpp>

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <vector>

namespace offheap::detail {

/// One recovery of the shard `sh` (see recover() below). Requires: no
/// other thread in the shard for its whole life.
template <class S>
class ShardRecovery {
 public:
  using Recovery = typename S::Recovery;

  explicit ShardRecovery(S& sh) noexcept : sh_(sh) {}
  ShardRecovery(const ShardRecovery&) = delete;
  ShardRecovery& operator=(const ShardRecovery&) = delete;

  /// Shard::recover(): rebuilds the shard from the records in its chunks.
  Recovery run(bool writable);

 private:
  struct PendingAdopt {  // a record waiting in an indexing batch
    Location loc;
    const std::byte* rec;
    record::Meta m;
    std::uint64_t stamp;
    std::uint64_t hash;
  };
  static constexpr unsigned kAdoptBatch = 16;

  std::uint64_t scan_chunk(std::uint32_t c, bool is_tail, bool writable,
                           std::vector<Location>& losers, std::uint64_t& max_stamp, Recovery& r);
  bool sync_before_freeing_markers() noexcept;
  void grow_slack(std::byte* rec, Location loc, std::uint64_t extra) noexcept;
  void queue_adopt(Location loc, const std::byte* rec, const record::Meta& m, std::uint64_t stamp,
                   std::vector<Location>& losers);
  void adopt_batch(std::vector<Location>& losers);
  void adopt_record(Location loc, const std::byte* rec, const record::Meta& m, std::uint64_t stamp,
                    std::uint64_t h, std::vector<Location>& losers);

  S& sh_;
  PendingAdopt batch_[kAdoptBatch];  // records read ahead of their indexing (prefetched)
  unsigned batch_size_ = 0;
  std::vector<Location> dead_found_;  // dead markers met
};

/// Rebuilds the index, the free lists, the counters and the tail from the
/// records in the chunks (attached): the open after a crash, or whenever
/// the state files cannot be used. Only bytes below each chunk's end word
/// are records (the whole chunk if the word is damaged); a live header is
/// taken only whole, inside the chunk, with its checksum; anything else
/// is free space, stepped over 8 bytes at a time until a record starts
/// again. Of the live records and dead markers of one key the highest
/// stamp wins (a dead marker: the key is absent). Writable: rewrites the
/// free space as free records (stamp 2: recovery runs before any reader),
/// the prev-free bits, the end words, then frees the losers and the
/// winning dead markers (periodic: defers them, as a running store does);
/// read-only: builds the index and counters and writes nothing.
/// Requires: no other thread in the shard.
template <class S>
typename S::Recovery ShardRecovery<S>::run(bool writable) {
  Recovery r;
  std::vector<Location> losers;
  const std::uint32_t chunks = sh_.journal_.chunks();
  // A clear() cut short (format.hpp, the clear mark): finished here, so
  // that no chunk it had not emptied yet is read; a read-only open reads
  // none.
  const bool clear_cut_short = sh_.journal_.clear_marked();
  if (clear_cut_short && writable) {
    if (const int err = sh_.journal_.reset(sh_.durability_.sync_each() || sh_.durability_.defers())) sh_.note_sync_error(err);
  }
  // The tail chunk: the last one whose end says it holds records.
  std::uint32_t tail = chunks;
  for (std::uint32_t c = chunks; !clear_cut_short && c-- > 0;) {
    const std::uint64_t w = sh_.journal_.end_word(c);
    if (!format::end_word_valid(w, sh_.journal_.end_salt(c)) || format::end_of(w) != 0) {
      tail = c;
      break;
    }
  }
  // Size the index for the records the shard last had (a hint; bounded by
  // what the chunks could hold), so that it never rehashes.
  std::uint64_t room = 0;
  for (std::uint32_t c = 0; c < chunks; ++c) room += sh_.journal_.chunk_size(c) / record::kMinRecord;
  sh_.index_.reserve_empty(std::min(sh_.journal_.records_hint(), room) * 9 / 8);
  std::uint64_t max_stamp = 2, tail_offset = 0, used = 0;
  // Until the scan has found the tail, every chunk counts as records to its
  // end (the free lists check what they link against it).
  if (chunks != 0) sh_.journal_.set_tail(chunks - 1, sh_.journal_.chunk_size(chunks - 1), 0);
  sh_.free_.reserve_chunks(chunks);  // (may throw: nothing has changed yet)
  // A chunk compaction emptied (format::kEmptiedMarkOffset) holds no
  // records, and its space (a hole in the file) goes on no list. Only
  // before the tail, over an emptied chunk's layout: another mark is
  // damage, not trusted (the chunk is scanned). Every other chunk's disk
  // blocks are reserved (a hole under a lost mark), or writes are refused.
  sh_.journal_.check_emptied(tail < chunks ? tail : 0, writable);
  if (writable) {
    if (const int err = sh_.journal_.reserve_all_blocks()) sh_.note_sync_error(err);
  }
  for (std::uint32_t c = 0; tail < chunks && c < tail; ++c) {  // none if no chunk holds records
    used += sh_.journal_.chunk_size(c);
    if (sh_.journal_.emptied(c)) continue;
    scan_chunk(c, false, writable, losers, max_stamp, r);
  }
  if (tail < chunks) {
    tail_offset = scan_chunk(tail, true, writable, losers, max_stamp, r);
    used += tail_offset;
  }
  if (tail == chunks && chunks != 0) tail = 0;  // no records: start at chunk 0 (as reset())
  adopt_batch(losers);
  // Dead markers that won: their keys are absent.
  std::vector<Location> dead;
  for (const Location loc : dead_found_) {
    const std::byte* rec = sh_.journal_.at(loc);
    const record::Meta m = record::read_meta(rec);
    const std::string_view key(reinterpret_cast<const char*>(rec + record::kHeaderBytes), m.key_len);
    const Index::Found f = sh_.find_for_write(key, sh_.hash_(key));
    if (!f.found || sh_.index_.location(f.slot) != loc) continue;  // lost: among the losers
    sh_.index_.erase(f.slot);
    sh_.records_.store(sh_.records_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
    sh_.key_value_bytes_ -= std::uint64_t{m.key_len} + m.value_len;
    sh_.live_bytes_ -= record::kHeaderBytes + m.capacity();
    dead.push_back(loc);
  }
  dead_found_.clear();
  dead_found_.shrink_to_fit();
  sh_.journal_.set_tail(tail, tail_offset, used);
  sh_.stamp_ = max_stamp;
  sh_.durability_.wrote_live(max_stamp);
  if (writable) sh_.journal_.set_records_hint(sh_.size());
  if (writable) {
    for (std::uint32_t c = 0; c < chunks; ++c) {
      sh_.journal_.set_end(c, c < tail ? sh_.journal_.chunk_size(c) : c == tail ? tail_offset : 0);
    }
    // As a running store would: periodic frees them after syncs (a
    // power loss right after this open still finds the newest record of
    // each key), the other modes at once.
    // every_write: the records that won may not be on disk yet (a crash
    // inside the write that made them, before its msync): the older ones
    // are freed only once they are, so that a power loss still finds the
    // last completed write of every key.
    if (sh_.durability_.sync_each() && !losers.empty() && !sync_before_freeing_markers()) {
      for (const Location loc : losers) sh_.durability_.keep_old(loc);
      r.superseded = losers.size();
      losers.clear();
    }
    for (const Location loc : losers) sh_.durability_.free_or_defer_old(sh_, loc);
    if (!sh_.durability_.defers() && !dead.empty() && !sync_before_freeing_markers()) {
      // The frees could not be made durable: the markers stay, waiting
      // for syncs as in periodic (writes are refused from now on).
      for (const Location loc : dead) sh_.durability_.keep_marker(loc);
      dead.clear();
    }
    for (const Location loc : dead) sh_.durability_.free_or_defer_marker(sh_, loc);
  }
  sh_.normalized_ = writable;
  r.superseded += losers.size();
  r.records = sh_.size();
  sh_.corrupt_.fetch_add(r.dropped, std::memory_order_relaxed);
  sh_.recovered_damage_ += r.dropped;  // turned into free space: nothing left to rebuild
  return r;
}

/// Scans chunk c for recover(); returns where its records end (in the
/// tail chunk: the new tail offset).
template <class S>
std::uint64_t ShardRecovery<S>::scan_chunk(std::uint32_t c, bool is_tail, bool writable,
                         std::vector<Location>& losers, std::uint64_t& max_stamp, Recovery& r) {
  constexpr std::uint64_t kHeader = record::kHeaderBytes;
  const std::uint64_t size = sh_.journal_.chunk_size(c);
  const std::uint64_t word = sh_.journal_.end_word(c);
  std::uint64_t end = size;
  if (format::end_word_valid(word, sh_.journal_.end_salt(c))) {
    end = std::min(format::end_of(word) & ~std::uint64_t{7}, size);
  }
  std::byte* base = sh_.journal_.at(Location::make(c, 0));
  std::uint64_t pos = 0;
  bool in_run = false;      // [run, pos) is free space
  std::uint64_t run = 0;
  std::byte* last_live = nullptr;  // the live record just before `run`, if any
  bool on_chain = true;  // pos was reached from the chunk's start record by record
  while (pos + record::kMinRecord <= end) {
    std::byte* rec = base + pos;
    const std::uint64_t stamp = load_relaxed(word_at(rec));
    const std::uint64_t w1 = load_relaxed(word_at(rec + 8));
    const record::Meta m = record::Meta::decode(w1);
    if (stamp != 0 && (stamp & 1) == 0) {
      if (m.state() == record::State::live || m.state() == record::State::dead) {
        const std::uint64_t bytes = kHeader + m.capacity();
        const Location loc = Location::make(c, pos);
        if (bytes <= end - pos &&
            record::checksum_in_place(sh_.crc_seed_, rec, loc, stamp, w1, end - pos) == record::stored_checksum(rec)) {
          bool keep = true;
          bool prev_free = false;
          if (in_run) {
            if (pos - run >= record::kMinRecord) {
              if (writable) sh_.push_free_range(Location::make(c, run), base + run, pos - run, false, 2);
              prev_free = true;
            } else if (last_live != nullptr &&
                       record::Meta::decode(load_relaxed(word_at(last_live + 8))).slack_words() +
                               (pos - run) / 8 <= 7) {
              // A gap too small for a free record: the record before takes
              // it as slack (its checksum covers the slack, so resealed).
              if (writable) grow_slack(last_live, Location::make(c, static_cast<std::uint64_t>(last_live - base)), pos - run);
              sh_.live_bytes_ += pos - run;
            } else {
              keep = false;  // nowhere to put the gap: the record joins the free space
              ++r.dropped;
            }
          }
          if (keep) {
            in_run = false;
            if (writable && m.prev_free() != prev_free) record::set_prev_free(rec, prev_free);
            if (stamp > max_stamp) max_stamp = stamp;
            if (m.state() == record::State::dead) dead_found_.push_back(loc);
            queue_adopt(loc, rec, m, stamp, losers);
            last_live = rec;
            pos += bytes;
            on_chain = true;
            continue;
          }
          pos += bytes;
          on_chain = true;
          continue;  // still in the run
        }
        // Torn by a crash, or damaged: counted where a record was due (not
        // for record-like bytes met while stepping over garbage).
        if (on_chain) ++r.dropped;
      } else if (m.state() == record::State::free && on_chain) {
        // A free record is stepped over whole only where a record was due
        // (reached record by record from the chunk's start: a free header
        // met while stepping over garbage may be value bytes, which a writer
        // can shape to hide the records after them), and only if its last
        // word agrees (the footer; in a 16-byte one, the previous link): a
        // damaged capacity must not swallow the records after it.
        const std::uint64_t cap = m.capacity();
        if (cap >= record::kMinPayload && cap % 8 == 0 && kHeader + cap <= end - pos &&
            record::capacity_from_footer(load_relaxed(record::payload_words(rec) + cap / 8 - 1)) ==
                cap) {
          if (!in_run) {
            in_run = true;
            run = pos;
          }
          pos += kHeader + cap;
          on_chain = true;
          continue;
        }
      }
    }
    if (!in_run) {
      in_run = true;
      run = pos;
    }
    pos += 8;
    on_chain = false;
  }
  if (is_tail) {
    // The tail moves back over free space at the end.
    return in_run ? run : pos;
  }
  // A chunk before the tail holds records to its end: the rest is free.
  const std::uint64_t from = in_run ? run : pos;
  if (writable && size - from >= record::kMinRecord) {
    sh_.push_free_range(Location::make(c, from), base + from, size - from, false, 2);
  }
  return size;
}

/// Recovery, before it frees dead markers at once (every mode but
/// periodic, which defers them): the key's older records a marker
/// outranks may have been freed only in memory (by this recovery, or by
/// the life before a crash, whose frees the page cache still holds), so
/// every chunk is written to disk first; otherwise a power loss could
/// leave the marker freed and an older record live: the removed key back.
/// (every_write also calls it before freeing the records that lost to
/// newer ones.) Returns false (noted store-wide) if a write-back failed.
template <class S>
bool ShardRecovery<S>::sync_before_freeing_markers() noexcept {
  for (std::uint32_t c = 0; c < sh_.journal_.chunks(); ++c) {
    if (const int err = sh_.journal_.sync_chunk(c)) {
      sh_.note_sync_error(err);
      return false;
    }
  }
  return true;
}

/// Recovery: gives the record `rec` (live, or a dead marker, which stays
/// dead) `extra` more bytes of slack.
template <class S>
void ShardRecovery<S>::grow_slack(std::byte* rec, Location loc, std::uint64_t extra) noexcept {
  record::Meta m = record::Meta::decode(load_relaxed(word_at(rec + 8)));
  const std::uint64_t slack = m.slack_words() + extra / 8;
  m.flags = record::Meta::make_flags(m.state(), slack, m.prev_free(), m.policy_bits());
  const std::uint64_t stamp = load_relaxed(word_at(rec));
  store_relaxed(word_at(rec + 8), m.encode());
  const std::uint64_t w2 = load_relaxed(word_at(rec + 16));
  store_relaxed(word_at(rec + 16), (w2 & ~std::uint64_t{0xFFFFFFFF}) |
                                       record::checksum_in_place(sh_.crc_seed_, rec, loc, stamp, m.encode(),
                                                                 record::kHeaderBytes + m.capacity()));
}

template <class S>
void ShardRecovery<S>::queue_adopt(Location loc, const std::byte* rec, const record::Meta& m, std::uint64_t stamp,
                 std::vector<Location>& losers) {
  const std::string_view key(reinterpret_cast<const char*>(rec + record::kHeaderBytes), m.key_len);
  const std::uint64_t h = sh_.hash_(key);
  sh_.index_.prefetch(h);
  if (record::has_deadline(load_relaxed(word_at(rec + 16)))) sh_.expiry_.note_deadlines(true);  // rebuild_expiry() looks
  batch_[batch_size_++] = PendingAdopt{loc, rec, m, stamp, h};
  if (batch_size_ == kAdoptBatch) adopt_batch(losers);
}

template <class S>
void ShardRecovery<S>::adopt_batch(std::vector<Location>& losers) {
  for (unsigned i = 0; i < batch_size_; ++i) {
    const PendingAdopt& p = batch_[i];
    adopt_record(p.loc, p.rec, p.m, p.stamp, p.hash, losers);
  }
  batch_size_ = 0;
}

/// Recovery: indexes the live record at `loc` unless a record of its key
/// with a higher stamp is indexed already; the one that loses goes to
/// `losers`.
template <class S>
void ShardRecovery<S>::adopt_record(Location loc, const std::byte* rec, const record::Meta& m, std::uint64_t stamp,
                  std::uint64_t h, std::vector<Location>& losers) {
  const std::string_view key(reinterpret_cast<const char*>(rec + record::kHeaderBytes), m.key_len);
  Index::Found f = sh_.find_for_write(key, h);
  if (f.found) {
    const Location other = sh_.index_.location(f.slot);
    const std::byte* orec = sh_.journal_.at(other);
    if (load_relaxed(word_at(orec)) > stamp) {
      losers.push_back(loc);
      return;
    }
    const record::Meta om = record::read_meta(orec);
    losers.push_back(other);
    sh_.index_.update(f.slot, loc);
    sh_.key_value_bytes_ -= std::uint64_t{om.key_len} + om.value_len;
    sh_.live_bytes_ -= record::kHeaderBytes + om.capacity();
  } else {
    if (sh_.index_.needs_room()) {
      sh_.grow_index();
      sh_.finish_index_migration();  // no reader yet: at once
      f = sh_.find_for_write(key, h);
    }
    sh_.index_.insert(f.insert_slot, h, loc);
    f.slot = f.insert_slot;
    sh_.records_.store(sh_.records_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  // A cache's frequency, as the record's header last kept it (cache/cache_host.hpp).
  if constexpr (S::kSlotBits) sh_.index_.set_bits(f.slot, m.policy_bits());
  sh_.key_value_bytes_ += std::uint64_t{m.key_len} + m.value_len;
  sh_.live_bytes_ += record::kHeaderBytes + m.capacity();
}

}  // namespace offheap::detail
