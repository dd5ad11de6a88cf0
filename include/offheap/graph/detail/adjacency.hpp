// SPDX-License-Identifier: Apache-2.0
// A node's adjacency in the store: its directory (in the node record) and
// its pages (layout.hpp), read lock-free by AdjacencyReader and changed by
// AdjacencyWriter under the graph's writer mutex.
//
// The entries of a node run in ascending edge id, which is the order their
// edges were added (ids only grow, and an append goes at the end): that is
// the order every walk hands them out, and what lets a walk resume from the
// last id it handed out after a writer moved its pages.
//
// Costs, for a node with d entries in p = about d / 256 pages:
//   append   the node record read, the last page read and rewritten (at
//            most 4 KiB); every 256th append writes a new page and
//            rewrites the node record (16 bytes of directory per page).
//   remove   a binary search of the directory, one page read and rewritten
//            (or dropped when empty, rewriting the directory; or merged with
//            a neighbouring page when both are a quarter full or less,
//            which writes one page and the directory and drops two pages).
//   walk     one read of the node record, then one read per page.
// Merges keep pages at least a quarter full on average over any two
// neighbours, so a node whose edges were mostly removed keeps about 4 d /
// 256 + 1 pages, never one page per edge ever added.
//
// Write order (a crash between any two store writes leaves only what the
// graph's reads step over and check.hpp removes): a page is written before
// the directory that names it, and dropped after the directory that no
// longer does; the leftovers are pages no directory names.
//
// Thread safety: AdjacencyReader is one reader's (its buffers are its
// own); AdjacencyWriter runs under the graph's writer mutex. Entries are
// handed out by value, read from the reader's copy of a page.
#pragma once

#include <offheap/error.hpp>
#include <offheap/graph/detail/layout.hpp>
#include <offheap/store.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace offheap::graph_detail {

[[noreturn, gnu::cold]] inline void throw_corrupt_node(const std::string& store, NodeId n) {
  throw Error(Errc::corrupt_file, store + ": graph node " + std::to_string(n) +
                                      ": its record is too short for the page directory it announces");
}

/// Reads one node's adjacency at a time, lock-free, into buffers it keeps
/// for the next node (so a traversal allocates per page size, never per
/// edge). Not thread-safe: one per traversal.
class AdjacencyReader {
 public:
  explicit AdjacencyReader(const Store& store) noexcept : store_(&store) {}

  /// Effects: copies node n's header and directory (not its properties).
  /// Returns: false if n is absent. Throws: Error(corrupt_file) for a node
  /// record too short for its directory.
  bool load(NodeId n) {
    const std::optional<bool> r = try_load(n);
    if (!r) return false;
    if (!*r) throw_corrupt_node(store_->name(), n);
    return true;
  }
  /// load() without the throw. Returns: nullopt if n is absent; false if
  /// its record is too short for its directory (nothing copied); true if
  /// copied.
  std::optional<bool> try_load(NodeId n) {
    // read() may call the function more than once (a writer raced it): each
    // call copies afresh and checks the lengths before it trusts them; only
    // the validated call's answer counts.
    return store_->read(node_key(n), [&](std::string_view v) {
      if (!DirectoryView::well_formed(v)) return false;
      dir_.assign(v.data(), DirectoryView::bytes_for(load32(v.data())));
      return true;
    });
  }
  /// The directory load() copied last.
  DirectoryView directory() const noexcept { return DirectoryView(dir_); }

  /// Effects: calls fn(const Entry&) for each entry of node n whose edge id
  /// is above `after`, ascending, until fn returns false. Pages a writer
  /// drops or merges meanwhile are followed: the walk takes the directory
  /// again and goes on after the last id it handed out, so an entry
  /// present throughout comes exactly once. Entries added or removed during
  /// the walk may come or not. An absent node has no entries.
  /// Returns: false if fn stopped the walk.
  template <class F>
  bool walk(NodeId n, EdgeId after, F&& fn) {
    if (!load(n)) return true;
    return walk_loaded(n, after, fn, true);
  }

  /// walk() over the directory load() copied last (retake: take it again
  /// when a page is missing; false: skip the page). Entries naming node 0
  /// or edge 0 (no graph hands them out: damage) are skipped.
  template <class F>
  bool walk_loaded(NodeId n, EdgeId after, F& fn, bool retake) {
    DirectoryView d(dir_);
    std::size_t i = d.first_page_after(after);
    while (i < d.pages()) {
      const std::uint32_t page = d.at(i).page;
      if (!store_->get(page_key(n, page), page_)) {
        // Gone since the directory was copied: a writer dropped it (empty)
        // or merged it into a fresh page, after it rewrote the directory
        // (adjacency write order), so the directory taken again differs.
        // Taken again unchanged, it still names the page: damage (a page
        // lost, not dropped; page numbers are never reused, so an equal
        // directory is the same one), skipped. Each missing page costs one
        // more read of the directory, and the walk starts over only on a
        // directory a writer changed: bounded, however many pages are lost.
        if (retake) {
          prev_dir_.swap(dir_);
          const std::optional<bool> r = try_load(n);
          if (!r) return true;  // n removed meanwhile: no more entries
          if (!*r) throw_corrupt_node(store_->name(), n);
          d = DirectoryView(dir_);
          if (dir_ != prev_dir_) {
            i = d.first_page_after(after);
            continue;
          }
        }
        ++i;
        continue;
      }
      const std::size_t count = page_.size() / kEntryBytes;
      for (std::size_t j = lower_entry(page_.data(), count, after + 1); j < count; ++j) {
        const Entry e = load_entry(page_.data() + j * kEntryBytes);
        if (e.edge() <= after) continue;  // out of order: damage (ids ascend in a page)
        after = e.edge();
        if (e.neighbour == 0) continue;
        if (!fn(e)) return false;
      }
      ++i;
    }
    return true;
  }

  /// Returns: node n's entry of edge e, if it has one.
  /// (A node whose record is malformed has none.)
  std::optional<Entry> find(NodeId n, EdgeId e) {
    const std::optional<bool> loaded = try_load(n);
    if (!loaded || !*loaded) return std::nullopt;
    const DirectoryView d(dir_);
    const std::size_t i = d.page_of(e);
    if (i == d.pages() || !store_->get(page_key(n, d.at(i).page), page_)) return std::nullopt;
    const std::size_t count = page_.size() / kEntryBytes;
    const std::size_t j = lower_entry(page_.data(), count, e);
    if (j == count) return std::nullopt;
    const Entry found = load_entry(page_.data() + j * kEntryBytes);
    if (found.edge() != e) return std::nullopt;
    return found;
  }

 private:
  const Store* store_;
  std::string dir_;   // header and directory of the node loaded last
  std::string prev_dir_;  // walk_loaded: the directory before it was taken again
  std::string page_;  // the page read last
};

/// Changes adjacency; the graph's writer mutex serializes its callers, so
/// what it reads is what it last wrote. Keeps three buffers between calls
/// (the node record and two pages: each at most a page or a directory).
class AdjacencyWriter {
 public:
  explicit AdjacencyWriter(Store& store) noexcept : store_(&store) {}

  /// Effects: appends `e` at the end of node n's adjacency. Requires: n is
  /// present and e's edge id is above every id in its adjacency.
  /// Throws: what the store throws (out_of_space, value_too_large for a
  /// node record that cannot grow by a directory entry, ...): nothing
  /// changed then; a new page written before the directory refused it is
  /// removed again (if that removal fails too, the page is left, no
  /// directory names it, and take_leftover() says so).
  void append(NodeId n, const Entry& e) {
    if (!load_node(n)) {
      throw Error(Errc::invalid_argument,
                  store_->name() + ": graph node " + std::to_string(n) + " is absent");
    }
    const DirectoryView d(rec_);
    if (d.pages() > 0) {
      const Key last = page_key(n, d.at(d.pages() - 1).page);
      // A page the directory names and the store lacks is damage: the
      // append starts it afresh rather than refuse every later edge.
      if (!store_->get(last, page_)) page_.clear();
      if (page_.size() / kEntryBytes < kPageEntries) {
        store_->put(last, page_.size() + kEntryBytes, [&](std::span<std::byte> out) {
          char* p = reinterpret_cast<char*>(out.data());
          std::memcpy(p, page_.data(), page_.size());
          store_entry(p + page_.size(), e);
        });
        return;
      }
    }
    const std::uint32_t fresh = take_page_number(n, d);
    char one[kEntryBytes];
    store_entry(one, e);
    store_->put(page_key(n, fresh), std::string_view(one, kEntryBytes));
    const DirEntry added{e.edge(), fresh};
    rewrite_or_drop(n, fresh, [&] { rewrite_node(n, d, d.pages(), 0, &added, fresh + 1); });
  }

  /// Returns: whether a write that threw since the last call left a page no
  /// directory names (its removal failed too); clears the flag.
  bool take_leftover() noexcept { return std::exchange(leftover_, false); }

  /// For repair (check.hpp): rewrites node n's record with the directory
  /// `entries` and next page number `next`, its properties as they are.
  /// Requires: n is present and well formed.
  void replace_directory(NodeId n, const std::vector<DirEntry>& entries, std::uint32_t next) {
    if (!load_node(n)) return;
    const std::string_view props = DirectoryView(rec_).properties();
    const auto pages = static_cast<std::uint32_t>(entries.size());
    store_->put(node_key(n), DirectoryView::bytes_for(pages) + props.size(), [&](std::span<std::byte> out) {
      char* p = reinterpret_cast<char*>(out.data());
      store32(p, pages);
      store32(p + 4, next);
      for (std::size_t i = 0; i < entries.size(); ++i) store_dir_entry(p + DirectoryView::bytes_for(static_cast<std::uint32_t>(i)), entries[i]);
      std::memcpy(p + DirectoryView::bytes_for(pages), props.data(), props.size());
    });
  }

  /// Effects: drops edge e's entry from node n's adjacency (see the top of
  /// the file for what that rewrites). Returns: false if n has none.
  bool remove(NodeId n, EdgeId e) {
    if (!load_node(n)) return false;
    const DirectoryView d(rec_);
    const std::size_t i = d.page_of(e);
    if (i == d.pages()) return false;
    const Key pk = page_key(n, d.at(i).page);
    if (!store_->get(pk, page_)) return false;
    const std::size_t count = page_.size() / kEntryBytes;
    const std::size_t j = lower_entry(page_.data(), count, e);
    if (j == count || (load64(page_.data() + j * kEntryBytes) & kIdMask) != e) return false;
    const std::size_t left = count - 1;
    if (left == 0) {
      // The directory first: a reader it still sends to the page finds it
      // gone and takes the directory again.
      rewrite_node(n, d, i, 1, nullptr, d.next_page());
      store_->remove(pk);
      return true;
    }
    if (left <= kPageEntries / 4 && d.pages() > 1 && merge(n, d, i, j, left)) return true;
    store_->put(pk, left * kEntryBytes, [&](std::span<std::byte> out) {
      char* p = reinterpret_cast<char*>(out.data());
      std::memcpy(p, page_.data(), j * kEntryBytes);
      std::memcpy(p + j * kEntryBytes, page_.data() + (j + 1) * kEntryBytes, (left - j) * kEntryBytes);
    });
    return true;
  }

 private:
  bool load_node(NodeId n) {
    if (!store_->get(node_key(n), rec_)) return false;
    if (!DirectoryView::well_formed(rec_)) throw_corrupt_node(store_->name(), n);
    return true;
  }

  /// The number for a new page of node n: its record's next page number,
  /// or above every page its directory names if that is higher (a damaged
  /// record must not send a new page over a live one). Cost: O(pages), once
  /// per new page (every 256th append, or a merge).
  std::uint32_t take_page_number(NodeId n, const DirectoryView& d) const {
    std::uint64_t next = d.next_page();
    for (std::size_t i = 0; i < d.pages(); ++i) next = std::max<std::uint64_t>(next, std::uint64_t{d.at(i).page} + 1);
    if (next >= UINT32_MAX) {
      throw Error(Errc::out_of_space, store_->name() + ": graph node " + std::to_string(n) +
                                          " has used all 2^32 page numbers of its adjacency");
    }
    return static_cast<std::uint32_t>(next);
  }

  /// Runs `rewrite` (the directory naming the fresh page just written); if
  /// it throws, removes the fresh page again (nothing names it) and lets
  /// the error go on.
  template <class Rewrite>
  void rewrite_or_drop(NodeId n, std::uint32_t fresh, Rewrite&& rewrite) {
    try {
      rewrite();
    } catch (...) {
      try {
        store_->remove(page_key(n, fresh));
      } catch (...) {
        leftover_ = true;
      }
      throw;
    }
  }

  /// Rewrites node n's record (rec_, read as `d`): its directory with
  /// `drop` entries from `at` replaced by *insert (if any), next page
  /// number `next`, its properties as they are.
  void rewrite_node(NodeId n, const DirectoryView& d, std::size_t at, std::size_t drop,
                    const DirEntry* insert, std::uint32_t next) {
    const std::size_t old_pages = d.pages();
    const std::size_t pages = old_pages - drop + (insert != nullptr ? 1 : 0);
    const std::string_view props = d.properties();
    store_->put(node_key(n), DirectoryView::bytes_for(static_cast<std::uint32_t>(pages)) + props.size(),
                [&](std::span<std::byte> out) {
                  char* p = reinterpret_cast<char*>(out.data());
                  store32(p, static_cast<std::uint32_t>(pages));
                  store32(p + 4, next);
                  const char* old = rec_.data() + kNodeHeaderBytes;
                  char* q = p + kNodeHeaderBytes;
                  std::memcpy(q, old, at * kDirEntryBytes);
                  q += at * kDirEntryBytes;
                  if (insert != nullptr) {
                    store_dir_entry(q, *insert);
                    q += kDirEntryBytes;
                  }
                  const std::size_t rest = old_pages - at - drop;
                  std::memcpy(q, old + (at + drop) * kDirEntryBytes, rest * kDirEntryBytes);
                  q += rest * kDirEntryBytes;
                  std::memcpy(q, props.data(), props.size());
                });
  }

  /// remove() of entry j of page i (page_, `left` entries after it) when
  /// that leaves the page a quarter full or less: merges it with the
  /// previous page, or else the next, if the two then fill half a page or
  /// less. Writes the merged page under a fresh number, then the directory,
  /// then drops the two old pages. Returns: false (nothing written) if
  /// neither neighbour is small enough.
  bool merge(NodeId n, const DirectoryView& d, std::size_t i, std::size_t j, std::size_t left) {
    for (const std::size_t k : {i - 1, i + 1}) {
      if (k >= d.pages()) continue;  // i - 1 wraps for i == 0
      const Key other_key = page_key(n, d.at(k).page);
      if (!store_->get(other_key, other_)) continue;
      const std::size_t other_count = other_.size() / kEntryBytes;
      if (other_count + left > kPageEntries / 2) continue;
      const std::uint32_t fresh = take_page_number(n, d);
      // Page i's entries without entry j, before or after the other
      // page's, keeps the ids ascending.
      store_->put(page_key(n, fresh), (other_count + left) * kEntryBytes, [&](std::span<std::byte> out) {
        char* p = reinterpret_cast<char*>(out.data());
        if (k < i) {
          std::memcpy(p, other_.data(), other_.size());
          p += other_.size();
        }
        std::memcpy(p, page_.data(), j * kEntryBytes);
        p += j * kEntryBytes;
        std::memcpy(p, page_.data() + (j + 1) * kEntryBytes, (left - j) * kEntryBytes);
        p += (left - j) * kEntryBytes;
        if (k > i) std::memcpy(p, other_.data(), other_.size());
      });
      const std::size_t lo = k < i ? k : i;
      const DirEntry merged{d.at(lo).first, fresh};
      const Key lo_key = page_key(n, d.at(lo).page);
      const Key hi_key = page_key(n, d.at(lo + 1).page);
      rewrite_or_drop(n, fresh, [&] { rewrite_node(n, d, lo, 2, &merged, fresh + 1); });
      store_->remove(lo_key);
      store_->remove(hi_key);
      return true;
    }
    return false;
  }

  Store* store_;
  std::string rec_;    // the node record being changed
  std::string page_;   // the page being changed
  std::string other_;  // its neighbour, for a merge
  bool leftover_ = false;  // take_leftover()
};

}  // namespace offheap::graph_detail
