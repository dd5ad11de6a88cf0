// SPDX-License-Identifier: Apache-2.0
// Process-crash torture for the graph: a child process opens a file-backed
// Graph and adds, updates and removes nodes and edges at random,
// publishing each operation in shared memory before it starts and after it
// returns (with what it returned); the parent kills it with SIGKILL,
// reopens the graph (which repairs it) and checks it against the model of
// every acknowledged operation. Only the operation in flight may go either
// way, and it goes one way whole:
//   - every node and edge acknowledged is there, with its last
//     acknowledged properties, unless the operation in flight removes it;
//   - at most one node or edge is there that the model lacks, and only if
//     the operation in flight adds it (its properties name the operation);
//   - a node removed in flight is there with every edge it had, or gone
//     with all of them;
//   - verify() finds the graph as its write order promises (no entry
//     without its edge record, no edge to a missing node, no page no
//     directory names, counts right), and each node's edges in each
//     direction and BFS and DFS from a few nodes agree with the model (then
//     narrowed to what the graph holds).
// Every third cycle, before the parent's check, one or two further children
// only open the (unclean) graph, and are killed at a random moment of the
// time an unclean open took before: inside the repair.
//
// Every kill is classified by what the child had published (inside an
// operation, inside the open, between operations); the test requires at
// least one inside an operation and one inside an open that repairs, so
// that a change which made the kills miss them fails it.
//
// Environment: OFFHEAP_GRAPH_CRASH_CYCLES (default 40; 15 under sanitizers),
// OFFHEAP_TEST_SEED (the seed; printed at the start).
#include <offheap/graph.hpp>

#include "graph/graph_model.hpp"
#include "support/env.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <map>
#include <new>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

using offheap::Direction;
using offheap::Document;
using offheap::EdgeId;
using offheap::EdgeKind;
using offheap::Graph;
using offheap::NodeId;
using offheap_test::Model;

namespace {

enum Op : std::uint8_t { add_node, add_edge, remove_edge, remove_node, update_node, update_edge, sync };
enum Phase : std::uint8_t { before = 1, after = 2 };

struct Message {
  std::uint8_t phase;
  std::uint8_t op;
  std::uint8_t kind;    // add_edge: EdgeKind
  std::uint8_t result;  // the removes and updates: what they returned
  std::uint32_t pad;
  std::uint64_t seq;    // the operation's number: its properties are {"seq": seq}
  std::uint64_t a;      // add_edge: from; the others: the node or edge
  std::uint64_t b;      // add_edge: to
  std::uint64_t id;     // the adds: the id returned
};

/// Shared with the child (MAP_SHARED, mapped before the fork); a message is
/// written before `count` covers it (release).
struct Channel {
  static constexpr std::uint64_t kMessages = std::uint64_t{1} << 16;
  enum Progress : std::uint32_t { started = 0, opening = 1, opened = 2 };
  std::atomic<std::uint32_t> progress;
  std::atomic<std::uint32_t> repaired;  // the open found the graph unclean
  std::atomic<std::uint64_t> open_ns;
  std::atomic<std::uint64_t> count;
  Message messages[kMessages];
};

Document props(std::uint64_t seq) { return Document().set("seq", static_cast<std::int64_t>(seq)); }
std::uint64_t seq_of(const Document& d) {
  const offheap::Value* v = d.get("seq");
  return v != nullptr ? static_cast<std::uint64_t>(v->as_int()) : 0;
}

offheap::Options graph_options(const std::filesystem::path& dir, bool durable) {
  offheap::Options o;
  o.path = dir;
  o.shards = 2;
  o.min_chunk_bytes = 16 << 10;
  o.max_chunk_bytes = 1 << 20;
  o.durability = durable ? offheap::Durability::on_close : offheap::Durability::none;
  return o;
}

std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

/// The child: opens the graph, then (unless open_only) runs operations
/// until it is killed.
[[noreturn]] void child(const std::filesystem::path& dir, bool durable, bool open_only, std::uint64_t seed,
                        std::uint64_t first_seq, Channel& ch) {
  try {
    const std::uint64_t t0 = now_ns();
    ch.progress.store(Channel::opening, std::memory_order_release);
    Graph g(graph_options(dir, durable));
    ch.repaired.store(g.open_report().repaired ? 1 : 0, std::memory_order_relaxed);
    ch.open_ns.store(now_ns() - t0, std::memory_order_relaxed);
    ch.progress.store(Channel::opened, std::memory_order_release);
    if (open_only) {
      for (;;) ::pause();
    }
    // What is there, from the store's keys (the child's own heap).
    std::vector<NodeId> nodes;
    std::vector<EdgeId> edges;
    g.store().for_each_key([&](std::string_view k) {
      const auto key = offheap::graph_detail::parse_key(k);
      if (key.kind == offheap::graph_detail::kNodePrefix) nodes.push_back(key.id);
      if (key.kind == offheap::graph_detail::kEdgePrefix) edges.push_back(key.id);
    });
    std::mt19937_64 rng(seed);
    std::uint64_t n = 0;
    auto publish = [&](const Message& m) {
      if (n == Channel::kMessages) {
        for (;;) ::pause();
      }
      ch.messages[n] = m;
      ch.count.store(++n, std::memory_order_release);
    };
    auto pick = [&](std::vector<std::uint64_t>& v) -> std::uint64_t {
      return v.empty() || rng() % 16 == 0 ? 1 + rng() % 100000 : v[rng() % v.size()];
    };
    for (std::uint64_t seq = first_seq;; ++seq) {
      Message m{};
      m.seq = seq;
      const auto r = rng() % 100;
      m.op = nodes.size() < 20 || (r < 15 && nodes.size() < 1500) ? add_node
             : r < 55                                               ? add_edge
             : r < 70                                               ? remove_edge
             : r < 74                                               ? remove_node
             : r < 86                                               ? update_node
             : r < 99                                               ? update_edge
                                                                    : sync;
      if (m.op == add_edge) {
        if (nodes.empty()) continue;
        // A hub (the first node) gets one edge in four: pages fill and merge.
        m.a = rng() % 4 == 0 ? nodes.front() : nodes[rng() % nodes.size()];
        m.b = rng() % 10 == 0 ? m.a : nodes[rng() % nodes.size()];
        m.kind = rng() % 4 == 0 ? 1 : 0;
      } else if (m.op == remove_node || m.op == update_node) {
        m.a = pick(nodes);
      } else if (m.op == remove_edge || m.op == update_edge) {
        m.a = pick(edges);
      }
      m.phase = before;
      publish(m);
      switch (m.op) {
        case add_node:
          m.id = g.add_node(props(seq));
          nodes.push_back(m.id);
          break;
        case add_edge:
          m.id = g.add_edge(m.a, m.b, props(seq), static_cast<EdgeKind>(m.kind));
          edges.push_back(m.id);
          break;
        // The lists forget an id when a call finds it gone (a removed
        // node's edges go when they are next picked).
        case remove_edge:
          m.result = g.remove_edge(m.a);
          std::erase(edges, m.a);
          break;
        case remove_node:
          m.result = g.remove_node(m.a);
          std::erase(nodes, m.a);
          break;
        case update_node: m.result = g.update_node(m.a, props(seq)); break;
        case update_edge:
          m.result = g.update_edge(m.a, props(seq));
          if (!m.result) std::erase(edges, m.a);
          break;
        case sync: g.sync(); break;
      }
      m.phase = after;
      publish(m);
    }
  } catch (const std::exception& e) {
    std::cerr << "graph_crash_test child: " << e.what() << "\n";
    ::_exit(4);
  }
}

/// Applies an acknowledged operation to the model.
void apply(Model& model, const Message& m) {
  switch (m.op) {
    case add_node: model.add_node(m.id, props(m.seq)); break;
    case add_edge: model.add_edge(m.id, m.a, m.b, static_cast<EdgeKind>(m.kind), props(m.seq)); break;
    case remove_edge:
      if (m.result) model.remove_edge(m.a);
      break;
    case remove_node:
      if (m.result) model.remove_node(m.a);
      break;
    case update_node:
      if (m.result) model.nodes[m.a] = props(m.seq);
      break;
    case update_edge:
      if (m.result) model.edges[m.a].props = props(m.seq);
      break;
    default: break;
  }
}

enum class Landed { in_open, in_repair, in_operation, between };

struct Counts {
  std::uint64_t landed[4] = {};
  std::uint64_t acknowledged = 0, in_flight_applied = 0, repaired_opens = 0;
  std::uint64_t dropped_entries = 0, dropped_edges = 0, dropped_pages = 0;  // by the parent's opens
};

/// Kills the child (SIGKILL) and reaps it. Returns: its wait status.
int kill_child(pid_t pid) {
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

}  // namespace

TEST_CASE("graph crash: SIGKILL at random points, then reopen, repair and check", "[graph]") {
  const int cycles = static_cast<int>(offheap_test::env_u64("OFFHEAP_GRAPH_CRASH_CYCLES", offheap_test::kSanitized ? 15 : 40));
  const std::uint64_t seed = offheap_test::env_u64("OFFHEAP_TEST_SEED", std::random_device{}());
  std::cout << "graph_crash_test: seed " << seed << " (OFFHEAP_TEST_SEED), " << cycles
            << " cycles (OFFHEAP_GRAPH_CRASH_CYCLES)\n"
            << std::flush;
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  offheap_test::TempDir tmp;
  const std::filesystem::path dir = tmp / "graph";
  void* shared = ::mmap(nullptr, sizeof(Channel), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  REQUIRE(shared != MAP_FAILED);
  struct Unmap {
    void* p;
    ~Unmap() { ::munmap(p, sizeof(Channel)); }
  } unmap{shared};
  Channel& ch = *new (shared) Channel;

  Model model;
  Counts counts;
  std::uint64_t seq = 1;
  std::uint64_t repair_ns = 2'000'000;  // the last unclean open's duration, for aiming

  // Runs one child; returns where the kill landed, and the messages it
  // published through `messages`.
  auto run_child = [&](bool open_only, bool durable) {
    ch.progress.store(Channel::started);
    ch.repaired.store(0);
    ch.open_ns.store(0);
    ch.count.store(0);
    const std::uint64_t child_seed = rng();
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) child(dir, durable, open_only, child_seed, seq, ch);
    if (open_only) {
      // Aim inside the open's repair: a random moment of the time the last
      // unclean open took.
      while (ch.progress.load(std::memory_order_acquire) == Channel::started) std::this_thread::yield();
      std::this_thread::sleep_for(std::chrono::nanoseconds(rng() % (repair_ns + 1)));
    } else {
      // Up to a few thousand operations in, at one in flight.
      const std::uint64_t target = rng() % 3000;
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (std::chrono::steady_clock::now() < deadline) {
        const std::uint64_t c = ch.count.load(std::memory_order_acquire);
        if (c >= target && c % 2 == 1) break;
        int status = 0;
        if (::waitpid(pid, &status, WNOHANG) == pid) FAIL("the child exited by itself (status " << status << ")");
      }
    }
    const int status = kill_child(pid);
    REQUIRE(WIFSIGNALED(status));
    const std::uint32_t progress = ch.progress.load(std::memory_order_acquire);
    const std::uint64_t c = ch.count.load(std::memory_order_acquire);
    if (ch.repaired.load() != 0 && progress == Channel::opened) repair_ns = std::max<std::uint64_t>(ch.open_ns.load(), 100'000);
    Landed where = Landed::between;
    if (progress != Channel::opened) {
      where = open_only ? Landed::in_repair : Landed::in_open;
    } else if (c % 2 == 1) {
      where = Landed::in_operation;
    }
    ++counts.landed[static_cast<int>(where)];
    return c;
  };

  for (int cycle = 0; cycle < cycles; ++cycle) {
    INFO("cycle " << cycle);
    const bool durable = rng() % 2 == 0;
    const std::uint64_t published = run_child(false, durable);
    std::optional<Message> flight;
    for (std::uint64_t i = 0; i < published; ++i) {
      const Message& m = ch.messages[i];
      if (m.phase == after) {
        apply(model, m);
        ++counts.acknowledged;
      } else if (i + 1 == published) {
        flight = m;
      }
      seq = std::max(seq, m.seq + 1);
    }
    if (cycle % 3 == 2) {
      for (int k = 0; k < 1 + static_cast<int>(rng() % 2); ++k) run_child(true, durable);
    }

    // The check.
    Graph g(graph_options(dir, durable));
    if (g.open_report().repaired) ++counts.repaired_opens;
    counts.dropped_entries += g.open_report().entries_dropped;
    counts.dropped_edges += g.open_report().edges_dropped;
    counts.dropped_pages += g.open_report().pages_dropped;
    INFO("in flight: op " << (flight ? int(flight->op) : -1) << " seq " << (flight ? flight->seq : 0) << " a "
                          << (flight ? flight->a : 0) << " b " << (flight ? flight->b : 0));
    REQUIRE(g.verify() == "");
    // What the graph holds, from its keys.
    std::map<NodeId, Document> nodes;
    std::map<EdgeId, offheap::Edge> edges;
    g.store().for_each_key([&](std::string_view k) {
      const auto key = offheap::graph_detail::parse_key(k);
      if (key.kind == offheap::graph_detail::kNodePrefix) nodes[key.id] = *g.node(key.id);
      if (key.kind == offheap::graph_detail::kEdgePrefix) {
        const auto e = g.edge(key.id);
        REQUIRE(e);  // after the repair, no edge names a missing node
        edges[key.id] = *e;
      }
    });
    REQUIRE(g.node_count() == nodes.size());
    REQUIRE(g.edge_count() == edges.size());
    const Message f = flight.value_or(Message{});
    const bool in_flight = flight.has_value();
    // A node removed in flight: all or nothing.
    const bool removed_in_flight = in_flight && f.op == remove_node && !nodes.count(f.a) && model.nodes.count(f.a);
    for (const auto& [n, d] : model.nodes) {
      INFO("node " << n);
      const auto it = nodes.find(n);
      if (it == nodes.end()) {
        REQUIRE((in_flight && f.op == remove_node && f.a == n));
        continue;
      }
      const bool ok = seq_of(it->second) == seq_of(d) || (in_flight && f.op == update_node && f.a == n && seq_of(it->second) == f.seq);
      REQUIRE(ok);
    }
    int extra_nodes = 0;
    for (const auto& [n, d] : nodes) {
      if (model.nodes.count(n)) continue;
      INFO("node " << n << " that the model lacks");
      REQUIRE((in_flight && f.op == add_node && seq_of(d) == f.seq));
      REQUIRE(++extra_nodes == 1);
    }
    for (const auto& [e, x] : model.edges) {
      INFO("edge " << e << " " << x.from << " -> " << x.to);
      const auto it = edges.find(e);
      const bool touches_removed = removed_in_flight && (x.from == f.a || x.to == f.a);
      if (it == edges.end()) {
        REQUIRE((touches_removed || (in_flight && f.op == remove_edge && f.a == e)));
        continue;
      }
      REQUIRE_FALSE(touches_removed);
      REQUIRE(it->second.from == x.from);
      REQUIRE(it->second.to == x.to);
      REQUIRE(it->second.kind == x.kind);
      const bool ok = seq_of(it->second.properties) == seq_of(x.props) ||
                      (in_flight && f.op == update_edge && f.a == e && seq_of(it->second.properties) == f.seq);
      REQUIRE(ok);
    }
    int extra_edges = 0;
    for (const auto& [e, x] : edges) {
      if (model.edges.count(e)) continue;
      INFO("edge " << e << " that the model lacks");
      REQUIRE((in_flight && f.op == add_edge && x.from == f.a && x.to == f.b &&
               x.kind == static_cast<EdgeKind>(f.kind) && seq_of(x.properties) == f.seq));
      REQUIRE(++extra_edges == 1);
    }
    if (in_flight && ((f.op == add_node && extra_nodes) || (f.op == add_edge && extra_edges) ||
                      removed_in_flight)) {
      ++counts.in_flight_applied;
    }
    // Narrowed to what the graph holds; then adjacency and traversals.
    model.clear();
    for (const auto& [n, d] : nodes) model.add_node(n, d);
    for (const auto& [e, x] : edges) model.add_edge(e, x.from, x.to, x.kind, x.properties);
    for (const auto& [n, d] : nodes) {
      for (const Direction way : {Direction::out, Direction::in, Direction::both}) {
        std::vector<offheap_test::Hop> got;
        g.for_each_edge(n, way, [&](EdgeId e, NodeId v, EdgeKind k) { got.emplace_back(e, v, k); });
        INFO("node " << n << " direction " << int(way));
        REQUIRE(got == model.hops(n, way));
      }
    }
    for (int k = 0; k < 3 && !nodes.empty(); ++k) {
      const NodeId s = std::next(nodes.begin(), static_cast<std::ptrdiff_t>(rng() % nodes.size()))->first;
      const offheap::Traversal t{UINT32_MAX, static_cast<Direction>(rng() % 3)};
      std::vector<offheap_test::Visit> got;
      g.bfs(s, t, [&](NodeId v, std::uint32_t d) { got.emplace_back(v, d); });
      REQUIRE(got == model.bfs(s, t, SIZE_MAX));
      got.clear();
      g.dfs(s, t, [&](NodeId v, std::uint32_t d) { got.emplace_back(v, d); });
      REQUIRE(got == model.dfs(s, t, SIZE_MAX));
    }
  }
  const auto& l = counts.landed;
  std::cout << "graph_crash_test: kills inside operations " << l[2] << ", inside repairing opens " << l[1]
            << ", inside other opens " << l[0] << ", between operations " << l[3] << "; "
            << counts.acknowledged << " operations acknowledged, " << counts.in_flight_applied
            << " in flight found applied, " << counts.repaired_opens << " checks repaired (leftovers dropped: "
            << counts.dropped_entries << " entries, " << counts.dropped_edges << " edges, " << counts.dropped_pages
            << " pages); the graph ends with "
            << model.nodes.size() << " nodes, " << model.edges.size() << " edges\n";
  CHECK(l[static_cast<int>(Landed::in_operation)] >= 1);
  if (cycles >= 6) CHECK(l[static_cast<int>(Landed::in_repair)] >= 1);
}
