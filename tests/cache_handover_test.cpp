// SPDX-License-Identifier: Apache-2.0
// A cache write takes over the record it evicted for its room
// (detail/journal/space.hpp, Handover): whole when the sizes match, split
// when it is larger, freed when the write ends without it (an overwrite in
// place, a value that did not fit). Every step is checked against the
// store's own invariants (verify(): a record kept and never taken or freed
// is a live record no slot leads to; a stale prev-free bit or footer is
// named), and readers beside the writer never get another key's value.
#include <offheap/offheap.hpp>

#include "support/cache_options.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <utility>

using offheap::Cache;
using offheap::LruCache;
using offheap::Options;
using offheap::TinyLfuCache;

namespace {

std::string key_of(std::uint64_t i) { return "key-" + std::to_string(i); }

/// A value that names its key: the key, '#', then `len` bytes of a letter
/// the key decides. A reader can tell a torn or foreign value from it.
std::string value_for(const std::string& key, std::size_t len) {
  return key + "#" + std::string(len, static_cast<char>('a' + std::hash<std::string>{}(key) % 26));
}
bool names_its_key(const std::string& key, const std::string& v) {
  if (v.size() < key.size() + 1 || v.compare(0, key.size(), key) != 0 || v[key.size()] != '#') return false;
  const char c = static_cast<char>('a' + std::hash<std::string>{}(key) % 26);
  for (std::size_t i = key.size() + 1; i < v.size(); ++i) {
    if (v[i] != c) return false;
  }
  return true;
}

struct FillFailed {};

/// Every kind of write, some of them failing after their room was made
/// (a fill that throws), with verify() every few steps: a record kept for
/// a write and neither taken nor freed, or taken with a stale prev-free
/// bit, is found there.
template <class C>
void churn(C& c, std::uint64_t seed, int steps, std::uint64_t keys) {
  std::mt19937_64 rng(seed);
  for (int step = 0; step < steps; ++step) {
    const std::string k = key_of(rng() % keys);
    const std::size_t len = static_cast<std::size_t>(rng() % 4 == 0 ? rng() % 1500 : rng() % 200);
    const int op = static_cast<int>(rng() % 10);
    INFO("step " << step << ", operation " << op);
    try {
      switch (op) {
        case 0:
        case 1: c.put(k, value_for(k, len)); break;
        case 2: c.put(k, value_for(k, len), offheap::Ttl(std::chrono::hours(1))); break;
        case 3:
          c.put(k, len, [&](std::span<std::byte> d) {
            if (rng() % 2 == 0) throw FillFailed{};
            std::memset(d.data(), 'f', d.size());
          });
          break;
        case 4:
          c.compute(k, [&](std::optional<std::string_view> old) -> std::optional<std::string> {
            if (old && rng() % 5 == 0) return std::nullopt;
            return value_for(k, len);
          });
          break;
        case 5: {
          std::string ks[4], vs[4];
          std::pair<std::string_view, std::string_view> e[4];
          for (int i = 0; i < 4; ++i) {
            ks[i] = key_of(rng() % keys);
            vs[i] = value_for(ks[i], static_cast<std::size_t>(rng() % 300));
            e[i] = {ks[i], vs[i]};
          }
          c.put_all(std::span(e, 4));
          break;
        }
        case 6: c.remove(k); break;
        case 7: c.put_if_absent(k, value_for(k, len)); break;
        case 8: c.replace(k, value_for(k, len)); break;
        default: {
          std::string out;
          if (c.get(k, out) && out[0] != 'f') REQUIRE(names_its_key(k, out));
        }
      }
    } catch (const FillFailed&) {
      // the write left nothing behind (verify() below)
    } catch (const offheap::Error& e) {
      if (e.code() != offheap::Errc::out_of_space) throw;  // (the memory limit's)
    }
    if (step % 37 == 0) REQUIRE(c.verify() == "");
  }
  REQUIRE(c.verify() == "");
}

}  // namespace

TEMPLATE_TEST_CASE("a cache write takes over the record it evicted: whole, split, or freed when not taken",
                   "[cache][handover]", Cache, LruCache, TinyLfuCache) {
  TestType c(offheap_test::cache_options(32 << 10, 1));
  std::uint64_t next = 0;
  const auto put_fresh = [&](std::size_t len) {
    const std::string k = key_of(next++);
    c.put(k, value_for(k, len));
    return k;
  };
  // Past the capacity with records of one size: each write evicts one
  // record of its own size and takes it whole.
  for (int i = 0; i < 2000; ++i) {
    put_fresh(100);
    if (i % 50 == 0) REQUIRE(c.verify() == "");
  }
  REQUIRE(c.stats().evictions > 1000);
  REQUIRE(c.verify() == "");

  SECTION("smaller values split the records they take over") {
    const std::uint64_t records_before = c.stats().records;
    for (int i = 0; i < 400; ++i) {
      put_fresh(i % 2 == 0 ? 8 : 40);
      REQUIRE(c.verify() == "");
    }
    // The same bytes hold more of the smaller records: the rest of each
    // split record went back to the free lists or the tail, and was used.
    CHECK(c.stats().records > records_before + records_before / 2);
    CHECK(c.stats().live_bytes <= 32 * 1024 + 4096 + 512);
  }

  SECTION("an overwrite in place frees the record its room evicted") {
    // A fresh record of 2 KiB leaves the shard past its share; the next
    // write, of an existing key with a value of its size, evicts for it
    // (records of up to twice its bytes), and then rewrites its own record
    // in place: the evicted ones go to the free lists.
    for (int round = 0; round < 20; ++round) {
      const std::string k = put_fresh(100);
      put_fresh(2000);
      const auto before = c.stats();
      REQUIRE(before.live_bytes > 32 * 1024);
      c.put(k, value_for(k, 100));  // same size: in place
      const auto after = c.stats();
      CHECK(after.evictions > before.evictions);
      // Freed: on a free list, or given back to the journal's tail (the
      // 2 KiB record, evicted at once by W-TinyLFU's admission).
      CHECK((after.free_bytes > before.free_bytes || after.journal_bytes < before.journal_bytes));
      REQUIRE(c.verify() == "");
      std::string out;
      REQUIRE(c.get(k, out));
      CHECK(out == value_for(k, 100));
    }
  }

  SECTION("a value larger than every record evicted for it takes none of them") {
    for (int round = 0; round < 20; ++round) {
      put_fresh(3000);
      REQUIRE(c.verify() == "");
      put_fresh(100);
      REQUIRE(c.verify() == "");
    }
  }

  SECTION("mixed sizes, overwrites and removals") {
    std::mt19937_64 rng(7);
    for (int step = 0; step < 6000; ++step) {
      const std::uint64_t k = rng() % 800;
      const std::string key = key_of(1000000 + k);
      const auto op = rng() % 8;
      if (op < 6) {
        c.put(key, value_for(key, static_cast<std::size_t>(rng() % 400)));
      } else if (op == 6) {
        c.remove(key);
      } else {
        std::string out;
        if (c.get(key, out)) REQUIRE(names_its_key(key, out));
      }
      if (step % 25 == 0) REQUIRE(c.verify() == "");
    }
    REQUIRE(c.verify() == "");
  }
}

TEMPLATE_TEST_CASE("readers never get another key's value while writes take over evicted records",
                   "[cache][handover][threads]", Cache, LruCache, TinyLfuCache) {
  TestType c(offheap_test::cache_options(64 << 10, 2));
  std::atomic<std::uint64_t> written{0};
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> wrong{0}, hits{0};
  std::thread reader([&] {
    std::string out;
    std::mt19937_64 rng(3);
    while (!stop.load(std::memory_order_relaxed)) {
      const std::uint64_t w = written.load(std::memory_order_acquire);
      if (w == 0) continue;
      // The latest keys, most of them still there, some evicted meanwhile.
      const std::uint64_t i = w - 1 - rng() % std::min<std::uint64_t>(w, 600);
      const std::string key = key_of(i);
      if (c.get(key, out)) {
        hits.fetch_add(1, std::memory_order_relaxed);
        if (!names_its_key(key, out)) wrong.fetch_add(1, std::memory_order_relaxed);
      }
    }
  });
  std::mt19937_64 rng(5);
  for (std::uint64_t i = 0; i < 60000; ++i) {
    const std::string key = key_of(i);
    c.put(key, value_for(key, static_cast<std::size_t>(rng() % 200)));
    written.store(i + 1, std::memory_order_release);
  }
  stop.store(true);
  reader.join();
  CHECK(wrong.load() == 0);
  CHECK(hits.load() > 0);
  CHECK(c.stats().evictions > 30000);
  CHECK(c.verify() == "");
}

TEMPLATE_TEST_CASE("every kind of cache write keeps the records exact around a record taken over",
                   "[cache][handover]", Cache, LruCache, TinyLfuCache) {
  SECTION("in anonymous memory") {
    TestType c(offheap_test::cache_options(48 << 10, 1));
    churn(c, 11, 20000, 700);
    CHECK(c.stats().evictions > 1000);
  }
  SECTION("under a memory limit (writes that evict for it and try again)") {
    Options o = offheap_test::cache_options(1 << 20, 1);
    o.min_chunk_bytes = 64 << 10;
    o.max_chunk_bytes = 64 << 10;
    o.memory_limit_bytes = TestType::minimum_memory_limit(o, 1500) + (64 << 10);
    TestType c(o);
    churn(c, 12, 40000, 6000);
    CHECK(c.stats().limit_evictions > 0);
  }
  SECTION("with a removal listener (no record is kept: the listener reads it)") {
    Options o = offheap_test::cache_options(48 << 10, 1);
    std::uint64_t removals = 0;
    o.on_removal = [&](std::string_view, std::string_view, offheap::RemovalCause) { ++removals; };
    TestType c(o);
    churn(c, 13, 8000, 700);
    c.maintain();  // (reports the removals still queued)
    CHECK(removals > 0);
    CHECK(c.verify() == "");
  }
  SECTION("file-backed (no record is kept: a crash would find it)") {
    offheap_test::TempDir dir;
    Options o = offheap_test::cache_options(48 << 10, 1);
    o.path = dir / "cache";
    TestType c(o);
    churn(c, 14, 8000, 700);
    CHECK(c.stats().evictions > 0);
  }
}
