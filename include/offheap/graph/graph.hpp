// SPDX-License-Identifier: Apache-2.0
// Graph: nodes and directed or undirected edges, each with a Document of
// properties, kept in one offheap::Store (anonymous memory, or a directory
// of files that a later Graph reopens). Records, adjacency and bookkeeping
// all live in the store: the Graph object holds a store, a mutex, a few
// counters and four scratch buffers (each at most a page of 4 KiB or one
// node's record), and nothing per node or per edge, so its heap stays flat
// however many edges the graph has.
//
// The records (layout.hpp draws each to the byte):
//   node  N|id  -> its page directory and its properties
//   edge  E|id  -> from, to, kind and its properties
//   page  A|node|page number -> up to 256 adjacency entries of the node,
//         (edge id + out/in/undirected bits, neighbour id), ascending id
//   meta  M     -> format, the clean mark, reserved ids, counts
// An edge puts one entry at each end (one entry, out and in, for a
// self-loop); an undirected edge's entries are followed both ways.
//
// Write order: every change below is a sequence of single-record store
// writes; a crash (SIGKILL) can stop it between any two. The order keeps
// one invariant at every instant: an adjacency entry's edge record exists
// (written before the entry, removed after it). What a crash can leave:
//   add_edge     edge record, entry at from, entry at to
//                -> an edge record lacking an entry
//   remove_edge  entry at to, entry at from, edge record
//                -> the same
//   remove_node  node record (the commit: the node and its edges are gone
//                for every reader from here), then per entry of its
//                adjacency the entry at the other end and the edge record,
//                then its pages
//                -> entries and edge records naming a missing node, pages
//                   of a missing node
//   add_node, update_node, update_edge: one write each.
//   A page is written before the directory naming it and dropped after the
//   directory stops naming it (adjacency.hpp) -> pages no directory names.
// Reads step over every leftover: a walk hands out an entry only if its
// neighbour is present (the invariant vouches for the edge record); edge()
// returns an edge only if both its ends are present. So no read returns an
// edge to a missing node. Ids are reserved in the meta record in blocks of
// kIdBlock before they are handed out: never reused, even after a crash.
//
// Clean mark: close() writes it with the counts; the open clears it before
// any write. An open that finds it missing (a crash, or a write that failed
// halfway and left the graph marked damaged) repairs the graph before it
// returns (detail/check.hpp): it drops entries whose neighbour or edge record is
// gone, edge records that lack an entry or name a missing node (the add or
// remove in flight then did not happen, or did), pages no directory names,
// and recounts. Cost: a walk of every key and a few lookups per entry; a
// clean open reads only the meta record (and the store's stats). A graph
// marked clean is trusted as it is, unless the store met damage (stats():
// corrupt_records, or a rebuild of its index): then it is repaired too.
// The repair also drops damage that no crash leaves (detail/check.hpp), and
// raises the next ids above every id present. Only a writable open
// repairs: a read-only open of an unclean graph checks and counts, and its
// reads step over the leftovers as above.
//
// Thread safety: writers (add_*, update_*, remove_*, close) serialize
// on the graph's mutex; readers (node, edge, for_each_edge, degree, the
// traversals, the counts) take no lock and go straight to the store, whose
// reads are lock-free. A reader running beside a writer sees each of the
// writer's store writes whole and in order: a traversal is weakly
// consistent (an edge added or removed during it may or may not be seen),
// never torn, and still never returns an edge to a missing node (beyond the
// race of a node removed between the check and the callback).
//
// Durability: as the store's Options::durability; a graph is as durable as
// its last sync(). After a power loss (not a process crash) without a sync,
// records written late may be lost in any order, which the write order
// above does not cover: sync() at the points that matter.
//
// Memory handed out: nothing of the store's. node() and edge() return
// copies (a Document, an Edge); for_each_edge's function and the
// traversals' visitors get ids and kinds by value; shortest_path returns a
// Path the caller owns. The traversals' bookkeeping (visited sets, queues,
// Dijkstra's heap) is the only heap they use, freed when they return
// (detail/search.hpp).
//
// Costs and limits: the repair of an unclean graph is a full walk, 5-13 us
// per edge (measured on a shared 2-core machine). Traversals read the store
// at random (a node's directory and pages, the neighbour, and for weights
// each edge's record): on 1M nodes and 10M edges a whole BFS took 1.9 s
// and a Dijkstra 2.6 s, against 0.2 s and 0.4 s over in-process vectors,
// with the graph's heap flat (bench/README.md). Options::default_ttl is
// refused; write the graph's store only through the graph. Damage the
// store cannot see (records overwritten through store()) is found by
// verify(), not at open; a write that meets it (a node id already in use,
// a malformed node record) is refused with Errc::corrupt_file and marks
// the graph for repair at its next open. tests/graph/graph_crash_test.cpp
// kills a writer (and repairing opens) at random and checks the history,
// verify() and traversals.
#pragma once

#include <offheap/document.hpp>
#include <offheap/error.hpp>
#include <offheap/graph/detail/adjacency.hpp>
#include <offheap/graph/detail/id_table.hpp>
#include <offheap/graph/detail/layout.hpp>
#include <offheap/graph/detail/check.hpp>
#include <offheap/graph/detail/search.hpp>
#include <offheap/graph/types.hpp>
#include <offheap/options.hpp>
#include <offheap/store.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace offheap {



class Graph {
 public:
  /// Node and edge ids are reserved in the store this many at a time: a
  /// crash wastes at most this many of each.
  static constexpr std::uint64_t kIdBlock = 1024;

  /// Effects: opens a Store with `options` (empty path: anonymous memory;
  /// else a directory: created, or reopened with the graph it holds) and
  /// the graph in it. A graph not closed cleanly is checked and repaired
  /// first (see the top of the file; open_report() says what was done); a
  /// read-only one is only checked, and its counts taken from what is
  /// readable.
  /// Throws: what Store's constructor throws; Error(invalid_argument) for
  /// options.default_ttl (a graph's records must not expire) or a store
  /// that holds records but no graph; Error(corrupt_file) for a meta
  /// record that is not a graph's; Error(format_version) for a graph of
  /// another format.
  explicit Graph(Options options);

  /// Effects: close(), ignoring its errors (the next open then repairs).
  /// Requires: no other thread uses the graph.
  ~Graph() {
    try {
      close();
    } catch (...) {
    }
  }
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // ---- writes: serialized on the graph's mutex -------------------------------------
  //
  // Each throws Error(closed) after close() and Error(read_only) on a
  // read-only store, before it changes anything; and what the store throws
  // (out_of_space, value_too_large for properties too large for a record,
  // io_error). add_edge refused halfway undoes what it wrote (the edge
  // record, its entries, a new page its directory could not name); any
  // other write refused halfway, or an undo that fails too, leaves only
  // the leftovers a crash would and marks the graph damaged: close() then
  // leaves it unclean, and its next open repairs it.

  /// Effects: adds a node with these properties. Returns: its id (ids only
  /// grow, and are never reused). Throws (besides the above):
  /// Error(out_of_space) once every node id below 2^56 is handed out;
  /// Error(corrupt_file) if the id it takes is already in use (a stale or
  /// damaged meta record: nothing written, the graph marked damaged).
  NodeId add_node(const Document& properties = {});

  /// Effects: adds an edge from `from` to `to` (the same node: a
  /// self-loop; parallel edges are separate edges). An undirected edge is
  /// followed both ways from either end. Returns: its id, above every edge
  /// id before it: each node's edges come in walks in the order they were
  /// added. Throws: Error(invalid_argument) naming the missing node if
  /// `from` or `to` is absent (nothing written); Error(out_of_space) and
  /// Error(corrupt_file) as add_node, for edge ids.
  EdgeId add_edge(NodeId from, NodeId to, const Document& properties = {},
                  EdgeKind kind = EdgeKind::directed);

  /// Effects: replaces node n's (or edge e's) properties. Returns: false
  /// if it is absent (an edge with a missing end counts as absent).
  bool update_node(NodeId n, const Document& properties);
  bool update_edge(EdgeId e, const Document& properties);

  /// Effects: removes edge e. Cost: the edge's page at each end rewritten
  /// (O(256) entries copied, O(log pages) to find it). Returns: false if
  /// absent.
  bool remove_edge(EdgeId e);

  /// Effects: removes node n and every edge to or from it. Cost: per edge,
  /// its entry removed at the other end and its record; then n's pages.
  /// A node whose record is too short for its directory (damage) is
  /// removed too: its pages are found by a walk of every key, and the graph
  /// is marked damaged (the next open drops what they lost). Returns: false
  /// if absent.
  bool remove_node(NodeId n);

  // ---- reads: lock-free, from any thread, beside a writer ----------------------

  /// Returns: node n's properties (a copy), or nullopt if n is absent.
  std::optional<Document> node(NodeId n) const;
  bool contains_node(NodeId n) const { return store_.contains(graph_detail::node_key(n)); }

  /// Returns: edge e (a copy), or nullopt if it is absent or one of its
  /// ends is.
  std::optional<Edge> edge(EdgeId e) const;

  /// Effects: calls fn(EdgeId, NodeId neighbour, EdgeKind) for each edge of
  /// node n in direction d (an undirected edge in every direction; a
  /// self-loop once, with n as the neighbour), in the order the edges were
  /// added, skipping any whose neighbour is absent; fn returns void or
  /// bool (false: stop). fn may call the graph, writes included (a write
  /// to n meanwhile may or may not show in the rest of the walk). An
  /// absent node has no edges.
  /// Heap: one page (4 KiB) and n's directory, copied.
  template <class F>
  void for_each_edge(NodeId n, Direction d, F&& fn) const;

  /// Returns: how many edges for_each_edge(n, d, ...) would hand out
  /// (a self-loop counts once). Cost: a walk of n's adjacency.
  std::size_t degree(NodeId n, Direction d) const;

  /// Returns: the number of nodes (edges) present. Exact between writes:
  /// each write moves it when it completes.
  std::uint64_t node_count() const noexcept { return node_count_.load(std::memory_order_relaxed); }
  std::uint64_t edge_count() const noexcept { return edge_count_.load(std::memory_order_relaxed); }

  // ---- traversals (detail/search.hpp) ---------------------------------------------------
  //
  // Iterative (no recursion: a path a million nodes long is fine), each
  // node visited once, neighbours in the order their edges were added,
  // following t.direction. Heap: the traversal's own bookkeeping, sized by
  // what it reaches (a set or map of the nodes reached, a queue, stack or
  // heap of them), plus one page and one directory copied at a time;
  // nothing per edge. A start node that is absent visits nothing.

  /// Effects: breadth-first from `start`: visit(NodeId, std::uint32_t
  /// depth) for start at depth 0, then every node reached, in order of
  /// depth, each at its least depth, up to t.max_depth; within a depth in
  /// the order found (the nodes of depth k are taken in the order they were
  /// visited, each one's neighbours in edge order). visit returns void or
  /// bool (false: stop the whole traversal at once).
  template <class V>
  void bfs(NodeId start, const Traversal& t, V&& visit) const {
    graph_detail::GraphSearch(store_).bfs(start, t, visit);
  }

  /// Effects: depth-first from `start`, preorder: as the recursive
  /// dfs(u, depth) { visit(u, depth); if depth < t.max_depth: for each
  /// neighbour v in edge order: if v not visited: dfs(v, depth + 1) } would
  /// visit, stopping at once when visit returns false. A node is visited at
  /// the depth of the path that reached it first, so with a depth limit a
  /// node reachable within it by another path may go unvisited. Heap: a
  /// stack frame (24 bytes) per node on the current path, a set of the
  /// nodes visited.
  template <class V>
  void dfs(NodeId start, const Traversal& t, V&& visit) const {
    graph_detail::GraphSearch(store_).dfs(start, t, visit);
  }

  /// Returns: a path from `from` to `to` with the fewest edges following
  /// `d`, cost = its number of edges; among several, the one breadth-first
  /// search finds first (each node's parent is the first node that reached
  /// it). nullopt if either node is absent or no path exists. A node to
  /// itself: {{from}, {}, 0}.
  std::optional<Path> shortest_path(NodeId from, NodeId to, Direction d = Direction::out) const {
    return graph_detail::GraphSearch(store_).shortest_path(from, to, d);
  }

  /// Returns: a path from `from` to `to` of least total weight following
  /// `d` (Dijkstra, a binary heap with lazy deletion), where an edge's
  /// weight is its property `weight_field`, an integer or a real; cost: the
  /// sum. Ties: nodes settle in order of (distance, id) and a node's parent
  /// changes only for a strictly shorter distance. nullopt as above.
  /// Throws: Error(invalid_argument), naming the edge and the field, for
  /// the first edge the search looks at (each edge leaving a settled node,
  /// in edge order) whose weight is missing (no default is assumed: a graph
  /// whose edges lack the field has no weights to use), not a number,
  /// negative, or not finite (NaN, infinity); and for a distance that
  /// overflows to infinity (weights near the largest double). Weights are
  /// summed as doubles: integer weights exactly while the sums stay below
  /// 2^53. (Beside a writer, the edges of a node being removed may be
  /// looked at too.)
  std::optional<Path> shortest_path(NodeId from, NodeId to, std::string_view weight_field,
                                    Direction d = Direction::out) const {
    return graph_detail::GraphSearch(store_).shortest_path(from, to, weight_field, d);
  }

  // ---- lifetime ---------------------------------------------------------------------

  /// Effects: the store's sync(): every write before the call is on disk
  /// when it returns (file-backed stores). Throws: as Store::sync.
  void sync();

  /// Effects: writes the counts and the clean mark (unless the graph is
  /// read-only, or damaged by a write that failed halfway: the next open
  /// repairs it), then closes the store. Later writes throw Error(closed);
  /// reads go on working. The second call does nothing.
  /// Throws: as Store::close.
  void close();
  bool closed() const noexcept { return store_.closed(); }

  /// Effects: checks every record of the graph (O(records), for tests and
  /// debugging; call it without writers). Returns: "" if the graph is as
  /// its write order promises between writes (every entry's edge record
  /// present and matching, every edge record with both its entries, both
  /// its ends present, pages sorted and named by a directory, counts
  /// right), else a description of the first violation.
  std::string verify() const;

  /// What the open found and repaired.
  const GraphOpenReport& open_report() const noexcept { return open_report_; }

  /// The store the graph lives in (its stats(), its options(); reading it
  /// is fine, writing keys of the layout in layout.hpp corrupts the graph).
  Store& store() noexcept { return store_; }
  const Store& store() const noexcept { return store_; }

 private:
  static Options checked(Options o) {
    if (o.default_ttl.count() != 0) {
      throw Error(Errc::invalid_argument,
                  (o.name.empty() ? o.path.string() : o.name) +
                      ": a graph's store cannot have a default_ttl: its records must not expire");
    }
    return o;
  }
  void open();
  void check_writable(const char* op) const;
  /// The meta record: reserved ids while the graph is in use; at a clean
  /// close the next ids themselves, so that the reopen wastes none.
  graph_detail::Meta meta(bool clean) const {
    return {clean, clean ? next_node_ : node_ids_, clean ? next_edge_ : edge_ids_, node_count(), edge_count()};
  }
  void write_meta(bool clean) {
    const auto m = graph_detail::encode_meta(meta(clean));
    store_.put(graph_detail::meta_key(), std::string_view(m.data(), m.size()));
  }
  NodeId take_node_id();
  EdgeId take_edge_id();
  /// add_node / add_edge: the id just taken is already in use (the meta
  /// record's ids are stale or damaged): nothing written; the graph is
  /// marked damaged, so that its next open raises the ids above every one
  /// present.
  [[noreturn]] void refuse_taken_id(const char* op, const char* what, std::uint64_t id) {
    damaged_ = true;
    throw Error(Errc::corrupt_file, store_.name() + ": graph " + op + ": " + what + " id " + std::to_string(id) +
                                        " is already in use: the meta record's ids are stale or damaged (the "
                                        "next open repairs them)");
  }
  /// remove_node of a node whose record is malformed: calls each(entry)
  /// for every entry of every page of n found among the store's keys
  /// (O(keys)), then removes the page.
  template <class Each>
  void remove_pages_of_malformed(NodeId n, Each& each);
  /// Writes a record of `header` bytes (header(char*) writes them) then
  /// the properties.
  template <class Header>
  void put_with_properties(std::string_view key, std::size_t header_bytes, Header&& header,
                           const Document& properties) {
    const std::size_t props = properties.encoded_size();
    store_.put(key, header_bytes + props, [&](std::span<std::byte> out) {
      header(reinterpret_cast<char*>(out.data()));
      properties.encode_to(out.subspan(header_bytes));
    });
  }
  static Document decode_properties(std::string_view bytes) {
    return bytes.empty() ? Document{} : Document::decode(bytes);
  }
  /// Runs a write of several store writes: if one throws, the graph is
  /// marked damaged (close() then leaves it unclean) and the error goes on.
  template <class F>
  auto guarded(F&& steps) {
    try {
      return steps();
    } catch (...) {
      damaged_ = true;
      throw;
    }
  }

  Store store_;
  std::mutex write_mutex_;
  // Counts of what is present: moved by writers (under the mutex) once a
  // write completes, read by anyone (relaxed: a count, not a guard).
  std::atomic<std::uint64_t> node_count_{0};
  std::atomic<std::uint64_t> edge_count_{0};
  // Writers' state, under write_mutex_.
  NodeId next_node_ = 1;
  EdgeId next_edge_ = 1;
  std::uint64_t node_ids_ = 1;  // reserved in the meta record: ids below it may have been handed out
  std::uint64_t edge_ids_ = 1;
  // Set when a write left leftovers or met damage (a guarded write that
  // threw, an add_edge whose undo failed or left a page, an id in use, a
  // malformed node removed): close() then leaves the graph unclean.
  bool damaged_ = false;
  graph_detail::AdjacencyWriter writer_{store_};
  std::string scratch_;
  GraphOpenReport open_report_;
};

// ---- definitions ----------------------------------------------------------------------

inline Graph::Graph(Options options) : store_(checked(std::move(options))) { open(); }

inline void Graph::check_writable(const char* op) const {
  if (store_.closed()) {
    throw Error(Errc::closed, store_.name() + ": graph " + op + " after close()");
  }
  if (store_.options().read_only) {
    throw Error(Errc::read_only, store_.name() + ": graph " + op + " on a read-only store");
  }
}

inline NodeId Graph::take_node_id() {
  if (next_node_ > graph_detail::kIdMask) {
    throw Error(Errc::out_of_space, store_.name() + ": graph has handed out every node id below 2^56");
  }
  if (next_node_ == node_ids_) {
    node_ids_ = next_node_ + kIdBlock;
    try {
      write_meta(false);
    } catch (...) {
      node_ids_ = next_node_;
      throw;
    }
  }
  return next_node_++;
}

inline EdgeId Graph::take_edge_id() {
  if (next_edge_ > graph_detail::kIdMask) {
    throw Error(Errc::out_of_space, store_.name() + ": graph has handed out every edge id below 2^56");
  }
  if (next_edge_ == edge_ids_) {
    edge_ids_ = next_edge_ + kIdBlock;
    try {
      write_meta(false);
    } catch (...) {
      edge_ids_ = next_edge_;
      throw;
    }
  }
  return next_edge_++;
}

inline NodeId Graph::add_node(const Document& properties) {
  const std::lock_guard<std::mutex> lock(write_mutex_);
  check_writable("add_node");
  const NodeId n = take_node_id();
  if (store_.contains(graph_detail::node_key(n))) refuse_taken_id("add_node", "node", n);
  put_with_properties(graph_detail::node_key(n), graph_detail::kNodeHeaderBytes,
                      [](char* p) { std::memset(p, 0, graph_detail::kNodeHeaderBytes); }, properties);
  node_count_.fetch_add(1, std::memory_order_relaxed);
  return n;
}

inline EdgeId Graph::add_edge(NodeId from, NodeId to, const Document& properties, EdgeKind kind) {
  using namespace graph_detail;
  const std::lock_guard<std::mutex> lock(write_mutex_);
  check_writable("add_edge");
  for (const NodeId n : {from, to}) {
    if (!contains_node(n)) {
      throw Error(Errc::invalid_argument, store_.name() + ": add_edge(" + std::to_string(from) + " -> " +
                                              std::to_string(to) + "): node " + std::to_string(n) +
                                              " does not exist");
    }
  }
  if (kind != EdgeKind::directed && kind != EdgeKind::undirected) {
    throw Error(Errc::invalid_argument, store_.name() + ": add_edge: EdgeKind " +
                                            std::to_string(static_cast<int>(kind)) + " is neither directed nor undirected");
  }
  const EdgeId e = take_edge_id();
  if (store_.contains(edge_key(e))) refuse_taken_id("add_edge", "edge", e);
  const EdgeHeader h{from, to, kind};
  put_with_properties(edge_key(e), kEdgeHeaderBytes, [&](char* p) { store_edge_header(p, h); }, properties);
  try {
    writer_.append(from, {from_word(e, from, to, kind), to});
    if (to != from) writer_.append(to, {to_word(e, kind), from});
  } catch (...) {
    // Undone in the order of a removal (entries, then the record); if the
    // undo fails too, or an append could not remove the page it wrote
    // before its directory was refused, the leftovers are a crash's and
    // the next open's.
    if (writer_.take_leftover()) damaged_ = true;
    try {
      writer_.remove(from, e);
      if (to != from) writer_.remove(to, e);
      store_.remove(edge_key(e));
    } catch (...) {
      damaged_ = true;
    }
    throw;
  }
  edge_count_.fetch_add(1, std::memory_order_relaxed);
  return e;
}

inline bool Graph::update_node(NodeId n, const Document& properties) {
  using namespace graph_detail;
  const std::lock_guard<std::mutex> lock(write_mutex_);
  check_writable("update_node");
  if (!store_.get(node_key(n), scratch_)) return false;
  if (!DirectoryView::well_formed(scratch_)) throw_corrupt_node(store_.name(), n);
  const std::string_view dir = DirectoryView(scratch_).directory_bytes();
  put_with_properties(node_key(n), dir.size(), [&](char* p) { std::memcpy(p, dir.data(), dir.size()); },
                      properties);
  return true;
}

inline bool Graph::update_edge(EdgeId e, const Document& properties) {
  using namespace graph_detail;
  const std::lock_guard<std::mutex> lock(write_mutex_);
  check_writable("update_edge");
  if (!store_.get(edge_key(e), scratch_) || !edge_well_formed(scratch_)) return false;
  const EdgeHeader h = load_edge_header(scratch_);
  if (!contains_node(h.from) || !contains_node(h.to)) return false;
  put_with_properties(edge_key(e), kEdgeHeaderBytes, [&](char* p) { store_edge_header(p, h); }, properties);
  return true;
}

inline bool Graph::remove_edge(EdgeId e) {
  using namespace graph_detail;
  const std::lock_guard<std::mutex> lock(write_mutex_);
  check_writable("remove_edge");
  if (!store_.get(edge_key(e), scratch_) || !edge_well_formed(scratch_)) return false;
  const EdgeHeader h = load_edge_header(scratch_);
  // An edge with an end missing (left by a write that failed halfway) was
  // not counted, nor returned: it goes all the same.
  const bool counted = contains_node(h.from) && contains_node(h.to);
  guarded([&] {
    if (h.to != h.from) writer_.remove(h.to, e);
    writer_.remove(h.from, e);
    store_.remove(edge_key(e));
  });
  if (counted) edge_count_.fetch_sub(1, std::memory_order_relaxed);
  return counted;
}

inline bool Graph::remove_node(NodeId n) {
  using namespace graph_detail;
  const std::lock_guard<std::mutex> lock(write_mutex_);
  check_writable("remove_node");
  AdjacencyReader own(store_);
  const std::optional<bool> loaded = own.try_load(n);  // copies n's directory: the walk below needs it
  if (!loaded) return false;
  store_.remove(node_key(n));  // the commit
  node_count_.fetch_sub(1, std::memory_order_relaxed);
  guarded([&] {
    auto each = [&](const Entry& en) {
      const EdgeId e = en.edge();
      const NodeId v = en.neighbour;
      const bool counted = v == n || contains_node(v);
      if (v != n) writer_.remove(v, e);
      if (store_.remove(edge_key(e)) && counted) edge_count_.fetch_sub(1, std::memory_order_relaxed);
      return true;
    };
    if (!*loaded) {
      // Its record is too short for the directory it announces (damage):
      // its pages are found by a walk of the store's keys instead, and
      // what they lost is left to the next open's repair.
      damaged_ = true;
      remove_pages_of_malformed(n, each);
      return;
    }
    own.walk_loaded(n, 0, each, false);
    const DirectoryView d = own.directory();
    for (std::size_t i = 0; i < d.pages(); ++i) store_.remove(page_key(n, d.at(i).page));
  });
  return true;
}

template <class Each>
void Graph::remove_pages_of_malformed(NodeId n, Each& each) {
  using namespace graph_detail;
  std::vector<std::uint32_t> pages;
  store_.for_each_key([&](std::string_view key) {
    const ParsedKey k = parse_key(key);
    if (k.kind == kPagePrefix && k.id == n) pages.push_back(k.page);
  });
  std::sort(pages.begin(), pages.end());
  std::string page;
  for (const std::uint32_t p : pages) {
    if (!store_.get(page_key(n, p), page)) continue;
    for (std::size_t j = 0; j + kEntryBytes <= page.size(); j += kEntryBytes) {
      const Entry e = load_entry(page.data() + j);
      if (e.edge() != 0 && e.neighbour != 0) each(e);
    }
    store_.remove(page_key(n, p));
  }
}

inline std::optional<Document> Graph::node(NodeId n) const {
  using namespace graph_detail;
  std::string rec;
  if (!store_.get(node_key(n), rec)) return std::nullopt;
  if (!DirectoryView::well_formed(rec)) throw_corrupt_node(store_.name(), n);
  return decode_properties(DirectoryView(rec).properties());
}

inline std::optional<Edge> Graph::edge(EdgeId e) const {
  using namespace graph_detail;
  std::string rec;
  if (!store_.get(edge_key(e), rec)) return std::nullopt;
  if (!edge_well_formed(rec)) {
    throw Error(Errc::corrupt_file, store_.name() + ": graph edge " + std::to_string(e) +
                                        ": its record is too short or of an unknown kind");
  }
  const EdgeHeader h = load_edge_header(rec);
  if (!contains_node(h.from) || !contains_node(h.to)) return std::nullopt;
  return Edge{e, h.from, h.to, h.kind,
              decode_properties(std::string_view(rec).substr(kEdgeHeaderBytes))};
}

template <class F>
void Graph::for_each_edge(NodeId n, Direction d, F&& fn) const {
  static_assert(std::is_invocable_v<F&, EdgeId, NodeId, EdgeKind>,
                "for_each_edge's fn takes (EdgeId, NodeId neighbour, EdgeKind) and returns void or bool");
  graph_detail::AdjacencyReader reader(store_);
  reader.walk(n, 0, [&](const graph_detail::Entry& e) {
    if (!e.follows(d)) return true;
    if (e.neighbour != n && !contains_node(e.neighbour)) return true;
    return graph_detail::call_continue(fn, e.edge(), e.neighbour, e.kind());
  });
}

inline std::size_t Graph::degree(NodeId n, Direction d) const {
  std::size_t count = 0;
  for_each_edge(n, d, [&](EdgeId, NodeId, EdgeKind) { ++count; });
  return count;
}

inline void Graph::sync() { store_.sync(); }

inline void Graph::close() {
  const std::lock_guard<std::mutex> lock(write_mutex_);
  if (store_.closed()) return;
  if (!store_.options().read_only && !damaged_) {
    try {
      write_meta(true);
    } catch (...) {
      // Unclean, then: the next open repairs. The store still closes.
      store_.close();
      throw;
    }
  }
  store_.close();
}

// Open: a graph closed unclean (or in a store that met damage) is checked
// and repaired by graph_detail::GraphCheck (graph/detail/check.hpp).
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
  // A graph closed clean is trusted as it is, unless the store met damage
  // (its recovery dropped records that failed their checksums, or it had
  // to rebuild: records written late may be lost): then it is checked and
  // repaired like an unclean one.
  bool clean = (load32(m.data() + 12) & 1) != 0;
  if (clean) {
    const Stats st = store_.stats();
    clean = st.corrupt_records == 0 && !st.rebuilt;
  }
  if (clean) {
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
    // The meta record's ids may be stale or damaged: the next ids go above
    // every id found (ids are never reused).
    node_ids_ = next_node_ = std::max<std::uint64_t>(next_node_, check.max_node + 1);
    edge_ids_ = next_edge_ = std::max<std::uint64_t>(next_edge_, check.max_edge + 1);
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
  if (check.max_node >= next_node_ || check.max_edge >= next_edge_) {
    return "node " + std::to_string(check.max_node) + " or edge " + std::to_string(check.max_edge) +
           " is present, but the next ids handed out are node " + std::to_string(next_node_) + " and edge " +
           std::to_string(next_edge_) + " (the meta record's ids are stale)";
  }
  if (check.edges != edge_count()) {
    return "edge_count() is " + std::to_string(edge_count()) + " but the store holds " + std::to_string(check.edges) +
           " edges";
  }
  return {};
}

}  // namespace offheap
