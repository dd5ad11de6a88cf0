// SPDX-License-Identifier: Apache-2.0
// offheap_graph_bench: offheap::Graph at scale, beside the same queries on
// a plain in-memory model.
//
// The graph: --nodes nodes (default 20,000; 1,000,000 for the run)
// and --edges directed edges (default 200,000; 10,000,000), each edge
// between two nodes drawn uniformly (self-loops and parallel edges as they
// fall), with an integer weight 1-100 in the property "w"; nodes carry
// {"n": i}. Anonymous memory, or files under --dir.
//
// The model: what a program would write without the store, as fast as it
// comes: a std::vector per node of (to, edge id, weight), indexed by node
// id; BFS with a std::vector of depths and a FIFO std::vector, Dijkstra with
// std::vector distances and a std::priority_queue with lazy deletion, as
// the graph's own. (The graph's traversals keep hash tables of the nodes
// reached instead: it cannot assume dense ids.)
//
// Printed: the build (seconds, per edge), heap in use (mallinfo2's
// uordblks: before, after building the graph, after building the model,
// and the most seen while a traversal runs, sampled every 100 us on a
// thread), the store's mapped and live bytes; then Google Benchmark's
// timings:
//   BM_<Graph|Model>_Bfs/full      BFS from node 1 over everything it reaches
//   BM_<Graph|Model>_Bfs/depth3    BFS to depth 3 from each of --pairs random nodes
//   BM_<Graph|Model>_Dijkstra      least-weight path, each of --pairs random pairs
//   BM_<Graph|Model>_Fewest        fewest-edges path, the same pairs
// ("per query": an iteration's time over its queries; both subjects answer
// the same queries.)
// Every query's answer is compared between graph and model before timing
// (visits, depths, path costs): a difference fails the run.
//
//   offheap_graph_bench                                    smoke scale
//   offheap_graph_bench --nodes=1000000 --edges=10000000   the run
#include "cli.hpp"
#include "platform.hpp"

#include <benchmark/benchmark.h>
#include <offheap/graph.hpp>
#include <offheap/version.hpp>

#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <queue>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace offheap_bench {
namespace {

using offheap::Direction;
using offheap::Document;
using offheap::EdgeId;
using offheap::EdgeKind;
using offheap::Graph;
using offheap::NodeId;

struct Config {
  std::uint64_t nodes = 20000;
  std::uint64_t edges = 200000;
  std::uint64_t pairs = 8;  // random (from, to) pairs for the paths, and random BFS starts
  std::uint64_t seed = 42;
  std::string dir;           // empty: anonymous memory
};
Config g_config;

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::int64_t heap_bytes() { return static_cast<std::int64_t>(::mallinfo2().uordblks); }
double mib(std::int64_t b) { return static_cast<double>(b) / (1 << 20); }

/// The most heap in use seen while it lives, sampled on a thread every
/// 100 us (what a traversal's bookkeeping peaks at, less what it frees
/// between samples).
class HeapPeak {
 public:
  HeapPeak() : base_(heap_bytes()), peak_(base_) {
    thread_ = std::thread([this] {
      while (!stop_.load(std::memory_order_relaxed)) {
        std::int64_t now = heap_bytes();
        std::int64_t seen = peak_.load(std::memory_order_relaxed);
        if (now > seen) peak_.store(now, std::memory_order_relaxed);
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
    });
  }
  /// Returns: the most above the heap at construction.
  std::int64_t stop() {
    stop_ = true;
    thread_.join();
    return std::max<std::int64_t>(peak_.load(), heap_bytes()) - base_;
  }

 private:
  std::int64_t base_;
  std::atomic<std::int64_t> peak_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// ---- the model --------------------------------------------------------------------

struct Model {
  struct Out {
    NodeId to;
    EdgeId edge;
    double w;
  };
  std::vector<std::vector<Out>> out;  // index: node id

  /// BFS to max_depth from s: how many nodes visited, and the sum of their
  /// depths (compared with the graph's).
  std::pair<std::uint64_t, std::uint64_t> bfs(NodeId s, std::uint32_t max_depth) const {
    std::vector<std::uint32_t> depth(out.size(), UINT32_MAX);
    std::vector<NodeId> queue{s};
    depth[s] = 0;
    std::uint64_t depths = 0;
    for (std::size_t head = 0; head < queue.size(); ++head) {
      const NodeId u = queue[head];
      if (depth[u] >= max_depth) continue;
      for (const Out& o : out[u]) {
        if (depth[o.to] != UINT32_MAX) continue;
        depth[o.to] = depth[u] + 1;
        depths += depth[o.to];
        queue.push_back(o.to);
      }
    }
    return {queue.size(), depths};
  }

  std::optional<double> dijkstra(NodeId s, NodeId t) const {
    std::vector<double> dist(out.size(), -1);
    std::vector<bool> settled(out.size());
    using Item = std::pair<double, NodeId>;
    std::priority_queue<Item, std::vector<Item>, std::greater<Item>> heap;
    dist[s] = 0;
    heap.push({0, s});
    while (!heap.empty()) {
      const auto [d, u] = heap.top();
      heap.pop();
      if (settled[u] || d > dist[u]) continue;
      settled[u] = true;
      if (u == t) return d;
      for (const Out& o : out[u]) {
        const double nd = d + o.w;
        if (!settled[o.to] && (dist[o.to] < 0 || nd < dist[o.to])) {
          dist[o.to] = nd;
          heap.push({nd, o.to});
        }
      }
    }
    return std::nullopt;
  }

  std::optional<std::size_t> fewest(NodeId s, NodeId t) const {
    if (s == t) return 0;
    std::vector<std::uint32_t> depth(out.size(), UINT32_MAX);
    std::vector<NodeId> queue{s};
    depth[s] = 0;
    for (std::size_t head = 0; head < queue.size(); ++head) {
      const NodeId u = queue[head];
      for (const Out& o : out[u]) {
        if (depth[o.to] != UINT32_MAX) continue;
        depth[o.to] = depth[u] + 1;
        if (o.to == t) return depth[o.to];
        queue.push_back(o.to);
      }
    }
    return std::nullopt;
  }
};

// ---- the subjects, built once -------------------------------------------------------

struct World {
  std::unique_ptr<Graph> graph;
  Model model;
  std::vector<std::pair<NodeId, NodeId>> pairs;
  std::vector<NodeId> starts;
  double graph_build_s = 0, model_build_s = 0;
  std::int64_t heap_start = 0, heap_graph = 0, heap_model = 0;
};
World g_world;

/// The edges, generated again for each subject from the same seed.
template <class F>
void for_each_generated_edge(F&& fn) {
  std::mt19937_64 rng(g_config.seed);
  for (std::uint64_t i = 0; i < g_config.edges; ++i) {
    const NodeId from = 1 + rng() % g_config.nodes;
    const NodeId to = 1 + rng() % g_config.nodes;
    const std::int64_t w = 1 + static_cast<std::int64_t>(rng() % 100);
    fn(from, to, w);
  }
}

void build() {
  World& w = g_world;
  w.heap_start = heap_bytes();
  offheap::Options o;
  o.path = g_config.dir;
  // Nodes, edges and about one page per node: no index growth on the way.
  o.expected_entries = g_config.nodes * 2 + g_config.edges;
  auto t0 = Clock::now();
  w.graph = std::make_unique<Graph>(o);
  Graph& g = *w.graph;
  for (std::uint64_t i = 1; i <= g_config.nodes; ++i) {
    if (g.add_node(Document().set("n", static_cast<std::int64_t>(i))) != i) std::abort();
  }
  std::uint64_t done = 0;
  for_each_generated_edge([&](NodeId from, NodeId to, std::int64_t weight) {
    g.add_edge(from, to, Document().set("w", weight));
    if (++done % 1000000 == 0) {
      std::fprintf(stderr, "  graph: %s edges, %.1f s\n", with_commas(done).c_str(), seconds_since(t0));
    }
  });
  w.graph_build_s = seconds_since(t0);
  ::malloc_trim(0);
  w.heap_graph = heap_bytes();

  t0 = Clock::now();
  w.model.out.resize(g_config.nodes + 1);
  EdgeId e = 1;
  for_each_generated_edge([&](NodeId from, NodeId to, std::int64_t weight) {
    w.model.out[from].push_back({to, e++, static_cast<double>(weight)});
  });
  w.model_build_s = seconds_since(t0);
  w.heap_model = heap_bytes();

  std::mt19937_64 rng(g_config.seed + 1);
  for (std::uint64_t i = 0; i < g_config.pairs; ++i) {
    w.pairs.emplace_back(1 + rng() % g_config.nodes, 1 + rng() % g_config.nodes);
    w.starts.push_back(1 + rng() % g_config.nodes);
  }
}

std::pair<std::uint64_t, std::uint64_t> graph_bfs(NodeId s, std::uint32_t max_depth) {
  std::uint64_t visited = 0, depths = 0;
  g_world.graph->bfs(s, {max_depth, Direction::out}, [&](NodeId, std::uint32_t d) {
    ++visited;
    depths += d;
  });
  return {visited, depths};
}

/// Every query the benchmarks time, answered by both and compared.
bool cross_check() {
  bool ok = true;
  const auto full = graph_bfs(1, UINT32_MAX);
  if (full != g_world.model.bfs(1, UINT32_MAX)) {
    std::fprintf(stderr, "MISMATCH: full BFS from 1\n");
    ok = false;
  }
  for (std::size_t i = 0; i < g_world.pairs.size(); ++i) {
    const auto [s, t] = g_world.pairs[i];
    if (graph_bfs(g_world.starts[i], 3) != g_world.model.bfs(g_world.starts[i], 3)) {
      std::fprintf(stderr, "MISMATCH: BFS depth 3 from %" PRIu64 "\n", g_world.starts[i]);
      ok = false;
    }
    const auto p = g_world.graph->shortest_path(s, t, "w");
    const auto q = g_world.model.dijkstra(s, t);
    if (p.has_value() != q.has_value() || (p && p->cost != *q)) {
      std::fprintf(stderr, "MISMATCH: Dijkstra %" PRIu64 " -> %" PRIu64 "\n", s, t);
      ok = false;
    }
    const auto f = g_world.graph->shortest_path(s, t);
    const auto h = g_world.model.fewest(s, t);
    if (f.has_value() != h.has_value() || (f && f->edges.size() != *h)) {
      std::fprintf(stderr, "MISMATCH: fewest edges %" PRIu64 " -> %" PRIu64 "\n", s, t);
      ok = false;
    }
  }
  std::printf("Full BFS from node 1 reaches %s nodes; every answer agrees: %s\n\n",
              with_commas(full.first).c_str(), ok ? "yes" : "NO");
  return ok;
}

void print_memory() {
  const World& w = g_world;
  const offheap::Stats s = w.graph->store().stats();
  std::printf("Build: graph %.2f s (%.2f us per edge, nodes included), model %.2f s (%.3f us per edge)\n",
              w.graph_build_s, w.graph_build_s * 1e6 / static_cast<double>(g_config.edges), w.model_build_s,
              w.model_build_s * 1e6 / static_cast<double>(g_config.edges));
  std::printf("Heap in use: %.1f MiB before; %.1f MiB after building the graph (+%.2f MiB); "
              "%.1f MiB after building the model (+%.1f MiB)\n",
              mib(w.heap_start), mib(w.heap_graph), mib(w.heap_graph - w.heap_start), mib(w.heap_model),
              mib(w.heap_model - w.heap_graph));
  std::printf("The graph's store: %s records, %.1f MiB live, %.1f MiB mapped (%.1f bytes a record)\n",
              with_commas(s.records).c_str(), mib(static_cast<std::int64_t>(s.live_bytes)),
              mib(static_cast<std::int64_t>(s.memory_mapped_bytes)),
              static_cast<double>(s.memory_mapped_bytes) / static_cast<double>(s.records));
  // What a traversal adds to the heap while it runs, and keeps after it.
  auto peak_of = [](auto&& run) {
    HeapPeak peak;
    run();
    return peak.stop();
  };
  const std::int64_t before = heap_bytes();
  const std::int64_t graph_bfs_peak = peak_of([] { graph_bfs(1, UINT32_MAX); });
  const std::int64_t model_bfs_peak = peak_of([] { g_world.model.bfs(1, UINT32_MAX); });
  const NodeId s0 = w.pairs[0].first, t0 = w.pairs[0].second;
  const std::int64_t graph_dij_peak = peak_of([&] { w.graph->shortest_path(s0, t0, "w"); });
  const std::int64_t model_dij_peak = peak_of([&] { w.model.dijkstra(s0, t0); });
  std::printf("Heap during a traversal (most above the heap before it): full BFS graph %.1f MiB, model "
              "%.1f MiB; Dijkstra %" PRIu64 " -> %" PRIu64 " graph %.1f MiB, model %.1f MiB; after them "
              "%+.2f MiB\n\n",
              mib(graph_bfs_peak), mib(model_bfs_peak), s0, t0, mib(graph_dij_peak), mib(model_dij_peak),
              mib(heap_bytes() - before));
  std::fflush(stdout);
}

// ---- the timed queries -------------------------------------------------------------

// Each iteration answers the same queries for both subjects: the full BFS
// from node 1, or every start (depth 3) or every pair (paths) in turn.
// "per query": the iteration's time divided by its queries.
template <class Query>
void timed(benchmark::State& state, std::size_t queries, Query&& query) {
  std::uint64_t visited = 0;
  for (auto _ : state) {
    for (std::size_t i = 0; i < queries; ++i) visited += query(i);
  }
  state.counters["per query"] = benchmark::Counter(static_cast<double>(queries),
                                                   benchmark::Counter::kIsIterationInvariantRate |
                                                       benchmark::Counter::kInvert);
  state.counters["visited"] =
      static_cast<double>(visited) / (static_cast<double>(state.iterations()) * static_cast<double>(queries));
}

void BM_Graph_Bfs(benchmark::State& state) {
  if (state.range(0) == 0) return timed(state, 1, [](std::size_t) { return graph_bfs(1, UINT32_MAX).first; });
  timed(state, g_world.starts.size(), [](std::size_t i) { return graph_bfs(g_world.starts[i], 3).first; });
}
void BM_Model_Bfs(benchmark::State& state) {
  if (state.range(0) == 0) return timed(state, 1, [](std::size_t) { return g_world.model.bfs(1, UINT32_MAX).first; });
  timed(state, g_world.starts.size(), [](std::size_t i) { return g_world.model.bfs(g_world.starts[i], 3).first; });
}
void BM_Graph_Dijkstra(benchmark::State& state) {
  timed(state, g_world.pairs.size(), [](std::size_t i) {
    const auto p = g_world.graph->shortest_path(g_world.pairs[i].first, g_world.pairs[i].second, "w");
    return p ? p->nodes.size() : 0;
  });
}
void BM_Model_Dijkstra(benchmark::State& state) {
  timed(state, g_world.pairs.size(), [](std::size_t i) {
    return g_world.model.dijkstra(g_world.pairs[i].first, g_world.pairs[i].second).has_value() ? 1u : 0u;
  });
}
void BM_Graph_Fewest(benchmark::State& state) {
  timed(state, g_world.pairs.size(), [](std::size_t i) {
    const auto p = g_world.graph->shortest_path(g_world.pairs[i].first, g_world.pairs[i].second);
    return p ? p->nodes.size() : 0;
  });
}
void BM_Model_Fewest(benchmark::State& state) {
  timed(state, g_world.pairs.size(), [](std::size_t i) {
    const auto h = g_world.model.fewest(g_world.pairs[i].first, g_world.pairs[i].second);
    return h ? *h + 1 : 0;
  });
}

void usage(const char* argv0) {
  std::printf("usage: %s [--nodes=N] [--edges=N] [--pairs=N] [--seed=N] [--dir=PATH] [Google Benchmark flags]\n"
              "  defaults: --nodes=20000 --edges=200000 --pairs=8 (the issue's run: --nodes=1000000 "
              "--edges=10000000)\n",
              argv0);
}

int run(int argc, char** argv) {
  std::vector<char*> rest{argv[0]};
  const std::pair<const char*, std::uint64_t*> numbers[] = {
      {"--nodes=", &g_config.nodes}, {"--edges=", &g_config.edges},
      {"--pairs=", &g_config.pairs}, {"--seed=", &g_config.seed}};
  for (int i = 1; i < argc; ++i) {
    const Flag flag(argv[i]);
    bool taken = false;
    for (const auto& [prefix, out] : numbers) {
      if (const char* v = flag.value(prefix)) {
        if (!parse_u64(v, *out) || *out == 0) return flag.fail("expects a whole number above 0"), 2;
        taken = true;
      }
    }
    if (const char* d = flag.value("--dir=")) {
      g_config.dir = d;
      taken = true;
    }
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) usage(argv[0]);
    if (!taken) rest.push_back(argv[i]);
  }
  int n = static_cast<int>(rest.size());
  rest.push_back(nullptr);
  benchmark::Initialize(&n, rest.data());
  if (benchmark::ReportUnrecognizedArguments(n, rest.data())) return 2;

  std::printf("offheap_graph_bench: offheap %u.%u.%u\n", offheap::kVersionMajor, offheap::kVersionMinor,
              offheap::kVersionPatch);
  print_host();
  std::printf("  Graph:    %s nodes, %s directed edges (uniform ends, weight 1-100), %s\n\n",
              with_commas(g_config.nodes).c_str(), with_commas(g_config.edges).c_str(),
              g_config.dir.empty() ? "anonymous memory" : ("files under " + g_config.dir).c_str());
  std::fflush(stdout);
  if (!g_config.dir.empty()) std::filesystem::remove_all(g_config.dir);
  build();
  if (!cross_check()) return 1;
  print_memory();

  benchmark::RegisterBenchmark("BM_Graph_Bfs/full", BM_Graph_Bfs)->Arg(0)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_Model_Bfs/full", BM_Model_Bfs)->Arg(0)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_Graph_Bfs/depth3", BM_Graph_Bfs)->Arg(3)->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("BM_Model_Bfs/depth3", BM_Model_Bfs)->Arg(3)->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("BM_Graph_Dijkstra", BM_Graph_Dijkstra)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_Model_Dijkstra", BM_Model_Dijkstra)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_Graph_Fewest", BM_Graph_Fewest)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_Model_Fewest", BM_Model_Fewest)->Unit(benchmark::kMillisecond);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();

  if (!g_config.dir.empty()) {
    auto t0 = Clock::now();
    g_world.graph->close();
    const double close_s = seconds_since(t0);
    g_world.graph.reset();
    offheap::Options o;
    o.path = g_config.dir;
    t0 = Clock::now();
    Graph again(o);
    std::printf("\nClose %.2f s, clean reopen %.3f s (%s nodes, %s edges)\n", close_s, seconds_since(t0),
                with_commas(again.node_count()).c_str(), with_commas(again.edge_count()).c_str());
    again.close();
    std::filesystem::remove_all(g_config.dir);
  }
  return 0;
}

}  // namespace
}  // namespace offheap_bench

int main(int argc, char** argv) { return offheap_bench::run(argc, argv); }
