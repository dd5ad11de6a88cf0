// SPDX-License-Identifier: Apache-2.0
// Collection (document/collection.hpp): its operations and errors, and a
// differential test against a plain in-memory model (a std::map of
// documents, queries answered by looking at every document with Value's
// own comparisons): random inserts, updates, removes, index creation and
// drop, and queries of every kind, every answer compared, in anonymous
// memory and in files with reopens in the middle.
#include <offheap/document/collection.hpp>

#include "support/doc_model.hpp"
#include "support/env.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

using offheap::Collection;
using offheap::DocId;
using offheap::Document;
using offheap::DocumentView;
using offheap::IndexKind;
using offheap::Range;
using offheap::Value;
using offheap_test::ids_of;
using offheap_test::range_ids;

namespace {

offheap::Options in_dir(const offheap_test::TempDir& dir) {
  offheap::Options o;
  o.path = dir / "people";
  return o;
}

bool is_errc(const offheap::Error& e, offheap::Errc c) { return e.code() == c; }

}  // namespace

TEST_CASE("A collection stores, updates and removes documents by id", "[document][collection]") {
  offheap::Options o;
  Collection c(o);
  const DocId a = c.insert(Document{{"name", "Ada"}, {"born", 1815}});
  const DocId b = c.insert(Document{{"name", "Alan"}, {"born", 1912}});
  REQUIRE(a != b);
  REQUIRE(c.size() == 2);
  REQUIRE(c.get(a) == Document{{"name", "Ada"}, {"born", 1815}});
  REQUIRE(c.read(b, [](const DocumentView& d) { return d.get("born")->as_int(); }) == std::optional<std::int64_t>(1912));
  REQUIRE_FALSE(c.get(999).has_value());
  REQUIRE_FALSE(c.read(999, [](const DocumentView&) {}));
  // An id given: taken once; later generated ids come above it.
  REQUIRE(c.insert(1000, Document{{"name", "Grace"}}));
  REQUIRE_FALSE(c.insert(1000, Document{{"name", "Other"}}));
  REQUIRE(c.get(1000) == Document{{"name", "Grace"}});
  REQUIRE(c.insert(Document{}) > 1000);
  REQUIRE(c.update(a, Document{{"name", "Ada"}, {"born", 1815}, {"field", "maths"}}));
  REQUIRE_FALSE(c.update(4242, Document{}));
  REQUIRE(c.modify(b, [](Document& d) { d.set("born", d.get("born")->as_int() + 1); }));
  REQUIRE(c.get(b)->get("born")->as_int() == 1913);
  REQUIRE(c.remove(a));
  REQUIRE_FALSE(c.remove(a));
  REQUIRE_FALSE(c.contains(a));
  REQUIRE(c.size() == 3);
  std::set<DocId> seen;
  c.for_each([&](DocId id, const DocumentView&) { seen.insert(id); });
  REQUIRE(seen == std::set<DocId>{b, 1000, 1001});
  REQUIRE_THROWS_AS(c.insert(Collection::kNoId, Document{}), offheap::Error);
  REQUIRE(c.verify().empty());
}

TEST_CASE("A collection's indexes answer equality, ranges and prefixes, and are created and dropped at run time",
          "[document][collection]") {
  offheap::Options o;
  Collection c(o);
  std::vector<DocId> id(60);
  for (int i = 0; i < 60; ++i) {
    id[i] = c.insert(Document{{"n", i}, {"tens", i / 10}, {"name", "user" + std::to_string(i)}});
  }
  // No index yet: refused, with the field named.
  try {
    (void)ids_of(c, "tens", 3);
    FAIL("find without an index");
  } catch (const offheap::Error& e) {
    REQUIRE(is_errc(e, offheap::Errc::invalid_argument));
    REQUIRE(std::string(e.what()).find("'tens'") != std::string::npos);
  }
  REQUIRE(c.create_index("tens", IndexKind::hash));  // backfilled
  REQUIRE_FALSE(c.create_index("tens", IndexKind::hash));
  REQUIRE(c.create_index("n", IndexKind::ordered));
  REQUIRE(c.create_index("name", IndexKind::ordered));
  std::vector<DocId> threes = ids_of(c, "tens", 3);
  std::sort(threes.begin(), threes.end());  // (a hash index keeps its own order)
  REQUIRE(threes == std::vector<DocId>{id[30], id[31], id[32], id[33], id[34], id[35], id[36], id[37], id[38], id[39]});
  REQUIRE(ids_of(c, "n", 7) == std::vector<DocId>{id[7]});  // equality through the ordered index
  REQUIRE(ids_of(c, "tens", 3.0).empty());                   // a real is not an integer
  Range r;
  r.low = 10;
  r.high = 14;
  REQUIRE(range_ids(c, "n", r) == std::vector<DocId>{id[10], id[11], id[12], id[13], id[14]});
  r.low_inclusive = false;
  r.high_inclusive = false;
  REQUIRE(range_ids(c, "n", r) == std::vector<DocId>{id[11], id[12], id[13]});
  r.descending = true;
  r.limit = 2;
  REQUIRE(range_ids(c, "n", r) == std::vector<DocId>{id[13], id[12]});
  Range open_high;
  open_high.low = 57;
  REQUIRE(range_ids(c, "n", open_high) == std::vector<DocId>{id[57], id[58], id[59]});
  Range open_low;
  open_low.high = 1;
  open_low.descending = true;
  REQUIRE(range_ids(c, "n", open_low) == std::vector<DocId>{id[1], id[0]});
  std::vector<DocId> p;
  c.find_prefix("name", "user5", [&](DocId d, const DocumentView&) { p.push_back(d); });
  REQUIRE(p == std::vector<DocId>{id[5], id[50], id[51], id[52], id[53], id[54], id[55], id[56], id[57], id[58], id[59]});
  p.clear();
  c.find_prefix("name", "user5", [&](DocId d, const DocumentView&) { p.push_back(d); }, true, 3);
  REQUIRE(p == std::vector<DocId>{id[59], id[58], id[57]});
  // A visitor that stops.
  std::size_t calls = 0;
  REQUIRE(c.find("tens", 2, [&](DocId, const DocumentView&) { return ++calls < 4; }) == 3);
  // Updates move entries; removes drop them.
  REQUIRE(c.update(id[12], Document{{"n", 1000}, {"tens", 100}}));
  REQUIRE(range_ids(c, "n", r).size() == 2);
  REQUIRE(ids_of(c, "tens", 100) == std::vector<DocId>{id[12]});
  REQUIRE(ids_of(c, "tens", 1).size() == 9);
  REQUIRE(c.remove(id[13]));
  r.limit = SIZE_MAX;
  REQUIRE(range_ids(c, "n", r) == std::vector<DocId>{id[11]});
  REQUIRE(c.verify().empty());
  REQUIRE(c.drop_index("n", IndexKind::ordered));
  REQUIRE_FALSE(c.drop_index("n", IndexKind::ordered));
  REQUIRE_THROWS_AS(range_ids(c, "n", r), offheap::Error);
  REQUIRE(c.indexes() == std::vector<offheap::IndexInfo>{{"tens", IndexKind::hash}, {"name", IndexKind::ordered}});
  REQUIRE(c.verify().empty());
}

TEST_CASE("A collection refuses what it cannot index or do, and keeps what it had", "[document][collection]") {
  offheap::Options o;
  Collection c(o);
  c.create_index("k", IndexKind::ordered);
  const DocId a = c.insert(Document{{"k", "short"}});
  // An ordered key longer than the index takes: refused, nothing written.
  const std::string longer(Collection::kMaxOrderedKey, 'x');
  try {
    c.insert(Document{{"k", longer}});
    FAIL("a value too long for the ordered index");
  } catch (const offheap::Error& e) {
    REQUIRE(is_errc(e, offheap::Errc::invalid_argument));
  }
  REQUIRE_THROWS_AS(c.update(a, Document{{"k", longer}}), offheap::Error);
  REQUIRE(c.get(a) == Document{{"k", "short"}});
  REQUIRE(c.size() == 1);
  // Writing the collection from inside modify(): refused, not a deadlock.
  try {
    c.modify(a, [&](Document&) { c.insert(Document{}); });
    FAIL("a write from inside modify()");
  } catch (const offheap::Error& e) {
    REQUIRE(is_errc(e, offheap::Errc::invalid_argument));
  }
  // Queries from inside modify() and from inside a visitor work.
  std::size_t inner = 0;
  c.modify(a, [&](Document& d) {
    inner = ids_of(c, "k", "short").size();
    d.set("k", "shorter");
  });
  REQUIRE(inner == 1);
  c.find("k", "shorter", [&](DocId, const DocumentView& d) {
    REQUIRE(ids_of(c, "k", "shorter").size() == 1);
    REQUIRE(d.get("k")->as_string() == "shorter");  // the outer view intact after the inner query
  });
  REQUIRE(c.verify().empty());
}

TEST_CASE("A file-backed collection keeps its documents and indexes across a reopen", "[document][collection]") {
  offheap_test::TempDir dir;
  std::vector<DocId> ids;
  {
    Collection c(in_dir(dir));
    c.create_index("city", IndexKind::hash);
    c.create_index("age", IndexKind::ordered);
    for (int i = 0; i < 500; ++i) ids.push_back(c.insert(Document{{"city", i % 3 == 0 ? "Oslo" : "Rome"}, {"age", i % 90}}));
    c.remove(ids[0]);
  }
  Collection c(in_dir(dir));
  REQUIRE(c.size() == 499);
  REQUIRE(c.indexes().size() == 2);
  REQUIRE(ids_of(c, "city", "Oslo").size() == 166);
  Range r;
  r.low = 0;
  r.high = 0;
  REQUIRE(range_ids(c, "age", r).size() == 5);  // 90, 180, 270, 360, 450 (0 removed)
  REQUIRE(c.verify().empty());
  // Ids keep rising across the reopen.
  REQUIRE(c.insert(Document{}) > ids.back());
}

namespace {

using offheap_test::Model;
using offheap_test::check_all;
using offheap_test::check_queries;
using offheap_test::kFields;
using offheap_test::random_doc;
using offheap_test::random_value;

void run_differential(bool file, std::uint64_t seed) {
  offheap_test::TempDir dir;
  offheap::Options o;
  if (file) o = in_dir(dir);
  std::mt19937_64 rng(seed);
  Model m;
  auto c = std::make_unique<Collection>(o);
  const int ops = static_cast<int>(offheap_test::env_u64("OFFHEAP_COLLECTION_OPS", offheap_test::kSanitized ? 3000 : 12000));
  for (int op = 0; op < ops; ++op) {
    INFO("op " << op << ", seed " << seed);
    const unsigned what = static_cast<unsigned>(rng() % 100);
    if (what < 35 || m.docs.empty()) {
      const Document d = random_doc(rng);
      if (rng() % 8 == 0) {
        const DocId want = 1 + rng() % 20000;
        REQUIRE(c->insert(want, d) == (m.docs.count(want) == 0));
        m.docs.emplace(want, d);
      } else {
        const DocId id = c->insert(d);
        REQUIRE(m.docs.count(id) == 0);
        m.docs.emplace(id, d);
      }
    } else if (what < 55) {
      auto it = m.docs.lower_bound(rng() % (m.docs.rbegin()->first + 1));
      if (it == m.docs.end()) it = m.docs.begin();
      const Document d = random_doc(rng);
      REQUIRE(c->update(it->first, d));
      it->second = d;
    } else if (what < 65) {
      auto it = m.docs.lower_bound(rng() % (m.docs.rbegin()->first + 1));
      if (it == m.docs.end()) it = m.docs.begin();
      const std::string f = kFields[rng() % 4];
      const Value v = random_value(rng);
      REQUIRE(c->modify(it->first, [&](Document& d) { d.set(f, v); }));
      it->second.set(f, v);
    } else if (what < 80) {
      const DocId id = rng() % (m.docs.rbegin()->first + 2);
      REQUIRE(c->remove(id) == (m.docs.erase(id) == 1));
    } else if (what < 83) {
      const std::string f = kFields[rng() % 4];
      const IndexKind k = rng() % 2 == 0 ? IndexKind::hash : IndexKind::ordered;
      REQUIRE(c->create_index(f, k) == m.indexes.insert({f, k}).second);
    } else if (what < 85) {
      const std::string f = kFields[rng() % 4];
      const IndexKind k = rng() % 2 == 0 ? IndexKind::hash : IndexKind::ordered;
      REQUIRE(c->drop_index(f, k) == (m.indexes.erase({f, k}) == 1));
    } else {
      check_queries(*c, m, rng, 3);
    }
    if (op % 1000 == 999) check_all(*c, m);
    if (file && op == ops / 2) {
      c->close();
      c = std::make_unique<Collection>(o);
      check_all(*c, m);
    }
  }
  check_all(*c, m);
  check_queries(*c, m, rng, 200);
}

}  // namespace

TEST_CASE("A collection answers as a plain in-memory model does, in memory", "[document][collection][differential]") {
  run_differential(false, offheap_test::env_u64("OFFHEAP_SEED", 101));
}

TEST_CASE("A collection answers as a plain in-memory model does, in files with a reopen",
          "[document][collection][differential]") {
  run_differential(true, offheap_test::env_u64("OFFHEAP_SEED", 202));
}

TEST_CASE("Queries beside a writer return only documents that match, each whole", "[document][collection]") {
  offheap::Options o;
  Collection c(o);
  c.create_index("g", IndexKind::hash);
  c.create_index("v", IndexKind::ordered);
  for (int i = 0; i < 2000; ++i) c.insert(Document{{"g", i % 10}, {"v", i}, {"check", i * 7}});
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    std::mt19937_64 rng(5);
    while (!stop.load(std::memory_order_relaxed)) {
      const DocId id = 1 + rng() % 2000;
      const auto v = static_cast<std::int64_t>(rng() % 4000);
      c.update(id, Document{{"g", v % 10}, {"v", v}, {"check", v * 7}});
    }
  });
  const int rounds = offheap_test::kSanitized ? 30 : 300;
  for (int q = 0; q < rounds; ++q) {
    const std::int64_t g = q % 10;
    c.find("g", g, [&](DocId, const DocumentView& d) {
      REQUIRE(d.get("g")->as_int() == g);
      REQUIRE(d.get("check")->as_int() == d.get("v")->as_int() * 7);
    });
    Range r;
    r.low = q * 10;
    r.high = q * 10 + 400;
    std::int64_t last = -1;
    c.find_range("v", r, [&](DocId, const DocumentView& d) {
      const std::int64_t v = d.get("v")->as_int();
      REQUIRE(v >= q * 10);
      REQUIRE(v <= q * 10 + 400);
      REQUIRE(v >= last);  // in order
      last = v;
      REQUIRE(d.get("check")->as_int() == v * 7);
    });
  }
  stop = true;
  writer.join();
  REQUIRE(c.verify().empty());
}

TEST_CASE("A collection whose indexes directory was lost or replaced rebuilds it at open", "[document][collection]") {
  offheap_test::TempDir dir;
  {
    Collection c(in_dir(dir));
    c.create_index("k", IndexKind::ordered);
    c.create_index("h", IndexKind::hash);
    for (int i = 0; i < 300; ++i) c.insert(Document{{"k", i}, {"h", i % 7}});
  }
  std::filesystem::remove_all(dir / "people" / "indexes");
  {
    Collection c(in_dir(dir));  // clean, but its indexes are gone: rebuilt
    REQUIRE(ids_of(c, "h", 3).size() == 43);
    Range r;
    r.low = 10;
    r.high = 19;
    REQUIRE(range_ids(c, "k", r).size() == 10);
    REQUIRE(c.verify().empty());
  }
  Collection c(in_dir(dir));
  REQUIRE(c.verify().empty());
  REQUIRE(ids_of(c, "h", 3).size() == 43);
}

TEST_CASE("A collection's ids stay in range, skip taken ones, and a failed write leaves no duplicate entry",
          "[document][collection]") {
  offheap::Options o;
  o.max_chunk_bytes = 1 << 20;
  Collection c(o);
  c.create_index("f", IndexKind::hash);
  c.create_index("g", IndexKind::ordered);
  REQUIRE(c.insert(Document{{"f", 1}}) == 1);
  REQUIRE(c.insert(3, Document{{"f", 1}}));
  REQUIRE(c.insert(Document{{"f", 1}}) == 4);  // above the id given
  REQUIRE(c.insert(2, Document{{"f", 1}}));    // below: free, taken
  REQUIRE_THROWS_AS(c.insert(Collection::kMaxId + 1, Document{}), offheap::Error);
  REQUIRE_THROWS_AS(c.insert(0, Document{}), offheap::Error);
  REQUIRE_FALSE(c.remove(0));
  REQUIRE_FALSE(c.update(Collection::kNoId, Document{}));
  REQUIRE(c.insert(Collection::kMaxId, Document{{"f", 1}}));
  try {
    c.insert(Document{});
    FAIL("an id past kMaxId");
  } catch (const offheap::Error& e) {
    REQUIRE(e.code() == offheap::Errc::out_of_space);
  }
  // An update whose document the store refuses: the entries it added go
  // again, so the next answers hold each document once.
  const std::string big(2 << 20, 'b');
  REQUIRE_THROWS_AS(c.update(1, Document{{"f", 2}, {"g", 5}, {"big", big}}), offheap::Error);
  REQUIRE(c.get(1) == Document{{"f", 1}});
  REQUIRE(c.update(1, Document{{"f", 2}, {"g", 5}}));
  REQUIRE(ids_of(c, "f", 2) == std::vector<DocId>{1});
  REQUIRE(ids_of(c, "g", 5) == std::vector<DocId>{1});
  REQUIRE(c.verify().empty());
}

TEST_CASE("A collection refuses options that would act on its own records, and nested writer locks are refused, "
          "not deadlocked", "[document][collection]") {
  offheap::Options ttl;
  ttl.default_ttl = std::chrono::seconds(10);
  REQUIRE_THROWS_AS(Collection(ttl), offheap::Error);
  offheap::Options heard;
  heard.on_removal = [](std::string_view, std::string_view, offheap::RemovalCause) {};
  REQUIRE_THROWS_AS(Collection(heard), offheap::Error);
  offheap::Options o;
  Collection a(o), b(o);
  const DocId id = a.insert(Document{{"n", 1}});
  bool refused = false;
  a.modify(id, [&](Document& d) {
    b.insert(Document{{"from", "a's modify"}});  // another collection: fine
    try {
      a.insert(Document{});
    } catch (const offheap::Error& e) {
      refused = e.code() == offheap::Errc::invalid_argument;
    }
    d.set("n", 2);
  });
  REQUIRE(refused);
  REQUIRE(b.size() == 1);
  REQUIRE(a.get(id) == Document{{"n", 2}});
}
