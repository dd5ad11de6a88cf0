// SPDX-License-Identifier: Apache-2.0
// A road map as an offheap::Graph: cities are nodes, roads are undirected
// edges with their length in km; prints the shortest route by distance and
// by number of roads, and the cities within two roads of Marseille. Run with a
// directory to keep the map in files (reopened with everything by the next
// run); without one, the map lives in anonymous memory.
#include <offheap/graph.hpp>

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  offheap::Options options;
  if (argc > 1) options.path = argv[1];
  offheap::Graph map(options);

  // A scenic direct road from Paris to Lyon: the shortest route and the one
  // with the fewest roads part ways there.
  if (map.node_count() == 0) {
    auto city = [&](const char* name) { return map.add_node(offheap::Document().set("name", name)); };
    auto road = [&](offheap::NodeId a, offheap::NodeId b, std::int64_t km) {
      map.add_edge(a, b, offheap::Document().set("km", km), offheap::EdgeKind::undirected);
    };
    const auto paris = city("Paris"), lyon = city("Lyon"), dijon = city("Dijon"),
               marseille = city("Marseille"), geneva = city("Geneva"), grenoble = city("Grenoble");
    road(paris, dijon, 315);
    road(dijon, lyon, 195);
    road(paris, lyon, 540);
    road(lyon, marseille, 315);
    road(lyon, geneva, 150);
    road(lyon, grenoble, 110);
    road(grenoble, marseille, 305);
    road(dijon, geneva, 260);
  }
  // Ids are handed out from 1, in order: Paris is 1, Lyon 2, ...
  const offheap::NodeId paris = 1, marseille = 4, geneva = 5, grenoble = 6;
  auto name = [&](offheap::NodeId n) { return map.node(n)->get("name")->as_string(); };

  auto print = [&](const char* title, const std::optional<offheap::Path>& path, const char* unit) {
    if (!path) {
      std::printf("%s: no route\n", title);
      return;
    }
    std::printf("%s (%g %s):", title, path->cost, unit);
    for (const offheap::NodeId n : path->nodes) std::printf(" %s", name(n).c_str());
    std::printf("\n");
  };
  print("Paris to Grenoble, shortest", map.shortest_path(paris, grenoble, "km"), "km");
  print("Paris to Grenoble, fewest roads", map.shortest_path(paris, grenoble), "roads");
  print("Geneva to Marseille, shortest", map.shortest_path(geneva, marseille, "km"), "km");

  std::printf("Within two roads of Marseille:");
  map.bfs(marseille, {2, offheap::Direction::both}, [&](offheap::NodeId n, std::uint32_t depth) {
    if (depth > 0) std::printf(" %s (%u)", name(n).c_str(), depth);
  });
  std::printf("\n%llu cities, %llu roads\n", static_cast<unsigned long long>(map.node_count()),
              static_cast<unsigned long long>(map.edge_count()));
  const auto best = map.shortest_path(paris, grenoble, "km");
  return best && best->cost == 620 ? 0 : 1;
}
