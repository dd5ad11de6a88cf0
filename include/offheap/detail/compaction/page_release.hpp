// SPDX-License-Identifier: Apache-2.0
// Memory back to the OS while the store runs: the whole pages inside free
// records, and those past the journal's tail, are handed back
// (MADV_DONTNEED) by the maintenance thread (or maintain()), under the
// shard's writer lock, so that no writer fills a free record meanwhile.
//
// PageRelease<S> owns this: a component of the shard (S), which holds one.
//
//   release() / push_free_range() ──note_freed()──> freed_ (mapped FIFO of
//        (under the writer lock)                    location + stamp)
//   release_pages(): pops; a record still free with that stamp and token
//        gives back its pages between its links and token and its footer
//        (they stay: the free lists and the merges still read them), in
//        slices, then the tail's; only while the shard's free records hold
//        an eighth of its journal or more.
//
// Addresses stay mapped: a reader holding an old location reads zeros (an
// anonymous chunk; no stamp check accepts 0) or the file's bytes (a
// file-backed chunk, as the freed record left them), and the index
// generation or the stamp turns it away as before. A writer that takes the
// free record later faults the pages in afresh. File-backed stores keep
// their disk space: the pages leave the process's memory (and the page
// cache may drop them once written back), but no hole is punched in the
// files, so that a store through the mapping never meets a full disk.
//
// tests/memory_return_test.cpp fills an anonymous store with 2 GiB of
// 8 KiB values: after clear() the process's RSS is 0.2% of its peak at
// once, and after removing every key one by one 0.5% within milliseconds
// (the index, pre-sized for the 262,144 keys, stays). A round hands back at
// most 64 MiB per shard; a write that frees pages wakes the maintenance
// thread. Free records give their pages back only while they hold an
// eighth of the journal or more: a cache at its capacity frees and refills
// as fast, and would only fault the pages in again.
#pragma once

#include <offheap/detail/index/hash.hpp>
#include <offheap/detail/index/location.hpp>
#include <offheap/detail/journal/free_lists.hpp>
#include <offheap/detail/journal/record.hpp>
#include <offheap/detail/memory/atomic_word.hpp>
#include <offheap/detail/memory/mapped_fifo.hpp>
#include <offheap/detail/memory/memory_budget.hpp>
#include <offheap/detail/memory/os.hpp>
#include <offheap/stats.hpp>

#include <algorithm>
#include <cstdint>

namespace offheap::detail {

/// A shard's pages on their way back to the OS. S is the Shard, which
/// holds one and lets it in (friend): every call runs under the shard's
/// writer lock (release_pages() takes it; the others are called by writers
/// that hold it). Its state: the queue of free records with whole pages
/// inside, whether frees are being queued (the free records hold an eighth
/// of the journal), and its figures.
template <class S>
class PageRelease {
 public:
  explicit PageRelease(const StoreName& name) : freed_(name, "the freed-pages queue") {}
  PageRelease(const PageRelease&) = delete;
  PageRelease& operator=(const PageRelease&) = delete;

  /// A record of `cap` payload bytes was freed at `loc`, stamped `stamp`:
  /// queued if it has a whole page inside and the shard is releasing, else
  /// a round is asked for when the free records pass an eighth.
  void note_freed(S& s, Location loc, std::uint64_t stamp, std::uint64_t cap) noexcept;
  /// Shard::release_pages (shard.hpp says what it does).
  std::uint64_t release_pages(S& s, std::uint64_t max_bytes, bool* more);
  /// Whether pages wait for a round (Shard::plan_next_round).
  bool wants_round(const S& s) const noexcept {
    return !freed_.empty() || (!releasing_ && worth_releasing(s) && s.free_.total_bytes() >= 2 * page_size());
  }
  /// clear(): every chunk's pages go back at once; nothing stays queued.
  void clear() noexcept {
    freed_.clear();
    releasing_ = false;
  }
  std::uint64_t mapped_bytes() const noexcept { return freed_.mapped_bytes(); }
  void add_stats(Stats& st) const noexcept {
    st.mapped_bytes += freed_.mapped_bytes();
    st.released_bytes += released_bytes_;
    st.release_pending += freed_.size();
    st.release_dropped += freed_dropped_;
  }

 private:
  struct Freed {
    std::uint64_t loc;
    std::uint64_t stamp;
    std::uint64_t done;  // payload bytes from which release_pages() goes on (a record cut in slices)
  };
  static constexpr std::uint64_t kFreedQueueMost = 65536;  // entries (1.5 MiB): then the oldest go

  /// Whether the free records hold an eighth of the journal or more: only
  /// then do their pages go back to the OS.
  static bool worth_releasing(const S& s) noexcept {
    return s.free_.total_bytes() * 8 >= s.journal_.active_bytes();
  }
  void queue_freed(S& s, Location loc, std::uint64_t stamp) noexcept;
  /// The word a queued free record holds at payload byte 16 (see
  /// queue_freed()).
  std::uint64_t freed_token(std::uint64_t stamp) const noexcept { return mix64(stamp ^ token_secret_); }

  MappedFifo<Freed> freed_;            // free records with whole pages inside, oldest first
  std::uint64_t released_bytes_ = 0;   // handed back to the OS so far
  std::uint64_t freed_dropped_ = 0;    // candidates dropped (queue full, or no room for it)
  std::uint64_t token_secret_ = random_u64();  // see queue_freed()
  bool releasing_ = false;  // free records hold an eighth of the journal: frees are queued
};

template <class S>
void PageRelease<S>::note_freed(S& s, Location loc, std::uint64_t stamp, std::uint64_t cap) noexcept {
  // Only a free record with a whole page between its links and token (the
  // first 24 payload bytes) and its footer (the last 8): at least two pages
  // of payload covers every alignment.
  if (cap < 2 * page_size()) return;
  // Hysteresis: a shard whose free records hold under an eighth of its
  // journal keeps their pages for the writes that will fill them (a cache
  // at its capacity frees and refills as fast: handing its pages back and
  // faulting them in again would cost time and save no memory). Once they
  // hold more, the next round queues every large free record (a scan of
  // the large classes' lists), and frees are queued as they come.
  if (!worth_releasing(s)) return;
  if (!releasing_) {
    s.want_round();
    return;
  }
  queue_freed(s, loc, stamp);
}

/// Queues the free record at `loc` (stamped `stamp`) for release_pages(),
/// with the token that vouches for it there. Never fails: a queue that
/// cannot grow drops its oldest entry, or this one.
template <class S>
void PageRelease<S>::queue_freed(S& s, Location loc, std::uint64_t stamp) noexcept {
  // A token only this shard can make, in the record's third payload word
  // (a free record's payload is never read by readers): release_pages()
  // trusts a queued location only if it still holds it. A stamp and a free
  // header alone could be a value's bytes, once the record was merged away
  // and its start covered by a record whose value is shaped like them;
  // anything laid over the token word rewrites it, and no value can know it.
  store_relaxed(record::payload_words(s.journal_.at(loc)) + 2, freed_token(stamp));
  try {
    if (freed_.size() >= kFreedQueueMost) {
      // No rounds have run for long (background_maintenance off and no
      // maintain()): the oldest, most likely merged away since, go.
      freed_.pop_front();
      ++freed_dropped_;
    }
    freed_.push_back(Freed{loc.raw(), stamp, 0});
  } catch (...) {
    ++freed_dropped_;  // no room for the queue: these pages stay until the record is freed again
    return;
  }
  s.want_round();
}

template <class S>
std::uint64_t PageRelease<S>::release_pages(S& s, std::uint64_t max_bytes, bool* more) {
  const typename S::WriteLock guard(s);
  const std::uint64_t page = page_size();
  std::uint64_t released = 0;
  if (!worth_releasing(s)) {
    // The free space fell under an eighth of the journal since these were
    // queued (see note_freed()): they are kept for the writes to come.
    releasing_ = false;
    freed_dropped_ += freed_.size();
    freed_.clear();
  } else if (!releasing_) {
    // It passed an eighth: every large free record goes on the queue.
    releasing_ = true;
    s.free_.for_each_at_least(2 * page, [&](Location loc, std::uint64_t) {
      queue_freed(s, loc, record::read_stamp(s.journal_.at(loc)));
    });
  }
  while (!freed_.empty() && released < max_bytes) {
    Freed f = freed_.front();
    freed_.pop_front();
    const Location loc = Location::from_raw(f.loc);
    std::uint64_t avail = 0;
    std::byte* rec = const_cast<std::byte*>(s.journal_.resolve(loc, record::kMinRecord, avail));
    // Still the free record that was queued: its stamp, a free header that
    // its list vouches for (sound: inside the records, its class, its
    // footer), and the token no value can hold. A merge, a split or a reuse
    // since drew a new stamp (the new free record was queued then).
    if (rec == nullptr || record::read_stamp(rec) != f.stamp) continue;
    const record::Meta m = record::read_meta(rec);
    if (m.state() != record::State::free || !FreeLists::valid_capacity(m.value_len) ||
        record::kHeaderBytes + m.value_len > avail || m.value_len < 2 * page ||
        !s.free_.sound(loc, FreeLists::class_of(m.value_len)) ||
        load_relaxed(record::payload_words(rec) + 2) != freed_token(f.stamp)) {
      continue;
    }
    const auto start = reinterpret_cast<std::uintptr_t>(rec) + record::kHeaderBytes;
    std::uint64_t from = round_up(start + std::max<std::uint64_t>(24, f.done), page);
    const std::uint64_t to = (start + m.value_len - 8) / page * page;
    if (to <= from) continue;
    // In slices: writers to this shard wait for the lock meanwhile.
    const std::uint64_t slice = std::min(to - from, std::max<std::uint64_t>(max_bytes - released, page));
    if (discard_pages(reinterpret_cast<void*>(from), slice)) released += slice;
    from += slice;
    if (from < to) {
      f.done = from - start;
      try {
        freed_.push_back(f);  // the rest, next time (a segment freed by the pop above: no mapping)
      } catch (...) {
        ++freed_dropped_;
      }
    }
  }
  released += s.journal_.release_past_tail();
  released_bytes_ += released;
  s.plan_next_round(s.now_ms());
  if (more != nullptr) *more = !freed_.empty();
  return released;
}

}  // namespace offheap::detail
