// SPDX-License-Identifier: Apache-2.0
// The heap-free hot path, proven: malloc and operator new are replaced by
// counting versions for this whole binary, and every API call of the hot
// path is run after warm-up with the count watched. A second test checks
// with mallinfo2 that the heap does not grow as records are added.
#include <offheap/offheap.hpp>
#include <offheap/document/collection.hpp>
#include <offheap/memcache/text_session.hpp>

#include <catch2/catch.hpp>

#include <atomic>
#include <thread>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <optional>
#include <span>
#include <filesystem>
#include <malloc.h>
#include <new>
#include <string>
#include <utility>
#include <vector>

extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);
void __libc_free(void*);
}

namespace {
std::atomic<std::uint64_t> g_allocations{0};
void counted() noexcept { g_allocations.fetch_add(1, std::memory_order_relaxed); }
std::uint64_t allocations() noexcept { return g_allocations.load(std::memory_order_relaxed); }
}  // namespace

extern "C" {
void* malloc(std::size_t n) {
  counted();
  return __libc_malloc(n);
}
void* calloc(std::size_t n, std::size_t m) {
  counted();
  return __libc_calloc(n, m);
}
void* realloc(void* p, std::size_t n) {
  counted();
  return __libc_realloc(p, n);
}
void* memalign(std::size_t a, std::size_t n) {
  counted();
  return __libc_memalign(a, n);
}
void* aligned_alloc(std::size_t a, std::size_t n) {
  counted();
  return __libc_memalign(a, n);
}
int posix_memalign(void** out, std::size_t a, std::size_t n) {
  counted();
  void* p = __libc_memalign(a, n);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}
void free(void* p) { __libc_free(p); }
}

void* operator new(std::size_t n) {
  counted();
  if (void* p = __libc_malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new(std::size_t n, std::align_val_t a) {
  counted();
  if (void* p = __libc_memalign(static_cast<std::size_t>(a), n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n, std::align_val_t a) { return operator new(n, a); }
void operator delete(void* p) noexcept { __libc_free(p); }
void operator delete[](void* p) noexcept { __libc_free(p); }
void operator delete(void* p, std::size_t) noexcept { __libc_free(p); }
void operator delete[](void* p, std::size_t) noexcept { __libc_free(p); }
void operator delete(void* p, std::align_val_t) noexcept { __libc_free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { __libc_free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { __libc_free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { __libc_free(p); }

namespace {

// Keys and values are built before measuring, in fixed buffers.
struct Keys {
  explicit Keys(std::size_t n, const char* prefix) : text(n * kWidth) {
    for (std::size_t i = 0; i < n; ++i) {
      std::snprintf(&text[i * kWidth], kWidth + 1 > 0 ? kWidth : 0, "%s%012zu", prefix, i);
    }
  }
  std::string_view operator[](std::size_t i) const { return {&text[i * kWidth], kWidth - 1}; }
  static constexpr std::size_t kWidth = 17;  // 16 characters and the terminator
  std::vector<char> text;
};

template <class F>
std::uint64_t allocations_of(F&& f) {
  const std::uint64_t before = allocations();
  f();
  return allocations() - before;
}

}  // namespace

TEST_CASE("the counting allocator sees allocations", "[alloc]") {
  // The test below would be meaningless if the replacement were not in use.
  const std::uint64_t n = allocations_of([] {
    std::string* s = new std::string(100, 'x');
    void* p = std::malloc(64);
    std::free(p);
    delete s;
  });
  CHECK(n >= 3);
}

namespace {

/// Every hot-path call, measured after one warm-up call of each kind.
/// `sync`: also a sync() inside a measured window (file-backed stores).
void check_hot_path(offheap::Options o, bool sync) {
  constexpr std::size_t kPresent = 20000, kNew = 50000;
  const Keys present(kPresent, "p:");
  const Keys fresh(kNew, "n:");
  const std::string value64(64, 'v'), value200(200, 'w'), value7(7, 's');

  o.expected_entries = kPresent + kNew;
  offheap::Store store(o);
  for (std::size_t i = 0; i < kPresent; ++i) store.put(present[i], value64);
  std::string out;
  out.reserve(4096);
  // Warm-up: one call of each kind, so that per-thread registration is done.
  store.get(present[0], out);
  store.contains(present[0]);
  store.view(present[0]).read([](std::string_view) {});
  store.put(present[0], value64);
  store.remove(present[1]);
  store.put(present[1], value64);
  store.put_value("typed", 1.5);
  (void)store.get_value<double>("typed");

  std::uint64_t hits = 0, sum = 0;
  CHECK(allocations_of([&] {
          for (std::size_t i = 0; i < kPresent; ++i) hits += store.get(present[i], out);
        }) == 0);
  CHECK(hits == kPresent);
  CHECK(out == value64);
  CHECK(allocations_of([&] {
          for (std::size_t i = 0; i < kNew; ++i) hits += store.get(fresh[i], out);
        }) == 0);  // misses
  CHECK(hits == kPresent);
  CHECK(allocations_of([&] {
          for (std::size_t i = 0; i < kPresent; ++i) {
            store.read(present[i], [&](std::string_view v) { sum += v.size(); });
          }
        }) == 0);
  CHECK(sum == kPresent * 64);
  CHECK(allocations_of([&] {
          for (std::size_t i = 0; i < kPresent; ++i) hits += store.contains(present[i]);
        }) == 0);
  CHECK(hits == 2 * kPresent);
  sum = 0;
  CHECK(allocations_of([&] {
          for (std::size_t i = 0; i < kPresent; ++i) {
            auto v = store.view(present[i]);
            sum += v.read([](std::string_view b) { return b.size(); });
          }
        }) == 0);
  CHECK(sum == kPresent * 64);
  CHECK(allocations_of([&] {
          for (std::size_t i = 0; i < kPresent; ++i) store.put(present[i], value7);  // in place
          for (std::size_t i = 0; i < kPresent; ++i) store.put(present[i], value200);  // moves
          for (std::size_t i = 0; i < kPresent; ++i) store.put(present[i], value64);
        }) == 0);
  CHECK(allocations_of([&] {
          for (std::size_t i = 0; i < kNew; ++i) store.put(fresh[i], value64);  // pre-sized
        }) == 0);
  CHECK(store.size() == kPresent + kNew + 1);
  CHECK(allocations_of([&] {
          for (std::size_t i = 0; i < kNew; i += 2) store.remove(fresh[i]);
          for (std::size_t i = 1; i < kNew; i += 2) store.remove(fresh[i], value64);
          for (std::size_t i = 0; i < kNew; ++i) store.put_if_absent(fresh[i], value200);
          for (std::size_t i = 0; i < kNew; ++i) store.replace(fresh[i], value64);
          for (std::size_t i = 0; i < kNew; ++i) store.replace(fresh[i], value64, value7);
        }) == 0);
  CHECK(store.size() == kPresent + kNew + 1);
  double d = 0;
  CHECK(allocations_of([&] {
          for (std::size_t i = 0; i < kPresent; ++i) {
            store.put_value("typed", static_cast<double>(i));
            d += *store.get_value<double>("typed");
          }
        }) == 0);
  CHECK(d == static_cast<double>(kPresent) * (kPresent - 1) / 2);
  CHECK(store.get(fresh[5], out));
  CHECK(out == value7);
  // Atomic read-modify-write: typed counters, and byte values returned as
  // views of the caller's buffer or of the old value.
  char buf[256];
  std::uint64_t computed = 0;
  CHECK(allocations_of([&] {
          for (std::size_t i = 0; i < kPresent; ++i) {
            store.compute_value<std::uint64_t>("counter", [](std::optional<std::uint64_t> n) {
              return std::optional<std::uint64_t>(n.value_or(0) + 1);
            });
            computed += store.compute(present[i], [&](std::optional<std::string_view> old) {
              const std::size_t n = old ? std::min(old->size() + 1, sizeof buf) : 1;
              std::memset(buf, 'c', n);
              return std::optional<std::string_view>(std::string_view(buf, n));
            }) == offheap::Computed::updated;
            store.compute_if_present(present[i], [](std::string_view old) { return std::optional<std::string_view>(old); });
            store.merge(fresh[i], value7, [](std::string_view, std::string_view add) { return std::optional<std::string_view>(add); });
            store.put_value_if_absent<std::uint64_t>("counter", 0);
          }
        }) == 0);
  CHECK(store.get_value<std::uint64_t>("counter") == kPresent);
  CHECK(computed == kPresent);
  CHECK(store.get(present[3], out));
  CHECK(out == std::string(65, 'c'));
  // Many keys at once: the caller's buffers reused.
  {
    std::vector<std::string_view> keys;
    std::vector<std::pair<std::string_view, std::string_view>> entries;
    for (std::size_t i = 0; i < 256; ++i) {
      keys.push_back(present[i]);
      entries.emplace_back(present[i], value64);
    }
    std::vector<std::optional<std::string>> values(keys.size(), std::string(256, 'x'));
    std::size_t found = 0;
    CHECK(allocations_of([&] {
            for (int round = 0; round < 50; ++round) {
              store.put_all(entries);
              found += store.get_all(keys, values);
              store.remove_all(std::span<const std::string_view>(keys).subspan(0, 16));
            }
          }) == 0);
    CHECK(found == 50 * 256);
    CHECK(values[20] == value64);
    store.put_all(entries);  // the 16 back
  }
  // Values written in place: reserve-then-fill, and gather.
  const std::string_view parts[] = {std::string_view(value64).substr(0, 10), std::string_view(value64).substr(10)};
  CHECK(allocations_of([&] {
          for (std::size_t i = 0; i < kPresent; ++i) {
            store.put(present[i], 48, [](std::span<std::byte> d) { std::memset(d.data(), 'f', d.size()); });
            store.put(present[i], std::span<const std::string_view>(parts));
            store.put_if_absent(present[i], 8, [](std::span<std::byte> d) { std::memset(d.data(), 'x', d.size()); });
          }
        }) == 0);
  CHECK(store.get(present[7], out));
  CHECK(out == value64);
  // Codecs (a short std::string decodes into its own buffer), the
  // non-throwing writes and view reads, a step of a keys-only walk.
  const std::string short_text = "short";
  std::size_t decoded = 0, walked = 0, fresh_views = 0;
  std::error_code ec;
  offheap::Cursor cursor;
  store.scan(cursor, 1000, [&](std::string_view, std::string_view) {});  // the thread's walk buffers
  CHECK(allocations_of([&] {
          for (std::size_t i = 0; i < kPresent; ++i) {
            store.put_as("codec", short_text);
            decoded += store.get_as<std::string>("codec")->size();
            store.put(present[i], value64, ec);
            fresh_views += store.view(present[i]).try_read([](std::string_view v) { return v.size(); }).value_or(0);
            if (i % 64 == 0 && !cursor.done()) {  // steps of a walk through the store
              walked += store.scan(cursor, 16, [&](std::string_view, std::string_view v, std::uint8_t) {
                return v.size() < 4096;  // (never false here: every value is smaller)
              });
              walked += store.scan_keys(cursor, 16, [&](std::string_view k) { return !k.empty(); });
            }
          }
        }) == 0);
  CHECK(walked > 0);
  CHECK(decoded == kPresent * short_text.size());
  CHECK(fresh_views == kPresent * 64);
  CHECK(!ec);
  if (sync) {
    CHECK(allocations_of([&] {
            for (std::size_t i = 0; i < kPresent; ++i) store.put(present[i], value200);
            store.sync();  // periodic: frees the superseded records
            for (std::size_t i = 0; i < kPresent; ++i) store.put(present[i], value64);
          }) == 0);
    CHECK(store.verify() == "");
  }
}

}  // namespace

TEST_CASE("hot-path calls allocate nothing after warm-up", "[alloc]") {
  check_hot_path(offheap::Options{}, false);
}

TEST_CASE("hot-path calls of a file-backed store allocate nothing after warm-up", "[alloc][files]") {
  char tmpl[] = "/tmp/offheap-alloc-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::filesystem::path dir = tmpl;
  for (const offheap::Durability d : {offheap::Durability::on_close, offheap::Durability::periodic}) {
    INFO("durability " << offheap::to_string(d));
    offheap::Options o;
    o.path = dir / offheap::to_string(d);
    o.durability = d;
    o.background_maintenance = false;
    o.min_chunk_bytes = 256 << 20;  // one chunk: adding a chunk file is growth, not the hot path
    check_hot_path(o, true);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("the heap does not grow with the number of records", "[alloc]") {
  constexpr std::size_t kRecords = 200000;
  const Keys keys(kRecords, "h:");
  const std::string value(48, 'x');
  offheap::Options o;
  o.expected_entries = kRecords;
  offheap::Store store(o);
  store.put("warm", value);
  store.contains("warm");

  const std::size_t before = mallinfo2().uordblks;
  const std::uint64_t n = allocations_of([&] {
    for (std::size_t i = 0; i < kRecords; ++i) store.put(keys[i], value);
  });
  const std::size_t after = mallinfo2().uordblks;
  CHECK(n == 0);
  CHECK(after == before);
  CHECK(store.size() == kRecords + 1);
  // The records went to mapped memory instead.
  CHECK(store.stats().live_bytes >= kRecords * (16 + 48));
}

TEST_CASE("two readers and a writer allocate nothing after warm-up", "[alloc]") {
  // The concurrency issue's version of the test above: readers on their own
  // threads (with record_stats, each counting on its thread's counter line,
  // whose number it takes on its first read), a writer overwriting, removing
  // and re-adding keys of a pre-sized store. Every call of the window is
  // counted.
  constexpr std::size_t kKeys = 20000;
  const Keys keys(kKeys, "t:");
  const std::string v64(64, 'v'), v200(200, 'w');
  offheap::Options o;
  o.expected_entries = kKeys;
  o.record_stats = true;
  offheap::Store store(o);
  for (std::size_t i = 0; i < kKeys; ++i) store.put(keys[i], v64);

  std::atomic<int> phase{0};  // 0 warm-up, 1 measure, 2 stop
  std::atomic<int> warmed{0};
  std::atomic<std::uint64_t> reader_ops{0}, writer_ops{0}, wrong{0};
  const auto reader = [&](std::size_t seed) {
    std::string out;
    out.reserve(256);
    std::uint64_t ops = 0, bad = 0;
    for (std::size_t i = seed; phase.load(std::memory_order_relaxed) < 2; ++i) {
      const std::string_view k = keys[(i * 7919) % kKeys];
      if (store.get(k, out)) bad += !(out == v64 || out == v200);
      std::size_t n = 0;
      store.read(k, [&](std::string_view v) { n = v.size(); });
      bad += n != 0 && n != 64 && n != 200;
      store.contains(k);
      // Views of keys the writer leaves alone (index 2 mod 3): a stale view
      // throws, and throwing allocates (the exception and its message).
      const auto view = store.view(keys[((i * 7919) % (kKeys / 3)) * 3 + 2]);
      bad += !view || view.read([](std::string_view v) { return v.size() == 64 ? 0 : 1; });
      if (++ops == 1000) warmed.fetch_add(1);
    }
    reader_ops.fetch_add(ops);
    wrong.fetch_add(bad);
  };
  std::thread r1(reader, 1), r2(reader, 2);
  std::uint64_t ops = 0;
  const auto write_round = [&] {
    for (std::size_t i = 0; i < kKeys; i += 3) {
      store.put(keys[i], (i / 3) % 2 ? v64 : v200);  // in place, and moves
      store.remove(keys[i + 1 < kKeys ? i + 1 : i]);
      store.put(keys[i + 1 < kKeys ? i + 1 : i], v64);
      ops += 3;
    }
  };
  while (warmed.load() < 2) write_round();
  write_round();
  phase.store(1);
  const std::uint64_t before = allocations();
  for (int round = 0; round < 20; ++round) write_round();
  const std::uint64_t during = allocations() - before;
  phase.store(2);
  r1.join();
  r2.join();
  writer_ops.store(ops);
  CHECK(during == 0);
  CHECK(wrong.load() == 0);
  CHECK(reader_ops.load() > 2000);
  WARN(reader_ops.load() << " reader iterations, " << writer_ops.load() << " writes, "
                         << during << " allocations while measuring");
}

TEST_CASE("writes with TTLs, their reads and the timing wheel's expiries allocate nothing after warm-up",
          "[alloc][expiry]") {
  struct TestClock : offheap::Clock {
    std::atomic<std::uint64_t> t{1'700'000'000'000};
    std::uint64_t now_ms() const noexcept override { return t.load(std::memory_order_relaxed); }
  } clock;
  constexpr std::size_t kKeys = 20000;
  const Keys keys(kKeys, "x:");
  const std::string value(40, 'e');
  offheap::Options o;
  o.clock = &clock;
  o.background_maintenance = false;
  o.expected_entries = kKeys;
  offheap::Store store(o);
  // Warm-up: a first round of TTL'd writes, reads, expiries.
  for (std::size_t i = 0; i < kKeys; ++i) store.put(keys[i], value, std::chrono::milliseconds(1 + i % 1000));
  clock.t += 1001;  // (a duration's deadline is 1 ms past it)
  store.maintain();
  REQUIRE(store.size() == 0);
  std::string out;
  out.reserve(64);
  std::uint64_t hits = 0;
  for (int round = 0; round < 3; ++round) {
    CHECK(allocations_of([&] {
            for (std::size_t i = 0; i < kKeys; ++i) {
              store.put(keys[i], value, std::chrono::milliseconds(1 + i % 1000));  // the wheel's nodes are reused
            }
            for (std::size_t i = 0; i < kKeys; i += 2) store.put(keys[i], value, std::chrono::hours(1));  // stale entries
            for (std::size_t i = 0; i < kKeys; ++i) hits += store.get(keys[i], out);
            clock.t += 501;
            store.maintain();  // half of the odd keys expire
            for (std::size_t i = 0; i < kKeys; ++i) hits += store.contains(keys[i]);
            clock.t += 3'600'000;
            store.maintain();  // the rest
          }) == 0);
    CHECK(store.size() == 0);
  }
  CHECK(hits == 3 * (kKeys + kKeys / 2 + kKeys / 4));
  CHECK(store.stats().expirations == 4 * kKeys);
}

TEST_CASE("a collection's writes with indexes, reads and queries allocate nothing after warm-up",
          "[alloc][collection]") {
  offheap::Options o;
  o.background_maintenance = false;
  offheap::Collection c(o);
  c.create_index("city", offheap::IndexKind::hash);
  c.create_index("score", offheap::IndexKind::ordered);
  c.create_index("name", offheap::IndexKind::ordered);
  constexpr std::int64_t kDocs = 20000;
  // Documents built before the measure (building one allocates: it is the
  // caller's object); two versions of each, so that updates move entries.
  std::vector<offheap::Document> docs[2];
  for (int v = 0; v < 2; ++v) {
    for (std::int64_t i = 0; i < kDocs; ++i) {
      docs[v].push_back(offheap::Document{{"city", "city-" + std::to_string((i + v) % 97)},
                                          {"score", (i * 7919 + v * 13) % 100000},
                                          {"name", "person-" + std::to_string(i)}});
    }
  }
  const offheap::Value city("city-5"), low(1000), high(1500);
  offheap::Range range;
  range.low = low;
  range.high = high;
  std::uint64_t seen = 0;
  auto round = [&](int v) {
    for (std::int64_t i = 0; i < kDocs; ++i) c.insert(static_cast<offheap::DocId>(i + 1), docs[v][static_cast<std::size_t>(i)]);
    for (std::int64_t i = 0; i < kDocs; ++i) c.update(static_cast<offheap::DocId>(i + 1), docs[1 - v][static_cast<std::size_t>(i)]);
    for (std::int64_t i = 0; i < kDocs; i += 7) {
      seen += c.read(static_cast<offheap::DocId>(i + 1), [](const offheap::DocumentView& d) { return d.size(); }).value_or(0);
    }
    for (int q = 0; q < 50; ++q) {
      seen += c.find("city", city, [](offheap::DocId, const offheap::DocumentView&) {});
      seen += c.find_range("score", range, [](offheap::DocId, const offheap::DocumentView&) {});
      seen += c.find_prefix("name", "person-12", [](offheap::DocId, const offheap::DocumentView&) {});
    }
    for (std::int64_t i = 0; i < kDocs; ++i) c.remove(static_cast<offheap::DocId>(i + 1));
  };
  round(0);  // warm-up: buffers and the stores' structures at their size
  round(1);
  for (int v = 0; v < 2; ++v) CHECK(allocations_of([&] { round(v); }) == 0);
  CHECK(c.size() == 0);
  CHECK(seen > 0);
  CHECK(c.verify().empty());
}

TEST_CASE("a memcache text session's commands allocate nothing after warm-up", "[alloc][memcache]") {
  offheap::Options o;
  o.capacity_bytes = 16 << 20;
  o.background_maintenance = false;
  offheap::Cache cache(o);
  offheap::memcache::ServerState state;
  offheap::memcache::TextSession<offheap::CachePolicy> session(cache, state);
  // Every command of the text protocol but stats (which formats the
  // store's Stats, a reporting call) and quit, and the meta commands, on
  // 200 keys.
  std::string requests;
  for (int i = 0; i < 200; ++i) {
    const std::string k = "key:" + std::to_string(i);
    requests += "set " + k + " 7 0 10\r\n0123456789\r\nget " + k + " nokey\r\ngets " + k + "\r\n";
    requests += "append " + k + " 0 0 3\r\nabc\r\nprepend " + k + " 0 0 2\r\nxy\r\n";
    requests += "add " + k + " 0 0 1\r\nx\r\nreplace " + k + " 0 100 2\r\n10\r\n";
    requests += "incr " + k + " 5\r\ndecr " + k + " 3\r\ntouch " + k + " 1000\r\ngat 2000 " + k + "\r\n";
    requests += "cas " + k + " 0 0 1 1\r\nz\r\ndelete " + k + "\r\ndelete " + k + " noreply\r\n";
    requests += "bogus\r\nset " + k + " 0 0 -1\r\nversion\r\nverbosity 1\r\n";
    // The meta commands, with their flags.
    requests += "ms " + k + " 3 T100 F1 c k O1\r\nabc\r\nmg " + k + " v t f c s h l k O2\r\nmg a2V5OjE= b v k\r\n";
    requests += "ma n" + k + " N0 J5 v t c\r\nma n" + k + " MD D2 q\r\nmd " + k + " I T50\r\nmg " + k + " v c\r\n";
    requests += "ms " + k + " 1 MA C1 I\r\nz\r\nmg " + k + " N30 R10 v\r\nme " + k + "\r\nmn\r\nmd " + k + " q\r\n";
  }
  std::string out;
  out.reserve(1 << 20);
  const auto fed = session.feed(requests, out);  // warm-up: the scratch buffer, the store's chunks
  REQUIRE(fed.consumed == requests.size());
  const std::string first = out;
  REQUIRE(first.find("SERVER_ERROR") == std::string::npos);
  for (int round = 0; round < 3; ++round) {
    out.clear();
    CHECK(allocations_of([&] { CHECK(session.feed(requests, out).consumed == requests.size()); }) == 0);
    // The same replies but for the cas uniques of gets.
    const auto count = [](const std::string& s, std::string_view what) {
      std::size_t n = 0;
      for (std::size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
      return n;
    };
    for (const std::string_view what : {"VALUE ", "STORED\r\n", "NOT_STORED\r\n", "DELETED\r\n", "NOT_FOUND\r\n",
                                        "TOUCHED\r\n", "EXISTS\r\n", "ERROR\r\n"}) {
      CHECK(count(out, what) == count(first, what));
    }
    CHECK(count(out, "VALUE ") == 200 * 3);
  }
}
