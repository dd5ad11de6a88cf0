// SPDX-License-Identifier: Apache-2.0
#include <offheap/detail/index/index.hpp>

#include "detail/index/harness.hpp"
#include "support/store_name.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <random>
#include <string>

using offheap::detail::Index;
using offheap_test::Harness;
using offheap::detail::IndexTable;
using offheap::detail::Location;
namespace ctrl = offheap::detail::ctrl;

TEST_CASE("control-word matching is exact for every byte value", "[index]") {
  for (unsigned tag = 0x80; tag <= 0xFF; ++tag) {
    for (unsigned b = 0; b <= 0xFF; ++b) {
      // The byte under test in each position, other bytes different.
      for (unsigned pos = 0; pos < 8; ++pos) {
        std::uint64_t w = 0;
        for (unsigned i = 0; i < 8; ++i) {
          const unsigned v = i == pos ? b : (tag ^ 0x01u);
          w |= std::uint64_t{v & 0xFF} << (8 * i);
        }
        const std::uint64_t m = ctrl::match(w, static_cast<std::uint8_t>(tag));
        // The eighth byte is no slot: never matched.
        CHECK(((m >> (8 * pos + 7)) & 1) == (b == tag && pos < 7 ? 1u : 0u));
        if (b != tag) REQUIRE(m == 0);
      }
    }
  }
  // Empty and available, over the three kinds of control byte.
  const std::uint64_t w = 0x80'01'00'FF'01'00'81'00ull;
  CHECK(ctrl::match_empty(w) == 0x00'00'80'00'00'80'00'80ull);
  CHECK(ctrl::match_available(w) == 0x00'80'80'00'80'80'00'80ull);
  CHECK(ctrl::first(ctrl::match_empty(w)) == 0);
  CHECK(ctrl::first(0x80'00'00'00'00'00'00'00ull) == 7);
  // A group whose seven slots are full has no empty or available slot,
  // whatever its eighth byte holds.
  CHECK(ctrl::match_empty(0x00'81'82'83'84'85'86'87ull) == 0);
  CHECK(ctrl::match_available(0x00'81'82'83'84'85'86'87ull) == 0);
}

TEST_CASE("capacity_for keeps entries under the 7/8 load limit", "[index]") {
  // 7 slots per group, a power of two of groups; at least one slot stays empty.
  CHECK(Index::capacity_for(0) == 7);
  CHECK(Index::limit_of(7) == 6);
  CHECK(Index::capacity_for(6) == 7);
  CHECK(Index::capacity_for(7) == 14);
  CHECK(Index::capacity_for(24000) == 28672);
  CHECK(Index::limit_of(28672) == 25088);
  CHECK(Index::capacity_for(25088) == 28672);
  CHECK(Index::capacity_for(25089) == 57344);
  for (std::uint64_t groups = 1; groups <= (1u << 20); groups *= 2) {
    CHECK(Index::limit_of(groups * 7) < groups * 7);
    CHECK(Index::limit_of(groups * 7) >= groups * 7 * 7 / 8 - 1);
  }
}


TEST_CASE("insert, find, update and erase under growth", "[index]") {
  Harness x(0);
  std::mt19937_64 rng(1);
  std::map<std::uint64_t, std::uint64_t> live;  // loc raw -> hash
  for (int i = 0; i < 20000; ++i) {
    const std::uint64_t h = rng();
    live[x.add(h).raw()] = h;
    if (i % 3 == 0) {
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng() % live.size()));
      CHECK(x.erase(it->second, Location::from_raw(it->first)));
      live.erase(it);
    }
  }
  CHECK(x.index.size() == live.size());
  for (const auto& [raw, h] : live) CHECK(x.find(h, Location::from_raw(raw)).found);
  // Updating a slot changes where it leads.
  const auto [raw, h] = *live.begin();
  const Index::Found f = x.find(h, Location::from_raw(raw));
  x.index.update(f.slot, Location::make(1, 8));
  CHECK(x.index.location(f.slot) == Location::make(1, 8));
  CHECK(x.index.size() + x.index.tombstones() <= Index::limit_of(x.index.capacity()));
}

TEST_CASE("growth doubles at the load limit and drops tombstones", "[index]") {
  Harness x(0);
  CHECK(x.index.capacity() == 7);
  for (int i = 0; i < 6; ++i) x.add(static_cast<std::uint64_t>(i) * 0x9E3779B97F4A7C15ull);
  CHECK(x.index.capacity() == 7);  // 6 = the limit of 7 slots
  x.add(12345);
  CHECK(x.index.capacity() == 14);
  CHECK(x.index.size() == 7);
  CHECK(x.index.tombstones() == 0);
}

TEST_CASE("a table full of tombstones is rebuilt at the same size", "[index]") {
  // All keys in one group chain: erasures leave tombstones, not empties.
  Harness x(1000);
  const std::uint64_t cap = x.index.capacity();
  std::vector<Location> locs;
  for (std::uint64_t i = 0; i < 500; ++i) locs.push_back(x.add(i << 57));  // same group 0
  for (std::uint64_t i = 0; i < 500; ++i) CHECK(x.erase(i << 57, locs[i]));
  CHECK(x.index.tombstones() > 0);
  for (std::uint64_t i = 0; i < 2000; ++i) {
    const Location l = x.add(i << 57);
    CHECK(x.erase(i << 57, l));
  }
  CHECK(x.index.capacity() == cap);  // rebuilt in place, never doubled
  CHECK(x.index.size() == 0);
}

TEST_CASE("pre-sizing from expected entries avoids growth", "[index]") {
  Harness x(100000);
  const std::uint64_t cap = x.index.capacity();
  CHECK(cap == Index::capacity_for(100000));
  std::mt19937_64 rng(2);
  for (int i = 0; i < 100000; ++i) x.add(rng());
  CHECK(x.index.capacity() == cap);
}

TEST_CASE("clear replaces the table with an empty one and moves the generation", "[index]") {
  Harness x(100);
  for (int i = 0; i < 1000; ++i) x.add(static_cast<std::uint64_t>(i) * 77777);
  const std::uint64_t cap = x.index.capacity();
  const std::uint64_t* table = x.index.acquire_view().words;
  const std::uint64_t g = x.index.acquire_generation();
  const std::uint64_t serial = x.index.acquire_serial();
  CHECK(x.index.unchanged_since(g));
  x.index.clear(x.walks);
  CHECK_FALSE(x.index.unchanged_since(g));
  // A fresh table is published (readers inside the old one find it is no
  // longer current); the old one's range is kept, its pages dropped.
  CHECK(x.index.acquire_view().words != table);
  CHECK(x.index.acquire_serial() != serial);
  CHECK(x.index.retired_tables() >= 1);
  CHECK(x.index.capacity() == cap);
  CHECK(x.index.size() == 0);
  CHECK(x.index.tombstones() == 0);
  for (int i = 0; i < 1000; ++i) {
    CHECK_FALSE(x.find(static_cast<std::uint64_t>(i) * 77777, Location::make(0, 8 * static_cast<std::uint64_t>(i))).found);
  }
  x.hash_of.clear();
  const Location l = x.add(5);
  CHECK(x.find(5, l).found);
}

TEST_CASE("growth publishes the new table before it moves the generation", "[index]") {
  Harness x(0);
  const std::uint64_t g = x.index.acquire_generation();
  const std::uint64_t* before = x.index.acquire_view().words;
  const std::uint64_t serial = x.index.acquire_serial();
  for (int i = 0; i < 6; ++i) x.add(static_cast<std::uint64_t>(i) << 3);
  CHECK(x.index.unchanged_since(g));  // no growth yet
  x.add(99);
  CHECK_FALSE(x.index.unchanged_since(g));
  CHECK(x.index.acquire_view().words != before);
  CHECK(x.index.acquire_serial() == serial + 2);
}

TEST_CASE("replaced tables read as zeros and their ranges are reused, never unmapped", "[index]") {
  Harness x(0);
  std::mt19937_64 rng(3);
  // A table a stale reader holds: after growth its words read as zeros
  // (every slot empty), or as a later table's, and stay mapped.
  for (int i = 0; i < 6; ++i) x.add(rng());
  const offheap::detail::TableView stale = x.index.acquire_view();
  CHECK(stale.mask == 0);
  const std::uint64_t w0 = offheap::detail::load_acquire(stale.ctrl_word(0));
  CHECK(w0 != 0);  // six full slots
  x.add(rng());    // grows: the old table is replaced and dropped
  CHECK(x.index.acquire_view().words != stale.words);
  CHECK(offheap::detail::load_acquire(stale.ctrl_word(0)) == 0);  // zero pages
  // Growth and clear() cycles reuse kept ranges: the address space kept
  // stays within four times the current table.
  for (int round = 0; round < 50; ++round) {
    for (int i = 0; i < 200; ++i) x.add(rng());
    x.index.clear(x.walks);
    x.hash_of.clear();
    CHECK(x.index.retired_bytes() <= 4 * x.index.mapped_bytes());
  }
  // A walk in progress keeps a replaced table as it was.
  Harness y(0);
  for (int i = 0; i < 6; ++i) y.add(rng());
  const offheap::detail::TableView walked = y.index.acquire_view();
  const std::uint64_t before = offheap::detail::load_acquire(walked.ctrl_word(0));
  const unsigned ticket = y.walks.enter();
  y.add(rng());  // grows while the walk is inside
  CHECK(offheap::detail::load_acquire(walked.ctrl_word(0)) == before);
  y.walks.leave(ticket);
  y.index.drop_retired(y.walks);
  CHECK(offheap::detail::load_acquire(walked.ctrl_word(0)) == 0);
}
