// SPDX-License-Identifier: Apache-2.0
// GraphCheck: the check that an unclean open of a Graph runs (repairing)
// and Graph::verify() runs (reporting). graph.hpp lists what a crash can
// leave; this removes it, in three walks of the store's keys:
//
//   1. nodes   each entry of each node's adjacency: its edge record must
//              exist and name this node and the entry's neighbour at the
//              right ends, with the right kind, and the neighbour must be
//              present; an entry that fails is dropped. (From remove_node:
//              entries naming the removed node.) Damage no crash leaves is
//              dropped here too, so that no read meets it again: a node
//              whose record is too short for its directory (the node goes;
//              walks 2 and 3 drop its edges and pages), directory entries
//              that do not ascend or name a missing page, entries out of
//              order or outside their page's range (their pages rewritten;
//              walk 2 drops the edges that lost an entry), and a next page
//              number not above every page named (raised).
//   2. edges   each edge record: both ends present, and its entry at each
//              end present; else its entries are dropped, then the record.
//              (From add_edge or remove_edge in flight: the operation then
//              did not happen, or did; from remove_node: its edges.)
//   3. pages   each page must be named by its node's directory: the
//              directory entry whose range holds the page's first edge id
//              names this page number; else the page is dropped. (From a
//              new page or a merge in flight, or remove_node.) Nodes are
//              counted here, edges in walk 2.
//
// Each walk writes only keys of other kinds than the one it walks (walk 2
// removes the edge record it stands on), so the store's for_each_key visits
// each key of its kind once. Cost: O(keys) lookups, a few per entry and per
// edge; heap: one page, one directory and the ids of one node's dropped
// entries.
//
// verify() runs the same walks without writing, adds the structure checks
// (directory ranges ascending, pages of 1-256 entries ascending inside
// their range, named pages present, no foreign keys) and compares the
// counts, stopping at the first violation.
//
// Thread safety: the repair runs inside Graph's constructor, before any
// other call can; verify() takes no lock and must run without writers
// (Graph::verify).
#pragma once

#include <offheap/error.hpp>
#include <offheap/graph/detail/adjacency.hpp>
#include <offheap/graph/detail/layout.hpp>
#include <offheap/graph/types.hpp>
#include <offheap/store.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace offheap::graph_detail {

class GraphCheck {
 public:
  /// writable and writer: both null to report only (verify, a read-only
  /// open), else the same store and the graph's writer.
  GraphCheck(const Store& store, Store* writable, AdjacencyWriter* writer, bool structure)
      : store_(store), writable_(writable), writer_(writer), structure_(structure), reader_(store) {}

  /// Effects: runs the three walks; `fixes` counts what was dropped (or,
  /// reporting only, what would have been). Returns: the first violation,
  /// or "" if none.
  std::string run() {
    store_.for_each_key([&](std::string_view key) {
      const ParsedKey k = parse_key(key);
      if (k.kind == kNodePrefix) check_node(k.id);
    });
    store_.for_each_key([&](std::string_view key) {
      const ParsedKey k = parse_key(key);
      if (k.kind == kEdgePrefix) check_edge(k.id);
    });
    store_.for_each_key([&](std::string_view key) {
      const ParsedKey k = parse_key(key);
      if (k.kind == kPagePrefix) {
        check_page(k.id, k.page);
      } else if (k.kind == kNodePrefix) {
        ++nodes;
        if (k.id <= kIdMask) max_node = std::max(max_node, k.id);
      } else if (k.kind == 0 && structure_) {
        note("a key of " + std::to_string(key.size()) + " bytes that is not the graph's");
      }
    });
    return problem_;
  }

  std::uint64_t nodes = 0;
  std::uint64_t edges = 0;  // edge records that pass walk 2
  NodeId max_node = 0;      // the greatest node (edge) id met below 2^56: the next ids go above
  EdgeId max_edge = 0;
  GraphOpenReport fixes;

 private:
  void note(std::string what) {
    if (problem_.empty()) problem_ = std::move(what);
  }

  /// Whether entry `e` of node n is its edge's, and leads to a present node.
  bool entry_ok(NodeId n, const Entry& e) {
    if (!store_.get(edge_key(e.edge()), edge_) || !edge_well_formed(edge_)) return false;
    return entry_matches(e, n, e.edge(), load_edge_header(edge_)) &&
           store_.contains(node_key(e.neighbour));
  }

  std::string node_name(NodeId n) const { return "node " + std::to_string(n); }

  void check_node(NodeId n) {
    const std::optional<bool> loaded = reader_.try_load(n);
    if (!loaded) return;
    if (!*loaded || n == 0 || n > kIdMask) {
      // Its directory cannot be read (or no graph hands out its id): the
      // node goes; walk 2 then drops its edges (an end missing), walk 3
      // its pages (no directory names them).
      note(node_name(n) + (*loaded ? ": its id is 0 or above 2^56"
                                   : ": its record is too short for the page directory it announces"));
      ++fixes.nodes_dropped;
      if (writable_ != nullptr) writable_->remove(node_key(n));
      return;
    }
    max_node = std::max(max_node, n);
    const DirectoryView d = reader_.directory();
    // The directory entries kept: each starts above the one before and
    // names a page that is present and keeps an entry.
    keep_.clear();
    for (std::size_t i = 0; i < d.pages(); ++i) {
      const DirEntry at = d.at(i);
      if (!keep_.empty() && at.first <= keep_.back().first) {
        note(node_name(n) + ": directory entry " + std::to_string(i) + " does not start above the one before");
        continue;
      }
      keep_.push_back(at);
    }
    std::uint64_t top_page = 0;  // 1 + the greatest page number named
    std::size_t kept = 0;
    for (std::size_t i = 0; i < keep_.size(); ++i) {
      const DirEntry at = keep_[i];
      const EdgeId end = i + 1 < keep_.size() ? keep_[i + 1].first : ~EdgeId{0};
      if (!store_.get(page_key(n, at.page), page_)) {
        note(node_name(n) + ": page " + std::to_string(at.page) + " of its directory is missing");
        continue;  // dropped from the directory; walk 2 drops the edges it held
      }
      const std::size_t count = page_.size() / kEntryBytes;
      if (count == 0 || count > kPageEntries || page_.size() % kEntryBytes != 0) {
        note(node_name(n) + ": page " + std::to_string(at.page) + " holds " + std::to_string(page_.size()) +
             " bytes, not 1-256 entries");
      }
      // The page's entries kept: ascending inside its range, at most
      // kPageEntries, each its edge's and leading to a present node.
      out_.clear();
      EdgeId last = 0;
      std::size_t bad = 0;
      for (std::size_t j = 0; j < count; ++j) {
        const Entry e = load_entry(page_.data() + j * kEntryBytes);
        if (e.edge() <= last || e.edge() < at.first || e.edge() >= end || out_.size() == kPageEntries * kEntryBytes) {
          note(node_name(n) + ": page " + std::to_string(at.page) + " entry " + std::to_string(j) + " (edge " +
               std::to_string(e.edge()) + ") is out of order or outside the page's range");
          ++bad;
          continue;
        }
        if (!entry_ok(n, e)) {
          note(node_name(n) + ": entry of edge " + std::to_string(e.edge()) + " (neighbour " +
               std::to_string(e.neighbour) + ") has no matching edge record or an absent neighbour");
          ++bad;
          continue;
        }
        last = e.edge();
        max_edge = std::max(max_edge, last);
        out_.append(page_.data() + j * kEntryBytes, kEntryBytes);
      }
      fixes.entries_dropped += bad;
      if (out_.empty()) continue;  // nothing kept: dropped from the directory, the page left to walk 3
      if (writable_ != nullptr && out_.size() != page_.size()) writable_->put(page_key(n, at.page), out_);
      top_page = std::max<std::uint64_t>(top_page, std::uint64_t{at.page} + 1);
      keep_[kept++] = at;
    }
    keep_.resize(kept);
    if (d.next_page() < top_page) {
      note(node_name(n) + ": its next page number " + std::to_string(d.next_page()) +
           " is not above every page its directory names");
    }
    const bool dir_changed = kept != d.pages() || d.next_page() < top_page;
    if (!dir_changed) return;
    fixes.directory_entries_dropped += d.pages() - kept;
    if (writer_ != nullptr) {
      writer_->replace_directory(n, keep_, static_cast<std::uint32_t>(std::max<std::uint64_t>(d.next_page(), top_page)));
    }
  }

  void check_edge(EdgeId e) {
    if (!store_.get(edge_key(e), edge_)) return;
    if (e <= kIdMask) max_edge = std::max(max_edge, e);  // dropped or not: never handed out again
    bool ok = edge_well_formed(edge_);
    EdgeHeader h;
    if (ok) {
      h = load_edge_header(edge_);
      const bool from_ok = store_.contains(node_key(h.from));
      const bool to_ok = store_.contains(node_key(h.to));
      ok = from_ok && to_ok;
      if (ok) {
        const std::optional<Entry> at_from = reader_.find(h.from, e);
        ok = at_from && entry_matches(*at_from, h.from, e, h);
      }
      if (ok && h.to != h.from) {
        const std::optional<Entry> at_to = reader_.find(h.to, e);
        ok = at_to && entry_matches(*at_to, h.to, e, h);
      }
    }
    if (ok) {
      ++edges;
      return;
    }
    note("edge " + std::to_string(e) + ": an end is absent, or an end lacks its adjacency entry");
    ++fixes.edges_dropped;
    if (writer_ == nullptr) return;
    if (edge_well_formed(edge_)) {
      // Entries first, then the record: the invariant (an entry's record
      // exists) holds through the repair too.
      writer_->remove(h.from, e);
      if (h.to != h.from) writer_->remove(h.to, e);
    }
    writable_->remove(edge_key(e));
  }

  void check_page(NodeId n, std::uint32_t page) {
    bool named = false;
    const std::optional<bool> loaded = reader_.try_load(n);
    if (loaded && *loaded && store_.get(page_key(n, page), page_) && page_.size() >= kEntryBytes) {
      const DirectoryView d = reader_.directory();
      const std::size_t i = d.page_of(load64(page_.data()) & kIdMask);
      named = i < d.pages() && d.at(i).page == page;
    }
    if (named) return;
    note("page " + std::to_string(page) + " of node " + std::to_string(n) + " is named by no directory");
    ++fixes.pages_dropped;
    if (writable_ != nullptr) writable_->remove(page_key(n, page));
  }

  const Store& store_;
  Store* writable_;
  AdjacencyWriter* writer_;
  bool structure_;
  AdjacencyReader reader_;
  std::string edge_;
  std::string page_;
  std::vector<DirEntry> keep_;  // check_node: the directory entries kept
  std::string out_;             // check_node: the entries of a page kept
  std::string problem_;
};

}  // namespace offheap::graph_detail
