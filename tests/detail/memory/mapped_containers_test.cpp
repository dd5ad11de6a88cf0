// SPDX-License-Identifier: Apache-2.0
// The eviction policies' containers in mapped memory: MappedFifo,
// GhostSet and NodeLists, each against a plain model under random use
// (NodeLists also restoring nodes at asked-for numbers);
// MappedArray's and NodeLists' directories growing past a page, counted
// in the store's memory budget to the byte.
#include <offheap/detail/cache/ghost_set.hpp>
#include <offheap/detail/memory/mapped_array.hpp>
#include <offheap/detail/memory/mapped_fifo.hpp>
#include <offheap/detail/cache/node_list.hpp>
#include <offheap/detail/index/hash.hpp>

#include "support/store_name.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <deque>
#include <list>
#include <random>
#include <string>
#include <unordered_map>

using offheap::detail::GhostSet;
using offheap::detail::MappedFifo;
using offheap::detail::NodeLists;

namespace {
const offheap::detail::StoreName& kName = offheap_test::store_name("containers test");
}

TEST_CASE("MappedFifo keeps FIFO order across segments, retain_if keeps order", "[detail][fifo]") {
  MappedFifo<std::uint64_t> q(kName, "a test queue");
  std::deque<std::uint64_t> model;
  std::mt19937_64 rng(1);
  std::uint64_t next = 0;
  for (int step = 0; step < 300000; ++step) {
    const auto op = rng() % 10000;
    if (step % 50000 != 49999 && op < 6000) {
      q.push_back(next);
      model.push_back(next++);
    } else if (step % 50000 != 49999) {
      if (!model.empty()) {
        REQUIRE(q.front() == model.front());
        q.pop_front();
        model.pop_front();
      }
    } else {
      const std::uint64_t m = 2 + rng() % 5;
      q.retain_if([m](std::uint64_t v) { return v % m != 0; });
      std::deque<std::uint64_t> kept;
      for (std::uint64_t v : model)
        if (v % m != 0) kept.push_back(v);
      model.swap(kept);
    }
    REQUIRE(q.size() == model.size());
  }
  CHECK(model.size() > 20000);  // several segments deep
  CHECK(q.mapped_bytes() >= model.size() * 8);
  q.retain_if([](std::uint64_t) { return false; });
  CHECK(q.empty());
  q.push_back(5);
  CHECK(q.front() == 5);
  CHECK(q.mapped_bytes() <= 2 * MappedFifo<std::uint64_t>::kSegmentBytes);
}

TEST_CASE("GhostSet remembers exactly its window of latest inserts and forgets what it hands back", "[detail][ghost]") {
  GhostSet g(kName);
  g.set_capacity(1000);
  for (std::uint64_t i = 0; i < 5000; ++i) g.insert(offheap::detail::mix64(i));
  // The last 1000 inserts (bar a rare bucket overflow) are in, older ones not.
  int in_window = 0, older = 0;
  for (std::uint64_t i = 4000; i < 5000; ++i) in_window += g.take(offheap::detail::mix64(i));
  for (std::uint64_t i = 0; i < 4000; ++i) older += g.take(offheap::detail::mix64(i));
  CHECK(in_window >= 990);
  CHECK(older == 0);
  // Taken: gone.
  CHECK_FALSE(g.take(offheap::detail::mix64(4999)));
  // A larger capacity: a new table; entries from before growth still found.
  for (std::uint64_t i = 10000; i < 10500; ++i) g.insert(offheap::detail::mix64(i));
  g.set_capacity(100000);
  for (std::uint64_t i = 20000; i < 20500; ++i) g.insert(offheap::detail::mix64(i));
  int before = 0, after = 0;
  for (std::uint64_t i = 10000; i < 10500; ++i) before += g.take(offheap::detail::mix64(i));
  for (std::uint64_t i = 20000; i < 20500; ++i) after += g.take(offheap::detail::mix64(i));
  CHECK(before >= 495);
  CHECK(after == 500);
  CHECK(g.entries() <= 100000);
  g.clear();
  g.insert(offheap::detail::mix64(1));
  CHECK(g.take(offheap::detail::mix64(1)));
  CHECK_FALSE(g.take(offheap::detail::mix64(20000)));
}

TEST_CASE("NodeLists agree with std::list and a map under random use", "[detail][nodes]") {
  NodeLists n(kName, "test lists");
  std::list<std::uint64_t> model[2];  // locations, head first
  std::unordered_map<std::uint64_t, unsigned> where;
  std::unordered_map<std::uint64_t, std::uint32_t> node_of;  // what a record's header keeps
  std::mt19937_64 rng(3);
  for (int step = 0; step < 200000; ++step) {
    const std::uint64_t loc = (rng() % 5000) * 8;
    const auto op = rng() % 10;
    const auto it = where.find(loc);
    // A header's word is checked against the node it names: a location
    // held names its own node; a word left from an earlier record does not
    // pass for a location that is not held.
    const auto w = node_of.find(loc);
    if (w != node_of.end()) REQUIRE(n.holds(w->second, loc, loc * 3) == (it != where.end()));
    if (it == where.end()) {
      const unsigned list = static_cast<unsigned>(rng() % 2);
      const std::uint32_t x = n.insert(loc, loc * 3, list);
      REQUIRE(x < NodeLists::kMaxNodes);
      node_of[loc] = x;
      model[list].push_front(loc);
      where[loc] = list;
      continue;
    }
    const std::uint32_t found = w->second;
    if (op < 4) {
      const unsigned list = static_cast<unsigned>(rng() % 2);
      n.move_to_head(found, list);
      model[it->second].remove(loc);
      model[list].push_front(loc);
      it->second = list;
    } else if (op < 6) {
      n.erase(found);
      REQUIRE_FALSE(n.holds(found, loc, loc * 3));
      model[it->second].remove(loc);
      where.erase(it);
    } else if (op < 7) {
      // Rekey to a free location: the node keeps its place (and its
      // number goes with the record).
      const std::uint64_t to = (5000 + rng() % 5000) * 8;
      if (where.count(to) == 0) {
        n.rekey(found, to, to * 3);
        REQUIRE(n.holds(found, to, to * 3));
        REQUIRE_FALSE(n.holds(found, loc, loc * 3));
        for (auto& l : model[it->second])
          if (l == loc) l = to;
        where[to] = it->second;
        node_of[to] = found;
        where.erase(loc);
      }
    }
    if (step % 1000 == 0) {
      for (unsigned l = 0; l < 2; ++l) {
        REQUIRE(n.length(l) == model[l].size());
        std::uint32_t x = n.head(l);
        for (std::uint64_t want : model[l]) {
          REQUIRE(x != NodeLists::kNone);
          REQUIRE(n.node(x).loc == want);
          REQUIRE(n.node(x).stamp == want * 3);
          x = n.node(x).next;
        }
        REQUIRE(x == NodeLists::kNone);
        if (!model[l].empty()) REQUIRE(n.node(n.tail(l)).loc == model[l].back());
      }
    }
  }
  CHECK(n.size() == where.size());
  CHECK(where.size() > 1000);
  // Words no node could hold: past the nodes handed out, and kNone.
  CHECK_FALSE(n.holds(NodeLists::kMaxNodes - 1, 8, 24));
  CHECK_FALSE(n.holds(NodeLists::kNone, 8, 24));
}

TEST_CASE("NodeLists restore nodes at the numbers asked for when free and in bounds, else anew", "[detail][nodes]") {
  NodeLists n(kName, "test lists");
  const std::uint64_t records = 3000;
  n.begin_restore(records);  // numbers below 3000 + 2048 may be kept
  std::mt19937_64 rng(9);
  std::unordered_map<std::uint32_t, std::uint64_t> loc_of;  // node -> location
  std::uint64_t kept = 0;
  for (std::uint64_t i = 0; i < records; ++i) {
    const std::uint64_t loc = i * 8;
    // Wanted numbers: scattered and free, repeated (taken), far out of
    // bounds, and kNone.
    const auto kind = rng() % 8;
    const std::uint32_t want = kind < 5   ? static_cast<std::uint32_t>(rng() % 6000)
                               : kind < 6 ? 17
                               : kind < 7 ? NodeLists::kMaxNodes - 1
                                          : NodeLists::kNone;
    const std::uint32_t x = n.restore_at(want, loc, i, static_cast<unsigned>(i % 3));
    REQUIRE(loc_of.count(x) == 0);  // never a node already in use
    loc_of[x] = loc;
    kept += x == want;
    if (want >= records + 2048) REQUIRE(x != want);
  }
  CHECK(kept > records / 3);  // (five in eight ask for a number in range, some taken already)
  // The mapped nodes stay those of the records and a segment or two.
  CHECK(n.mapped_bytes() <= (records + 2 * 2048) * sizeof(NodeLists::Node) + 4096);
  // The holes the restores skipped are free nodes, handed out before new
  // ones; no number is handed out twice.
  for (std::uint64_t i = 0; i < 5000; ++i) {
    const std::uint32_t x = n.insert((records + i) * 8, i, 0);
    REQUIRE(loc_of.count(x) == 0);
    loc_of[x] = (records + i) * 8;
  }
  for (const auto& [x, loc] : loc_of) {
    REQUIRE(n.holds(x, loc, loc < records * 8 ? loc / 8 : loc / 8 - records));
  }
  CHECK(n.size() == records + 5000);
  CHECK(n.length(0) + n.length(1) + n.length(2) == records + 5000);
}

TEST_CASE("Under a memory limit, NodeLists keep an asked-for number only inside the segments mapped",
          "[detail][nodes]") {
  const std::string text = "limited lists";
  const offheap::detail::StoreName name(text, std::uint64_t{1} << 20);
  NodeLists n(name, "test lists");
  n.begin_restore(5000);
  const std::uint32_t first = n.restore_at(4000, 8, 1, 0);  // past the mapped nodes (none): not mapped for
  CHECK(first == 0);
  CHECK(n.mapped_bytes() <= 65536 + 4096);  // one segment, as an insert maps
  CHECK(n.restore_at(100, 16, 2, 0) == 100);  // inside the segment: kept
  CHECK(n.holds(100, 16, 2));
}

TEST_CASE("Segment directories grow a page at a time and the budget counts every byte", "[detail][nodes]") {
  const std::string text = "directories test";
  const offheap::detail::StoreName name(text, 0);
  {
    // 1,200 segments of 8,192 elements: the directory outgrows a page (512
    // segments) twice, copied each time.
    offheap::detail::MappedArray<std::uint64_t> a(name, "a test array");
    const std::uint64_t n = 1200 * offheap::detail::MappedArray<std::uint64_t>::kPerSegment;
    for (std::uint64_t i = 0; i < n; ++i) a.push_back(i * 7);
    REQUIRE(a.size() == n);
    for (std::uint64_t i = 0; i < n; i += 997) REQUIRE(a[i] == i * 7);
    REQUIRE(a[n - 1] == (n - 1) * 7);
    REQUIRE(name.budget.used() == a.mapped_bytes());
    REQUIRE(a.mapped_bytes() == 1200 * std::uint64_t{65536} + 4 * 4096);  // directory: 1,024 -> 2,048 entries
    while (a.size() > 10) a.pop_back();
    REQUIRE(name.budget.used() == a.mapped_bytes());
  }
  REQUIRE(name.budget.used() == 0);
  {
    NodeLists lists(name, "test lists");
    const std::uint32_t n = 1100000;  // 538 segments of 2,048 nodes
    for (std::uint32_t i = 0; i < n; ++i) lists.insert(std::uint64_t{i} * 8, i, i % 2);
    for (std::uint32_t i = 0; i < n; i += 101) {
      REQUIRE(lists.holds(i, std::uint64_t{i} * 8, i));  // handed out in order: node i for record i
    }
    REQUIRE(lists.length(0) + lists.length(1) == n);
    REQUIRE(name.budget.used() == lists.mapped_bytes());
  }
  REQUIRE(name.budget.used() == 0);
}
