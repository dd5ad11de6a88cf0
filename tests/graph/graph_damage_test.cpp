// SPDX-License-Identifier: Apache-2.0
// offheap::Graph over damaged records: what a crash cannot leave but a
// damaged file, a stale meta record or a refused write can. Each case: no
// hang, no wrong answer, an Error that says what is wrong, or a repair at
// the next open (and verify() describing the damage rather than throwing).
#include <offheap/graph.hpp>
#include <offheap/offheap.hpp>

#include "support/error_of.hpp"
#include "support/chunk_walk.hpp"
#include "support/file_io.hpp"
#include "support/store_dir.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

using offheap::Direction;
using offheap::Document;
using offheap::EdgeId;
using offheap::EdgeKind;
using offheap::Errc;
using offheap::Graph;
using offheap::NodeId;
using offheap::Options;
using offheap::Store;
using offheap_test::TempDir;
namespace gd = offheap::graph_detail;

using offheap_test::error_of;

namespace {

Options damage_options(const std::filesystem::path& path = {}) {
  Options o;
  o.path = path;
  o.shards = 2;
  o.min_chunk_bytes = 64 << 10;
  o.max_chunk_bytes = 4 << 20;
  o.background_maintenance = false;  // the hang test forks: no threads beside it
  return o;
}

/// Clears the graph's clean mark, as a crash would have left it.
void mark_unclean(const Options& o) {
  Store s(o);
  std::string m = *s.get(gd::meta_key());
  m[12] = 0;
  s.put(gd::meta_key(), m);
}

/// Runs f() (returns bool: passed) in a child process that a watchdog
/// kills after `seconds`. Returns: 0 passed, 1 failed, 2 threw, 128 +
/// signal (SIGALRM: it hung). The caller holds no store open: the child
/// opens its own.
template <class F>
int in_child(unsigned seconds, F&& f) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::alarm(seconds);
    int rc = 1;
    try {
      rc = f() ? 0 : 1;
    } catch (...) {
      rc = 2;
    }
    ::_exit(rc);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::size_t out_degree(const Graph& g, NodeId n) { return g.degree(n, Direction::out); }

}  // namespace

TEST_CASE("graph damage: a directory naming several missing pages neither hangs reads nor survives repair",
          "[graph]") {
  TempDir tmp;
  const Options o = damage_options(tmp / "g");
  NodeId hub = 0;
  {
    Graph g(o);
    hub = g.add_node();
    for (int i = 0; i < 600; ++i) g.add_edge(hub, g.add_node());  // pages 0, 1, 2
  }
  {
    Store s(o);
    REQUIRE(s.remove(gd::page_key(hub, 0)));
    REQUIRE(s.remove(gd::page_key(hub, 1)));
  }
  // Marked clean: trusted, so the reads meet the missing pages.
  const int clean_rc = in_child(20, [&] {
    Graph g(o);
    std::size_t visited = 0;
    g.bfs(hub, {}, [&](NodeId, std::uint32_t) { ++visited; });
    return !g.open_report().repaired && out_degree(g, hub) == 600 - 512 && visited == 1 + 600 - 512 &&
           g.verify().find("page 0 of its directory is missing") != std::string::npos;
  });
  CHECK(clean_rc == 0);  // 128 + SIGALRM: the walk looped

  mark_unclean(o);
  const int repair_rc = in_child(20, [&] {
    Graph g(o);
    const auto& r = g.open_report();
    return r.repaired && r.directory_entries_dropped == 2 && r.edges_dropped == 512 && g.edge_count() == 88 &&
           out_degree(g, hub) == 88 && g.verify().empty();
  });
  REQUIRE(repair_rc == 0);
  Graph g(o);
  CHECK_FALSE(g.open_report().repaired);
  CHECK(out_degree(g, hub) == 88);
  CHECK(g.edge_count() == 88);
  CHECK(g.verify() == "");
  for (int i = 0; i < 300; ++i) g.add_edge(hub, 2);  // new pages go on
  CHECK(out_degree(g, hub) == 388);
  CHECK(g.verify() == "");
}

TEST_CASE("graph damage: stale or damaged meta ids never overwrite records, nor wrap", "[graph]") {
  TempDir tmp;
  const Options o = damage_options(tmp / "g");
  const auto set_ids = [&](std::uint64_t nodes, std::uint64_t edges) {
    Store s(o);
    std::string m = *s.get(gd::meta_key());
    gd::store64(m.data() + 16, nodes);
    gd::store64(m.data() + 24, edges);
    s.put(gd::meta_key(), m);
  };
  {
    Graph g(o);
    const NodeId a = g.add_node(Document().set("name", "A"));
    const NodeId b = g.add_node(Document().set("name", "B"));
    g.add_edge(a, b, Document().set("km", 1));
  }
  set_ids(1, 1);  // a stale meta record, marked clean
  {
    Graph g(o);
    CHECK(g.verify().find("stale") != std::string::npos);
    std::string message;
    CHECK(error_of([&] { g.add_node(Document().set("name", "C")); }, &message) == Errc::corrupt_file);
    CHECK(message.find("node id 1 is already in use") != std::string::npos);
    CHECK(*g.node(1) == Document().set("name", "A"));
    CHECK(error_of([&] { g.add_edge(2, 2); }, &message) == Errc::corrupt_file);
    CHECK(message.find("edge id 1 is already in use") != std::string::npos);
    REQUIRE(g.edge(1));
    CHECK(g.edge(1)->from == 1);
    CHECK(g.edge(1)->to == 2);
    CHECK(g.node_count() == 2);
    CHECK(g.edge_count() == 1);
  }
  {
    // Refused as damage: this open repairs and raises the ids above them all.
    Graph g(o);
    CHECK(g.open_report().repaired);
    const NodeId c = g.add_node();
    CHECK(c > 2);
    CHECK(g.add_edge(c, 1) > 1);
    CHECK(*g.node(1) == Document().set("name", "A"));
    CHECK(g.verify() == "");
  }
  set_ids(std::numeric_limits<std::uint64_t>::max() - 1, std::numeric_limits<std::uint64_t>::max() - 1);
  Graph g(o);
  std::string message;
  CHECK(error_of([&] { g.add_node(); }, &message) == Errc::out_of_space);
  CHECK(message.find("node id") != std::string::npos);
  CHECK(error_of([&] { g.add_node(); }) == Errc::out_of_space);  // never wraps to 0
  CHECK(error_of([&] { g.add_edge(1, 2); }) == Errc::out_of_space);
  CHECK(g.node_count() == 3);
  CHECK_FALSE(g.contains_node(0));
}

TEST_CASE("graph damage: a node record's next page number below its pages", "[graph]") {
  TempDir tmp;
  const Options o = damage_options(tmp / "g");
  NodeId hub = 0;
  const auto lie = [&] {
    Store s(o);
    std::string rec = *s.get(gd::node_key(hub));
    gd::store32(rec.data() + 4, 0);  // next page 0; pages 0 and 1 named
    s.put(gd::node_key(hub), rec);
  };
  {
    Graph g(o);
    hub = g.add_node();
    for (int i = 0; i < 300; ++i) g.add_edge(hub, g.add_node());
  }
  lie();
  {
    Graph g(o);
    CHECK(g.verify().find("next page number") != std::string::npos);
    const NodeId other = g.add_node();
    for (int i = 0; i < 300; ++i) g.add_edge(hub, other);  // page 1 fills: a new page
    CHECK(out_degree(g, hub) == 600);
    CHECK(g.edge_count() == 600);
    REQUIRE(g.edge(1));
    CHECK(g.verify() == "");
  }
  // The repair raises it too.
  lie();
  mark_unclean(o);
  Graph g(o);
  CHECK(g.open_report().repaired);
  CHECK(g.verify() == "");
  CHECK(out_degree(g, hub) == 600);
}

TEST_CASE("graph damage: a node record too short for its directory", "[graph]") {
  TempDir tmp;
  Options o = damage_options(tmp / "g");
  const auto build = [&] {
    std::filesystem::remove_all(o.path);
    {
      Graph g(o);
      for (int i = 0; i < 10; ++i) g.add_node();
      for (NodeId i = 1; i < 10; ++i) g.add_edge(i, i + 1);
    }
    Store s(o);
    std::string rec = *s.get(gd::node_key(5));
    gd::store32(rec.data(), 1000000);  // a million pages, in a record of a few bytes
    s.put(gd::node_key(5), rec);
  };
  build();
  {
    Graph g(o);  // clean: trusted
    std::string problem;
    REQUIRE_NOTHROW(problem = g.verify());
    CHECK(problem.find("node 5: its record is too short") != std::string::npos);
    CHECK(error_of([&] { (void)g.node(5); }) == Errc::corrupt_file);
    CHECK(g.remove_node(5));
    CHECK_FALSE(g.contains_node(5));
    CHECK(g.node_count() == 9);
    CHECK(g.edge_count() == 7);  // 4 -> 5 and 5 -> 6 went with it
    CHECK(out_degree(g, 4) == 0);
    CHECK(g.verify() == "");
  }
  {
    Graph g(o);  // the removal marked it damaged: repaired, nothing left
    CHECK(g.open_report().repaired);
    CHECK(g.verify() == "");
    CHECK(g.edge_count() == 7);
  }
  build();
  mark_unclean(o);
  {
    Options ro = o;
    ro.read_only = true;
    Graph g(ro);  // checked, not repaired: opens all the same
    CHECK(g.open_report().repaired);
    CHECK(g.open_report().nodes_dropped == 1);
    CHECK(out_degree(g, 1) == 1);
  }
  Graph g(o);
  CHECK(g.open_report().repaired);
  CHECK(g.open_report().nodes_dropped == 1);
  CHECK(g.open_report().edges_dropped == 2);
  CHECK_FALSE(g.contains_node(5));
  CHECK(g.node_count() == 9);
  CHECK(g.edge_count() == 7);
  CHECK(g.verify() == "");
}

TEST_CASE("graph damage: records the store drops as damaged are repaired at the next open", "[graph]") {
  namespace cw = offheap_test::chunk_walk;
  TempDir tmp;
  const Options o = damage_options(tmp / "g");
  {
    Graph g(o);
    for (int i = 0; i < 4; ++i) g.add_node();
    g.add_edge(1, 2);
    g.add_edge(2, 3);  // edge 2: its record gets damaged
    g.add_edge(3, 4);
  }
  // Damage the record of edge 2 in its chunk file.
  const gd::Key target = gd::edge_key(2);
  bool damaged = false;
  for (const std::string& name : offheap_test::files_of(o.path, ".chunk")) {
    const std::string file = offheap_test::read_file(o.path / name);
    for (const cw::Record& r : cw::walk(file, name).records) {
      if (r.state() == cw::State::live && cw::key_of(file, r) == target.view()) {
        offheap_test::flip_byte(o.path / name, r.payload_at() + r.key_len + 1, 0x40);
        damaged = true;
      }
    }
  }
  REQUIRE(damaged);
  {
    // A store that meets it says so, and is not saved clean.
    Store s(o);
    CHECK(error_of([&] { (void)s.get(target); }) == Errc::corrupt_file);
  }
  // The graph was closed clean; the store's recovery dropped a record.
  Graph g(o);
  CHECK(g.open_report().repaired);
  CHECK(g.edge_count() == 2);
  std::vector<EdgeId> seen;
  for (NodeId n = 1; n <= 4; ++n) {
    g.for_each_edge(n, Direction::both, [&](EdgeId e, NodeId, EdgeKind) {
      seen.push_back(e);
      CHECK(g.edge(e));  // every edge handed out has its record
    });
  }
  CHECK(seen == std::vector<EdgeId>{1, 1, 3, 3});
  CHECK(g.verify() == "");
}

TEST_CASE("graph damage: add_edge refused after writing a new page leaves no page behind", "[graph]") {
  TempDir tmp;
  Options o = damage_options(tmp / "g");
  o.min_chunk_bytes = 64 << 10;
  o.max_chunk_bytes = 64 << 10;
  NodeId big = 0;
  {
    Graph g(o);
    const NodeId small = g.add_node();
    // The largest properties a node record can hold: its directory cannot
    // grow by one entry.
    std::size_t lo = 1, hi = 65536;  // lo fits, hi does not
    while (hi - lo > 1) {
      const std::size_t mid = lo + (hi - lo) / 2;
      Document probe;
      probe.set("p", std::string(mid, 'x'));
      try {
        g.remove_node(g.add_node(probe));
        lo = mid;
      } catch (const offheap::Error&) {
        hi = mid;
      }
    }
    Document props;
    props.set("p", std::string(lo, 'x'));
    big = g.add_node(props);
    CHECK(error_of([&] { g.add_edge(big, small); }) == Errc::value_too_large);
    CHECK(g.edge_count() == 0);
    CHECK(g.verify() == "");  // the page it wrote is gone again
  }
  Graph g(o);
  CHECK_FALSE(g.open_report().repaired);
  CHECK(g.verify() == "");
  CHECK(out_degree(g, big) == 0);
}

TEST_CASE("graph damage: a weighted distance that overflows is refused", "[graph]") {
  Graph g(damage_options());
  for (int i = 0; i < 3; ++i) g.add_node();
  g.add_edge(1, 2, Document().set("w", 1e308));
  g.add_edge(2, 3, Document().set("w", 1e308));
  std::string message;
  CHECK(error_of([&] { (void)g.shortest_path(1, 3, "w"); }, &message) == Errc::invalid_argument);
  CHECK(message.find("largest double") != std::string::npos);
  const auto p = g.shortest_path(1, 2, "w");  // one such edge is fine
  REQUIRE(p);
  CHECK(p->cost == 1e308);
}
