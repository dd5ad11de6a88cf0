// SPDX-License-Identifier: Apache-2.0
// The graph tests' model: nodes and edges in std::maps, each node's edge
// ids in a std::vector in the order they were added, and the traversals
// written the plain way (a std::queue, a recursive DFS, Dijkstra on a
// std::set) from the order offheap::Graph documents.
#pragma once

#include <offheap/graph.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <queue>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace offheap_test {

using offheap::Direction;
using offheap::Document;
using offheap::EdgeId;
using offheap::EdgeKind;
using offheap::NodeId;
using offheap::Path;
using offheap::Traversal;

using Hop = std::tuple<EdgeId, NodeId, EdgeKind>;
using Visit = std::pair<NodeId, std::uint32_t>;

/// What a weighted search answers: a path, none, or the edge whose weight
/// it refused.
struct Weighted {
  std::optional<Path> path;
  EdgeId refused = 0;
};

inline bool same_path(const std::optional<Path>& a, const std::optional<Path>& b) {
  if (a.has_value() != b.has_value()) return false;
  return !a || (a->nodes == b->nodes && a->edges == b->edges && a->cost == b->cost);
}

inline std::string describe(const std::optional<Path>& p) {
  if (!p) return "none";
  std::string s = "cost " + std::to_string(p->cost) + " nodes";
  for (const NodeId n : p->nodes) s += " " + std::to_string(n);
  return s;
}

class Model {
 public:
  struct E {
    NodeId from;
    NodeId to;
    EdgeKind kind;
    Document props;
  };
  std::map<NodeId, Document> nodes;
  std::map<EdgeId, E> edges;
  std::map<NodeId, std::vector<EdgeId>> adjacency;  // ascending edge ids

  void clear() {
    nodes.clear();
    edges.clear();
    adjacency.clear();
  }
  void add_node(NodeId n, const Document& d) {
    nodes[n] = d;
    adjacency[n];
  }
  void add_edge(EdgeId e, NodeId from, NodeId to, EdgeKind kind, const Document& d) {
    edges[e] = {from, to, kind, d};
    adjacency[from].push_back(e);
    if (to != from) adjacency[to].push_back(e);
  }
  bool remove_edge(EdgeId e) {
    const auto it = edges.find(e);
    if (it == edges.end()) return false;
    for (const NodeId n : {it->second.from, it->second.to}) {
      auto& list = adjacency[n];
      list.erase(std::remove(list.begin(), list.end(), e), list.end());
    }
    edges.erase(it);
    return true;
  }
  bool remove_node(NodeId n) {
    if (nodes.erase(n) == 0) return false;
    const std::vector<EdgeId> list = adjacency[n];
    for (const EdgeId e : list) remove_edge(e);
    adjacency.erase(n);
    return true;
  }

  std::vector<Hop> hops(NodeId n, Direction d) const {
    std::vector<Hop> out;
    const auto it = adjacency.find(n);
    if (it == adjacency.end()) return out;
    for (const EdgeId e : it->second) {
      const E& x = edges.at(e);
      const bool follows = x.kind == EdgeKind::undirected || d == Direction::both ||
                           (d == Direction::out ? x.from == n : x.to == n);
      if (follows) out.emplace_back(e, x.from == n ? x.to : x.from, x.kind);
    }
    return out;
  }

  std::vector<Visit> bfs(NodeId s, const Traversal& t, std::size_t stop_after) const {
    std::vector<Visit> out;
    if (!nodes.count(s)) return out;
    std::set<NodeId> seen{s};
    std::queue<Visit> q;
    q.push({s, 0});
    out.push_back({s, 0});
    if (out.size() == stop_after) return out;
    while (!q.empty()) {
      const auto [u, d] = q.front();
      q.pop();
      if (d >= t.max_depth) continue;
      for (const auto& [e, v, k] : hops(u, t.direction)) {
        if (!seen.insert(v).second) continue;
        q.push({v, d + 1});
        out.push_back({v, d + 1});
        if (out.size() == stop_after) return out;
      }
    }
    return out;
  }

  std::vector<Visit> dfs(NodeId s, const Traversal& t, std::size_t stop_after) const {
    std::vector<Visit> out;
    if (!nodes.count(s)) return out;
    std::set<NodeId> seen;
    std::function<bool(NodeId, std::uint32_t)> go = [&](NodeId u, std::uint32_t d) {
      seen.insert(u);
      out.push_back({u, d});
      if (out.size() == stop_after) return false;
      if (d >= t.max_depth) return true;
      for (const auto& [e, v, k] : hops(u, t.direction)) {
        if (!seen.count(v) && !go(v, d + 1)) return false;
      }
      return true;
    };
    go(s, 0);
    return out;
  }

  std::optional<Path> fewest(NodeId from, NodeId to, Direction dir) const {
    if (!nodes.count(from) || !nodes.count(to)) return std::nullopt;
    if (from == to) return Path{{from}, {}, 0};
    std::map<NodeId, std::pair<NodeId, EdgeId>> parent{{from, {0, 0}}};
    std::queue<NodeId> q;
    q.push(from);
    while (!q.empty()) {
      const NodeId u = q.front();
      q.pop();
      for (const auto& [e, v, k] : hops(u, dir)) {
        if (parent.count(v)) continue;
        parent[v] = {u, e};
        if (v == to) return walk_back(parent, from, to);
        q.push(v);
      }
    }
    return std::nullopt;
  }

  Weighted dijkstra(NodeId from, NodeId to, const char* field, Direction dir) const {
    if (!nodes.count(from) || !nodes.count(to)) return {};
    if (from == to) return {Path{{from}, {}, 0}};
    std::map<NodeId, double> dist{{from, 0}};
    std::map<NodeId, std::pair<NodeId, EdgeId>> parent;
    std::set<NodeId> settled;
    std::set<std::pair<double, NodeId>> open{{0, from}};
    while (!open.empty()) {
      const auto [du, u] = *open.begin();
      open.erase(open.begin());
      settled.insert(u);
      if (u == to) {
        Weighted w{walk_back(parent, from, to)};
        w.path->cost = du;
        return w;
      }
      for (const auto& [e, v, k] : hops(u, dir)) {
        const offheap::Value* w = edges.at(e).props.get(field);
        double weight = 0;
        if (w != nullptr && w->type() == offheap::FieldType::integer) {
          weight = static_cast<double>(w->as_int());
        } else if (w != nullptr && w->type() == offheap::FieldType::real) {
          weight = w->as_double();
        } else {
          return {std::nullopt, e};
        }
        if (!(weight >= 0) || std::isinf(weight)) return {std::nullopt, e};
        if (settled.count(v)) continue;
        const auto it = dist.find(v);
        if (it != dist.end() && !(du + weight < it->second)) continue;
        if (it != dist.end()) open.erase({it->second, v});
        dist[v] = du + weight;
        parent[v] = {u, e};
        open.insert({du + weight, v});
      }
    }
    return {};
  }

 private:
  static Path walk_back(const std::map<NodeId, std::pair<NodeId, EdgeId>>& parent, NodeId from, NodeId to) {
    Path p;
    for (NodeId at = to; at != from; at = parent.at(at).first) {
      p.nodes.insert(p.nodes.begin(), at);
      p.edges.insert(p.edges.begin(), parent.at(at).second);
    }
    p.nodes.insert(p.nodes.begin(), from);
    p.cost = static_cast<double>(p.edges.size());
    return p;
  }
};

}  // namespace offheap_test
