// SPDX-License-Identifier: Apache-2.0
// detail::OrderedTree (the ordered index's B+-tree in a store) against a
// std::set: random inserts and erases of keys of every length up to the
// limit, with walks from random bounds in both directions after each
// batch, the tree's shape checked (sorted nodes, keys within their
// parents' separators, the leaf chain both ways), and a reader thread
// walking while a writer changes the tree.
#include <offheap/document/detail/ordered_tree.hpp>

#include "support/env.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace {

using offheap::detail::OrderedTree;
using offheap::detail::TreeBound;
using offheap::detail::TreeBuffers;

std::string random_key(std::mt19937_64& rng) {
  // Mostly short keys over a small alphabet (shared prefixes, equal
  // runs), some long ones up to the limit.
  const std::size_t len = rng() % 16 == 0 ? rng() % (OrderedTree::kMaxKeyBytes + 1) : 1 + rng() % 12;
  std::string k(len, '\0');
  for (char& c : k) c = static_cast<char>(rng() % 4 == 0 ? rng() % 256 : 'a' + rng() % 3);
  return k;
}

std::vector<std::string> walk(const OrderedTree& t, TreeBound from, bool descending, std::size_t limit) {
  std::vector<std::string> out;
  TreeBuffers b;
  REQUIRE(offheap::detail::walk_tree(t, from, descending, [&](std::string_view k) {
    out.emplace_back(k);
    return out.size() < limit;
  }, b, 1000));
  return out;
}

std::vector<std::string> model_walk(const std::set<std::string>& m, const TreeBound& from, bool descending,
                                    std::size_t limit) {
  std::vector<std::string> out;
  if (!descending) {
    auto it = from.unbounded ? m.begin() : from.inclusive ? m.lower_bound(from.key) : m.upper_bound(from.key);
    for (; it != m.end() && out.size() < limit; ++it) out.push_back(*it);
  } else {
    auto it = from.unbounded ? m.end() : from.inclusive ? m.upper_bound(from.key) : m.lower_bound(from.key);
    while (it != m.begin() && out.size() < limit) out.push_back(*--it);
  }
  return out;
}

/// Every node sorted and within its parent's bounds; the leaves' chain
/// holds the model's keys in order, both ways. Returns the leaf count.
std::size_t check_shape(const OrderedTree& t, const std::set<std::string>& m) {
  TreeBuffers b;
  if (t.root() == 0) {
    REQUIRE(m.empty());
    return 0;
  }
  struct Item {
    std::uint64_t id;
    std::string lo, hi;
    bool has_lo, has_hi;
    std::uint32_t depth;
  };
  std::vector<Item> todo{{t.root(), "", "", false, false, 1}};
  std::vector<std::uint64_t> leaves_in_order;
  std::uint32_t leaf_depth = 0;
  while (!todo.empty()) {
    const Item it = todo.back();
    todo.pop_back();
    REQUIRE(t.read_node(it.id, b));
    for (std::size_t i = 0; i < b.node.size(); ++i) {
      const std::string k(b.node.key(i));
      if (i > 0) REQUIRE(std::string(b.node.key(i - 1)) < k);
      if (it.has_lo) REQUIRE(k >= it.lo);
      if (it.has_hi) REQUIRE(k < it.hi);
    }
    if (b.node.leaf()) {
      if (leaf_depth == 0) leaf_depth = it.depth;
      REQUIRE(it.depth == leaf_depth);  // balanced
      REQUIRE((b.node.size() > 0 || it.id == t.root()));
      leaves_in_order.push_back(it.id);
      continue;
    }
    // Children pushed right to left: popped left to right.
    for (std::size_t i = b.node.size() + 1; i-- > 0;) {
      Item c{b.node.child(i), it.lo, it.hi, it.has_lo, it.has_hi, it.depth + 1};
      if (i > 0) {
        c.lo = std::string(b.node.key(i - 1));
        c.has_lo = true;
      }
      if (i < b.node.size()) {
        c.hi = std::string(b.node.key(i));
        c.has_hi = true;
      }
      todo.push_back(c);
    }
  }
  REQUIRE(leaf_depth == t.height());
  // The chain, forwards and backwards, is the leaves in tree order.
  std::vector<std::string> keys;
  std::uint64_t prev = 0;
  for (std::size_t i = 0; i < leaves_in_order.size(); ++i) {
    REQUIRE(t.read_node(leaves_in_order[i], b));
    REQUIRE(b.node.prev() == prev);
    REQUIRE(b.node.next() == (i + 1 < leaves_in_order.size() ? leaves_in_order[i + 1] : 0));
    for (std::size_t j = 0; j < b.node.size(); ++j) keys.emplace_back(b.node.key(j));
    prev = leaves_in_order[i];
  }
  REQUIRE(keys == std::vector<std::string>(m.begin(), m.end()));
  return leaves_in_order.size();
}

offheap::Options anonymous() {
  offheap::Options o;
  o.shards = 2;
  return o;
}

}  // namespace

TEST_CASE("An ordered tree in a store matches a std::set through inserts, erases and walks", "[ordered_tree]") {
  const std::uint64_t seed = offheap_test::env_u64("OFFHEAP_SEED", 7);
  std::mt19937_64 rng(seed);
  offheap::Store store(anonymous());
  OrderedTree tree(store, std::string("\x05") + "idx1");
  std::set<std::string> model;
  const int rounds = offheap_test::kSanitized ? 12 : 40;
  for (int round = 0; round < rounds; ++round) {
    // Grow for most rounds, then shrink to nothing.
    const bool growing = round < rounds * 2 / 3;
    for (int op = 0; op < 400; ++op) {
      tree.begin_write();
      if (growing ? rng() % 4 != 0 : rng() % 8 == 0) {
        const std::string k = random_key(rng);
        REQUIRE(tree.insert(k) == model.insert(k).second);
      } else if (!model.empty() && rng() % 3 != 0) {
        auto it = model.lower_bound(random_key(rng));
        if (it == model.end()) it = model.begin();
        const std::string k = *it;
        REQUIRE(tree.erase(k));
        model.erase(it);
      } else {
        const std::string k = random_key(rng);
        REQUIRE(tree.erase(k) == (model.erase(k) == 1));
      }
      tree.end_write();
    }
    INFO("round " << round << ", keys " << model.size() << ", height " << tree.height());
    check_shape(tree, model);
    for (int w = 0; w < 20; ++w) {
      TreeBound from;
      from.unbounded = rng() % 8 == 0;
      from.key = random_key(rng);
      from.inclusive = rng() % 2 == 0;
      if (!from.unbounded && !model.empty() && rng() % 2 == 0) {
        auto it = model.lower_bound(from.key);
        if (it != model.end()) from.key = *it;  // a bound that is a key
      }
      const bool desc = rng() % 2 == 0;
      const std::size_t limit = rng() % 4 == 0 ? SIZE_MAX : 1 + rng() % 300;
      REQUIRE(walk(tree, from, desc, limit) == model_walk(model, from, desc, limit));
    }
  }
  // Drained by the last rounds, or drained now.
  for (const std::string& k : std::vector<std::string>(model.begin(), model.end())) {
    tree.begin_write();
    REQUIRE(tree.erase(k));
    tree.end_write();
  }
  model.clear();
  check_shape(tree, model);
  // A reopened tree (its meta record read again) is the same tree.
  tree.begin_write();
  for (int i = 0; i < 2000; ++i) {
    const std::string k = random_key(rng);
    tree.insert(k);
    model.insert(k);
  }
  tree.end_write();
  OrderedTree again(store, std::string("\x05") + "idx1");
  check_shape(again, model);
  REQUIRE(walk(again, TreeBound{"", true, true}, false, SIZE_MAX) == std::vector<std::string>(model.begin(), model.end()));
  // destroy() leaves no record behind.
  again.destroy();
  REQUIRE(store.size() == 0);
}

TEST_CASE("A walk of an ordered tree that writers change under it skips and repeats no stable key",
          "[ordered_tree]") {
  offheap::Store store(anonymous());
  OrderedTree tree(store, "t");
  // Stable keys: even numbers, there throughout. Writers insert and erase
  // odd ones, splitting and emptying leaves around them.
  auto key = [](std::uint32_t n) {
    char b[16];
    std::snprintf(b, sizeof b, "k%08u", n);
    return std::string(b);
  };
  constexpr std::uint32_t kMax = 20000;
  tree.begin_write();
  for (std::uint32_t n = 0; n < kMax; n += 2) tree.insert(key(n));
  tree.end_write();
  std::atomic<bool> stop{false};
  std::mutex writer_lock;  // as the collection's: a walk that gives up goes on under it
  std::thread writer([&] {
    std::mt19937_64 rng(3);
    while (!stop.load(std::memory_order_relaxed)) {
      const std::uint32_t base = static_cast<std::uint32_t>(rng() % (kMax / 2)) * 2 + 1;
      for (int half = 0; half < 2; ++half) {
        const std::lock_guard<std::mutex> g(writer_lock);
        tree.begin_write();
        for (std::uint32_t n = base; n < base + 200 && n < kMax; n += 2) {
          if (half == 0) {
            tree.insert(key(n));
          } else {
            tree.erase(key(n));
          }
        }
        tree.end_write();
      }
    }
  });
  std::uint64_t gave_up = 0;
  for (int pass = 0; pass < (offheap_test::kSanitized ? 10 : 60); ++pass) {
    const bool desc = pass % 2 == 1;
    std::vector<std::uint32_t> seen;
    TreeBound from{"", true, true};
    TreeBuffers b;
    auto emit = [&](std::string_view k) {
      const auto n = static_cast<std::uint32_t>(std::stoul(std::string(k.substr(1))));
      if (n % 2 == 0) seen.push_back(n);
      return true;
    };
    if (!offheap::detail::walk_tree(tree, from, desc, emit, b, 3)) {
      ++gave_up;
      const std::lock_guard<std::mutex> g(writer_lock);
      REQUIRE(offheap::detail::walk_tree(tree, from, desc, emit, b, 0));
    }
    REQUIRE(seen.size() == kMax / 2);
    for (std::size_t i = 0; i < seen.size(); ++i) {
      REQUIRE(seen[i] == (desc ? kMax - 2 - 2 * i : 2 * i));
    }
  }
  stop = true;
  writer.join();
  INFO("walks that gave up after 3 restarts and went on locked: " << gave_up);
  SUCCEED();
}

TEST_CASE("A walk of an ordered tree whose leaf chain loops or is out of order reports damage, never loops",
          "[ordered_tree]") {
  offheap::Store store(anonymous());
  OrderedTree tree(store, "t");
  tree.begin_write();
  for (int i = 0; i < 3000; ++i) tree.insert("key-" + std::to_string(1000000 + i));
  tree.end_write();
  REQUIRE(tree.height() >= 2);
  TreeBuffers b;
  // The last leaf's next: back to the first one.
  REQUIRE(tree.seek_leaf(std::string(OrderedTree::kMaxKeyBytes + 1, '\xFF'), b));
  std::uint64_t first_id = 0;
  {
    TreeBuffers f;
    REQUIRE(tree.seek_leaf("", f));
    // (The first leaf's id: the one whose prev is 0, found from the second leaf's prev.)
    REQUIRE(tree.read_node(f.node.next(), f));
    first_id = f.node.prev();
  }
  std::string bytes = b.bytes;
  offheap::detail::write_le64(bytes.data() + 11, first_id);
  // The last leaf's own id: the one the previous leaf's next names.
  TreeBuffers p;
  REQUIRE(tree.read_node(b.node.prev(), p));
  const std::uint64_t last_id = p.node.next();
  std::string key = "t";
  offheap::detail::append_be64(key, last_id);
  store.put(key, bytes);
  for (const bool descending : {false, true}) {
    TreeBound from{"", true, true};
    std::size_t n = 0;
    try {
      offheap::detail::walk_tree(tree, from, descending, [&](std::string_view) { return ++n < 100000; }, b, 3);
      if (descending) SUCCEED("the prev chain is intact: walked to its end");
      else FAIL("a looping chain walked without an error");
    } catch (const offheap::Error& e) {
      REQUIRE(e.code() == offheap::Errc::corrupt_file);
      REQUIRE(n == 3000);  // every key once, then the loop found
    }
  }
}
