// SPDX-License-Identifier: Apache-2.0
// Index migrations (issue 31): a table past Index::kRebuildGroups groups
// grows by publishing the new table beside it and moving a few groups per
// write. Every key stays found throughout, in exactly one of the two
// tables; walks hold the moves back; a migration a walk held back until
// the new table filled is rebuilt at once; clear() and erase/update reach
// the drained table.
#include <offheap/detail/index/index.hpp>

#include "detail/index/harness.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <random>

using offheap::detail::Index;
using offheap::detail::Location;
using offheap::detail::TableView;
using offheap_test::Harness;

namespace {

/// Adds random keys until a migration begins; returns them (loc -> hash).
std::map<std::uint64_t, std::uint64_t> fill_until_migrating(Harness& x, std::mt19937_64& rng) {
  std::map<std::uint64_t, std::uint64_t> live;
  while (!x.index.migrating()) {
    const std::uint64_t h = rng();
    live[x.add(h).raw()] = h;
    REQUIRE(live.size() < 100000);
  }
  return live;
}

bool all_found(Harness& x, const std::map<std::uint64_t, std::uint64_t>& live) {
  for (const auto& [raw, h] : live) {
    if (!x.find(h, Location::from_raw(raw)).found) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("a table past kRebuildGroups grows by migration, a few groups per write", "[index][migration]") {
  Harness x(0);
  std::mt19937_64 rng(11);
  // Up to kRebuildGroups groups: rebuilt at once, as before migrations.
  std::map<std::uint64_t, std::uint64_t> live;
  while (x.index.capacity() <= Index::kRebuildGroups * 7) {
    const std::uint64_t h = rng();
    live[x.add(h).raw()] = h;
    CHECK_FALSE(x.index.migrating());
  }
  CHECK(x.index.migrations() == 0);
  // The next growth migrates: the new table is published empty beside the
  // old, the generation and the serial move once.
  const std::uint64_t g0 = x.index.acquire_generation();
  const std::uint64_t serial0 = x.index.acquire_serial();
  const TableView before = x.index.acquire_view();
  for (const auto& [raw, h] : fill_until_migrating(x, rng)) live[raw] = h;
  CHECK(x.index.migrations() == 1);
  CHECK(x.index.acquire_serial() == serial0 + 2);
  CHECK_FALSE(x.index.unchanged_since(g0));
  CHECK(x.index.acquire_old_view().words == before.words);
  const TableView during = x.index.acquire_view();
  CHECK(during.words != before.words);
  CHECK(during.mask == 2 * before.mask + 1);
  CHECK(x.index.size() == live.size());
  CHECK(x.index.old_size() + 1 == live.size());  // the write that began it went to the new table
  const std::uint64_t old_groups = before.mask + 1;
  // Each write moves the next kMoveGroups groups; every key stays found.
  std::uint64_t writes = 0;
  while (x.index.migrating()) {
    const std::uint64_t cursor = x.index.migration_cursor();
    const std::uint64_t g1 = x.index.acquire_generation();
    const std::uint64_t h = rng();
    live[x.add(h).raw()] = h;
    ++writes;
    if (x.index.migrating()) {
      CHECK(x.index.migration_cursor() == cursor + Index::kMoveGroups);
      CHECK(x.index.unchanged_since(g1));  // a step moves no generation
    } else {
      CHECK_FALSE(x.index.unchanged_since(g1));  // the end does
    }
    CHECK(x.index.size() == live.size());
    if (writes % 7 == 0) CHECK(all_found(x, live));
  }
  CHECK(writes == (old_groups + Index::kMoveGroups - 1) / Index::kMoveGroups);
  // Ended by moves, not by a rebuild: the migration's table is current,
  // and the drained one retired (its pages read as zeros).
  CHECK(x.index.acquire_view().words == during.words);
  CHECK(x.index.acquire_old_view().words == nullptr);
  CHECK(x.index.acquire_serial() == serial0 + 2);
  CHECK(offheap::detail::load_acquire(before.ctrl_word(0)) == 0);
  CHECK(all_found(x, live));
  CHECK(x.index.size() == live.size());
  CHECK(x.index.tombstones() == 0);
}

TEST_CASE("a key is in one table of a migration: found, updated and erased there", "[index][migration]") {
  Harness x(0);
  std::mt19937_64 rng(12);
  auto live = fill_until_migrating(x, rng);
  std::uint64_t in_old = 0, in_new = 0;
  std::uint64_t old_raw = 0, old_h = 0;
  for (const auto& [raw, h] : live) {
    const Index::Found f = x.find(h, Location::from_raw(raw));
    REQUIRE(f.found);
    if ((f.slot & Index::kOldSlot) != 0) {
      ++in_old;
      old_raw = raw;
      old_h = h;
    } else {
      ++in_new;
    }
    CHECK(x.index.location(f.slot) == Location::from_raw(raw));
  }
  CHECK(in_old == x.index.old_size());
  CHECK(in_new == 1);
  REQUIRE(in_old > 0);
  // for_each_full lists both tables, each key once.
  std::map<std::uint64_t, int> seen;
  x.index.for_each_full([&](std::uint64_t, Location l) { ++seen[l.raw()]; });
  CHECK(seen.size() == live.size());
  for (const auto& [raw, n] : seen) CHECK(n == 1);
  // An update in the drained table, then an erase there.
  const Index::Found f = x.find(old_h, Location::from_raw(old_raw));
  x.index.update(f.slot, Location::make(1, 8));
  CHECK(x.index.location(f.slot) == Location::make(1, 8));
  x.hash_of[Location::make(1, 8).raw()] = old_h;
  const std::uint64_t old_before = x.index.old_size();
  x.index.erase(x.find(old_h, Location::make(1, 8)).slot);
  CHECK(x.index.old_size() == old_before - 1);
  CHECK_FALSE(x.find(old_h, Location::make(1, 8)).found);
  live.erase(old_raw);
  // The rest of the migration leaves the erased key out.
  while (x.index.migrating()) {
    const std::uint64_t h = rng();
    live[x.add(h).raw()] = h;
  }
  CHECK(x.index.size() == live.size());
  CHECK(all_found(x, live));
  CHECK_FALSE(x.find(old_h, Location::make(1, 8)).found);
}

TEST_CASE("a walk in progress holds a migration's moves back", "[index][migration]") {
  Harness x(0);
  std::mt19937_64 rng(13);
  auto live = fill_until_migrating(x, rng);
  const unsigned ticket = x.walks.enter();
  x.index.wait_moves();  // returns: no step under way
  const std::uint64_t cursor = x.index.migration_cursor();
  const std::uint64_t old_size = x.index.old_size();
  for (int i = 0; i < 20; ++i) {
    const std::uint64_t h = rng();
    live[x.add(h).raw()] = h;
  }
  CHECK(x.index.migration_cursor() == cursor);
  CHECK(x.index.old_size() == old_size);
  CHECK(all_found(x, live));
  x.walks.leave(ticket);
  const std::uint64_t h = rng();
  live[x.add(h).raw()] = h;
  CHECK(x.index.migration_cursor() == cursor + Index::kMoveGroups);
  CHECK(x.index.old_size() < old_size);
}

TEST_CASE("a migration a walk held back until the new table filled is rebuilt at once", "[index][migration]") {
  Harness x(0);
  std::mt19937_64 rng(14);
  auto live = fill_until_migrating(x, rng);
  const TableView drained = x.index.acquire_old_view();
  const TableView current = x.index.acquire_view();
  const std::uint64_t drained_word = offheap::detail::load_acquire(drained.ctrl_word(drained.mask));
  const unsigned ticket = x.walks.enter();
  const std::uint64_t serial = x.index.acquire_serial();
  while (x.index.acquire_serial() == serial) {
    const std::uint64_t h = rng();
    live[x.add(h).raw()] = h;
    REQUIRE(live.size() < 200000);
  }
  // One table again, holding every key; both replaced tables kept as they
  // were for the walk (frozen), dropped once it leaves.
  CHECK_FALSE(x.index.migrating());
  CHECK(x.index.acquire_view().words != current.words);
  CHECK(x.index.acquire_view().words != drained.words);
  CHECK(all_found(x, live));
  CHECK(x.index.size() == live.size());
  CHECK(offheap::detail::load_acquire(drained.ctrl_word(drained.mask)) == drained_word);
  CHECK(x.index.retired_tables() >= 2);
  x.walks.leave(ticket);
  x.index.drop_retired(x.walks);
  CHECK(offheap::detail::load_acquire(drained.ctrl_word(drained.mask)) == 0);
}

TEST_CASE("clear() during a migration empties both tables", "[index][migration]") {
  Harness x(0);
  std::mt19937_64 rng(15);
  auto live = fill_until_migrating(x, rng);
  const std::uint64_t g = x.index.acquire_generation();
  x.index.clear(x.walks);
  x.hash_of.clear();
  CHECK_FALSE(x.index.migrating());
  CHECK(x.index.acquire_old_view().words == nullptr);
  CHECK(x.index.size() == 0);
  CHECK_FALSE(x.index.unchanged_since(g));
  for (const auto& [raw, h] : live) CHECK_FALSE(x.find(h, Location::from_raw(raw)).found);
  // And it grows again from there.
  std::map<std::uint64_t, std::uint64_t> again;
  for (int i = 0; i < 3000; ++i) {
    const std::uint64_t h = rng();
    again[x.add(h).raw()] = h;
  }
  CHECK(all_found(x, again));
  CHECK(x.index.size() == again.size());
}

TEST_CASE("finish_migration moves the rest at once", "[index][migration]") {
  Harness x(0);
  std::mt19937_64 rng(16);
  auto live = fill_until_migrating(x, rng);
  const TableView current = x.index.acquire_view();
  x.index.finish_migration([&](Location l, std::uint64_t& h) { return x.rehash(l, h); }, x.walks);
  CHECK_FALSE(x.index.migrating());
  CHECK(x.index.old_size() == 0);
  CHECK(x.index.acquire_view().words == current.words);
  CHECK(all_found(x, live));
  CHECK(x.index.size() == live.size());
}

TEST_CASE("a record a migration cannot rehash is left out", "[index][migration]") {
  Harness x(0);
  std::mt19937_64 rng(17);
  auto live = fill_until_migrating(x, rng);
  // Every third entry's record "damaged": the step leaves it out.
  std::uint64_t n = 0, dropped = 0;
  std::map<std::uint64_t, std::uint64_t> kept;
  x.index.finish_migration([&](Location l, std::uint64_t& h) {
    if (++n % 3 == 0) {
      ++dropped;
      return false;
    }
    return x.rehash(l, h);
  }, x.walks);
  CHECK(dropped > 0);
  CHECK(x.index.size() == live.size() - dropped);
}

TEST_CASE("a reader's pair of tables loaded across a publish is refused (the serial's seqlock)",
          "[index][migration][review]") {
  // Review of 3b13d40: a reader preempted between its loads of the table
  // word and the drained table's word could hold a migration's new table
  // beside no drained one (a rebuild that cleared the second word first),
  // or the old table twice (a migration's start). Readers now check the
  // serial around both loads: an odd serial or one that moved refuses the
  // pair (acquire_pair() loads again; the fast path goes the slow way).
  Harness x(0);
  std::mt19937_64 rng(18);
  std::map<std::uint64_t, std::uint64_t> live;
  while (x.index.capacity() <= Index::kRebuildGroups * 7) {
    const std::uint64_t h = rng();
    live[x.add(h).raw()] = h;
  }
  // Across a migration's start.
  std::uint64_t s = x.index.acquire_serial();
  CHECK(s % 2 == 0);
  CHECK(x.index.single_table_since(s));
  for (const auto& [raw, h] : fill_until_migrating(x, rng)) live[raw] = h;
  CHECK_FALSE(x.index.single_table_since(s));
  TableView current{}, drained{};
  const std::uint64_t during = x.index.acquire_pair(current, drained);
  CHECK(during == s + 2);
  CHECK(drained.words != nullptr);
  CHECK(drained.words != current.words);
  CHECK_FALSE(x.index.single_table_since(during));  // two tables: not the fast path's case
  // Across the rebuild of both tables (a walk held the migration back).
  const unsigned ticket = x.walks.enter();
  while (x.index.acquire_serial() == during) {
    const std::uint64_t h = rng();
    live[x.add(h).raw()] = h;
  }
  x.walks.leave(ticket);
  const std::uint64_t after = x.index.acquire_pair(current, drained);
  CHECK(after == during + 2);
  CHECK(drained.words == nullptr);
  CHECK(x.index.single_table_since(after));
  CHECK(all_found(x, live));
}
