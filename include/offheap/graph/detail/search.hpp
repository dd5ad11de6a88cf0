// SPDX-License-Identifier: Apache-2.0
// Graph's searches: breadth-first and depth-first search, the fewest-edge
// path and Dijkstra's least-weight path. All iterative, all lock-free
// readers of the store (graph.hpp says what they see beside a writer).
// GraphSearch holds nothing but the store it reads; Graph's bfs, dfs and
// shortest_path make one per call.
//
// Heap: only the traversal's bookkeeping, sized by the nodes it reaches
// (the hash tables of id_table.hpp hold 8-byte ids, or ids and values, at
// 35-70% load, so about 1.5-3 slots a node):
//   bfs            a set of the nodes found (8-byte slots) and a queue of
//                  (node, depth), 16 bytes a node;
//   dfs            the set, and a frame per node on the current path
//                  (node, depth, the last edge id taken: 24 bytes);
//   fewest edges   a map node -> (parent, edge) (24-byte slots) and two
//                  levels of the queue;
//   Dijkstra       a map node -> (distance, parent, edge, settled) (40-byte
//                  slots) and a binary heap of (distance, node) with lazy
//                  deletion (an improved distance pushes again; stale
//                  entries are skipped when popped): at most one heap entry
//                  per edge relaxed; and a batch of 64 edge records copied
//                  (their weights);
//   and an AdjacencyReader's page and directory buffers. Nothing per edge
//   beyond Dijkstra's heap entries; pages are read into one buffer.
//
// Order: a node's neighbours come in the order of its adjacency, which is
// edge id order, which is the order the edges were added. DFS resumes a
// node after its child's subtree by edge id (the frame keeps the last id
// taken), so it holds no page per frame and reads a node's directory and
// one page again when it comes back to it.
//
// Every node is checked present before it is visited or expanded: BFS, the
// fewest-edge search and Dijkstra check when they take a node from their
// queue (the read of its directory answers), DFS when it finds it (one
// lookup); a node already reached is not looked up again.
//
// Thread safety: lock-free readers beside the graph's one writer; each call
// owns its bookkeeping. Visitors get ids by value.
#pragma once

#include <offheap/document.hpp>
#include <offheap/error.hpp>
#include <offheap/graph/detail/adjacency.hpp>
#include <offheap/graph/detail/id_table.hpp>
#include <offheap/graph/detail/layout.hpp>
#include <offheap/graph/types.hpp>
#include <offheap/store.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <queue>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace offheap::graph_detail {

/// Calls a visitor that returns void (go on) or something that converts to
/// bool (false: stop). Returns: whether to go on.
template <class F, class... A>
bool call_continue(F& fn, A&&... a) {
  if constexpr (std::is_void_v<std::invoke_result_t<F&, A...>>) {
    fn(std::forward<A>(a)...);
    return true;
  } else {
    return static_cast<bool>(fn(std::forward<A>(a)...));
  }
}

/// The searches of one call of Graph::bfs, dfs or shortest_path over the
/// graph's store (which must outlive it). Graph's declarations say what
/// each does and what it throws.
class GraphSearch {
 public:
  explicit GraphSearch(const Store& store) noexcept : store_(store) {}

  template <class V>
  void bfs(NodeId start, const Traversal& t, V&& visit) const;
  template <class V>
  void dfs(NodeId start, const Traversal& t, V&& visit) const;
  /// Fewest edges (breadth-first, level by level).
  std::optional<Path> shortest_path(NodeId from, NodeId to, Direction d) const;
  /// Least weight (Dijkstra).
  std::optional<Path> shortest_path(NodeId from, NodeId to, std::string_view weight_field, Direction d) const;

 private:
  bool contains_node(NodeId n) const { return store_.contains(node_key(n)); }
  /// Dijkstra's weight of edge e from a copy of its record; throws as
  /// shortest_path says.
  double weight_of(std::string_view record, EdgeId e, std::string_view field, NodeId from, NodeId to) const;
  /// The path to `to` from the parents a search recorded.
  template <class Parents>
  static Path path_from(Parents& parents, NodeId from, NodeId to, double cost);

  const Store& store_;
};

template <class V>
void GraphSearch::bfs(NodeId start, const Traversal& t, V&& visit) const {
  static_assert(std::is_invocable_v<V&, NodeId, std::uint32_t>,
                "bfs's visit takes (NodeId, std::uint32_t depth) and returns void or bool");
  IdSet seen;
  seen.insert(start);
  struct Item {
    NodeId node;
    std::uint32_t depth;
  };
  std::vector<Item> queue{{start, 0}};
  AdjacencyReader reader(store_);
  for (std::size_t head = 0; head < queue.size(); ++head) {
    const Item at = queue[head];
    const bool expand = at.depth < t.max_depth;
    // Visited when taken from the queue, once its node is known present:
    // the read of its directory says so (a lookup if it is not expanded).
    if (expand ? !reader.load(at.node) : !contains_node(at.node)) continue;
    if (!call_continue(visit, at.node, at.depth)) return;
    if (!expand) continue;
    const std::uint32_t depth = at.depth + 1;
    auto each = [&](const Entry& e) {
      if (e.follows(t.direction) && seen.insert(e.neighbour)) queue.push_back({e.neighbour, depth});
      return true;
    };
    reader.walk_loaded(at.node, 0, each, true);
  }
}

template <class V>
void GraphSearch::dfs(NodeId start, const Traversal& t, V&& visit) const {
  static_assert(std::is_invocable_v<V&, NodeId, std::uint32_t>,
                "dfs's visit takes (NodeId, std::uint32_t depth) and returns void or bool");
  if (!contains_node(start)) return;
  IdSet seen;
  seen.insert(start);
  if (!call_continue(visit, start, std::uint32_t{0})) return;
  struct Frame {
    NodeId node;
    EdgeId after;  // the last edge id taken from node's adjacency (0: none yet)
    std::uint32_t depth;
  };
  std::vector<Frame> stack{{start, 0, 0}};
  AdjacencyReader reader(store_);
  while (!stack.empty()) {
    Frame& top = stack.back();
    if (top.depth >= t.max_depth) {
      stack.pop_back();
      continue;
    }
    NodeId next = 0;
    reader.walk(top.node, top.after, [&](const Entry& e) {
      top.after = e.edge();
      if (!e.follows(t.direction) || seen.contains(e.neighbour)) return true;
      if (!contains_node(e.neighbour)) return true;
      next = e.neighbour;
      return false;
    });
    if (next == 0) {
      stack.pop_back();
      continue;
    }
    const std::uint32_t depth = top.depth + 1;
    seen.insert(next);
    if (!call_continue(visit, next, depth)) return;
    stack.push_back({next, 0, depth});
  }
}

template <class Parents>
Path GraphSearch::path_from(Parents& parents, NodeId from, NodeId to, double cost) {
  Path p;
  p.cost = cost;
  for (NodeId at = to; at != from;) {
    const auto* step = parents.find(at);
    p.nodes.push_back(at);
    p.edges.push_back(step->edge);
    at = step->parent;
  }
  p.nodes.push_back(from);
  std::reverse(p.nodes.begin(), p.nodes.end());
  std::reverse(p.edges.begin(), p.edges.end());
  return p;
}

inline std::optional<Path> GraphSearch::shortest_path(NodeId from, NodeId to, Direction d) const {
  if (!contains_node(from) || !contains_node(to)) return std::nullopt;
  if (from == to) return Path{{from}, {}, 0};
  struct Step {
    NodeId parent;
    EdgeId edge;
  };
  IdMap<Step> parents;
  parents.insert(from, {0, 0});
  std::vector<NodeId> queue{from};
  std::vector<NodeId> next;
  AdjacencyReader reader(store_);
  // Level by level, so that the cost is the level at which `to` is found.
  // A node found is checked present when it is expanded (the read of its
  // directory): one gone is never a parent, so no path passes through it;
  // `to` was checked at the start.
  for (std::uint32_t level = 1; !queue.empty(); ++level) {
    bool found = false;
    for (const NodeId u : queue) {
      if (!reader.load(u)) continue;
      auto each = [&](const Entry& e) {
        if (!e.follows(d) || !parents.insert(e.neighbour, {u, e.edge()}).second) return true;
        if (e.neighbour == to) {
          found = true;
          return false;
        }
        next.push_back(e.neighbour);
        return true;
      };
      reader.walk_loaded(u, 0, each, true);
      if (found) return path_from(parents, from, to, level);
    }
    queue.swap(next);
    next.clear();
  }
  return std::nullopt;
}

inline double GraphSearch::weight_of(std::string_view record, EdgeId e, std::string_view field, NodeId from,
                              NodeId to) const {
  const auto refuse = [&](Errc code, const std::string& why) {
    throw Error(code, store_.name() + ": shortest_path(" + std::to_string(from) + " -> " + std::to_string(to) +
                          ", weight \"" + std::string(field) + "\"): edge " + std::to_string(e) + ": " + why);
  };
  std::optional<DocumentView> doc;
  if (edge_well_formed(record)) doc = DocumentView::parse(record.substr(kEdgeHeaderBytes));
  if (!doc) refuse(Errc::corrupt_file, "its record or properties do not parse");
  const std::optional<ValueView> value = doc->get(field);
  if (!value) refuse(Errc::invalid_argument, "has no field \"" + std::string(field) + "\" (every edge followed needs a weight)");
  double w = 0;
  if (value->type() == FieldType::integer) {
    w = static_cast<double>(value->as_int());
  } else if (value->type() == FieldType::real) {
    w = value->as_double();
  } else {
    refuse(Errc::invalid_argument, "its field \"" + std::string(field) + "\" is of type " +
                                       std::string(to_string(value->type())) + ", not an integer or a real");
  }
  if (std::isnan(w) || std::isinf(w)) {
    refuse(Errc::invalid_argument, "its weight \"" + std::string(field) + "\" is " + (std::isnan(w) ? "NaN" : "infinite") +
                                       ": weights must be finite and >= 0");
  }
  if (w < 0) {
    refuse(Errc::invalid_argument, "its weight \"" + std::string(field) + "\" is negative (" + std::to_string(w) +
                                       "): Dijkstra needs weights >= 0");
  }
  return w;
}

inline std::optional<Path> GraphSearch::shortest_path(NodeId from, NodeId to, std::string_view weight_field,
                                                Direction d) const {
  if (!contains_node(from) || !contains_node(to)) return std::nullopt;
  if (from == to) return Path{{from}, {}, 0};
  struct Label {
    double dist;
    NodeId parent;
    EdgeId edge;
    bool settled;
  };
  struct Item {
    double dist;
    NodeId node;
    // std::priority_queue keeps the greatest on top: "greater" is the
    // later one, so the top is the least (distance, id).
    bool operator>(const Item& o) const noexcept {
      return dist != o.dist ? dist > o.dist : node > o.node;
    }
  };
  IdMap<Label> labels;
  labels.insert(from, {0, 0, 0, false});
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> heap;
  heap.push({0, from});
  AdjacencyReader reader(store_);
  // A settled node's edges are taken in batches of up to 64, their records
  // read with one get_all() (which prefetches the index lines of the batch
  // first): the lookups' cache misses overlap. The records are copies, so
  // DocumentView may trust the bytes it parses.
  constexpr std::size_t kBatch = 64;
  std::vector<Entry> batch;
  std::vector<Key> keys(kBatch);
  std::vector<std::string_view> views(kBatch);
  std::vector<std::optional<std::string>> records(kBatch);
  NodeId u = 0;
  double du = 0;
  const auto relax_batch = [&] {
    const std::size_t n = batch.size();
    for (std::size_t i = 0; i < n; ++i) {
      keys[i] = edge_key(batch[i].edge());
      views[i] = keys[i].view();
    }
    store_.get_all(std::span<const std::string_view>(views.data(), n),
                   std::span<std::optional<std::string>>(records.data(), n));
    for (std::size_t i = 0; i < n; ++i) {
      if (!records[i]) continue;  // removed meanwhile
      const Entry& e = batch[i];
      const double dv = du + weight_of(*records[i], e.edge(), weight_field, from, to);
      if (std::isinf(dv)) {
        throw Error(Errc::invalid_argument,
                    store_.name() + ": shortest_path(" + std::to_string(from) + " -> " + std::to_string(to) +
                        ", weight \"" + std::string(weight_field) + "\"): the distance through edge " +
                        std::to_string(e.edge()) + " is beyond the largest double: the weights are too large to sum");
      }
      Label* v = labels.find(e.neighbour);
      if (v == nullptr) {
        labels.insert(e.neighbour, {dv, u, e.edge(), false});
        heap.push({dv, e.neighbour});
      } else if (!v->settled && dv < v->dist) {
        *v = {dv, u, e.edge(), false};
        heap.push({dv, e.neighbour});
      }
    }
    batch.clear();
  };
  while (!heap.empty()) {
    const Item top = heap.top();
    heap.pop();
    Label* at = labels.find(top.node);
    if (at->settled || top.dist > at->dist) continue;  // a stale entry (lazy deletion)
    at->settled = true;
    if (top.node == to) return path_from(labels, from, to, top.dist);
    // Present? The read of its directory says (`to` was checked at the
    // start); a node gone is settled but never expanded, so no path
    // passes through it.
    u = top.node;
    du = top.dist;
    if (!reader.load(u)) continue;
    auto each = [&](const Entry& e) {
      if (!e.follows(d)) return true;
      batch.push_back(e);
      if (batch.size() == kBatch) relax_batch();
      return true;
    };
    reader.walk_loaded(u, 0, each, true);
    relax_batch();
  }
  return std::nullopt;
}

}  // namespace offheap::graph_detail
