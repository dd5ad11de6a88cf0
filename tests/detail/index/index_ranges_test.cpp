// SPDX-License-Identifier: Apache-2.0
// Review 10: the address space that replaced index tables keep. index.hpp
// promises "at most four times the current table's address space per
// shard" and that kept ranges go "until the index goes". Tables replaced
// while a walk (for_each) is in progress are all given back at once when
// it ends; only two per size become spares, the others went to lost_,
// which nothing ever reuses or unmaps (not even ~Index).
#include <offheap/detail/index/index.hpp>

#include "support/store_name.hpp"

#include <catch2/catch.hpp>

#include <cerrno>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

using offheap::detail::Index;
using offheap::detail::IndexTable;
using offheap::detail::Location;

namespace {

/// Whether any page of [p, p + bytes) is mapped (mincore fails with ENOMEM
/// on an unmapped page).
bool mapped(const void* p, std::uint64_t bytes) {
  std::vector<unsigned char> v((bytes + 4095) / 4096 + 1);
  return ::mincore(const_cast<void*>(p), bytes, v.data()) == 0;
}

struct Tables {
  const offheap::detail::StoreName& name = offheap_test::store_name("ranges test");
  offheap::detail::WalkGate walks;
  Index index{0, name};
  std::uint64_t next = 1;
  std::set<const IndexTable*> seen;

  void note() { seen.insert(index.table()); }
  /// Fills a few slots (clear() of an empty index replaces nothing).
  void fill() {
    for (int i = 0; i < 3; ++i) {
      const std::uint64_t h = next * 0x9E3779B97F4A7C15ull;
      const Location loc = Location::make(0, 8 * next++);
      const Index::Found f = index.find(h, [&](Location l) { return l == loc; });
      index.insert(f.insert_slot, h, loc);
    }
  }
  /// A walk during which the table is cleared three times, then one clear
  /// after it (which gives back what the walk kept).
  void cycle() {
    const unsigned ticket = walks.enter();
    for (int i = 0; i < 3; ++i) {
      fill();
      index.clear(walks);
      note();
    }
    walks.leave(ticket);
    fill();
    index.clear(walks);
    note();
  }
};

}  // namespace

TEST_CASE("review10: tables replaced during walks do not pile up address space for ever",
          "[index][review10]") {
  Tables x;
  x.note();
  for (int c = 0; c < 50; ++c) x.cycle();
  std::uint64_t kept = 0;
  for (const IndexTable* t : x.seen) {
    if (t != x.index.table() && mapped(t, x.index.mapped_bytes())) kept += x.index.mapped_bytes();
  }
  INFO(x.seen.size() << " distinct table ranges mapped over 50 cycles; " << kept
                     << " bytes still mapped besides the current table ("
                     << x.index.mapped_bytes() << " bytes); stats say " << x.index.retired_bytes());
  // The promise of index.hpp: at most four times the current table.
  CHECK(kept <= 4 * x.index.mapped_bytes());
  // What the stats report is what is kept.
  CHECK(x.index.retired_bytes() == kept);
}

TEST_CASE("review10: an index that goes unmaps every range it kept", "[index][review10]") {
  std::set<const IndexTable*> seen;
  std::uint64_t bytes = 0;
  {
    Tables x;
    x.note();
    for (int c = 0; c < 3; ++c) x.cycle();
    seen = x.seen;
    bytes = x.index.mapped_bytes();
  }
  std::uint64_t still = 0;
  for (const IndexTable* t : seen) still += mapped(t, bytes);
  INFO(seen.size() << " ranges the index mapped; " << still << " still mapped after ~Index");
  CHECK(still == 0);
}

// The same through the public API: for_each's callback may write the store
// (store.hpp), here clear() it; each walk then leaves index ranges behind
// for good (address space, VMAs), and stats() does not count them.
#include <offheap/offheap.hpp>

#include <fstream>

namespace {
std::uint64_t vm_size_kib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmSize:", 0) == 0) return std::stoull(line.substr(7));
  }
  return 0;
}
}  // namespace

TEST_CASE("review10: a store cleared inside walks keeps its address space bounded",
          "[store][review10]") {
  offheap::Options o;
  o.shards = 1;
  o.expected_entries = 200000;  // an index table of a few MiB
  o.background_maintenance = false;
  offheap::Store s(o);
  const std::uint64_t table_kib = s.stats().mapped_bytes / 1024;  // index + journal: an upper bound
  const auto cycle = [&] {
    s.put("a", "1");
    bool once = false;
    s.for_each([&](std::string_view, std::string_view) {
      if (once) return;
      once = true;
      for (int i = 0; i < 3; ++i) {
        s.clear();
        s.put("b", "2");
      }
    });
    s.clear();
  };
  for (int c = 0; c < 3; ++c) cycle();  // settles
  const std::uint64_t before = vm_size_kib();
  for (int c = 0; c < 40; ++c) cycle();
  const std::uint64_t after = vm_size_kib();
  INFO("VmSize " << before << " KiB -> " << after << " KiB over 40 walks; the store maps "
                 << table_kib << " KiB");
  CHECK(after - before <= table_kib);
}

// Two threads walk by turns so that one walk is always in progress (each
// leaves only once the other is inside): the WalkGate's count never falls
// to 0, so drop_retired() never gives anything back. Every table that a
// writer's churn replaces then stays as it was, resident, for as long as
// walks overlap; epochs (the previous design) freed each once the walks
// that could hold it had ended.
#include <atomic>
#include <thread>

TEST_CASE("review10: overlapping walks do not keep every replaced table resident",
          "[store][review10]") {
  offheap::Options o;
  o.shards = 1;
  o.background_maintenance = false;
  offheap::Store s(o);
  for (int i = 0; i < 8; ++i) s.put("stable" + std::to_string(i), "s");
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> a_entered{0}, b_entered{0};
  const auto wait_for = [&](const std::atomic<std::uint64_t>& x, std::uint64_t at_least) {
    while (x.load() < at_least && !stop.load()) std::this_thread::yield();
  };
  std::thread a([&] {
    for (std::uint64_t i = 1; !stop.load(); ++i) {
      bool first = true;
      s.for_each([&](std::string_view, std::string_view) {
        if (first) a_entered.store(i);
        first = false;
        wait_for(b_entered, i);  // leaves walk i only once b is inside its walk i
      });
    }
  });
  std::thread b([&] {
    for (std::uint64_t i = 1; !stop.load(); ++i) {
      bool first = true;
      s.for_each([&](std::string_view, std::string_view) {
        if (first) b_entered.store(i);
        first = false;
        wait_for(a_entered, i + 1);  // leaves walk i only once a is inside its walk i + 1
      });
    }
  });
  // The most tables kept at once in the first second and in the third: a
  // bound, not a count that keeps growing with the time walks overlap.
  std::uint64_t first = 0, third = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int round = 0;; ++round) {
    const auto t = std::chrono::steady_clock::now() - start;
    if (t >= std::chrono::seconds(3)) break;
    // Keys put then removed: the index is rebuilt (replaced) every batch or two.
    for (int i = 0; i < 40; ++i) s.put("churn" + std::to_string(round * 40 + i), "x");
    for (int i = 0; i < 40; ++i) s.remove("churn" + std::to_string(round * 40 + i));
    s.maintain();
    const std::uint64_t kept = s.stats().retired_tables;
    if (t < std::chrono::seconds(1)) first = std::max(first, kept);
    if (t >= std::chrono::seconds(2)) third = std::max(third, kept);
  }
  const std::uint64_t walks = a_entered.load() + b_entered.load();
  stop.store(true);
  a.join();
  b.join();
  INFO(walks << " walks; at most " << first << " replaced tables kept at once in the first second, "
             << third << " in the third");
  CHECK(walks > 10);
  CHECK(third <= first + first / 2 + 32);
}
