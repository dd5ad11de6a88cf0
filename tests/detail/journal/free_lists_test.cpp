// SPDX-License-Identifier: Apache-2.0
#include <offheap/detail/journal/free_lists.hpp>
#include <offheap/detail/journal/journal.hpp>

#include "support/store_name.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

using offheap::detail::FreeLists;
using offheap::detail::Journal;
using offheap::detail::JournalConfig;
using offheap::detail::Location;
namespace record = offheap::detail::record;

TEST_CASE("size classes: 8-byte steps to 4 KiB, powers of two above", "[free_lists]") {
  CHECK(FreeLists::class_of(8) == 0);
  CHECK(FreeLists::class_of(16) == 1);
  CHECK(FreeLists::class_of(4088) == 510);
  CHECK(FreeLists::class_of(4096) == 511);
  CHECK(FreeLists::class_of(4104) == 512);
  CHECK(FreeLists::class_of(8184) == 512);
  CHECK(FreeLists::class_of(8192) == 513);
  CHECK(FreeLists::class_of(16383 & ~7ull) == 513);
  CHECK(FreeLists::class_of(std::uint64_t{1} << 47) == 547);
  CHECK(FreeLists::class_of((std::uint64_t{1} << 48) - 8) == 547);
  CHECK(FreeLists::kClasses == 548);
  for (unsigned c = 0; c < FreeLists::kClasses; ++c) {
    CHECK(FreeLists::class_of(FreeLists::class_min_capacity(c)) == c);
    if (c > 0) CHECK(FreeLists::class_of(FreeLists::class_min_capacity(c) - 8) == c - 1);
  }
}

namespace {
struct Fixture {
  const offheap::detail::StoreName& name = offheap_test::store_name("free-list test");
  Journal journal{JournalConfig{}, name};
  FreeLists lists{journal, name};
  std::uint64_t stamp = 0;

  // A slot of `capacity` payload bytes at the journal's tail, freed.
  Location freed(std::uint64_t capacity) {
    const Location loc = journal.append(record::kHeaderBytes + capacity,
                                        [](Location, std::byte*, std::uint64_t) {});
    lists.push(journal.at(loc), loc, capacity, stamp += 2, false);
    return loc;
  }
};
}  // namespace

TEST_CASE("an exact class hands back its records last in, first out", "[free_lists]") {
  Fixture f;
  const Location a = f.freed(64), b = f.freed(64);
  CHECK(f.lists.total_records() == 2);
  CHECK(f.lists.class_records(FreeLists::class_of(64)) == 2);
  CHECK(f.lists.class_bytes(FreeLists::class_of(64)) == 128);
  FreeLists::Taken t = f.lists.take(64);
  CHECK(t.loc == b);
  CHECK(t.capacity == 64);
  t = f.lists.take(64);
  CHECK(t.loc == a);
  CHECK(f.lists.take(64).loc.is_none());
  CHECK(f.lists.total_records() == 0);
  CHECK(f.lists.total_bytes() == 0);
}

TEST_CASE("a request takes the smallest class that fits", "[free_lists]") {
  Fixture f;
  const Location big = f.freed(1024);
  const Location mid = f.freed(128);
  f.freed(16);
  const FreeLists::Taken t = f.lists.take(72);
  CHECK(t.loc == mid);
  CHECK(t.capacity == 128);
  CHECK(f.lists.take(200).loc == big);
  CHECK(f.lists.take(24).loc.is_none());  // only the 16 is left
  CHECK(f.lists.total_records() == 1);
}

TEST_CASE("in a power-of-two class only a head that fits is taken", "[free_lists]") {
  Fixture f;
  const Location small = f.freed(5000);  // class [4104, 8192)
  CHECK(f.lists.take(6000).loc.is_none());
  const Location large = f.freed(20000);  // class [16384, 32768)
  CHECK(f.lists.take(6000).loc == large);
  CHECK(f.lists.take(4500).loc == small);
}

TEST_CASE("a freed record carries its links in the payload and a new stamp", "[free_lists]") {
  Fixture f;
  const Location a = f.freed(32);
  const Location b = f.freed(32);
  const std::byte* rb = f.journal.at(b);
  CHECK(record::read_meta(rb).state() == record::State::free);
  CHECK(record::free_next(rb) == a);
  CHECK(record::free_prev(rb).is_none());
  CHECK(record::free_prev(f.journal.at(a)) == b);
  CHECK(record::free_next(f.journal.at(a)).is_none());
  CHECK(record::read_stamp(rb) > record::read_stamp(f.journal.at(a)));
}

TEST_CASE("a record leaves its list from the middle, head or end", "[free_lists]") {
  Fixture f;
  const Location a = f.freed(48), b = f.freed(48), c = f.freed(48), d = f.freed(48);
  // The list is d, c, b, a.
  CHECK(f.lists.unlink(b, 48));  // middle
  CHECK(record::free_next(f.journal.at(c)) == a);
  CHECK(record::free_prev(f.journal.at(a)) == c);
  CHECK(f.lists.unlink(d, 48));  // head
  CHECK(record::free_prev(f.journal.at(c)).is_none());
  CHECK(f.lists.unlink(a, 48));  // end
  CHECK(record::free_next(f.journal.at(c)).is_none());
  CHECK(f.lists.total_records() == 1);
  CHECK(f.lists.take(48).loc == c);
  CHECK(f.lists.take(48).loc.is_none());
  CHECK(f.lists.total_bytes() == 0);
}

TEST_CASE("clear forgets every free record", "[free_lists]") {
  Fixture f;
  for (int i = 0; i < 100; ++i) f.freed(8 * (2 + i % 20));
  CHECK(f.lists.total_records() == 100);
  f.lists.clear();
  CHECK(f.lists.total_records() == 0);
  CHECK(f.lists.total_bytes() == 0);
  CHECK(f.lists.take(16).loc.is_none());
}

// What a damaged file may hold where a list leads (a store reopened from its
// state files reads no record): each is refused, the class's list dropped
// and counted, and nothing is written through it.
TEST_CASE("damaged free records and links are never followed or written through", "[free_lists]") {
  const auto payload = [](Fixture& f, Location l) {
    return record::payload_words(f.journal.at(l));
  };
  const auto set_word = [](std::uint64_t* w, std::uint64_t v) { *w = v; };
  const auto meta_word = [](Fixture& f, Location l) {
    return reinterpret_cast<std::uint64_t*>(f.journal.at(l) + 8);
  };

  SECTION("a zeroed capacity") {
    Fixture f;
    f.freed(48);
    const Location b = f.freed(48);
    record::Meta m = record::read_meta(f.journal.at(b));
    m.value_len = 0;
    set_word(meta_word(f, b), m.encode());
    CHECK_FALSE(f.lists.sound(b, FreeLists::class_of(48)));
    CHECK(f.lists.take(48).loc.is_none());  // the head fails: the list is dropped
    CHECK(f.lists.damaged() == 1);
    CHECK(f.lists.class_records(FreeLists::class_of(48)) == 0);
  }
  SECTION("a capacity that is no multiple of 8, or runs past the chunk") {
    for (const std::uint64_t cap : {std::uint64_t{52}, std::uint64_t{1} << 30}) {
      Fixture f;
      const Location a = f.freed(48);
      record::Meta m = record::read_meta(f.journal.at(a));
      m.value_len = static_cast<std::uint32_t>(cap);
      set_word(meta_word(f, a), m.encode());
      CHECK_FALSE(f.lists.sound(a, FreeLists::class_of(48)));
      CHECK(f.lists.take(16).loc.is_none());
      CHECK(f.lists.damaged() == 1);
    }
  }
  SECTION("a footer that disagrees with the header") {
    Fixture f;
    const Location a = f.freed(48);
    set_word(payload(f, a) + 5, (40u << 1) | 1);
    CHECK_FALSE(f.lists.sound(a, FreeLists::class_of(48)));
  }
  SECTION("a next link misaligned, outside, to a live record or another class") {
    const Location outside = Location::make(3, 0);
    for (int kind = 0; kind < 4; ++kind) {
      INFO("kind " << kind);
      Fixture f;
      const Location other = f.freed(64);  // another class
      const Location a = f.freed(48);
      const Location b = f.freed(48);  // the list of 48: b, a
      const Location live = f.journal.append(record::kHeaderBytes + 48,
                                             [](Location, std::byte*, std::uint64_t) {});
      record::write_live(f.journal.at(live), f.stamp += 2, "k", "v", 0, 48, false);
      const std::uint64_t before = *payload(f, live);
      Location bad = outside;
      if (kind == 0) bad = Location::from_raw(a.raw() + 4);  // misaligned: reads as a (sound)
      if (kind == 2) bad = live;
      if (kind == 3) bad = other;
      set_word(payload(f, b), bad.raw());  // b's next
      const bool ok = f.lists.unlink(b, 48);
      if (kind == 0) {
        // The low bits are ignored: the link leads to a, which links back.
        CHECK(ok);
        continue;
      }
      CHECK_FALSE(ok);
      CHECK(f.lists.damaged() == 1);
      CHECK(*payload(f, live) == before);  // nothing written into the live record
      CHECK(f.lists.class_records(FreeLists::class_of(48)) == 0);
      // The dropped class is skipped; other classes are untouched.
      CHECK(f.lists.take(48).loc == other);
    }
  }
  SECTION("a record whose neighbour does not link back, or that is not on its list") {
    Fixture f;
    const Location a = f.freed(48);
    const Location b = f.freed(48);
    const Location c = f.freed(48);  // list: c, b, a
    set_word(payload(f, a) + 1, c.raw());  // a's prev says c, c's next is b
    CHECK_FALSE(f.lists.unlink(a, 48));
    Fixture g;
    g.freed(48);
    const Location orphan = g.freed(48);
    set_word(payload(g, orphan) + 1, Location::none().raw());  // no prev, yet not the head?
    CHECK(g.lists.unlink(orphan, 48));  // it is the head: fine
    (void)b;
  }
  SECTION("a head that is damaged is never written to by a push") {
    Fixture f;
    const Location a = f.freed(48);
    record::Meta m = record::read_meta(f.journal.at(a));
    m.flags = record::Meta::make_flags(record::State::live, 0, false, 0);
    set_word(meta_word(f, a), m.encode());
    const std::uint64_t prev_word = *(payload(f, a) + 1);
    f.freed(48);  // pushes onto the class whose head is no longer free
    CHECK(*(payload(f, a) + 1) == prev_word);
    CHECK(f.lists.damaged() == 1);
    CHECK(f.lists.class_records(FreeLists::class_of(48)) == 1);
  }
}
