// SPDX-License-Identifier: Apache-2.0
// Differential test: a random sequence of graph calls (add, update and
// remove nodes and edges, directed and undirected, self-loops, parallel
// edges, endpoints that do not exist) run against offheap::Graph and
// against a plain model (std::map of nodes and edges, a std::vector of edge
// ids per node), with every answer compared: ids, properties, each node's
// edges in each direction, degrees, BFS and DFS visits (order and depth),
// shortest paths by edge count and by weight (the path itself, its cost,
// and the error a bad weight raises, down to the edge it names).
//
// The model's traversals are written the plain way (a std::queue, a
// recursive DFS, Dijkstra on a std::set), from the order the Graph
// documents: a node's neighbours in the order their edges were added.
//
// Runs in anonymous memory and on files; the file-backed run closes and
// reopens the graph in the middle, and compares everything after it.
// Every 250 operations, and at the end, everything is compared and
// verify() runs.
//
// Environment: OFFHEAP_GRAPH_OPS (operations per run, default 10,000;
// 3,000 under sanitizers),
// OFFHEAP_TEST_SEED (the seed; printed at the start).
#include <offheap/graph.hpp>

#include "graph/graph_model.hpp"
#include "support/env.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

using offheap::Direction;
using offheap::Document;
using offheap::EdgeId;
using offheap::EdgeKind;
using offheap::Graph;
using offheap::NodeId;
using offheap::Path;
using offheap::Traversal;
using offheap_test::Hop;
using offheap_test::Model;
using offheap_test::Visit;
using offheap_test::Weighted;
using offheap_test::describe;
using offheap_test::same_path;

namespace {

std::vector<Hop> graph_hops(const Graph& g, NodeId n, Direction d) {
  std::vector<Hop> out;
  g.for_each_edge(n, d, [&](EdgeId e, NodeId v, EdgeKind k) { out.emplace_back(e, v, k); });
  return out;
}

Weighted graph_dijkstra(const Graph& g, NodeId from, NodeId to, const char* field, Direction d) {
  try {
    return {g.shortest_path(from, to, field, d)};
  } catch (const offheap::Error& e) {
    REQUIRE(e.code() == offheap::Errc::invalid_argument);
    const std::string m = e.what();
    const std::size_t at = m.find("): edge ");
    REQUIRE(at != std::string::npos);
    return {std::nullopt, std::stoull(m.substr(at + 8))};
  }
}

/// A node's or an edge's properties: a name, and for edges an integer
/// weight "w" (0-9) or now and then a real one (k + 0.5); and a second
/// weight "v", as "w" but one in 50 edges has none, a negative one or a
/// string (the searches by "v" meet the errors).
Document random_props(std::mt19937_64& rng, bool edge) {
  Document d;
  d.set("name", "p" + std::to_string(rng() % 1000));
  if (!edge) return d;
  const auto weight = [&](const char* field) {
    if (rng() % 16 == 0) {
      d.set(field, static_cast<double>(rng() % 10) + 0.5);
    } else {
      d.set(field, static_cast<std::int64_t>(rng() % 10));
    }
  };
  weight("w");
  const auto r = rng() % 100;
  if (r < 98) {
    weight("v");
  } else if (r == 98) {
    d.set("v", rng() % 2 == 0 ? offheap::Value(-1) : offheap::Value(-0.5));
  } else if (rng() % 2 == 0) {
    d.set("v", "heavy");
  }  // else no "v"
  return d;
}

Direction random_direction(std::mt19937_64& rng) { return static_cast<Direction>(rng() % 3); }

class Run {
 public:
  Run(std::uint64_t seed, offheap::Options options) : rng_(seed), options_(std::move(options)) {
    graph_ = std::make_unique<Graph>(options_);
  }

  void step(std::uint64_t op) {
    INFO("operation " << op);
    Graph& g = *graph_;
    // About 200 nodes and four times as many edges by the end.
    const auto r = rng_() % 100;
    if (model_.nodes.size() < 5 || (r < 12 && model_.nodes.size() < 200)) {
      const Document d = random_props(rng_, false);
      const NodeId n = g.add_node(d);
      REQUIRE(n > last_node_);
      last_node_ = n;
      model_.add_node(n, d);
    } else if (r < 52) {
      // One edge in three touches the hub (the oldest node present), so
      // that its adjacency spans pages that fill, empty and merge.
      const NodeId from = rng_() % 3 == 0 ? model_.nodes.begin()->first : pick_node();
      const NodeId to = rng_() % 8 == 0 ? from : pick_node();
      const EdgeKind kind = rng_() % 4 == 0 ? EdgeKind::undirected : EdgeKind::directed;
      const Document d = random_props(rng_, true);
      if (!model_.nodes.count(from) || !model_.nodes.count(to)) {
        const std::uint64_t edges = g.edge_count();
        try {
          g.add_edge(from, to, d, kind);
          FAIL("add_edge to a missing node went through");
        } catch (const offheap::Error& e) {
          REQUIRE(e.code() == offheap::Errc::invalid_argument);
        }
        REQUIRE(g.edge_count() == edges);
        return;
      }
      const EdgeId e = g.add_edge(from, to, d, kind);
      REQUIRE(e > last_edge_);
      last_edge_ = e;
      model_.add_edge(e, from, to, kind, d);
    } else if (r < 56) {
      const NodeId n = pick_node();
      const Document d = random_props(rng_, false);
      const bool present = model_.nodes.count(n) != 0;
      REQUIRE(g.update_node(n, d) == present);
      if (present) model_.nodes[n] = d;
    } else if (r < 60) {
      const EdgeId e = pick_edge();
      const Document d = random_props(rng_, true);
      const bool present = model_.edges.count(e) != 0;
      REQUIRE(g.update_edge(e, d) == present);
      if (present) model_.edges[e].props = d;
    } else if (r < 68) {
      const EdgeId e = pick_edge();
      REQUIRE(g.remove_edge(e) == model_.remove_edge(e));
    } else if (r < 70) {
      const NodeId n = pick_node();
      REQUIRE(g.remove_node(n) == model_.remove_node(n));
    } else {
      query();
    }
    REQUIRE(g.node_count() == model_.nodes.size());
    REQUIRE(g.edge_count() == model_.edges.size());
  }

  /// One random read, compared.
  void query() {
    const Graph& g = *graph_;
    const NodeId n = pick_node();
    const Direction d = random_direction(rng_);
    switch (rng_() % 7) {
      case 0:
        REQUIRE(graph_hops(g, n, d) == model_.hops(n, d));
        REQUIRE(g.degree(n, d) == model_.hops(n, d).size());
        break;
      case 1: check_edge(pick_edge()); break;
      case 2: check_node(n); break;
      case 3:
      case 4: {
        const Traversal t{rng_() % 3 == 0 ? static_cast<std::uint32_t>(rng_() % 4) : UINT32_MAX, d};
        // Sometimes a visitor that stops after k visits.
        const std::size_t stop_after = rng_() % 4 == 0 ? 1 + rng_() % 10 : SIZE_MAX;
        std::vector<Visit> got;
        const auto visit = [&](NodeId v, std::uint32_t depth) {
          got.emplace_back(v, depth);
          return got.size() != stop_after;
        };
        const bool breadth = rng_() % 2 == 0;
        if (breadth) {
          g.bfs(n, t, visit);
        } else {
          g.dfs(n, t, visit);
        }
        const auto want = breadth ? model_.bfs(n, t, stop_after) : model_.dfs(n, t, stop_after);
        INFO((breadth ? "bfs" : "dfs") << " from " << n << " depth " << t.max_depth << " direction "
                                       << static_cast<int>(d) << " stop after " << stop_after);
        REQUIRE(got == want);
        visits_ += got.size();
        break;
      }
      case 5: {
        const NodeId to = pick_node();
        const auto got = g.shortest_path(n, to, d);
        const auto want = model_.fewest(n, to, d);
        INFO("shortest_path " << n << " -> " << to << ": " << describe(got) << " against " << describe(want));
        REQUIRE(same_path(got, want));
        break;
      }
      default: {
        const NodeId to = pick_node();
        const char* field = rng_() % 4 == 0 ? "v" : "w";
        const Weighted got = graph_dijkstra(g, n, to, field, d);
        const Weighted want = model_.dijkstra(n, to, field, d);
        INFO("weighted by " << field << " " << n << " -> " << to << ": " << describe(got.path) << " refused " << got.refused
                         << " against " << describe(want.path) << " refused " << want.refused);
        REQUIRE(got.refused == want.refused);
        REQUIRE(same_path(got.path, want.path));
        ++(got.refused != 0 ? refused_ : got.path ? found_ : unreachable_);
        break;
      }
    }
  }

  void check_node(NodeId n) {
    const auto got = graph_->node(n);
    const auto it = model_.nodes.find(n);
    REQUIRE(got.has_value() == (it != model_.nodes.end()));
    if (got) REQUIRE(*got == it->second);
    REQUIRE(graph_->contains_node(n) == got.has_value());
  }
  void check_edge(EdgeId e) {
    const auto got = graph_->edge(e);
    const auto it = model_.edges.find(e);
    REQUIRE(got.has_value() == (it != model_.edges.end()));
    if (!got) return;
    REQUIRE(got->id == e);
    REQUIRE(got->from == it->second.from);
    REQUIRE(got->to == it->second.to);
    REQUIRE(got->kind == it->second.kind);
    REQUIRE(got->properties == it->second.props);
  }

  /// Everything: every id ever handed out (and a few past them), every
  /// node's edges in every direction, the counts, verify().
  void check_all() {
    const Graph& g = *graph_;
    for (NodeId n = 1; n <= last_node_ + 2; ++n) {
      check_node(n);
      for (const Direction d : {Direction::out, Direction::in, Direction::both}) {
        INFO("node " << n << " direction " << static_cast<int>(d));
        REQUIRE(graph_hops(g, n, d) == model_.hops(n, d));
      }
    }
    for (EdgeId e = 1; e <= last_edge_ + 2; ++e) check_edge(e);
    REQUIRE(g.node_count() == model_.nodes.size());
    REQUIRE(g.edge_count() == model_.edges.size());
    REQUIRE(g.verify() == "");
  }

  void reopen() {
    graph_->close();
    graph_.reset();
    graph_ = std::make_unique<Graph>(options_);
    REQUIRE_FALSE(graph_->open_report().repaired);
  }

  /// What the run exercised, printed at its end.
  std::string summary() const {
    const auto hub = model_.adjacency.find(model_.nodes.begin()->first);
    return std::to_string(model_.nodes.size()) + " nodes and " + std::to_string(model_.edges.size()) +
           " edges at the end, the hub's degree " + std::to_string(hub->second.size()) + "; " + std::to_string(visits_) + " BFS/DFS visits compared; weighted searches: " +
           std::to_string(found_) + " found a path, " + std::to_string(unreachable_) + " none, " +
           std::to_string(refused_) + " refused a weight";
  }
  std::uint64_t found_paths() const { return found_; }

 private:
  /// Mostly a present node, now and then one removed or never made.
  NodeId pick_node() {
    if (model_.nodes.empty() || rng_() % 20 == 0) return 1 + rng_() % (last_node_ + 3);
    auto it = model_.nodes.lower_bound(1 + rng_() % last_node_);
    if (it == model_.nodes.end()) it = model_.nodes.begin();
    return it->first;
  }
  EdgeId pick_edge() {
    if (model_.edges.empty() || rng_() % 10 == 0) return 1 + rng_() % (last_edge_ + 3);
    auto it = model_.edges.lower_bound(1 + rng_() % last_edge_);
    if (it == model_.edges.end()) it = model_.edges.begin();
    return it->first;
  }

  std::mt19937_64 rng_;
  offheap::Options options_;
  std::unique_ptr<Graph> graph_;
  Model model_;
  NodeId last_node_ = 0;
  EdgeId last_edge_ = 0;
  std::uint64_t found_ = 0, unreachable_ = 0, refused_ = 0, visits_ = 0;
};

void run(bool files) {
  const std::uint64_t seed = offheap_test::env_u64("OFFHEAP_TEST_SEED", std::random_device{}());
  const std::uint64_t ops = offheap_test::env_u64("OFFHEAP_GRAPH_OPS", offheap_test::kSanitized ? 3000 : 10000);
  std::cout << "graph_differential_test (" << (files ? "files" : "memory") << "): seed " << seed
            << " (OFFHEAP_TEST_SEED), " << ops << " operations (OFFHEAP_GRAPH_OPS)\n"
            << std::flush;
  INFO("seed " << seed);
  offheap_test::TempDir tmp;
  offheap::Options o;
  o.shards = 2;
  o.min_chunk_bytes = 64 << 10;
  o.max_chunk_bytes = 4 << 20;
  if (files) o.path = tmp / "graph";
  Run r(seed, o);
  for (std::uint64_t i = 0; i < ops; ++i) {
    r.step(i);
    if (i % 250 == 249) r.check_all();
    if (files && i == ops / 2) {
      r.check_all();
      r.reopen();
      r.check_all();
    }
  }
  r.check_all();
  std::cout << "graph_differential_test: " << r.summary() << "\n";
  CHECK(r.found_paths() > 0);
}

}  // namespace

TEST_CASE("graph differential: in memory", "[graph]") { run(false); }

TEST_CASE("graph differential: on files, reopened in the middle", "[graph]") { run(true); }
