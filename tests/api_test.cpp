// The day-one API of issue 13 besides compute and batches: errors without
// exceptions (std::error_code, Errc's category), Errc::closed for both
// kinds of store, options an anonymous store refuses, RecordView::try_read,
// resumable walks (scan, scan_keys, for_each_key), codecs (put_as, get_as)
// and their layout check across a reopen.
#include <catch2/catch.hpp>

#include <offheap/offheap.hpp>
#include <support/scratch_dir.hpp>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace {

using offheap::Errc;

template <class F>
std::optional<Errc> error_of(F&& fn) {
  try {
    fn();
  } catch (const offheap::Error& e) {
    return e.code();
  }
  return std::nullopt;
}

std::string value_of(std::string_view key) { return "value of " + std::string(key); }

}  // namespace

// A record type of a test's own, with a codec whose layout version the
// tests change (Person2 reads what Person wrote, under a new version).
struct Person {
  std::string name;
  std::uint32_t age = 0;
};
struct Person2 {
  std::string name;
  std::uint32_t age = 0;
};
template <>
struct offheap::Codec<Person> {
  static constexpr std::uint8_t tag = 200;
  static constexpr std::uint16_t version = 1;
  static std::size_t size(const Person& p) noexcept { return 4 + p.name.size(); }
  static void encode(const Person& p, std::span<std::byte> out) noexcept {
    std::memcpy(out.data(), &p.age, 4);
    std::memcpy(out.data() + 4, p.name.data(), p.name.size());
  }
  static Person decode(std::span<const std::byte> in) {
    if (in.size() < 4) throw offheap::Error(offheap::Errc::type_mismatch, "a Person of fewer than 4 bytes");
    Person p;
    std::memcpy(&p.age, in.data(), 4);
    p.name.assign(reinterpret_cast<const char*>(in.data()) + 4, in.size() - 4);
    return p;
  }
};
template <>
struct offheap::Codec<Person2> {  // the same tag, a new layout: the name first
  static constexpr std::uint8_t tag = 200;
  static constexpr std::uint16_t version = 2;
  static std::size_t size(const Person2& p) noexcept { return p.name.size() + 4; }
  static void encode(const Person2& p, std::span<std::byte> out) noexcept {
    std::memcpy(out.data(), p.name.data(), p.name.size());
    std::memcpy(out.data() + p.name.size(), &p.age, 4);
  }
  static Person2 decode(std::span<const std::byte> in) {
    Person2 p;
    p.name.assign(reinterpret_cast<const char*>(in.data()), in.size() - 4);
    std::memcpy(&p.age, in.data() + in.size() - 4, 4);
    return p;
  }
};

struct Fussy {
  int n = 0;
};
template <>
struct offheap::Codec<Fussy> {  // refuses negative numbers while encoding
  static constexpr std::uint8_t tag = 201;
  static constexpr std::uint16_t version = 1;
  static std::size_t size(const Fussy&) noexcept { return sizeof(int); }
  static void encode(const Fussy& f, std::span<std::byte> out) {
    if (f.n < 0) throw std::invalid_argument("negative");
    std::memcpy(out.data(), &f.n, sizeof(int));
  }
  static Fussy decode(std::span<const std::byte> in) {
    Fussy f;
    std::memcpy(&f.n, in.data(), sizeof(int));
    return f;
  }
};

TEST_CASE("Errc is a std::error_code enum with its own category", "[api]") {
  const std::error_code ec = Errc::locked;
  CHECK(ec.category().name() == std::string("offheap"));
  CHECK(ec.message() == "locked");
  CHECK(ec == Errc::locked);
  CHECK(ec != Errc::closed);
  CHECK(ec.value() == static_cast<int>(Errc::locked));
  // Portable conditions.
  CHECK(std::error_code(Errc::invalid_argument) == std::errc::invalid_argument);
  CHECK(std::error_code(Errc::out_of_space) == std::errc::not_enough_memory);
  CHECK(std::error_code(Errc::key_too_large) == std::errc::value_too_large);
  CHECK(std::error_code(Errc::read_only) == std::errc::read_only_file_system);
  CHECK(std::error_code(Errc::closed) != std::errc::invalid_argument);
  CHECK(offheap::to_string(Errc::closed) == "closed");
  const offheap::Error e(Errc::corrupt_file, "x");
  CHECK(e.error_code() == Errc::corrupt_file);
}

TEST_CASE("open(options, ec) and the writes taking an error_code throw nothing", "[api]") {
  std::error_code ec = Errc::io_error;  // cleared on success
  std::string message;
  auto store = offheap::Store::open({}, ec, &message);
  REQUIRE(store);
  CHECK(!ec);

  offheap::Options bad;
  bad.sync_interval = std::chrono::milliseconds(0);  // out of its range
  ec.clear();
  auto refused = offheap::Store::open(bad, ec, &message);
  CHECK(refused == nullptr);
  CHECK(ec == Errc::invalid_argument);
  CHECK(message.find("sync_interval") != std::string::npos);

  CHECK(store->put("k", "v", ec) == offheap::Computed::inserted);
  CHECK(!ec);
  CHECK(store->put("k", "w", ec) == offheap::Computed::updated);
  CHECK_FALSE(store->put_if_absent("k", "x", ec));
  CHECK(!ec);
  CHECK(store->replace("k", "w", "y", ec));
  CHECK(store->get("k") == "y");
  CHECK(store->replace("k", "z", ec));
  CHECK(store->put_value("n", std::uint64_t{9}, ec) == offheap::Computed::inserted);
  CHECK(store->get_value<std::uint64_t>("n") == 9u);

  const std::string long_key(offheap::Store::kMaxKeyBytes + 1, 'k');
  CHECK(store->put(long_key, "v", ec) == offheap::Computed::unchanged);
  CHECK(ec == Errc::key_too_large);
  CHECK_FALSE(store->put_if_absent(long_key, "v", ec));
  CHECK(ec == Errc::key_too_large);
  CHECK_FALSE(store->remove(long_key, ec));
  CHECK(ec == Errc::key_too_large);
  CHECK(store->remove("k", "z", ec));
  CHECK(!ec);
  CHECK_FALSE(store->remove("k", ec));
  CHECK(!ec);
  CHECK(store->size() == 1);  // "n"

  store->clear(ec);
  CHECK(!ec);
  CHECK(store->empty());
  store->sync(ec);  // anonymous: nothing to do
  CHECK(!ec);
  store->close(ec);
  CHECK(!ec);
  CHECK_FALSE(store->put_if_absent("k", "v", ec));
  CHECK(ec == Errc::closed);
  CHECK(store->size() == 0);  // nothing written
}

TEST_CASE("close() closes both kinds of store: writes get Errc::closed, reads go on", "[api][files]") {
  offheap_test::ScratchDir tmp("OFFHEAP_TEST_TMPDIR", "offheap-api-close");
  for (const bool files : {false, true}) {
    DYNAMIC_SECTION((files ? "file-backed" : "anonymous")) {
      std::vector<std::pair<std::string, std::string>> removed;
      offheap::Options o;
      if (files) o.path = tmp / "store";
      o.default_ttl = std::chrono::hours(1);
      o.on_removal = [&](std::string_view k, std::string_view v, offheap::RemovalCause) {
        removed.emplace_back(k, v);
      };
      o.background_maintenance = false;
      auto store = offheap::Store::open(o);
      store->put("a", "1");
      store->put("b", "2");
      store->remove("b");  // waits for the listener until maintain() or close()
      CHECK_FALSE(store->closed());
      store->close();
      CHECK(store->closed());
      // The removal waiting was reported by close().
      REQUIRE(removed.size() == 1);
      CHECK(removed[0].first == "b");
      CHECK(error_of([&] { store->put("c", "3"); }) == Errc::closed);
      CHECK(error_of([&] { store->remove("a"); }) == Errc::closed);
      CHECK(error_of([&] { store->clear(); }) == Errc::closed);
      CHECK(error_of([&] { store->compute("a", [](std::optional<std::string_view>) {
              return std::optional<std::string_view>("x");
            }); }) == Errc::closed);
      CHECK(error_of([&] { store->put_value("n", 1); }) == Errc::closed);
      CHECK(store->get("a") == "1");
      CHECK(store->contains("a"));
      CHECK_FALSE(store->contains("c"));
      store->close();  // the second time: nothing
      store->maintain();  // nothing expires or is evicted once closed
      CHECK(store->get("a") == "1");
    }
  }
}

TEST_CASE("an anonymous store refuses a durability it cannot keep", "[api]") {
  for (const auto d : {offheap::Durability::periodic, offheap::Durability::every_write}) {
    offheap::Options o;
    o.durability = d;
    std::error_code ec;
    std::string message;
    CHECK(offheap::Store::open(o, ec, &message) == nullptr);
    CHECK(ec == Errc::invalid_argument);
    CHECK(message.find("file-backed") != std::string::npos);
  }
  offheap::Options o;
  o.verify_checksums = false;  // documented: no effect on an anonymous store
  o.durability = offheap::Durability::none;  // nor this
  offheap::Store s(o);
  s.put("k", "v");
  CHECK(s.get("k") == "v");
}

TEST_CASE("RecordView::try_read says stale instead of throwing", "[api][view]") {
  offheap::Store s;
  s.put("k", "first");
  const auto v = s.view("k");
  CHECK(v.try_read([](std::string_view b) { return std::string(b); }) == "first");
  bool called = false;
  CHECK(v.try_read([&](std::string_view b) { called = b == "first"; }));
  CHECK(called);
  s.put("k", "second");
  CHECK_FALSE(v.try_read([](std::string_view b) { return b.size(); }).has_value());
  CHECK_FALSE(v.try_read([](std::string_view) {}));
  CHECK_THROWS_AS(v.read([](std::string_view b) { return b.size(); }), offheap::StaleView);
  const offheap::Store::View empty;
  CHECK_FALSE(empty.try_read([](std::string_view b) { return b.size(); }).has_value());
  CHECK(v.refresh().try_read([](std::string_view b) { return std::string(b); }) == "second");
}

TEST_CASE("scan walks every record once in steps, with type tags, and stops early", "[api][scan]") {
  offheap::Options o;
  o.shards = 4;
  offheap::Store s(o);
  constexpr int kKeys = 5000;
  for (int i = 0; i < kKeys; ++i) s.put("k" + std::to_string(i), value_of("k" + std::to_string(i)));
  s.put_value("typed", std::uint64_t{7});
  s.put_as("text", std::string("codec"));

  for (const std::size_t step : {std::size_t{1}, std::size_t{7}, std::size_t{1000}, std::size_t{1} << 20}) {
    INFO("step " << step);
    offheap::Cursor c;
    std::map<std::string, int> seen;
    std::size_t total = 0;
    int calls = 0;
    while (!c.done()) {
      const std::size_t n = s.scan(c, step, [&](std::string_view k, std::string_view v, std::uint8_t type) {
        ++seen[std::string(k)];
        if (k == "typed") {
          CHECK(type == 10);
          CHECK(v.size() == 8);
        } else if (k == "text") {
          CHECK(type == offheap::type_tag::string);
        } else {
          CHECK(type == 0);
          CHECK(v == value_of(k));
        }
      });
      CHECK(n <= step);
      total += n;
      ++calls;
      REQUIRE(calls < 2 * kKeys + 100);
    }
    CHECK(total == kKeys + 2);
    CHECK(seen.size() == kKeys + 2);
    for (const auto& [k, n] : seen) CHECK(n == 1);
    CHECK(c.restarts() == 0);
    CHECK(c.shard() == 4);
    CHECK(s.scan(c, 10, [](std::string_view, std::string_view) { FAIL("a done walk called fn"); }) == 0);
  }

  // Early stop: the record fn returned false for counts, and the walk goes
  // on after it.
  offheap::Cursor c;
  std::set<std::string> keys;
  int stops = 0;
  while (!c.done()) {
    s.scan_keys(c, 1000, [&](std::string_view k, std::uint8_t) {
      CHECK(keys.insert(std::string(k)).second);
      if (keys.size() % 100 == 0) {
        ++stops;
        return false;
      }
      return true;
    });
  }
  CHECK(keys.size() == kKeys + 2);
  CHECK(stops == (kKeys + 2) / 100);

  // for_each and for_each_key take the type tag too.
  std::size_t typed = 0, all = 0;
  s.for_each([&](std::string_view, std::string_view, std::uint8_t t) { typed += t == 10; });
  s.for_each_key([&](std::string_view) { ++all; });
  CHECK(typed == 1);
  CHECK(all == kKeys + 2);
}

TEST_CASE("scan: a callback that throws counts its record, the walk resumes after it, missing none",
          "[api][scan]") {
  offheap::Options o;
  o.shards = 2;
  offheap::Store s(o);
  constexpr int kKeys = 2000;
  for (int i = 0; i < kKeys; ++i) s.put("k" + std::to_string(i), "v");
  offheap::Cursor c;
  std::map<std::string, int> seen;
  int calls = 0, throws = 0;
  while (!c.done()) {
    try {
      s.scan(c, 64, [&](std::string_view k, std::string_view) {
        ++seen[std::string(k)];
        if (++calls % 10 == 0) throw std::runtime_error("from the callback");
      });
    } catch (const std::runtime_error&) {
      ++throws;
    }
    REQUIRE(throws < kKeys);
  }
  CHECK(throws == kKeys / 10);
  CHECK(seen.size() == kKeys);  // none missed (every 10th threw mid-group)
  for (const auto& [k, n] : seen) CHECK(n == 1);  // the one that threw counts: not again

  // The same cursor from inside the callback: keys may come again, none is missed.
  offheap::Cursor shared;
  std::set<std::string> met;
  int nested = 0;
  while (!shared.done()) {
    s.scan(shared, 100, [&](std::string_view k, std::string_view) {
      met.insert(std::string(k));
      if (++nested % 50 == 0) {
        s.scan(shared, 7, [&](std::string_view k2, std::string_view) { met.insert(std::string(k2)); });
      }
    });
  }
  CHECK(met.size() == kKeys);
}

TEST_CASE("scan: a table replaced between steps retakes its shard: keys repeat, none missed",
          "[api][scan]") {
  offheap::Options o;
  o.shards = 2;
  o.expected_entries = 64;  // small tables: the inserts below grow them
  offheap::Store s(o);
  for (int i = 0; i < 500; ++i) s.put("stable" + std::to_string(i), "s");
  offheap::Cursor c;
  std::map<std::string, int> seen;
  int added = 0;
  for (int step = 0; !c.done(); ++step) {
    s.scan(c, 50, [&](std::string_view k, std::string_view) { ++seen[std::string(k)]; });
    // Between the first steps: growth (a walk slower than the growth of
    // its shard would be retaken for as long as the growth lasts).
    if (step < 12) {
      for (int j = 0; j < 400; ++j) s.put("grow" + std::to_string(added++), "g");
    }
    REQUIRE(step < 100000);
  }
  for (int i = 0; i < 500; ++i) {
    INFO("stable" << i);
    CHECK(seen["stable" + std::to_string(i)] >= 1);
  }
  CHECK(c.restarts() > 0);  // the growth retook shards
  std::size_t twice = 0;
  for (const auto& [k, n] : seen) twice += n > 1;
  CHECK(twice > 0);
}

TEST_CASE("scan: steps against a writer see every key left alone, whole values, none torn",
          "[api][scan][concurrency]") {
  offheap::Options o;
  o.shards = 4;
  o.expected_entries = 256;
  offheap::Store s(o);
  constexpr int kStable = 3000;
  for (int i = 0; i < kStable; ++i) s.put("stable" + std::to_string(i), value_of("stable" + std::to_string(i)));
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (std::uint64_t n = 0; !stop.load(std::memory_order_relaxed); ++n) {
      const std::string k = "churn" + std::to_string(n % 20000);
      if (n % 3 == 2) {
        s.remove(k);
      } else {
        s.put(k, std::string(1 + n % 300, static_cast<char>('a' + n % 26)));
      }
    }
  });
  for (int walk = 0; walk < 5; ++walk) {
    offheap::Cursor c;
    std::set<std::string> seen;
    while (!c.done()) {
      s.scan(c, 97, [&](std::string_view k, std::string_view v) {
        if (k.starts_with("stable")) {
          CHECK(v == value_of(k));
        } else {
          // A churn value is one letter repeated: a torn one would mix.
          REQUIRE(!v.empty());
          CHECK(v.find_first_not_of(v[0]) == std::string_view::npos);
        }
        seen.insert(std::string(k));
      });
    }
    for (int i = 0; i < kStable; ++i) {
      if (!seen.count("stable" + std::to_string(i))) FAIL("walk " << walk << " missed stable" << i);
    }
  }
  stop = true;
  writer.join();
  CHECK(s.verify() == "");
}

TEST_CASE("scan: a cursor given to the same files reopened goes on, retaking its shard",
          "[api][scan][files]") {
  offheap_test::ScratchDir tmp("OFFHEAP_TEST_TMPDIR", "offheap-api-scan");
  offheap::Options o;
  o.path = tmp / "store";
  o.shards = 4;
  std::set<std::string> all;
  offheap::Cursor c;
  std::map<std::string, int> seen;
  {
    offheap::Store s(o);
    for (int i = 0; i < 2000; ++i) {
      all.insert("k" + std::to_string(i));
      s.put("k" + std::to_string(i), "v");
    }
    s.scan(c, 700, [&](std::string_view k, std::string_view) { ++seen[std::string(k)]; });
  }
  REQUIRE_FALSE(c.done());
  offheap::Store s(o);
  while (!c.done()) s.scan(c, 300, [&](std::string_view k, std::string_view) { ++seen[std::string(k)]; });
  for (const std::string& k : all) CHECK(seen[k] >= 1);
  CHECK(seen.size() == all.size());
  CHECK(c.restarts() == 1);

  offheap::Options two = o;
  two.path = tmp / "two";
  two.shards = 2;
  offheap::Store small(two);
  // A cursor standing in shard 3 is refused by a store of 2 shards.
  offheap::Cursor in3;
  while (in3.shard() < 3) s.scan_keys(in3, 100, [](std::string_view) {});
  REQUIRE_FALSE(in3.done());
  CHECK(error_of([&] { small.scan_keys(in3, 1, [](std::string_view) {}); }) == Errc::invalid_argument);
}

TEST_CASE("codecs: strings, vectors and a codec of one's own round-trip, tags are checked",
          "[api][codec]") {
  offheap::Store s;
  CHECK(s.put_as("s", std::string("hello")) == offheap::Computed::inserted);
  CHECK(s.put_as("empty", std::string()) == offheap::Computed::inserted);
  s.put_as("v", std::vector<double>{1.5, -2.25, 3});
  s.put_as("vi", std::vector<std::int32_t>{1, 2, 3});
  s.put_as("p", Person{"Ada", 36});
  s.put_as("n", std::uint64_t{42});  // no codec: put_value's fast path
  s.put_as("big", std::string(100000, 'x'));

  CHECK(s.get_as<std::string>("s") == "hello");
  CHECK(s.get_as<std::string>("empty") == "");
  CHECK(s.get_as<std::vector<double>>("v") == std::vector<double>{1.5, -2.25, 3});
  CHECK(s.get_as<std::vector<std::int32_t>>("vi") == std::vector<std::int32_t>{1, 2, 3});
  const auto p = s.get_as<Person>("p");
  REQUIRE(p);
  CHECK(p->name == "Ada");
  CHECK(p->age == 36);
  CHECK(s.get_as<std::uint64_t>("n") == 42u);
  CHECK(s.get_value<std::uint64_t>("n") == 42u);
  CHECK(s.get_as<std::string>("big") == std::string(100000, 'x'));
  CHECK_FALSE(s.get_as<std::string>("absent").has_value());
  // The stored bytes: the version, then what encode() wrote.
  CHECK(s.get("s") == std::string("\x01\x00hello", 7));

  // Another codec's record, bytes, another element type: refused.
  CHECK(error_of([&] { (void)s.get_as<std::string>("p"); }) == Errc::type_mismatch);
  CHECK(error_of([&] { (void)s.get_as<std::vector<std::int32_t>>("v"); }) == Errc::type_mismatch);
  s.put("raw", "hello");
  CHECK(error_of([&] { (void)s.get_as<std::string>("raw"); }) == Errc::type_mismatch);
  CHECK(error_of([&] { (void)s.get_as<std::string>("n"); }) == Errc::type_mismatch);
  CHECK(error_of([&] { (void)s.get_value<std::uint64_t>("s"); }) == Errc::type_mismatch);
  // A codec that throws while encoding leaves the key as it was.
  CHECK_THROWS_AS(s.put_as("s", Fussy{-1}), std::invalid_argument);
  CHECK(s.get_as<std::string>("s") == "hello");
  CHECK_THROWS_AS(s.put_as("fussy", Fussy{-1}), std::invalid_argument);
  CHECK_FALSE(s.contains("fussy"));
  s.put_as("fussy", Fussy{5});
  CHECK(s.get_as<Fussy>("fussy")->n == 5);
  CHECK(s.verify() == "");
}

TEST_CASE("codecs: put_as against readers: every value read is whole", "[api][codec][concurrency]") {
  offheap::Options o;
  o.shards = 2;
  offheap::Store s(o);
  for (int k = 0; k < 64; ++k) s.put_as("c" + std::to_string(k), std::string(8, 'a'));
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (std::uint64_t n = 0; !stop.load(std::memory_order_relaxed); ++n) {
      s.put_as("c" + std::to_string(n % 64), std::string(1 + n % 200, static_cast<char>('a' + n % 26)));
      // Churn beside them: freed slots are reused by the next put_as while
      // readers may still hold their old locations.
      const std::string x = "x" + std::to_string(n % 512);
      if (n % 2 == 0) {
        s.put(x, std::string(1 + n % 300, 'x'));
      } else {
        s.remove(x);
      }
    }
  });
  std::uint64_t reads = 0;
  for (int round = 0; round < 2000; ++round) {
    for (int k = 0; k < 64; ++k) {
      const auto v = s.get_as<std::string>("c" + std::to_string(k));
      REQUIRE(v);
      REQUIRE(!v->empty());
      CHECK(v->find_first_not_of((*v)[0]) == std::string::npos);  // one letter: not torn
      ++reads;
    }
    if (round % 100 == 0) {
      offheap::Cursor c;
      while (!c.done()) s.scan_keys(c, 50, [](std::string_view) {});
    }
  }
  stop = true;
  writer.join();
  CHECK(reads == 2000u * 64u);
  CHECK(s.verify() == "");
}

TEST_CASE("codecs: a persisted store refuses a value whose codec layout version changed",
          "[api][codec][files]") {
  offheap_test::ScratchDir tmp("OFFHEAP_TEST_TMPDIR", "offheap-api-codec");
  offheap::Options o;
  o.path = tmp / "store";
  {
    offheap::Store s(o);
    s.put_as("ada", Person{"Ada", 36});
    s.put_as("names", std::string("a,b,c"));
  }
  offheap::Store s(o);
  // The same program's codec still reads it, across the restart.
  const auto p = s.get_as<Person>("ada");
  REQUIRE(p);
  CHECK(p->name == "Ada");
  CHECK(p->age == 36);
  // A program whose codec of tag 200 moved to version 2 gets an error, not
  // a Person2 decoded from version 1's bytes.
  try {
    (void)s.get_as<Person2>("ada");
    FAIL("a value of layout version 1 was decoded by version 2");
  } catch (const offheap::Error& e) {
    CHECK(e.code() == Errc::type_mismatch);
    const std::string what = e.what();
    CHECK(what.find("layout version 1") != std::string::npos);
    CHECK(what.find("reads version 2") != std::string::npos);
  }
  // Rewritten under version 2, it reads.
  s.put_as("ada", Person2{"Ada", 37});
  const auto p2 = s.get_as<Person2>("ada");
  REQUIRE(p2);
  CHECK(p2->name == "Ada");
  CHECK(p2->age == 37);
  CHECK(error_of([&] { (void)s.get_as<Person>("ada"); }) == Errc::type_mismatch);
  CHECK(s.get_as<std::string>("names") == "a,b,c");
}

TEST_CASE("oversized keys: reads answer absent, every write refuses", "[api][bad_input]") {
  offheap::Store s;
  const std::string key(offheap::Store::kMaxKeyBytes + 1, 'k');
  CHECK_FALSE(s.get_as<std::string>(key).has_value());
  CHECK(error_of([&] { s.put_as(key, std::string("v")); }) == Errc::key_too_large);
  CHECK(error_of([&] { s.compute(key, [](std::optional<std::string_view>) {
          return std::optional<std::string_view>();
        }); }) == Errc::key_too_large);
  CHECK(s.empty());
}
