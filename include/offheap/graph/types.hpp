// SPDX-License-Identifier: Apache-2.0
// The graph's public value types: ids, directions, an edge as read back, a
// path as found, and the limits of a traversal. Plain values: nothing here
// touches a store (graph.hpp does).
//
// Thread safety and memory: plain values the caller owns.
#pragma once

#include <offheap/document.hpp>

#include <cstdint>
#include <limits>
#include <vector>

namespace offheap {

/// A node's id: handed out by Graph::add_node from 1 upwards, never 0,
/// never reused (not even after a crash: ids are reserved in the store in
/// blocks before they are handed out).
using NodeId = std::uint64_t;
/// An edge's id: as NodeId, from its own counter. Ids stay below 2^56 (the
/// adjacency entry keeps its flags in the top byte of the id's word).
using EdgeId = std::uint64_t;

/// Which edges of a node a call follows. An undirected edge is followed in
/// every direction.
enum class Direction : std::uint8_t {
  out,   ///< edges that leave the node (the node is the edge's `from`)
  in,    ///< edges that arrive at the node (the node is the edge's `to`)
  both,  ///< either
};

enum class EdgeKind : std::uint8_t {
  directed,    ///< followed from `from` to `to` (Direction::out), or back (Direction::in)
  undirected,  ///< followed both ways from either end
};

/// An edge as Graph::edge returns it: a copy, independent of the store.
struct Edge {
  EdgeId id = 0;
  NodeId from = 0;
  NodeId to = 0;
  EdgeKind kind = EdgeKind::directed;
  Document properties;
};

/// A path as Graph::shortest_path returns it: nodes.front() is `from`,
/// nodes.back() is `to`; edges[i] joins nodes[i] and nodes[i + 1], so there
/// is one edge fewer than nodes (none for a path from a node to itself).
/// cost: the number of edges (unweighted search) or the sum of their
/// weights (weighted search).
struct Path {
  std::vector<NodeId> nodes;
  std::vector<EdgeId> edges;
  double cost = 0;
};

/// The limits of Graph::bfs and Graph::dfs.
struct Traversal {
  /// The deepest depth visited: the start is at depth 0, its neighbours at
  /// 1, and so on. 0 visits the start alone.
  std::uint32_t max_depth = std::numeric_limits<std::uint32_t>::max();
  Direction direction = Direction::out;
};

/// What the open of a graph found (Graph::open_report()).
struct GraphOpenReport {
  bool repaired = false;             ///< the graph was not closed cleanly: it was checked and repaired
  std::uint64_t entries_dropped = 0; ///< adjacency entries whose neighbour or edge record was gone
  std::uint64_t edges_dropped = 0;   ///< edge records lacking an entry or naming a missing node
  std::uint64_t pages_dropped = 0;   ///< pages no directory named
  std::uint64_t nodes_dropped = 0;   ///< node records too short for their directory (damage)
  std::uint64_t directory_entries_dropped = 0;  ///< directory entries naming a missing or emptied
                                                ///< page, or not ascending (damage)
  double seconds = 0;                ///< how long the check and repair took
};

}  // namespace offheap
