// SPDX-License-Identifier: Apache-2.0
// The contract suite: every policy must pass every test here.
#include <offheap/offheap.hpp>

#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <map>
#include <random>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {

struct NoInPlacePolicy : offheap::StorePolicy {
  static constexpr bool in_place_updates = false;
  static constexpr std::uint8_t id = 201;
};

std::string value_of(std::size_t n, char c) { return std::string(n, c); }

// Tests that look at the physical layout (records next to each other, the
// journal's tail) use one shard: with more, keys land in different journals.
offheap::Options one_shard() {
  offheap::Options o;
  o.shards = 1;
  o.record_stats = true;
  return o;
}

}  // namespace

#define POLICIES offheap::StorePolicy, offheap::SingleWriterPolicy, NoInPlacePolicy

TEMPLATE_TEST_CASE("an empty store answers every read with a miss", "[store]", POLICIES) {
  offheap::Options o;
  o.record_stats = true;
  offheap::OffHeapStore<TestType> s(o);
  std::string out = "untouched";
  CHECK(s.size() == 0);
  CHECK(s.empty());
  CHECK_FALSE(s.contains("k"));
  CHECK_FALSE(s.get("k").has_value());
  CHECK_FALSE(s.get("k", out));
  CHECK_FALSE(s.read("k", [](std::string_view) { FAIL("called on a miss"); }));
  CHECK_FALSE(s.view("k"));
  CHECK_FALSE(s.remove("k"));
  CHECK_FALSE(s.remove("k", "v"));
  CHECK_FALSE(s.replace("k", "v"));
  CHECK_FALSE(s.replace("k", "v", "w"));
  CHECK_FALSE(s.template get_value<int>("k").has_value());
  int visits = 0;
  s.for_each([&](std::string_view, std::string_view) { ++visits; });
  CHECK(visits == 0);
  const offheap::Stats st = s.stats();
  CHECK(st.records == 0);
  CHECK(st.puts == 0);
  CHECK(st.removes == 0);
  CHECK(st.misses == 6);  // contains, get x2, read, view, get_value
  CHECK(st.gets == 6);
}

TEMPLATE_TEST_CASE("put, get, overwrite and remove", "[store]", POLICIES) {
  offheap::OffHeapStore<TestType> s;
  s.put("alpha", "one");
  s.put("beta", "two");
  CHECK(s.size() == 2);
  CHECK(s.get("alpha") == "one");
  CHECK(s.get("beta") == "two");
  s.put("alpha", "uno, but longer than before");
  CHECK(s.get("alpha") == "uno, but longer than before");
  s.put("alpha", "1");
  CHECK(s.get("alpha") == "1");
  CHECK(s.size() == 2);
  CHECK(s.remove("alpha"));
  CHECK_FALSE(s.contains("alpha"));
  CHECK_FALSE(s.remove("alpha"));
  CHECK(s.get("beta") == "two");
  CHECK(s.size() == 1);
}

TEMPLATE_TEST_CASE("empty keys, empty values and binary bytes are ordinary", "[store]", POLICIES) {
  offheap::OffHeapStore<TestType> s;
  const std::string bin_key("\0\xff\0k", 4), bin_value("\0\0\x01\xfe\0", 5);
  s.put("", "empty key");
  s.put("empty value", "");
  s.put(bin_key, bin_value);
  s.put(std::string("\0\xff\0", 3), "prefix of the binary key");
  CHECK(s.get("") == "empty key");
  CHECK(s.get("empty value") == "");
  CHECK(s.get(bin_key) == bin_value);
  CHECK(s.get(std::string("\0\xff\0", 3)) == "prefix of the binary key");
  CHECK(s.size() == 4);
}

TEMPLATE_TEST_CASE("conditional writes follow their conditions", "[store]", POLICIES) {
  offheap::OffHeapStore<TestType> s;
  CHECK(s.put_if_absent("k", "first"));
  CHECK_FALSE(s.put_if_absent("k", "second"));
  CHECK(s.get("k") == "first");
  CHECK(s.replace("k", "third"));
  CHECK(s.get("k") == "third");
  CHECK_FALSE(s.replace("k", "wrong", "fourth"));
  CHECK(s.get("k") == "third");
  CHECK_FALSE(s.replace("k", "thir", "fourth"));  // a prefix is not equal
  CHECK(s.replace("k", "third", "fourth"));
  CHECK(s.get("k") == "fourth");
  CHECK_FALSE(s.remove("k", "third"));
  CHECK(s.contains("k"));
  CHECK(s.remove("k", "fourth"));
  CHECK_FALSE(s.contains("k"));
  CHECK_FALSE(s.replace("k", "x"));
  CHECK_FALSE(s.contains("k"));
  const offheap::Stats st = s.stats();
  CHECK(st.puts == 3);  // put_if_absent, replace, replace-if
  CHECK(st.removes == 1);
}

TEMPLATE_TEST_CASE("get(key, out) reuses the caller's buffer", "[store]", POLICIES) {
  offheap::OffHeapStore<TestType> s;
  s.put("k", value_of(1000, 'x'));
  std::string out;
  out.reserve(2000);
  const char* buffer = out.data();
  CHECK(s.get("k", out));
  CHECK(out == value_of(1000, 'x'));
  CHECK(out.data() == buffer);
  s.put("k", "short");
  CHECK(s.get("k", out));
  CHECK(out == "short");
}

TEMPLATE_TEST_CASE("read runs the callback on the value in place", "[store]", POLICIES) {
  offheap::OffHeapStore<TestType> s;
  s.put("k", "in place");
  std::string seen;
  CHECK(s.read("k", [&](std::string_view v) { seen.assign(v); }));
  CHECK(seen == "in place");
}

TEMPLATE_TEST_CASE("read and view hand the callback the bytes where they lie, in every build",
                   "[store][in_place]", POLICIES) {
  // A copy per call (or per thread) would show as equal addresses for two
  // keys, or as different addresses for one record read twice or on two
  // threads. Values of equal size, so that a reused buffer would not move.
  // (Addresses as const void*: Catch would print a const char* as a string.)
  offheap::OffHeapStore<TestType> s;
  s.put("a", value_of(40, 'a'));
  s.put("b", value_of(40, 'b'));
  // The address of key's value as read() hands it over; null if read()
  // missed or handed over wrong bytes. (No CHECK inside: it also runs on a
  // second thread.)
  const auto where = [&](std::string_view key) -> const void* {
    const void* p = nullptr;
    const bool hit = s.read(key, [&](std::string_view v) {
      p = v == value_of(40, key[0]) ? v.data() : nullptr;
    });
    return hit ? p : nullptr;
  };
  const void* a = where("a");
  const void* b = where("b");
  REQUIRE(a != nullptr);
  REQUIRE(b != nullptr);
  CHECK(a != b);
  CHECK(where("a") == a);  // an unchanged record stays where it is
  CHECK(where("b") == b);
  const void* a_elsewhere = nullptr;
  std::thread([&] { a_elsewhere = where("a"); }).join();
  CHECK(a_elsewhere == a);  // the same bytes on every thread
  const auto address = [](std::string_view v) { return static_cast<const void*>(v.data()); };
  CHECK(s.view("a").read(address) == a);
  CHECK(s.view("b").read(address) == b);
}

TEMPLATE_TEST_CASE("without record_stats a read writes no counter and stats() shows none", "[store]",
                   POLICIES) {
  offheap::Options o = one_shard();
  o.record_stats = false;
  offheap::OffHeapStore<TestType> s(o);
  s.put("a", "1");
  std::string out;
  CHECK(s.get("a", out));
  CHECK_FALSE(s.get("b", out));
  CHECK(s.contains("a"));
  const offheap::Stats st = s.stats();
  CHECK(st.gets == 0);
  CHECK(st.hits == 0);
  CHECK(st.misses == 0);
  CHECK(st.puts == 1);  // writes are counted either way (under the writer lock)
}

TEMPLATE_TEST_CASE("statistics count what happened", "[store]", POLICIES) {
  offheap::OffHeapStore<TestType> s(one_shard());
  s.put("a", "12345678");
  s.put("bb", "x");
  s.put("a", "123");
  std::string out;
  s.get("a", out);
  s.get("zz", out);
  s.contains("bb");
  s.remove("bb");
  const offheap::Stats st = s.stats();
  CHECK(st.puts == 3);
  CHECK(st.gets == 3);
  CHECK(st.hits == 2);
  CHECK(st.misses == 1);
  CHECK(st.removes == 1);
  CHECK(st.records == 1);
  CHECK(st.key_value_bytes == 1 + 3);
  CHECK(st.live_bytes == 24 + 16);  // header + "a123" in the 16-byte minimum payload
  CHECK(st.chunks == 1);
  CHECK(st.shards == 1);
  CHECK(st.index_capacity == 7);  // one group of 7 slots
  CHECK(st.index_load == Approx(1.0 / 7).margin(1.0 / 7));
  CHECK(st.mapped_bytes >= 64 * 1024);
  CHECK(st.mapped_bytes < 2 * 1024 * 1024);  // a small store maps little
  std::uint64_t class_records = 0;
  for (const offheap::FreeClassStats& c : st.free_classes) {
    CHECK(c.records > 0);
    class_records += c.records;
  }
  CHECK(class_records == st.free_records);
  CHECK(st.name == "anonymous store");
}

TEST_CASE("an overwrite that fits rewrites in place, otherwise the old slot is freed", "[store]") {
  offheap::Store s(one_shard());
  s.put("key", value_of(100, 'a'));
  s.put("after", "keeps the records above away from the tail");
  const offheap::Stats a = s.stats();
  s.put("key", value_of(100, 'b'));  // same size: in place
  s.put("key", value_of(90, 'c'));   // smaller, within 3 words of slack: in place
  const offheap::Stats b = s.stats();
  CHECK(b.free_records == a.free_records);
  CHECK(b.journal_bytes == a.journal_bytes);
  CHECK(s.get("key") == value_of(90, 'c'));
  s.put("key", value_of(500, 'd'));  // larger: moves, old slot freed
  s.put("after2", value_of(300, 'z'));  // too big for the freed slot: at the tail
  const offheap::Stats c = s.stats();
  CHECK(c.free_records == b.free_records + 1);
  CHECK(s.get("key") == value_of(500, 'd'));
  s.put("key", value_of(10, 'e'));  // much smaller: shrinks in place, splits off the rest
  const offheap::Stats d = s.stats();
  CHECK(d.free_records == c.free_records + 1);
  CHECK(d.journal_bytes == c.journal_bytes);
  CHECK(s.get("key") == value_of(10, 'e'));
}

TEST_CASE("without in-place updates every overwrite writes a new record", "[store]") {
  offheap::OffHeapStore<NoInPlacePolicy> s(one_shard());
  s.put("key", value_of(100, 'a'));
  s.put("key", value_of(100, 'b'));  // at the tail; the first slot is freed
  CHECK(s.stats().free_records == 1);
  CHECK(s.stats().journal_bytes == 2 * (24 + 104));
  s.put("key", value_of(100, 'c'));  // back in the first slot; the tail slot returns to the tail
  const offheap::Stats st = s.stats();
  CHECK(st.free_records == 0);
  CHECK(st.journal_bytes == 24 + 104);
  CHECK(s.get("key") == value_of(100, 'c'));
}

TEMPLATE_TEST_CASE("a larger free record is split for a smaller one", "[store]", POLICIES) {
  offheap::OffHeapStore<TestType> s(one_shard());
  s.put("big", value_of(1000, 'b'));  // payload 1003 -> 1008
  s.put("tail", "t");                 // keeps the big record away from the tail
  CHECK(s.remove("big"));
  const std::uint64_t journal = s.stats().journal_bytes;
  s.put("small", value_of(100, 's'));  // payload 105 -> 112, the rest stays free
  const offheap::Stats st = s.stats();
  CHECK(st.journal_bytes == journal);  // no growth: the freed record was reused
  CHECK(st.free_records == 1);
  CHECK(st.free_bytes == 1008 - 112 - 24);
  CHECK(s.get("small") == value_of(100, 's'));
  CHECK(s.get("tail") == "t");
}

TEMPLATE_TEST_CASE("removed space is reused before the journal grows", "[store]", POLICIES) {
  offheap::OffHeapStore<TestType> s(one_shard());
  for (int i = 0; i < 5000; ++i) s.put("k" + std::to_string(i), value_of(static_cast<std::size_t>(i % 97), 'v'));
  const std::uint64_t journal = s.stats().journal_bytes;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 5000; ++i) CHECK(s.remove("k" + std::to_string(i)));
    for (int i = 0; i < 5000; ++i) s.put("k" + std::to_string(i), value_of(static_cast<std::size_t>(i % 97), 'w'));
  }
  // Identical sizes come back: at most what merging and splitting shuffle.
  CHECK(s.stats().journal_bytes <= journal + journal / 100);
  for (int i = 0; i < 5000; ++i) {
    REQUIRE(s.get("k" + std::to_string(i)) == value_of(static_cast<std::size_t>(i % 97), 'w'));
  }
}

TEMPLATE_TEST_CASE("the index grows from 8 slots to a million entries", "[store]", POLICIES) {
  offheap::OffHeapStore<TestType> s(one_shard());
  constexpr int kN = 300000;
  for (int i = 0; i < kN; ++i) s.put("key:" + std::to_string(i), std::to_string(i * 3));
  CHECK(s.size() == kN);
  const offheap::Stats st = s.stats();
  CHECK(st.index_capacity == 458752);  // 65,536 groups of 7: the first power of two holding kN under 7/8
  CHECK(st.index_load < 0.875);
  std::string out;
  for (int i = 0; i < kN; ++i) {
    REQUIRE(s.get("key:" + std::to_string(i), out));
    REQUIRE(out == std::to_string(i * 3));
  }
  CHECK_FALSE(s.contains("key:" + std::to_string(kN)));
}

TEMPLATE_TEST_CASE("expected_entries pre-sizes the index", "[store]", POLICIES) {
  offheap::Options o;
  o.expected_entries = 100000;
  offheap::OffHeapStore<TestType> s(o);
  const std::uint64_t cap = s.stats().index_capacity;
  CHECK(cap >= 100000 * 8 / 7);  // room under the 7/8 load limit, spread over shards
  CHECK(cap <= 4 * 100000);
  for (int i = 0; i < 100000; ++i) s.put(std::to_string(i), "v");
  CHECK(s.stats().index_capacity == cap);
}

TEMPLATE_TEST_CASE("large keys and values, and chunk growth", "[store]", POLICIES) {
  offheap::OffHeapStore<TestType> s;
  const std::string long_key(65535, 'K');
  s.put(long_key, "the longest key");
  CHECK(s.get(long_key) == "the longest key");
  std::vector<std::string> values;
  for (int i = 0; i < 20; ++i) {
    values.push_back(value_of(static_cast<std::size_t>(70000 + 4096 * i), static_cast<char>('a' + i)));
    s.put("big" + std::to_string(i), values.back());
  }
  const offheap::Stats st = s.stats();
  CHECK(st.chunks > 2);
  for (int i = 0; i < 20; ++i) CHECK(s.get("big" + std::to_string(i)) == values[static_cast<std::size_t>(i)]);
  CHECK(s.get(long_key) == "the longest key");
}

TEMPLATE_TEST_CASE("clear empties the store, which stays usable", "[store]", POLICIES) {
  offheap::OffHeapStore<TestType> s;
  for (int i = 0; i < 10000; ++i) s.put(std::to_string(i), value_of(50, 'x'));
  auto view = s.view("7");
  const offheap::Stats before = s.stats();
  s.clear();
  CHECK(s.size() == 0);
  CHECK(s.empty());
  CHECK_FALSE(s.contains("7"));
  CHECK(view.status() == offheap::ViewStatus::removed);
  CHECK_THROWS_AS(view.read([](std::string_view) {}), offheap::StaleView);
  for (int i = 0; i < 10000; ++i) s.put(std::to_string(i), value_of(50, 'y'));
  const offheap::Stats after = s.stats();
  CHECK(after.chunks == before.chunks);  // the chunks were reused
  CHECK(after.journal_bytes == before.journal_bytes);
  CHECK(s.get("7") == value_of(50, 'y'));
  CHECK(view.status() == offheap::ViewStatus::updated);
  CHECK_THROWS_AS(view.read([](std::string_view) {}), offheap::StaleView);
}

TEMPLATE_TEST_CASE("for_each visits every record once with its value", "[store]", POLICIES) {
  offheap::OffHeapStore<TestType> s;
  std::map<std::string, std::string> model;
  for (int i = 0; i < 3000; ++i) {
    const std::string k = "k" + std::to_string(i), v = value_of(static_cast<std::size_t>(i % 50), 'a');
    s.put(k, v);
    model[k] = v;
  }
  for (int i = 0; i < 3000; i += 3) {
    s.remove("k" + std::to_string(i));
    model.erase("k" + std::to_string(i));
  }
  std::map<std::string, std::string> seen;
  s.for_each([&](std::string_view k, std::string_view v) {
    CHECK(seen.emplace(std::string(k), std::string(v)).second);
  });
  CHECK(seen == model);
}

TEMPLATE_TEST_CASE("for_each may write to the store, even through index growth", "[store]", POLICIES) {
  offheap::OffHeapStore<TestType> s;
  for (int i = 0; i < 100; ++i) s.put("old" + std::to_string(i), "o");
  std::map<std::string, int> old_visits;
  s.for_each([&](std::string_view k, std::string_view v) {
    if (k.substr(0, 4) == "new:") {  // may or may not be visited; whole if it is
      CHECK(v == "n");
      return;
    }
    CHECK(v == "o");
    ++old_visits[std::string(k)];
    for (int j = 0; j < 100; ++j) s.put("new:" + std::string(k) + "/" + std::to_string(j), "n");
  });
  CHECK(old_visits.size() == 100);
  for (const auto& [k, n] : old_visits) CHECK(n == 1);
  CHECK(s.size() == 100 + 100 * 100);
  CHECK(s.stats().index_capacity >= 100 + 100 * 100);  // it grew during the walk
  CHECK(s.get("new:old42/99") == "n");
}

TEMPLATE_TEST_CASE("typed values round-trip with their tags", "[store]", POLICIES) {
  offheap::OffHeapStore<TestType> s;
  s.put_value("i8", std::int8_t{-5});
  s.put_value("u64", std::uint64_t{1} << 63);
  s.put_value("f", 2.5f);
  s.put_value("d", -0.125);
  s.put_value("b", true);
  s.put_value("c", 'z');
  CHECK(s.template get_value<std::int8_t>("i8") == -5);
  CHECK(s.template get_value<std::uint64_t>("u64") == std::uint64_t{1} << 63);
  CHECK(s.template get_value<float>("f") == 2.5f);
  CHECK(s.template get_value<double>("d") == -0.125);
  CHECK(s.template get_value<bool>("b") == true);
  CHECK(s.template get_value<char>("c") == 'z');
  CHECK_THROWS_AS(s.template get_value<std::uint8_t>("i8"), offheap::Error);
  CHECK_THROWS_AS(s.template get_value<double>("f"), offheap::Error);
  CHECK(s.get("d").value().size() == sizeof(double));  // bytes stay readable
}

TEMPLATE_TEST_CASE("freed neighbours merge, and space at the tail returns to it", "[store]", POLICIES) {
  offheap::OffHeapStore<TestType> s(one_shard());
  s.put("a", value_of(100, 'a'));  // each record: 24 + 104 bytes
  s.put("b", value_of(100, 'b'));
  s.put("c", value_of(100, 'c'));
  s.put("d", value_of(100, 'd'));
  CHECK(s.stats().journal_bytes == 4 * 128);
  CHECK(s.remove("d"));  // the last record: the tail moves back
  CHECK(s.stats().journal_bytes == 3 * 128);
  CHECK(s.stats().free_records == 0);
  CHECK(s.remove("b"));
  CHECK(s.remove("a"));  // absorbs the free "b" that follows it
  offheap::Stats st = s.stats();
  CHECK(st.free_records == 1);
  CHECK(st.free_bytes == 128 + 104);
  s.put("big", value_of(200, 'x'));  // fits the merged record: no growth
  st = s.stats();
  CHECK(st.journal_bytes == 3 * 128);
  CHECK(s.get("big") == value_of(200, 'x'));
  CHECK(s.get("c") == value_of(100, 'c'));
  CHECK(s.size() == 2);
  CHECK(s.verify() == "");
}

TEMPLATE_TEST_CASE("a freed record merges with the free record before it", "[store]", POLICIES) {
  offheap::OffHeapStore<TestType> s(one_shard());
  for (const char* k : {"a", "b", "c", "d"}) s.put(k, value_of(100, k[0]));  // 128 bytes each
  CHECK(s.remove("a"));
  CHECK(s.remove("b"));  // b's predecessor a is free: they become one record
  offheap::Stats st = s.stats();
  CHECK(st.free_records == 1);
  CHECK(st.free_bytes == 128 + 104);
  CHECK(s.remove("c"));  // and c joins them from behind too
  st = s.stats();
  CHECK(st.free_records == 1);
  CHECK(st.free_bytes == 2 * 128 + 104);
  CHECK(s.verify() == "");
  CHECK(s.remove("d"));  // the last: everything returns to the tail
  st = s.stats();
  CHECK(st.free_records == 0);
  CHECK(st.journal_bytes == 0);
  CHECK(s.verify() == "");
  s.put("e", value_of(300, 'e'));
  CHECK(s.get("e") == value_of(300, 'e'));
}

TEMPLATE_TEST_CASE("random churn keeps every invariant", "[store]", POLICIES) {
  offheap::OffHeapStore<TestType> s(one_shard());
  std::mt19937_64 rng(17);
  std::map<std::string, std::string> model;
  const std::string big(3000, 'x');
  for (int op = 0; op < 20000; ++op) {
    const std::string k = "k" + std::to_string(rng() % 300);
    if (rng() % 3 == 0) {
      CHECK(s.remove(k) == (model.erase(k) == 1));
    } else {
      const std::string v = big.substr(0, rng() % 2500);
      s.put(k, v);
      model[k] = v;
    }
    if (op % 97 == 0) REQUIRE(s.verify() == "");
  }
  REQUIRE(s.verify() == "");
  for (const auto& [k, v] : model) REQUIRE(s.get(k) == v);
  CHECK(s.size() == model.size());
}

TEST_CASE("read(key, fn) returns what the validated call of fn returned", "[store]") {
  offheap::Store s{offheap::Options{}};
  s.put("k", "value");
  const std::optional<std::size_t> n = s.read("k", [](std::string_view v) { return v.size(); });
  REQUIRE(n == 5u);
  const std::optional<std::string> copy = s.read("k", [](std::string_view v) { return std::string(v.substr(1)); });
  REQUIRE(copy == "alue");
  int calls = 0;
  const std::optional<int> missed = s.read("absent", [&](std::string_view) { return ++calls; });
  REQUIRE_FALSE(missed.has_value());
  REQUIRE(calls == 0);
  // void fn: whether the key was present, as before.
  REQUIRE(s.read("k", [](std::string_view) {}));
  REQUIRE_FALSE(s.read("absent", [](std::string_view) {}));
}

TEST_CASE("read(key, fn) never returns what fn computed on torn bytes", "[store][concurrency]") {
  // A writer rewrites the value in place, all 'a' or all 'b'; fn says
  // whether the bytes it saw were all one letter. A call on torn bytes
  // computes false, and is thrown away: read() returns only true.
  offheap::Store s{offheap::Options{}};
  const std::string a(4000, 'a'), b(4000, 'b');
  s.put("k", a);
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (std::uint64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) s.put("k", i % 2 ? a : b);
  });
  std::uint64_t returned = 0, wrong = 0;
  for (int i = 0; i < 100000; ++i) {
    const std::optional<bool> uniform = s.read("k", [](std::string_view v) {
      return v.size() == 4000 && v.find_first_not_of(v[0]) == std::string_view::npos;
    });
    returned += uniform.has_value();
    wrong += uniform.has_value() && !*uniform;
  }
  stop = true;
  writer.join();
  REQUIRE(returned == 100000);
  REQUIRE(wrong == 0);
}
