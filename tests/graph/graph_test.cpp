// SPDX-License-Identifier: Apache-2.0
// offheap::Graph, call by call: nodes and properties, edges of both kinds,
// self-loops and parallel edges, directions, removal cascades, pages (a hub
// of thousands of edges, then most removed), BFS and DFS orders with depth
// limits and early stops, both shortest paths, every error the API
// promises, reopen (clean and repaired), read-only opens, the heap staying
// flat, and readers traversing while a writer changes the graph.
#include <offheap/graph.hpp>
#include <offheap/offheap.hpp>

#include "support/error_of.hpp"
#include "support/env.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <malloc.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

using offheap::Direction;
using offheap::Document;
using offheap::EdgeId;
using offheap::EdgeKind;
using offheap::Errc;
using offheap::Graph;
using offheap::NodeId;
using offheap::Options;
using offheap::Traversal;
using offheap_test::TempDir;

using offheap_test::error_of;

namespace {

using Hop = std::tuple<EdgeId, NodeId, EdgeKind>;
using Visit = std::pair<NodeId, std::uint32_t>;

std::vector<Hop> hops(const Graph& g, NodeId n, Direction d) {
  std::vector<Hop> out;
  g.for_each_edge(n, d, [&](EdgeId e, NodeId v, EdgeKind k) { out.emplace_back(e, v, k); });
  return out;
}

std::vector<Visit> bfs(const Graph& g, NodeId s, Traversal t = {}) {
  std::vector<Visit> out;
  g.bfs(s, t, [&](NodeId n, std::uint32_t d) { out.emplace_back(n, d); });
  return out;
}

std::vector<Visit> dfs(const Graph& g, NodeId s, Traversal t = {}) {
  std::vector<Visit> out;
  g.dfs(s, t, [&](NodeId n, std::uint32_t d) { out.emplace_back(n, d); });
  return out;
}

Document named(std::string name) { return Document().set("name", std::move(name)); }
Document weighted(offheap::Value w) { return Document().set("w", std::move(w)); }

Options small_options(const std::filesystem::path& path = {}) {
  Options o;
  o.path = path;
  o.shards = 2;
  o.min_chunk_bytes = 64 << 10;
  o.max_chunk_bytes = 4 << 20;
  return o;
}

/// 1 -> 2, 1 -> 3, 2 -> 4, 3 -> 4, 4 -> 5, 5 -> 1, 6 -> 1 (edges 1-7).
void diamond(Graph& g) {
  for (int i = 1; i <= 6; ++i) REQUIRE(g.add_node(named("n" + std::to_string(i))) == NodeId(i));
  const std::pair<NodeId, NodeId> edges[] = {{1, 2}, {1, 3}, {2, 4}, {3, 4}, {4, 5}, {5, 1}, {6, 1}};
  EdgeId want = 1;
  for (const auto& [a, b] : edges) REQUIRE(g.add_edge(a, b) == want++);
}

}  // namespace

TEST_CASE("graph: nodes, ids and properties", "[graph]") {
  Graph g(small_options());
  CHECK(g.node_count() == 0);
  CHECK_FALSE(g.node(1));
  CHECK_FALSE(g.contains_node(1));
  const NodeId a = g.add_node(Document().set("name", "Alice").set("age", 42));
  const NodeId b = g.add_node();
  CHECK(a == 1);
  CHECK(b == 2);
  CHECK(g.node_count() == 2);
  REQUIRE(g.node(a));
  CHECK(*g.node(a) == Document().set("name", "Alice").set("age", 42));
  CHECK(*g.node(b) == Document());
  CHECK(g.update_node(b, named("Bob")));
  CHECK(*g.node(b) == named("Bob"));
  CHECK_FALSE(g.update_node(99, named("nobody")));
  CHECK(g.remove_node(a));
  CHECK_FALSE(g.remove_node(a));
  CHECK_FALSE(g.contains_node(a));
  CHECK(g.add_node() == 3);  // never reused
  CHECK(g.node_count() == 2);
  CHECK(g.verify() == "");
}

TEST_CASE("graph: edges, kinds, directions, self-loops, parallel edges", "[graph]") {
  Graph g(small_options());
  const NodeId a = g.add_node(), b = g.add_node(), c = g.add_node();
  const EdgeId ab = g.add_edge(a, b, weighted(3));
  const EdgeId ca = g.add_edge(c, a);
  const EdgeId bc = g.add_edge(b, c, {}, EdgeKind::undirected);
  const EdgeId aa = g.add_edge(a, a, named("loop"));
  const EdgeId ab2 = g.add_edge(a, b);  // parallel
  CHECK(g.edge_count() == 5);

  const auto e = g.edge(ab);
  REQUIRE(e);
  CHECK(e->id == ab);
  CHECK(e->from == a);
  CHECK(e->to == b);
  CHECK(e->kind == EdgeKind::directed);
  CHECK(e->properties == weighted(3));
  CHECK(g.edge(bc)->kind == EdgeKind::undirected);
  CHECK(g.edge(aa)->properties == named("loop"));
  CHECK_FALSE(g.edge(999));

  // The order edges were added; a self-loop once, with the node itself.
  CHECK(hops(g, a, Direction::out) == std::vector<Hop>{{ab, b, EdgeKind::directed},
                                                        {aa, a, EdgeKind::directed},
                                                        {ab2, b, EdgeKind::directed}});
  CHECK(hops(g, a, Direction::in) == std::vector<Hop>{{ca, c, EdgeKind::directed}, {aa, a, EdgeKind::directed}});
  CHECK(hops(g, a, Direction::both).size() == 4);
  // An undirected edge in every direction from both ends.
  CHECK(hops(g, b, Direction::out) == std::vector<Hop>{{bc, c, EdgeKind::undirected}});
  CHECK(hops(g, c, Direction::out) == std::vector<Hop>{{ca, a, EdgeKind::directed}, {bc, b, EdgeKind::undirected}});
  CHECK(hops(g, b, Direction::in) == std::vector<Hop>{{ab, a, EdgeKind::directed},
                                                       {bc, c, EdgeKind::undirected},
                                                       {ab2, a, EdgeKind::directed}});
  CHECK(g.degree(a, Direction::out) == 3);
  CHECK(g.degree(a, Direction::in) == 2);
  CHECK(g.degree(a, Direction::both) == 4);
  CHECK(g.degree(42, Direction::both) == 0);

  // A visitor returning false stops the walk.
  int seen = 0;
  g.for_each_edge(a, Direction::both, [&](EdgeId, NodeId, EdgeKind) { return ++seen < 2; });
  CHECK(seen == 2);

  CHECK(g.update_edge(ab, weighted(7.5)));
  CHECK(g.edge(ab)->properties == weighted(7.5));
  CHECK_FALSE(g.update_edge(999, weighted(1)));
  CHECK(g.verify() == "");
}

TEST_CASE("graph: a missing endpoint is refused and nothing is written", "[graph]") {
  Graph g(small_options());
  const NodeId a = g.add_node();
  std::string message;
  CHECK(error_of([&] { g.add_edge(a, 77); }, &message) == Errc::invalid_argument);
  CHECK(message.find("node 77 does not exist") != std::string::npos);
  CHECK(error_of([&] { g.add_edge(78, a); }, &message) == Errc::invalid_argument);
  CHECK(message.find("node 78") != std::string::npos);
  CHECK(g.edge_count() == 0);
  CHECK(hops(g, a, Direction::both).empty());
  CHECK(error_of([&] { g.add_edge(a, a, {}, static_cast<EdgeKind>(9)); }) == Errc::invalid_argument);
  CHECK(g.verify() == "");
}

TEST_CASE("graph: removing edges and nodes", "[graph]") {
  Graph g(small_options());
  diamond(g);
  CHECK(g.remove_edge(3));  // 2 -> 4
  CHECK_FALSE(g.remove_edge(3));
  CHECK_FALSE(g.edge(3));
  CHECK(hops(g, 2, Direction::out).empty());
  CHECK(hops(g, 4, Direction::in) == std::vector<Hop>{{4, 3, EdgeKind::directed}});
  CHECK(g.edge_count() == 6);

  // Node 1 has edges 1, 2 (out), 6, 7 (in): all go with it.
  const EdgeId loop = g.add_edge(1, 1);
  const EdgeId undirected = g.add_edge(4, 1, {}, EdgeKind::undirected);
  CHECK(g.edge_count() == 8);
  CHECK(g.remove_node(1));
  CHECK(g.node_count() == 5);
  CHECK(g.edge_count() == 2);  // 3 -> 4, 4 -> 5 and nothing else
  for (const EdgeId e : {EdgeId{1}, EdgeId{2}, EdgeId{6}, EdgeId{7}, loop, undirected}) CHECK_FALSE(g.edge(e));
  CHECK(hops(g, 5, Direction::both) == std::vector<Hop>{{5, 4, EdgeKind::directed}});
  CHECK(hops(g, 6, Direction::both).empty());
  CHECK(hops(g, 4, Direction::both) == std::vector<Hop>{{4, 3, EdgeKind::directed}, {5, 5, EdgeKind::directed}});
  CHECK(hops(g, 1, Direction::both).empty());
  CHECK(g.verify() == "");
}

TEST_CASE("graph: a hub of many pages keeps its order through removals and merges", "[graph]") {
  Graph g(small_options());
  const NodeId hub = g.add_node();
  std::vector<NodeId> others;
  for (int i = 0; i < 50; ++i) others.push_back(g.add_node());
  std::vector<Hop> want;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 3000; ++i) {
    const NodeId v = others[rng() % others.size()];
    const bool out = rng() % 2 == 0;
    const EdgeId e = out ? g.add_edge(hub, v) : g.add_edge(v, hub);
    want.emplace_back(e, v, EdgeKind::directed);
  }
  CHECK(hops(g, hub, Direction::both) == want);
  CHECK(g.verify() == "");
  // Remove 90%, in random order: pages empty out and merge.
  std::vector<Hop> order = want;
  std::shuffle(order.begin(), order.end(), rng);
  for (std::size_t i = 0; i < order.size() * 9 / 10; ++i) {
    REQUIRE(g.remove_edge(std::get<0>(order[i])));
    if (i % 500 == 0) REQUIRE(g.verify() == "");
  }
  std::vector<Hop> left(order.begin() + static_cast<std::ptrdiff_t>(order.size() * 9 / 10), order.end());
  std::sort(left.begin(), left.end());
  CHECK(hops(g, hub, Direction::both) == left);
  CHECK(g.degree(hub, Direction::both) == left.size());
  CHECK(g.verify() == "");
  // Pages stay at least about a quarter full: count the hub's page keys.
  std::size_t pages = 0;
  g.store().for_each_key([&](std::string_view k) {
    const auto key = offheap::graph_detail::parse_key(k);
    pages += key.kind == offheap::graph_detail::kPagePrefix && key.id == hub;
  });
  INFO("pages " << pages << " for " << left.size() << " entries");
  CHECK(pages <= 4 * left.size() / 256 + 3);
  // New edges go after the rest.
  const EdgeId e = g.add_edge(hub, others[0]);
  CHECK(std::get<0>(hops(g, hub, Direction::both).back()) == e);
  CHECK(g.remove_node(hub));
  CHECK(g.edge_count() == 0);
  g.store().for_each_key([&](std::string_view k) { CHECK(k.size() != 13); });
  CHECK(g.verify() == "");
}

TEST_CASE("graph: BFS and DFS orders, depth limits, directions, early stop", "[graph]") {
  Graph g(small_options());
  diamond(g);
  CHECK(bfs(g, 1) == std::vector<Visit>{{1, 0}, {2, 1}, {3, 1}, {4, 2}, {5, 3}});
  CHECK(bfs(g, 1, {1, Direction::out}) == std::vector<Visit>{{1, 0}, {2, 1}, {3, 1}});
  CHECK(bfs(g, 1, {0, Direction::out}) == std::vector<Visit>{{1, 0}});
  CHECK(bfs(g, 1, {UINT32_MAX, Direction::in}) ==
        std::vector<Visit>{{1, 0}, {5, 1}, {6, 1}, {4, 2}, {2, 3}, {3, 3}});
  CHECK(bfs(g, 4, {UINT32_MAX, Direction::both}) ==
        std::vector<Visit>{{4, 0}, {2, 1}, {3, 1}, {5, 1}, {1, 2}, {6, 3}});
  CHECK(dfs(g, 1) == std::vector<Visit>{{1, 0}, {2, 1}, {4, 2}, {5, 3}, {3, 1}});
  CHECK(dfs(g, 1, {2, Direction::out}) == std::vector<Visit>{{1, 0}, {2, 1}, {4, 2}, {3, 1}});
  CHECK(dfs(g, 6, {UINT32_MAX, Direction::out}) ==
        std::vector<Visit>{{6, 0}, {1, 1}, {2, 2}, {4, 3}, {5, 4}, {3, 2}});
  CHECK(bfs(g, 99).empty());
  CHECK(dfs(g, 99).empty());

  std::vector<NodeId> seen;
  g.bfs(1, {}, [&](NodeId n, std::uint32_t) {
    seen.push_back(n);
    return n != 3;
  });
  CHECK(seen == std::vector<NodeId>{1, 2, 3});
  seen.clear();
  g.dfs(1, {}, [&](NodeId n, std::uint32_t) {
    seen.push_back(n);
    return n != 4;
  });
  CHECK(seen == std::vector<NodeId>{1, 2, 4});
  seen.clear();
  g.dfs(1, {}, [&](NodeId n, std::uint32_t) {
    seen.push_back(n);
    return false;
  });
  CHECK(seen == std::vector<NodeId>{1});
}

TEST_CASE("graph: DFS on a path of 100,000 nodes does not recurse", "[graph]") {
  Graph g(small_options());
  const std::uint32_t n = offheap_test::kSanitized ? 20000 : 100000;
  NodeId prev = g.add_node();
  for (std::uint32_t i = 1; i < n; ++i) {
    const NodeId next = g.add_node();
    g.add_edge(prev, next);
    prev = next;
  }
  std::uint32_t count = 0, deepest = 0;
  g.dfs(1, {}, [&](NodeId, std::uint32_t d) {
    ++count;
    deepest = d;
  });
  CHECK(count == n);
  CHECK(deepest == n - 1);
  const auto p = g.shortest_path(1, prev);
  REQUIRE(p);
  CHECK(p->cost == n - 1);
  CHECK(p->nodes.size() == n);
}

TEST_CASE("graph: shortest path by edge count", "[graph]") {
  Graph g(small_options());
  diamond(g);
  auto p = g.shortest_path(1, 5);
  REQUIRE(p);
  CHECK(p->nodes == std::vector<NodeId>{1, 2, 4, 5});
  CHECK(p->edges == std::vector<EdgeId>{1, 3, 5});
  CHECK(p->cost == 3);
  CHECK_FALSE(g.shortest_path(5, 6));
  p = g.shortest_path(5, 6, Direction::in);
  REQUIRE(p);
  CHECK(p->nodes == std::vector<NodeId>{5, 4, 2, 1, 6});
  CHECK(p->edges == std::vector<EdgeId>{5, 3, 1, 7});
  CHECK(p->cost == 4);
  p = g.shortest_path(3, 3);
  REQUIRE(p);
  CHECK(p->nodes == std::vector<NodeId>{3});
  CHECK(p->edges.empty());
  CHECK(p->cost == 0);
  CHECK_FALSE(g.shortest_path(1, 99));
  CHECK_FALSE(g.shortest_path(99, 1));
}

TEST_CASE("graph: weighted shortest path and its errors", "[graph]") {
  Graph g(small_options());
  for (int i = 0; i < 6; ++i) g.add_node();
  const EdgeId e12 = g.add_edge(1, 2, weighted(1));
  g.add_edge(1, 3, weighted(4));
  const EdgeId e23 = g.add_edge(2, 3, weighted(1.5));
  const EdgeId e34 = g.add_edge(3, 4, weighted(std::int64_t{1}));
  g.add_edge(2, 4, weighted(5));
  auto p = g.shortest_path(1, 4, "w");
  REQUIRE(p);
  CHECK(p->nodes == std::vector<NodeId>{1, 2, 3, 4});
  CHECK(p->edges == std::vector<EdgeId>{e12, e23, e34});
  CHECK(p->cost == 3.5);
  CHECK_FALSE(g.shortest_path(4, 1, "w"));
  p = g.shortest_path(4, 1, "w", Direction::in);
  REQUIRE(p);
  CHECK(p->nodes == std::vector<NodeId>{4, 3, 2, 1});
  CHECK(p->cost == 3.5);
  // Zero weights are fine; an undirected edge goes both ways.
  const EdgeId e45 = g.add_edge(5, 4, weighted(0), EdgeKind::undirected);
  p = g.shortest_path(1, 5, "w");
  REQUIRE(p);
  CHECK(p->edges == std::vector<EdgeId>{e12, e23, e34, e45});
  CHECK(p->cost == 3.5);

  std::string message;
  SECTION("negative") {
    const EdgeId bad = g.add_edge(3, 6, weighted(-2));
    CHECK(error_of([&] { g.shortest_path(1, 6, "w"); }, &message) == Errc::invalid_argument);
    CHECK(message.find("edge " + std::to_string(bad)) != std::string::npos);
    CHECK(message.find("\"w\"") != std::string::npos);
    CHECK(message.find("negative") != std::string::npos);
  }
  SECTION("missing") {
    const EdgeId bad = g.add_edge(3, 6, named("no weight"));
    CHECK(error_of([&] { g.shortest_path(1, 6, "w"); }, &message) == Errc::invalid_argument);
    CHECK(message.find("edge " + std::to_string(bad)) != std::string::npos);
    CHECK(message.find("no field \"w\"") != std::string::npos);
    // Another field name: every edge lacks it.
    CHECK(error_of([&] { g.shortest_path(1, 4, "cost"); }) == Errc::invalid_argument);
  }
  SECTION("not a number") {
    g.add_edge(3, 6, weighted("heavy"));
    CHECK(error_of([&] { g.shortest_path(1, 6, "w"); }, &message) == Errc::invalid_argument);
    CHECK(message.find("string") != std::string::npos);
  }
  SECTION("NaN and infinity") {
    const EdgeId bad = g.add_edge(3, 6, weighted(std::numeric_limits<double>::quiet_NaN()));
    CHECK(error_of([&] { g.shortest_path(1, 6, "w"); }, &message) == Errc::invalid_argument);
    CHECK(message.find("NaN") != std::string::npos);
    g.update_edge(bad, weighted(std::numeric_limits<double>::infinity()));
    CHECK(error_of([&] { g.shortest_path(1, 6, "w"); }, &message) == Errc::invalid_argument);
    CHECK(message.find("infinite") != std::string::npos);
  }
  SECTION("an edge the search never looks at is not checked") {
    g.add_edge(6, 1, weighted(-1));
    CHECK(g.shortest_path(1, 4, "w"));
  }
}

TEST_CASE("graph: options and stores a graph refuses", "[graph]") {
  Options o = small_options();
  o.default_ttl = std::chrono::milliseconds(1000);
  CHECK(error_of([&] { Graph g(o); }) == Errc::invalid_argument);

  TempDir tmp;
  {
    Options so = small_options(tmp / "kv");
    offheap::Store s(so);
    s.put("user:1", "Alice");
  }
  std::string message;
  CHECK(error_of([&] { Graph g(small_options(tmp / "kv")); }, &message) == Errc::invalid_argument);
  CHECK(message.find("no graph") != std::string::npos);
  {
    offheap::Store s(small_options(tmp / "meta"));
    s.put("M", "not a graph's meta record");
  }
  CHECK(error_of([&] { Graph g(small_options(tmp / "meta")); }) == Errc::corrupt_file);
  {
    Graph g(small_options(tmp / "version"));
  }
  {
    offheap::Store s(small_options(tmp / "version"));
    std::string m = *s.get("M");
    m[8] = 9;  // format version 9
    s.put("M", m);
  }
  CHECK(error_of([&] { Graph g(small_options(tmp / "version")); }, &message) == Errc::format_version);
  CHECK(message.find("version 9") != std::string::npos);
}

TEST_CASE("graph: writes after close and on a read-only store", "[graph]") {
  TempDir tmp;
  {
    Graph g(small_options(tmp / "g"));
    diamond(g);
    g.close();
    g.close();
    CHECK(error_of([&] { g.add_node(); }) == Errc::closed);
    CHECK(error_of([&] { g.add_edge(1, 2); }) == Errc::closed);
    CHECK(error_of([&] { g.remove_node(1); }) == Errc::closed);
    CHECK(bfs(g, 1).size() == 5);  // reads go on
  }
  Options ro = small_options(tmp / "g");
  ro.read_only = true;
  Graph g(ro);
  CHECK(g.node_count() == 6);
  CHECK(g.edge_count() == 7);
  CHECK(bfs(g, 1).size() == 5);
  CHECK(error_of([&] { g.add_node(); }) == Errc::read_only);
  CHECK(error_of([&] { g.update_node(1, {}); }) == Errc::read_only);
  CHECK(error_of([&] { g.remove_edge(1); }) == Errc::read_only);
}

TEST_CASE("graph: reopen keeps everything, ids go on", "[graph]") {
  TempDir tmp;
  const Options o = small_options(tmp / "g");
  {
    Graph g(o);
    diamond(g);
    g.update_edge(2, weighted(2));
    g.remove_edge(7);
  }
  {
    Graph g(o);
    CHECK_FALSE(g.open_report().repaired);
    CHECK(g.node_count() == 6);
    CHECK(g.edge_count() == 6);
    CHECK(*g.node(3) == named("n3"));
    CHECK(g.edge(2)->properties == weighted(2));
    CHECK_FALSE(g.edge(7));
    CHECK(bfs(g, 4, {UINT32_MAX, Direction::both}) == std::vector<Visit>{{4, 0}, {2, 1}, {3, 1}, {5, 1}, {1, 2}});
    CHECK(g.add_node() == 7);
    CHECK(g.add_edge(7, 1) == 8);
    CHECK(g.verify() == "");
  }
  Graph g(o);
  CHECK(g.node_count() == 7);
  CHECK(g.edge_count() == 7);
  CHECK(g.verify() == "");
}

TEST_CASE("graph: an unclean reopen repairs what a crash leaves", "[graph]") {
  using namespace offheap::graph_detail;
  TempDir tmp;
  const Options o = small_options(tmp / "g");
  {
    Graph g(o);
    diamond(g);
  }
  {
    // What crashes leave, written by hand: an edge record without its
    // entries (add_edge stopped after its first write), an entry at node 2
    // naming a node that is gone, its edge record too (remove_node stopped
    // in its cascade), a page no directory names; and the clean mark gone.
    offheap::Store s(o);
    std::string rec(kEdgeHeaderBytes, '\0');
    store_edge_header(rec.data(), {1, 5, EdgeKind::directed});
    rec += Document().encode();
    s.put(edge_key(100), rec);
    store_edge_header(rec.data(), {2, 77, EdgeKind::directed});
    s.put(edge_key(101), rec);
    std::string page = *s.get(page_key(2, 0));
    char entry[kEntryBytes];
    store_entry(entry, {101 | kOut, 77});
    page.append(entry, kEntryBytes);
    s.put(page_key(2, 0), page);
    s.put(page_key(3, 40), std::string(entry, kEntryBytes));
    std::string m = *s.get(meta_key());
    m[12] = 0;  // not clean
    s.put(meta_key(), m);
  }
  Graph g(o);
  const auto& r = g.open_report();
  CHECK(r.repaired);
  CHECK(r.entries_dropped == 1);
  CHECK(r.edges_dropped == 2);
  CHECK(r.pages_dropped == 1);
  CHECK(g.node_count() == 6);
  CHECK(g.edge_count() == 7);
  CHECK_FALSE(g.edge(100));
  CHECK(hops(g, 2, Direction::out) == std::vector<Hop>{{3, 4, EdgeKind::directed}});
  CHECK(g.verify() == "");
  // Ids reserved before the crash are not handed out again.
  CHECK(g.add_node() > 6);
  CHECK(g.add_edge(1, 2) > 7);
}

TEST_CASE("graph: verify() reports what it finds", "[graph]") {
  using namespace offheap::graph_detail;
  Graph g(small_options());
  diamond(g);
  REQUIRE(g.verify() == "");
  g.store().remove(page_key(4, 0));
  CHECK(g.verify().find("node 4: page 0") != std::string::npos);
}

TEST_CASE("graph: the heap stays flat as the graph grows", "[graph]") {
  if (offheap_test::kSanitized) return;  // sanitizers keep their own heap
  Graph g(small_options());
  std::mt19937_64 rng(3);
  for (int i = 0; i < 100; ++i) g.add_edge(g.add_node(), g.add_node());  // warm-up
  const std::size_t before = mallinfo2().uordblks;
  constexpr int kNodes = 20000;
  for (int i = 0; i < kNodes; ++i) g.add_node(named("node"));
  for (int i = 0; i < 5 * kNodes; ++i) {
    g.add_edge(1 + rng() % kNodes, 1 + rng() % kNodes, weighted(static_cast<std::int64_t>(rng() % 10)));
  }
  const std::size_t after = mallinfo2().uordblks;
  INFO("heap before " << before << ", after " << after << " bytes; 100,000 edges");
  CHECK(after < before + (256 << 10));
}

TEST_CASE("graph: readers traverse while a writer changes the graph", "[graph]") {
  Graph g(small_options());
  constexpr int kNodes = 300;
  for (int i = 0; i < kNodes; ++i) g.add_node();
  std::mt19937_64 rng(11);
  for (int i = 0; i < 1500; ++i) g.add_edge(1 + rng() % kNodes, 1 + rng() % kNodes, weighted(1));
  // The highest ids handed out, for the readers to pick from.
  std::atomic<NodeId> top_node{kNodes};
  std::atomic<EdgeId> top_edge{1500};
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> bad{0}, walks{0}, visited{0};
  auto reader = [&](std::uint64_t seed) {
    std::mt19937_64 r(seed);
    while (!stop.load(std::memory_order_relaxed)) {
      const NodeId s = 1 + r() % top_node.load(std::memory_order_relaxed);
      std::uint64_t last = 0;
      g.for_each_edge(s, Direction::both, [&](EdgeId e, NodeId v, EdgeKind) {
        if (e <= last || v == 0) bad.fetch_add(1);
        last = e;
      });
      g.bfs(s, {3, Direction::both}, [&](NodeId n, std::uint32_t d) {
        if (n == 0 || d > 3) bad.fetch_add(1);
        visited.fetch_add(1, std::memory_order_relaxed);
      });
      g.dfs(s, {4, Direction::out}, [&](NodeId n, std::uint32_t) { return n != 0; });
      try {
        const NodeId to = 1 + r() % top_node.load(std::memory_order_relaxed);
        if (auto p = g.shortest_path(s, to, "w")) {
          if (p->nodes.size() != p->edges.size() + 1 || p->nodes.front() != s || p->nodes.back() != to) {
            bad.fetch_add(1);
          }
        }
      } catch (const offheap::Error&) {
        bad.fetch_add(1);
      }
      if (auto e = g.edge(1 + r() % top_edge.load(std::memory_order_relaxed))) {
        if (e->from == 0 || e->to == 0) bad.fetch_add(1);
      }
      walks.fetch_add(1, std::memory_order_relaxed);
    }
  };
  std::thread r1(reader, 1), r2(reader, 2);
  struct Join {
    std::atomic<bool>& stop;
    std::thread& a;
    std::thread& b;
    ~Join() {
      stop = true;
      if (a.joinable()) a.join();
      if (b.joinable()) b.join();
    }
  } join{stop, r1, r2};
  // The writer goes on until it has made `rounds` changes and the readers have walked
  // `least_walks` times meanwhile (at most 20 s).
  const int rounds = offheap_test::kSanitized ? 3000 : 20000;
  const std::uint64_t least_walks = offheap_test::kSanitized ? 2000 : 10000;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  // The writer picks from what it knows is there (its own lists), so the
  // graph stays about as it began: 300 nodes, about 1,500 edges.
  std::vector<NodeId> nodes;
  for (NodeId n = 1; n <= kNodes; ++n) nodes.push_back(n);
  std::vector<EdgeId> edges;
  for (EdgeId e = 1; e <= 1500; ++e) edges.push_back(e);
  for (int i = 0; i < rounds || (walks.load() < least_walks && std::chrono::steady_clock::now() < deadline); ++i) {
    const auto op = rng() % 100;
    if (op < 40 || edges.empty()) {
      const EdgeId e = g.add_edge(nodes[rng() % nodes.size()], nodes[rng() % nodes.size()],
                                  weighted(static_cast<std::int64_t>(rng() % 5)));
      edges.push_back(e);
      top_edge.store(e, std::memory_order_relaxed);
    } else if (op < 80) {
      const std::size_t k = rng() % edges.size();
      g.remove_edge(edges[k]);  // false if its node went
      edges[k] = edges.back();
      edges.pop_back();
    } else if (op < 82) {
      const std::size_t k = rng() % nodes.size();
      REQUIRE(g.remove_node(nodes[k]));
      nodes[k] = g.add_node();
      top_node.store(nodes[k], std::memory_order_relaxed);
    } else {
      g.update_edge(edges[rng() % edges.size()], weighted(static_cast<std::int64_t>(rng() % 5)));
    }
  }
  stop = true;
  r1.join();
  r2.join();
  INFO("reader walks: " << walks.load() << ", nodes visited by their BFS: " << visited.load() << "; the graph ends with "
                        << g.node_count() << " nodes, " << g.edge_count() << " edges");
  CHECK(walks.load() >= least_walks);
  CHECK(visited.load() >= 20 * walks.load());
  CHECK(g.node_count() == kNodes);
  CHECK(g.edge_count() >= 500);
  CHECK(bad.load() == 0);
  CHECK(g.verify() == "");
}
