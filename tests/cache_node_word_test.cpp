// SPDX-License-Identifier: Apache-2.0
// LruCache and TinyLfuCache find a record's list node by the node word its
// header keeps (detail/journal/record.hpp, eviction/policy.hpp), not by a
// table: the policy maps its nodes alone; the word follows a key through
// overwrites, moves and compaction (verify() checks every current record
// against its node); a clean reopen keeps the words, writing no record;
// and a word damaged in a file, or forged, is checked against the node it
// names and never misleads the policy.
#include <offheap/offheap.hpp>
#include <offheap/detail/files/format.hpp>

#include "support/cache_options.hpp"
#include "support/chunk_walk.hpp"
#include "support/file_io.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <random>
#include <vector>
#include <string>

using offheap::LruCache;
using offheap::Options;
using offheap::TinyLfuCache;

using offheap_test::cache_options;

namespace {

std::string key_of(std::uint64_t i) { return "node-key-" + std::to_string(i); }
std::string value_of(std::uint64_t i, std::size_t len) {
  std::string v = std::to_string(i) + ":";
  v.resize(std::max(len, v.size()), static_cast<char>('a' + i % 26));
  return v;
}

/// Every chunk file's bytes past its header page (the records), in name order.
std::string records_of(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() == ".chunk") names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  std::string out;
  for (const std::string& n : names) out += offheap_test::read_file(dir / n).substr(offheap_test::chunk_walk::kHeaderPage);
  return out;
}

}  // namespace

TEMPLATE_TEST_CASE("LRU and W-TinyLFU map their list nodes alone: no table from location to node",
                   "[cache][node_word]", LruCache, TinyLfuCache) {
  // 200,000 records of 48 bytes, none evicted: 32 bytes of node each (and
  // a page of directory), where a location table at most 70% full took
  // 23-46 more. (W-TinyLFU's sketch, sized for the capacity in records,
  // takes up to 4 MiB more here.)
  TestType c(cache_options(std::uint64_t{12} << 20, 1));
  const std::uint64_t n = 200000;
  for (std::uint64_t i = 0; i < n; ++i) c.put(key_of(i), value_of(i, 8));
  const auto st = c.stats();
  REQUIRE(st.records == n);
  REQUIRE(st.evictions == 0);
  INFO("policy mapped bytes " << st.policy_mapped_bytes);
  CHECK(st.policy_mapped_bytes <= n * 32 + 2 * 65536 + 4096 * 2 + (4u << 20));  // (+ W-TinyLFU's sketch)
  CHECK(st.policy_mapped_bytes >= n * 32);
  REQUIRE(c.verify() == "");
}

TEMPLATE_TEST_CASE("the node word follows its key through overwrites in place and elsewhere, removals and evictions",
                   "[cache][node_word]", LruCache, TinyLfuCache) {
  TestType c(cache_options(256 << 10, 2));
  std::mt19937_64 rng(11);
  for (int step = 0; step < 40000; ++step) {
    const std::uint64_t k = rng() % 3000;
    const auto op = rng() % 10;
    if (op < 6) {
      // Sizes that fit in place, and sizes that move the record.
      c.put(key_of(k), value_of(k, static_cast<std::size_t>(rng() % 2 == 0 ? 20 : rng() % 400)));
    } else if (op == 6) {
      c.remove(key_of(k));
    } else {
      const auto v = c.get(key_of(k));
      if (v) REQUIRE(v->compare(0, std::to_string(k).size() + 1, std::to_string(k) + ":") == 0);
    }
    if (step % 997 == 0) REQUIRE(c.verify() == "");  // every current record keeps its node's word
  }
  CHECK(c.stats().evictions > 1000);
  REQUIRE(c.verify() == "");
}

TEMPLATE_TEST_CASE("compaction moves records with their node words", "[cache][node_word][compaction]", LruCache,
                   TinyLfuCache) {
  Options o = cache_options(std::uint64_t{8} << 20, 1);
  o.max_chunk_bytes = 256 << 10;  // compaction's unit: chunks a small share of the journal
  TestType c(o);
  // A few MiB of records, then most of them removed: sparse chunks that
  // maintain() compacts, moving the rest.
  const std::uint64_t n = 30000;
  for (std::uint64_t i = 0; i < n; ++i) c.put(key_of(i), value_of(i, 100));
  REQUIRE(c.stats().evictions == 0);
  for (std::uint64_t i = 0; i < n; ++i) {
    if (i % 8 != 0) c.remove(key_of(i));
  }
  c.maintain();
  const auto st = c.stats();
  INFO("compacted records " << st.compacted_records);
  REQUIRE(st.compacted_records > 0);
  REQUIRE(c.verify() == "");
  for (std::uint64_t i = 0; i < n; i += 8) REQUIRE(c.get(key_of(i)) == value_of(i, 100));
  // The moved records' nodes still stand for them: writes past the
  // capacity evict through them, and the books stay exact.
  for (std::uint64_t i = n; i < 4 * n; ++i) c.put(key_of(i), value_of(i, 100));
  CHECK(c.stats().evictions > n);
  REQUIRE(c.verify() == "");
}

TEMPLATE_TEST_CASE("a clean reopen keeps every record's node word: the records are not written",
                   "[cache][node_word][files]", LruCache, TinyLfuCache) {
  offheap_test::TempDir dir;
  Options o = cache_options(1 << 20, 1);
  o.path = dir / "cache";
  std::mt19937_64 rng(5);
  {
    TestType c(o);
    // Churn first, so that node numbers are reused out of order.
    for (int step = 0; step < 40000; ++step) {
      const std::uint64_t k = rng() % 16000;
      if (rng() % 8 == 0) {
        c.remove(key_of(k));
      } else {
        c.put(key_of(k), value_of(k, static_cast<std::size_t>(rng() % 120)));
      }
    }
    REQUIRE(c.stats().evictions > 0);
  }
  const std::string records = records_of(o.path);
  {
    TestType c(o);
    REQUIRE(c.verify() == "");
  }
  CHECK(records_of(o.path) == records);
  TestType c(o);
  REQUIRE(c.verify() == "");
}

TEMPLATE_TEST_CASE("node words damaged in a file after a clean close are checked, never trusted",
                   "[cache][node_word][files][damage]", LruCache, TinyLfuCache) {
  offheap_test::TempDir dir;
  Options o = cache_options(64 << 10, 1);
  o.path = dir / "cache";
  std::uint64_t n = 0;
  {
    TestType c(o);
    while (c.stats().live_bytes + 200 < o.capacity_bytes) {
      c.put(key_of(n), value_of(n, 60));
      ++n;
    }
    REQUIRE(c.stats().evictions == 0);
  }
  // Every live record's node word (bits 33-63 of header word 2, outside
  // the checksum) set to a value of the damage's choosing: all the same
  // (each restore but one finds its number taken), one far past the nodes
  // there are (2^31 - 2), random, or in the range a restore may keep:
  // scattered (holes between them, some taken twice) or dense with
  // repeats.
  const auto chunk = o.path / offheap::detail::format::chunk_file_name(0, 0);
  const std::string file = offheap_test::read_file(chunk);
  const auto walk = offheap_test::chunk_walk::walk(file, chunk.filename().string());
  std::mt19937_64 rng(3);
  const int mode = GENERATE(0, 1, 2, 3, 4);
  std::uint64_t damaged = 0;
  for (const auto& r : walk.records) {
    if (r.state() != offheap_test::chunk_walk::State::live) continue;
    const std::uint64_t w2 = offheap_test::chunk_walk::load_u64(file, r.file_offset + 16);
    const std::uint64_t word = mode == 0   ? 1
                               : mode == 1 ? 0x7FFFFFFFu
                               : mode == 2 ? rng() & 0x7FFFFFFFu
                               : mode == 3 ? 1 + rng() % (2 * n + 2048)
                                           : 1 + rng() % 64;
    const std::uint64_t forged = (w2 & ((std::uint64_t{1} << 33) - 1)) | word << 33;
    offheap_test::write_bytes(chunk, r.file_offset + 16, &forged, sizeof forged);
    ++damaged;
  }
  REQUIRE(damaged + 1 >= n);
  TestType c(o);
  INFO("mode " << mode);
  REQUIRE(c.verify() == "");  // each restored record got a node of its own, and keeps its word
  for (std::uint64_t i = 0; i < n; ++i) REQUIRE(c.get(key_of(i)) == value_of(i, 60));
  // Every record evicted in order, none twice, the books exact.
  for (std::uint64_t i = n; i < 3 * n; ++i) c.put(key_of(i), value_of(i, 60));
  CHECK(c.stats().evictions >= n);
  REQUIRE(c.verify() == "");
}
