// SPDX-License-Identifier: Apache-2.0
// A model of the store's use of the index, for the index's own tests: fake
// locations whose "key" is the location itself, hashed by a caller-chosen
// function; writes take a migration step first, as Shard::write_locked does.
#pragma once

#include <offheap/detail/index/migration.hpp>

#include "support/store_name.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <map>

namespace offheap_test {

using offheap::detail::Index;
using offheap::detail::Location;

struct Harness {
  const offheap::detail::StoreName& name = store_name("index test");
  offheap::detail::WalkGate walks;
  Index index;
  std::map<std::uint64_t, std::uint64_t> hash_of;  // location raw -> hash
  std::uint64_t next = 0;

  explicit Harness(std::uint64_t expected) : index(expected, name) {}

  Index::Found find(std::uint64_t h, Location key) {
    return index.find(h, [&](Location l) { return l == key; });
  }
  bool rehash(Location l, std::uint64_t& h) const {
    h = hash_of.at(l.raw());
    return true;
  }
  /// A write's migration step (as Shard::write_locked takes it).
  void step() {
    index.migrate([&](Location l, std::uint64_t& h) { return rehash(l, h); }, [](Location) {}, walks);
  }
  Location add(std::uint64_t h) {
    const Location loc = Location::make(0, 8 * next++);
    step();
    if (index.needs_room()) {
      index.grow([&](Location l, std::uint64_t& h) { return rehash(l, h); }, walks);
    }
    const Index::Found f = find(h, loc);
    REQUIRE_FALSE(f.found);
    index.insert(f.insert_slot, h, loc);
    hash_of[loc.raw()] = h;
    return loc;
  }
  bool erase(std::uint64_t h, Location loc) {
    const Index::Found f = find(h, loc);
    if (!f.found) return false;
    index.erase(f.slot);
    hash_of.erase(loc.raw());
    return true;
  }
};

}  // namespace offheap_test
