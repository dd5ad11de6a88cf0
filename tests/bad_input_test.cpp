// SPDX-License-Identifier: Apache-2.0
// Bad input: every refused call throws offheap::Error with the documented
// Errc and a message that names the store and the sizes involved, and leaves
// the store exactly as it was (error.hpp: "Every public operation either
// completes or throws before it has changed anything"). After each refusal
// the store is compared with a model: same size(), every key with its value
// and type tag, for_each agreeing, and the write counters and memory figures
// of stats() unchanged (a refused write is not a put).
#include <offheap/offheap.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

struct Pod {
  std::uint64_t a;
  std::uint32_t b;
  std::uint32_t c;
};

struct OtherPod {  // same size as Pod, same "object" tag: told apart by size only
  std::uint32_t x[4];
};

struct Tagged {  // same size as Pod, with a user tag of its own
  std::uint64_t a, b;
};

}  // namespace

template <>
struct offheap::ValueTypeTag<Tagged> {
  static constexpr std::uint8_t value = 200;
};

namespace {

using offheap::Errc;

struct Entry {
  std::string bytes;
  std::uint8_t type;
};

/// The figures a refused call must leave as they were.
struct Snapshot {
  std::uint64_t puts, removes, records, key_value_bytes, live_bytes, free_records, free_bytes,
      journal_bytes, mapped_bytes, chunks, size;

  friend bool operator==(const Snapshot&, const Snapshot&) = default;
};

std::string describe(const Snapshot& s) {
  return "puts " + std::to_string(s.puts) + ", removes " + std::to_string(s.removes) +
         ", records " + std::to_string(s.records) + ", kv bytes " +
         std::to_string(s.key_value_bytes) + ", live " + std::to_string(s.live_bytes) +
         ", free " + std::to_string(s.free_records) + "/" + std::to_string(s.free_bytes) +
         ", journal " + std::to_string(s.journal_bytes) + ", mapped " +
         std::to_string(s.mapped_bytes) + ", chunks " + std::to_string(s.chunks) + ", size " +
         std::to_string(s.size);
}

template <class T>
std::string bytes_of(const T& v) {
  std::string s(sizeof(T), '\0');
  std::memcpy(s.data(), &v, sizeof(T));
  return s;
}

/// A store with known contents, including keys that a length truncated to
/// 16 bits would land on: "" (65,536 -> 0), "a" (65,537 -> 1) and a key of
/// 65,535 'a's (the longest key, a prefix of every oversized 'a' key).
class Guarded {
 public:
  /// `longest_key`: false for stores whose chunks cannot hold a 64 KiB key.
  explicit Guarded(offheap::Options o = {}, bool longest_key = true)
      : store(with_name(std::move(o))) {
    put("", "the empty key's value");
    put("a", "a's value");
    if (longest_key) put(std::string(65535, 'a'), "the longest key's value");
    put(std::string(1000, 'a'), std::string(3000, 'v'));
    for (int i = 0; i < 200; ++i) {
      std::string k = "key-" + std::to_string(i);
      if (i % 3 == 0) k += std::string(static_cast<std::size_t>(i), '\0');
      put(k, std::string(static_cast<std::size_t>(i * 5 % 700), static_cast<char>('A' + i % 26)));
    }
    put_value("typed-u64", std::uint64_t{0xDEADBEEFCAFEF00D});
    put_value("typed-u32", std::uint32_t{0x01020304});
    put_value("typed-pod", Pod{1, 2, 3});
    store.remove("key-1");
    model.erase("key-1");
  }

  void put(const std::string& k, const std::string& v) {
    store.put(k, v);
    model[k] = Entry{v, 0};
  }
  template <class T>
  void put_value(const std::string& k, const T& v) {
    store.put_value(k, v);
    model[k] = Entry{bytes_of(v), tag_of<T>()};
  }

  template <class T>
  static constexpr std::uint8_t tag_of() {
    if constexpr (std::is_same_v<T, std::uint64_t>) return 10;
    else if constexpr (std::is_same_v<T, std::uint32_t>) return 8;
    else if constexpr (std::is_same_v<T, Tagged>) return 200;
    else return 64;
  }

  Snapshot snapshot() const {
    const offheap::Stats s = store.stats();
    return {s.puts,       s.removes,       s.records,      s.key_value_bytes,
            s.live_bytes, s.free_records,  s.free_bytes,   s.journal_bytes,
            s.mapped_bytes, s.chunks,      store.size()};
  }

  /// The store holds exactly the model, and `before` (taken before a
  /// refused call) still describes it.
  void check_unchanged(const Snapshot& before) const {
    const Snapshot now = snapshot();
    INFO("before: " << describe(before));
    INFO("after:  " << describe(now));
    CHECK(now == before);
    check_model();
  }

  /// The store holds exactly the model: every key with its bytes and type,
  /// through get, view and for_each.
  void check_model() const {
    CHECK(store.size() == model.size());
    std::string out;
    std::size_t wrong = 0;
    std::string first_wrong;
    for (const auto& [k, e] : model) {
      const auto view = store.view(k);
      const bool ok = store.get(k, out) && out == e.bytes && view && view.type() == e.type &&
                      view.size() == e.bytes.size();
      if (!ok && wrong++ == 0) first_wrong = k.substr(0, 40) + " (" + std::to_string(k.size()) + " bytes)";
    }
    INFO("first wrong key: " << first_wrong);
    CHECK(wrong == 0);
    std::size_t visits = 0, bad = 0;
    store.for_each([&](std::string_view k, std::string_view v) {
      ++visits;
      const auto it = model.find(std::string(k));
      if (it == model.end() || it->second.bytes != v) ++bad;
    });
    CHECK(visits == model.size());
    CHECK(bad == 0);
  }

  offheap::Store store;
  std::map<std::string, Entry> model;

 private:
  static offheap::Options with_name(offheap::Options o) {
    if (o.name.empty()) o.name = "guarded store";
    o.record_stats = true;  // the tests check that oversized keys count misses
    // No maintenance thread: its rounds change the memory figures on their
    // own (a large free record queued for page release maps the queue's
    // first segment), which a "refused call changed nothing" check would
    // blame on the call. Nothing here needs a round.
    o.background_maintenance = false;
    return o;
  }
};

/// Runs `call`, which must throw offheap::Error with `code` and a message
/// containing every string of `needles`; then checks the store unchanged.
void expect_refused(Guarded& g, Errc code, std::vector<std::string> needles,
                    const std::function<void()>& call) {
  const Snapshot before = g.snapshot();
  bool threw = false;
  try {
    call();
  } catch (const offheap::Error& e) {
    threw = true;
    INFO("what(): " << e.what());
    CHECK(e.code() == code);
    const std::string what = e.what();
    for (const std::string& n : needles) {
      INFO("expected in the message: " << n);
      CHECK(what.find(n) != std::string::npos);
    }
  }
  INFO("Errc expected: " << offheap::to_string(code));
  CHECK(threw);
  g.check_unchanged(before);
}

}  // namespace

TEST_CASE("bad input: oversized keys are refused by every write with key_too_large",
          "[bad_input]") {
  Guarded g;
  for (const std::size_t n : {std::size_t{65536}, std::size_t{65537}, std::size_t{65536 + 8},
                              std::size_t{1} << 20, std::size_t{16} << 20}) {
    const std::string key(n, 'a');
    const std::string len = std::to_string(n);
    const std::vector<std::string> needles = {len, "guarded store"};
    INFO("key of " << n << " bytes");
    expect_refused(g, Errc::key_too_large, needles, [&] { g.store.put(key, "v"); });
    expect_refused(g, Errc::key_too_large, needles, [&] { (void)g.store.put_if_absent(key, "v"); });
    expect_refused(g, Errc::key_too_large, needles, [&] { (void)g.store.replace(key, "v"); });
    expect_refused(g, Errc::key_too_large, needles,
                   [&] { (void)g.store.replace(key, "the longest key's value", "v"); });
    expect_refused(g, Errc::key_too_large, needles, [&] { g.store.put_value(key, std::uint64_t{1}); });
    expect_refused(g, Errc::key_too_large, needles, [&] { g.store.put_value(key, Pod{4, 5, 6}); });
    // remove documents Error(key_too_large) too.
    expect_refused(g, Errc::key_too_large, needles, [&] { (void)g.store.remove(key); });
    expect_refused(g, Errc::key_too_large, needles,
                   [&] { (void)g.store.remove(key, "the longest key's value"); });
  }
}

TEST_CASE("bad input: reads of oversized keys answer absent and count a miss", "[bad_input]") {
  Guarded g;
  const Snapshot before = g.snapshot();
  for (const std::size_t n : {std::size_t{65536}, std::size_t{65537}, std::size_t{1} << 20}) {
    INFO("key of " << n << " bytes");
    const std::string key(n, 'a');
    const offheap::Stats s0 = g.store.stats();
    CHECK_FALSE(g.store.contains(key));
    CHECK_FALSE(g.store.get(key).has_value());
    std::string out = "unchanged?";
    CHECK_FALSE(g.store.get(key, out));
    int calls = 0;
    CHECK_FALSE(g.store.read(key, [&](std::string_view) { ++calls; }));
    CHECK(calls == 0);
    const auto view = g.store.view(key);
    CHECK_FALSE(view);
    CHECK(view.status() == offheap::ViewStatus::removed);
    CHECK_THROWS_AS(view.read([](std::string_view) { return 0; }), offheap::StaleView);
    CHECK_FALSE(g.store.get_value<std::uint64_t>(key).has_value());
    const offheap::Stats s1 = g.store.stats();
    CHECK(s1.misses == s0.misses + 6);
    CHECK(s1.hits == s0.hits);
    CHECK(s1.gets == s0.gets + 6);
  }
  g.check_unchanged(before);
}

TEST_CASE("bad input: a key of exactly 65,535 bytes works", "[bad_input]") {
  Guarded g;
  // Two longest keys that differ only in their last byte, and one that
  // differs from the model's 65,535 'a's in its first byte.
  std::string k1(65535, '\0');
  for (std::size_t i = 0; i < k1.size(); ++i) k1[i] = static_cast<char>((i * 131) & 0xFF);
  std::string k2 = k1;
  k2.back() = static_cast<char>(k2.back() ^ 0x5A);
  std::string k3(65535, 'a');
  k3.front() = 'b';
  const std::string v1(5000, 'x'), v2 = "second", v3(100000, '\xFF');

  g.put(k1, v1);
  CHECK(g.store.get(k1) == v1);
  CHECK_FALSE(g.store.contains(k2));
  g.put(k2, v2);
  g.put(k3, v3);
  CHECK(g.store.get(k1) == v1);
  CHECK(g.store.get(k2) == v2);
  CHECK(g.store.get(k3) == v3);
  CHECK(g.store.get(std::string(65535, 'a')) == "the longest key's value");

  const auto view = g.store.view(k2);
  REQUIRE(view);
  CHECK(view.key() == k2);
  CHECK(view.key().size() == 65535);
  CHECK(view.read([&](std::string_view v) { return v == v2; }));

  CHECK_FALSE(g.store.put_if_absent(k1, "no"));
  CHECK(g.store.replace(k1, "replaced"));
  g.model[k1] = Entry{"replaced", 0};
  CHECK_FALSE(g.store.replace(k1, "not the value", "no"));
  CHECK(g.store.replace(k1, "replaced", "replaced again"));
  g.model[k1] = Entry{"replaced again", 0};
  CHECK_FALSE(g.store.remove(k1, "not the value"));
  g.put_value(k2, std::uint64_t{42});
  CHECK(g.store.get_value<std::uint64_t>(k2) == std::optional<std::uint64_t>(42));
  CHECK(view.status() == offheap::ViewStatus::updated);
  g.check_model();

  CHECK(g.store.remove(k1));
  g.model.erase(k1);
  CHECK_FALSE(g.store.contains(k1));
  CHECK_FALSE(g.store.remove(k1));
  CHECK(g.store.get(k2) == bytes_of(std::uint64_t{42}));
  g.check_model();
}

TEST_CASE("bad input: a value larger than the largest chunk is refused with value_too_large",
          "[bad_input]") {
  offheap::Options o;
  o.max_chunk_bytes = std::uint64_t{1} << 20;  // 1 MiB
  Guarded g(o);
  const std::string big(std::size_t{2} << 20, 'B');  // 2 MiB
  const std::vector<std::string> needles = {"2097152", "1048576", "guarded store"};
  expect_refused(g, Errc::value_too_large, needles, [&] { g.store.put("new", big); });
  expect_refused(g, Errc::value_too_large, needles, [&] { g.store.put("a", big); });
  expect_refused(g, Errc::value_too_large, needles, [&] { (void)g.store.put_if_absent("new", big); });
  expect_refused(g, Errc::value_too_large, needles, [&] { (void)g.store.replace("a", big); });
  // Even when the expected value matches, a desired value too large is refused.
  expect_refused(g, Errc::value_too_large, needles,
                 [&] { (void)g.store.replace("a", "a's value", big); });
  // One byte over the largest record: 24 + round8(1 + 1,048,552) > 1 MiB.
  const std::string over(1048552, 'o');
  expect_refused(g, Errc::value_too_large, {"1048552", "1048576"},
                 [&] { g.store.put("k", over); });

  // put_value of a type too large for a 4 KiB chunk.
  offheap::Options tiny;
  tiny.min_chunk_bytes = 4096;
  tiny.max_chunk_bytes = 4096;
  Guarded t(tiny, false);
  struct Big {
    char bytes[5000];
  };
  Big b{};
  expect_refused(t, Errc::value_too_large, {"5000", "4096"}, [&] { t.store.put_value("big", b); });
  expect_refused(t, Errc::value_too_large, {"5000", "4096"},
                 [&] { t.store.put("big", std::string(5000, 'x')); });
}

TEST_CASE("bad input: a value that exactly fits the largest chunk is stored", "[bad_input]") {
  offheap::Options o;
  o.max_chunk_bytes = std::uint64_t{1} << 20;
  Guarded g(o);
  // Record = 24-byte header + key + value padded to 8 = exactly 1 MiB.
  const std::string k1 = "k", k9 = "nine-byte";
  const std::string v1(1048576 - 24 - 1, '1');
  const std::string v9(1048576 - 24 - 9, '9');
  g.put(k1, v1);
  g.put(k9, v9);
  CHECK(g.store.get(k1) == v1);
  CHECK(g.store.get(k9) == v9);
  g.check_model();
  // Overwrite with a small value and back with the exact fit.
  g.put(k1, "small");
  g.put(k1, std::string(v1.size(), 'x'));
  CHECK(g.store.get(k1) == std::string(v1.size(), 'x'));
  expect_refused(g, Errc::value_too_large, {"1048544"},
                 [&] { g.store.put(k9, std::string(v9.size() + 1, '9')); });
  g.check_model();

  // The smallest legal chunks: 4 KiB holds a record of exactly 4 KiB.
  offheap::Options tiny;
  tiny.min_chunk_bytes = 4096;
  tiny.max_chunk_bytes = 4096;
  Guarded t(tiny, false);
  const std::string fits(4096 - 24 - 1, 'f');
  t.put("k", fits);
  t.put("j", fits);  // another one-byte key: a second full chunk
  CHECK(t.store.get("k") == fits);
  t.check_model();
  expect_refused(t, Errc::value_too_large, {}, [&] { t.store.put("k3", fits + "!"); });
}

TEST_CASE("bad input: chunk sizes out of range are refused with invalid_argument", "[bad_input]") {
  const auto refused = [](std::uint64_t min, std::uint64_t max) {
    offheap::Options o;
    o.name = "bad options";
    o.min_chunk_bytes = min;
    o.max_chunk_bytes = max;
    INFO("min_chunk_bytes " << min << ", max_chunk_bytes " << max);
    try {
      offheap::Store s(o);
      FAIL_CHECK("the store was created");
    } catch (const offheap::Error& e) {
      CHECK(e.code() == Errc::invalid_argument);
      CHECK(std::string(e.what()).find("bad options") != std::string::npos);
    }
  };
  const std::uint64_t two48 = std::uint64_t{1} << 48;
  refused(std::uint64_t{2} << 20, std::uint64_t{1} << 20);  // min > max
  refused(std::uint64_t{1} << 30, 65536);
  refused(65536, two48 + 1);                                 // max > 2^48
  refused(65536, two48 * 2);
  refused(65536, std::numeric_limits<std::uint64_t>::max());
  refused(0, std::uint64_t{1} << 20);                        // min < 4 KiB
  refused(two48 + 4096, two48 + 4096);

  // The edges themselves are legal.
  const auto accepted = [](std::uint64_t min, std::uint64_t max) {
    offheap::Options o;
    o.min_chunk_bytes = min;
    o.max_chunk_bytes = max;
    INFO("min_chunk_bytes " << min << ", max_chunk_bytes " << max);
    offheap::Store s(o);
    s.put("key", "value");
    CHECK(s.get("key") == std::optional<std::string>("value"));
  };
  accepted(4096, 4096);
  accepted(4096, two48);
  accepted(std::uint64_t{1} << 20, std::uint64_t{1} << 20);
}

namespace {

/// How an attempt to create a store ended.
struct Creation {
  bool returned = false;  // false: still running when the wait ended
  bool created = false;
  offheap::Errc code{};
  std::string what;
};

/// Creates a store with `o` (and writes and reads one key if that works) on
/// a thread of its own, waiting at most `limit`. A store that does not come
/// back is reported, not waited for: the thread is left running (with the
/// state it writes to), since a constructor that hangs is what this looks for.
Creation create_within(const offheap::Options& o, std::chrono::seconds limit) {
  struct Shared {
    std::mutex m;
    std::condition_variable cv;
    Creation c;
  };
  const auto shared = std::make_shared<Shared>();
  std::thread([shared, o] {
    Creation c;
    try {
      offheap::Store s(o);
      s.put("k", "v");
      c.created = s.get("k") == std::optional<std::string>("v");
    } catch (const offheap::Error& e) {
      c.code = e.code();
      c.what = e.what();
    }
    c.returned = true;
    const std::lock_guard<std::mutex> g(shared->m);
    shared->c = c;
    shared->cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> l(shared->m);
  shared->cv.wait_for(l, limit, [&] { return shared->c.returned; });
  return shared->c;
}

}  // namespace

TEST_CASE("bad input: expected_entries above 2^40 is refused with invalid_argument at once",
          "[bad_input]") {
  const std::uint64_t limit = std::uint64_t{1} << 40;
  // 9e18 on one shard: past the largest power-of-two capacity whose 7/8
  // holds it, where doubling wraps to 0 (last: without the check it hangs).
  for (const std::uint64_t n : {limit + 1, std::uint64_t{8'000'000'000'000'000'000},
                                std::numeric_limits<std::uint64_t>::max(),
                                std::uint64_t{9'000'000'000'000'000'000}}) {
    for (const std::uint32_t shards : {1u, 0u}) {
      offheap::Options o;
      o.name = "huge index";
      o.expected_entries = n;
      o.shards = shards;
      INFO("expected_entries " << n << ", shards " << shards);
      const auto start = std::chrono::steady_clock::now();
      const Creation c = create_within(o, std::chrono::seconds(20));
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      INFO("what(): " << c.what);
      REQUIRE(c.returned);  // else the constructor hangs
      CHECK(seconds < 1.0);
      CHECK_FALSE(c.created);
      CHECK(c.code == Errc::invalid_argument);
      CHECK(c.what.find("huge index") != std::string::npos);
      CHECK(c.what.find("Options::expected_entries") != std::string::npos);
      CHECK(c.what.find(std::to_string(n)) != std::string::npos);
      CHECK(c.what.find("2^40") != std::string::npos);
    }
  }
}

TEST_CASE("bad input: expected_entries at its limit maps lazily or says out_of_space",
          "[bad_input]") {
  // 2^40 entries on one shard: an index of 2^41 slots (18 TiB of address
  // space, pages untouched). Either the OS grants the mapping, and the store
  // works, or it refuses it with out_of_space: never a hang or a crash.
  offheap::Options o;
  o.name = "largest index";
  o.expected_entries = std::uint64_t{1} << 40;
  o.shards = 1;
  const Creation c = create_within(o, std::chrono::seconds(20));
  INFO("what(): " << c.what);
  REQUIRE(c.returned);
  if (!c.created) {
    CHECK(c.code == Errc::out_of_space);
    CHECK(c.what.find("largest index") != std::string::npos);
  }
  // A large but ordinary pre-size works.
  o.expected_entries = 1'000'000;
  o.shards = 0;
  const Creation ordinary = create_within(o, std::chrono::seconds(20));
  INFO("what(): " << ordinary.what);
  CHECK(ordinary.returned);
  CHECK(ordinary.created);
}

TEST_CASE("bad input: get_value of the wrong type or size throws type_mismatch", "[bad_input]") {
  Guarded g;
  g.put_value("tagged", Tagged{7, 8});
  g.put("bytes-8", std::string(8, '\x08'));
  g.put("bytes-16", std::string(16, '\x10'));
  const auto mismatch = [&](const std::function<void()>& call, const std::string& key) {
    expect_refused(g, Errc::type_mismatch, {std::to_string(key.size()) + " bytes", "guarded store"},
                   call);
  };
  // Tag and size differ.
  mismatch([&] { (void)g.store.get_value<std::uint32_t>("typed-u64"); }, "typed-u64");
  mismatch([&] { (void)g.store.get_value<Pod>("typed-u64"); }, "typed-u64");
  // Same size, another tag.
  mismatch([&] { (void)g.store.get_value<std::int64_t>("typed-u64"); }, "typed-u64");
  mismatch([&] { (void)g.store.get_value<double>("typed-u64"); }, "typed-u64");
  mismatch([&] { (void)g.store.get_value<float>("typed-u32"); }, "typed-u32");
  mismatch([&] { (void)g.store.get_value<Tagged>("typed-pod"); }, "typed-pod");
  mismatch([&] { (void)g.store.get_value<Pod>("tagged"); }, "tagged");
  // Bytes written by put() are not a typed value, whatever their length.
  mismatch([&] { (void)g.store.get_value<std::uint64_t>("bytes-8"); }, "bytes-8");
  mismatch([&] { (void)g.store.get_value<Pod>("bytes-16"); }, "bytes-16");
  mismatch([&] { (void)g.store.get_value<std::uint64_t>("a"); }, "a");

  // The right types still read back, and "object" types of one size share a tag.
  CHECK(g.store.get_value<std::uint64_t>("typed-u64") ==
        std::optional<std::uint64_t>(0xDEADBEEFCAFEF00D));
  CHECK(g.store.get_value<std::uint32_t>("typed-u32") == std::optional<std::uint32_t>(0x01020304));
  const auto pod = g.store.get_value<Pod>("typed-pod");
  REQUIRE(pod);
  CHECK((pod->a == 1 && pod->b == 2 && pod->c == 3));
  const auto tagged = g.store.get_value<Tagged>("tagged");
  REQUIRE(tagged);
  CHECK((tagged->a == 7 && tagged->b == 8));
  const auto other = g.store.get_value<OtherPod>("typed-pod");
  REQUIRE(other);
  CHECK(bytes_of(*other) == bytes_of(Pod{1, 2, 3}));
  CHECK_FALSE(g.store.get_value<std::uint64_t>("absent").has_value());
  g.check_model();
}

TEST_CASE("bad input: reading a stale or empty view throws StaleView", "[bad_input]") {
  Guarded g;
  const auto stale = [](const offheap::RecordView<offheap::StorePolicy>& v) {
    try {
      // The callback's result must never reach the caller from a stale view.
      const int r = v.read([](std::string_view) { return 1; });
      FAIL_CHECK("read returned " << r << " from a stale view");
      return false;
    } catch (const offheap::StaleView& e) {
      CHECK(e.code() == Errc::stale_view);
      CHECK(std::string(e.what()).find("stale") != std::string::npos);
      return true;
    }
  };

  // An empty view (missing key), also caught as the base class.
  const auto empty = g.store.view("missing");
  CHECK_FALSE(empty);
  CHECK(empty.status() == offheap::ViewStatus::removed);
  CHECK(stale(empty));
  CHECK_THROWS_MATCHES(empty.read([](std::string_view) {}), offheap::Error,
                       Catch::Predicate<offheap::Error>(
                           [](const offheap::Error& e) { return e.code() == Errc::stale_view; },
                           "code() == stale_view"));
  CHECK_FALSE(empty.refresh());

  // Updated in place (same length), updated elsewhere, removed, re-added.
  auto v = g.store.view("a");
  REQUIRE(v);
  CHECK(v.read([](std::string_view b) { return std::string(b); }) == "a's value");
  g.put("a", "A'S VALUE");  // same length: rewritten in place
  CHECK(v.status() == offheap::ViewStatus::updated);
  CHECK(stale(v));
  const auto copy = v;  // a copy of a stale view is stale too
  CHECK(stale(copy));
  const auto fresh = v.refresh();
  REQUIRE(fresh);
  CHECK(fresh.read([](std::string_view b) { return std::string(b); }) == "A'S VALUE");

  g.put("a", std::string(900, 'L'));  // moved to a larger record
  CHECK(fresh.status() == offheap::ViewStatus::updated);
  CHECK(stale(fresh));

  auto w = g.store.view("typed-u32");
  REQUIRE(w);
  CHECK(w.type() == 8);
  REQUIRE(g.store.remove("typed-u32"));
  g.model.erase("typed-u32");
  CHECK(w.status() == offheap::ViewStatus::removed);
  CHECK(stale(w));
  CHECK_FALSE(w.refresh());
  g.put_value("typed-u32", std::uint32_t{0x01020304});  // same bytes again: still a new record
  CHECK(w.status() == offheap::ViewStatus::updated);
  CHECK(stale(w));
  g.check_model();

  // clear() makes every view stale.
  auto x = g.store.view("key-2");
  REQUIRE(x);
  g.store.clear();
  g.model.clear();
  CHECK(x.status() == offheap::ViewStatus::removed);
  CHECK(stale(x));
  g.put("key-2", "after clear");
  CHECK(x.status() == offheap::ViewStatus::updated);
  CHECK(stale(x));
  g.check_model();
}
