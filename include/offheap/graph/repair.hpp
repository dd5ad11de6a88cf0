// SPDX-License-Identifier: Apache-2.0
// Graph's open, and the check that an unclean open runs (repairing) and
// verify() runs (reporting). graph.hpp lists what a crash can leave; this
// file removes it, in three walks of the store's keys:
//
//   1. nodes   each entry of each node's adjacency: its edge record must
//              exist and name this node and the entry's neighbour at the
//              right ends, with the right kind, and the neighbour must be
//              present; an entry that fails is dropped. (From remove_node:
//              entries naming the removed node.)
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
#pragma once

#include <offheap/graph/graph.hpp>

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
      } else if (k.kind == 0 && structure_) {
        note("a key of " + std::to_string(key.size()) + " bytes that is not the graph's");
      }
    });
    return problem_;
  }

  std::uint64_t nodes = 0;
  std::uint64_t edges = 0;  // edge records that pass walk 2
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

  void check_node(NodeId n) {
    if (!reader_.load(n)) return;
    const DirectoryView d = reader_.directory();
    dropped_.clear();
    for (std::size_t i = 0; i < d.pages(); ++i) {
      const DirEntry at = d.at(i);
      const EdgeId end = i + 1 < d.pages() ? d.at(i + 1).first : ~EdgeId{0};
      if (structure_ && at.first >= end) {
        note("node " + std::to_string(n) + ": directory entry " + std::to_string(i) + " does not start above the one before");
      }
      if (!store_.get(page_key(n, at.page), page_)) {
        if (structure_) note("node " + std::to_string(n) + ": page " + std::to_string(at.page) + " of its directory is missing");
        continue;
      }
      const std::size_t count = page_.size() / kEntryBytes;
      if (structure_ && (count == 0 || count > kPageEntries || page_.size() % kEntryBytes != 0)) {
        note("node " + std::to_string(n) + ": page " + std::to_string(at.page) + " holds " +
             std::to_string(page_.size()) + " bytes, not 1-256 entries");
      }
      EdgeId last = 0;
      for (std::size_t j = 0; j < count; ++j) {
        const Entry e = load_entry(page_.data() + j * kEntryBytes);
        if (structure_ && (e.edge() <= last || e.edge() < at.first || e.edge() >= end)) {
          note("node " + std::to_string(n) + ": page " + std::to_string(at.page) + " entry " + std::to_string(j) +
               " (edge " + std::to_string(e.edge()) + ") is out of order or outside the page's range");
        }
        last = e.edge();
        if (!entry_ok(n, e)) {
          note("node " + std::to_string(n) + ": entry of edge " + std::to_string(e.edge()) + " (neighbour " +
               std::to_string(e.neighbour) + ") has no matching edge record or an absent neighbour");
          dropped_.push_back(e.edge());
        }
      }
    }
    fixes.entries_dropped += dropped_.size();
    if (writer_ != nullptr) {
      for (const EdgeId e : dropped_) writer_->remove(n, e);
    }
  }

  void check_edge(EdgeId e) {
    if (!store_.get(edge_key(e), edge_)) return;
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
    if (reader_.load(n) && store_.get(page_key(n, page), page_) && page_.size() >= kEntryBytes) {
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
  std::vector<EdgeId> dropped_;
  std::string problem_;
};

}  // namespace offheap::graph_detail

namespace offheap {

inline void Graph::open() {
  using namespace graph_detail;
  const bool writable = !store_.options().read_only;
  std::string m;
  if (!store_.get(meta_key(), m)) {
    if (store_.size() != 0) {
      throw Error(Errc::invalid_argument, store_.name() + ": the store holds " + std::to_string(store_.size()) +
                                              " records and no graph (no meta record): a Graph opens only a "
                                              "store that is empty or holds a graph");
    }
    if (writable) write_meta(false);
    return;
  }
  if (m.size() != kMetaBytes || std::memcmp(m.data(), kMagic, sizeof kMagic) != 0) {
    throw Error(Errc::corrupt_file, store_.name() + ": the record under the graph's meta key (\"M\", " +
                                        std::to_string(m.size()) + " bytes) is not a graph's");
  }
  if (const std::uint32_t v = load32(m.data() + 8); v != kGraphFormatVersion) {
    throw Error(Errc::format_version, store_.name() + ": graph format version " + std::to_string(v) +
                                          "; this build reads version " + std::to_string(kGraphFormatVersion));
  }
  node_ids_ = next_node_ = std::max<std::uint64_t>(load64(m.data() + 16), 1);
  edge_ids_ = next_edge_ = std::max<std::uint64_t>(load64(m.data() + 24), 1);
  if ((load32(m.data() + 12) & 1) != 0) {
    node_count_.store(load64(m.data() + 32), std::memory_order_relaxed);
    edge_count_.store(load64(m.data() + 40), std::memory_order_relaxed);
  } else {
    const auto t0 = std::chrono::steady_clock::now();
    GraphCheck check(store_, writable ? &store_ : nullptr, writable ? &writer_ : nullptr, false);
    check.run();
    open_report_ = check.fixes;
    open_report_.repaired = true;
    open_report_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    node_count_.store(check.nodes, std::memory_order_relaxed);
    edge_count_.store(check.edges, std::memory_order_relaxed);
  }
  // In use from here: a crash before the next close() leaves it unclean.
  if (writable) write_meta(false);
}

inline std::string Graph::verify() const {
  using namespace graph_detail;
  std::string m;
  if (!store_.get(meta_key(), m)) return "the graph's meta record is missing";
  GraphCheck check(store_, nullptr, nullptr, true);
  std::string problem = check.run();
  if (!problem.empty()) return problem;
  if (check.nodes != node_count()) {
    return "node_count() is " + std::to_string(node_count()) + " but the store holds " + std::to_string(check.nodes) +
           " nodes";
  }
  if (check.edges != edge_count()) {
    return "edge_count() is " + std::to_string(edge_count()) + " but the store holds " + std::to_string(check.edges) +
           " edges";
  }
  return {};
}

}  // namespace offheap
