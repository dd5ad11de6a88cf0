// SPDX-License-Identifier: Apache-2.0
// Compaction (detail/compaction/compaction.hpp, Options::compaction_factor): churn with
// values of 16 B - 64 KiB, log-uniform, leaves a journal full of holes; the
// maintenance thread empties the sparsest chunks, so that at the end the
// store maps at most 1.3x its live bytes, every value is right and audit
// is clean. The same churn with compaction off passes 1.3x (the bound is
// not met by chance). Readers running through it never see a wrong value;
// a file-backed store gets holes in its emptied chunk files, reopens clean
// and after SIGKILL; an emptied chunk is taken back before a new one.
#include <offheap/offheap.hpp>

#include "support/env.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

using offheap_test::kSanitized;

constexpr std::uint64_t mix(std::uint64_t x) noexcept {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

std::string key_of(std::uint32_t id) {
  char b[24];
  std::snprintf(b, sizeof b, "compact-%08u", id);
  return b;
}

/// The size of (id, version)'s value: log-uniform over [16, max].
std::size_t value_size(std::uint32_t id, std::uint32_t version, std::size_t max) {
  const double u = static_cast<double>(mix(std::uint64_t{id} << 32 | version) >> 11) * 0x1.0p-53;
  return static_cast<std::size_t>(16.0 * std::pow(static_cast<double>(max) / 16.0, u));
}

/// A self-describing value: id, version, then bytes derived from both.
void make_value(std::uint32_t id, std::uint32_t version, std::size_t max, std::string& out) {
  const std::size_t n = value_size(id, version, max);
  out.resize(n);
  std::memcpy(out.data(), &id, 4);
  std::memcpy(out.data() + 4, &version, 4);
  std::uint64_t s = mix(std::uint64_t{version} << 32 | id) | 1;
  for (std::size_t off = 8; off < n; off += 8) {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    const std::uint64_t w = s * 0x2545F4914F6CDD1Dull;
    std::memcpy(out.data() + off, &w, std::min<std::size_t>(8, n - off));
  }
}

/// Whether `v` is a value make_value() makes for `id` (any version).
bool well_formed(std::uint32_t id, std::string_view v, std::size_t max, std::string& scratch) {
  if (v.size() < 16) return false;
  std::uint32_t vid = 0, version = 0;
  std::memcpy(&vid, v.data(), 4);
  std::memcpy(&version, v.data() + 4, 4);
  if (vid != id) return false;
  make_value(id, version, max, scratch);
  return scratch == v;
}

struct Churned {
  double mapped_over_live = 0;
  std::uint64_t bad_values = 0;
  offheap::Stats stats;
};

/// Loads `keys` keys, then runs `ops` operations (60% updates to a new
/// size, 20% removals, 20% re-adds), calls maintain() until compaction has
/// nothing left, and checks every key against the model.
template <class Store>
Churned churn(Store& s, std::uint32_t keys, std::uint64_t ops, std::size_t max, std::uint64_t seed,
              std::uint64_t maintain_every = 0) {
  std::vector<std::uint32_t> version(keys, 0);
  std::vector<bool> present(keys, false);
  std::mt19937_64 rng(seed);
  std::string v;
  for (std::uint32_t id = 0; id < keys; ++id) {
    make_value(id, 0, max, v);
    s.put(key_of(id), v);
    present[id] = true;
  }
  for (std::uint64_t n = 0; n < ops; ++n) {
    const auto id = static_cast<std::uint32_t>(rng() % keys);
    const auto op = rng() % 10;
    if (present[id] && op < 2) {
      REQUIRE(s.remove(key_of(id)));
      present[id] = false;
    } else {
      make_value(id, ++version[id], max, v);
      s.put(key_of(id), v);
      present[id] = true;
    }
    if (maintain_every != 0 && n % maintain_every == maintain_every - 1) s.maintain();
  }
  for (int i = 0; i < 4; ++i) s.maintain();
  Churned out;
  std::string got, scratch;
  for (std::uint32_t id = 0; id < keys; ++id) {
    const bool found = s.get(key_of(id), got);
    if (found != present[id]) {
      ++out.bad_values;
      continue;
    }
    if (!found) continue;
    make_value(id, version[id], max, scratch);
    if (got != scratch) ++out.bad_values;
  }
  out.stats = s.stats();
  out.mapped_over_live =
      static_cast<double>(out.stats.mapped_bytes) / static_cast<double>(out.stats.live_bytes);
  return out;
}

offheap::Options churn_options() {
  offheap::Options o;
  o.shards = 2;
  o.max_chunk_bytes = 4u << 20;  // the unit compaction empties: a small share of a shard's data
  o.compaction_factor = 1.2;
  o.expected_entries = 20000;
  return o;
}

}  // namespace

TEST_CASE("Churn with values of 16 B - 64 KiB: compaction keeps mapped bytes within 1.3x of live bytes",
          "[compaction]") {
  // (Sanitized: 8,000 keys. With 4,000, the shards' tail and spare chunks,
  // mapped whole, were 8-10% of the live bytes, and runs that compacted
  // to the factor ended at 1.29-1.30x.)
  const auto keys = static_cast<std::uint32_t>(offheap_test::env_u64("OFFHEAP_COMPACT_KEYS", kSanitized ? 8000 : 20000));
  const std::uint64_t ops = offheap_test::env_u64("OFFHEAP_COMPACT_OPS", kSanitized ? 80000 : 200000);
  offheap::Options o = churn_options();
  o.expected_entries = keys;
  // A chunk is compaction's unit, and each shard's tail chunk is mapped
  // whole: chunks a small share of a shard's data.
  if (keys < 10000) o.max_chunk_bytes = 1u << 20;

  offheap::Options off = o;
  off.compaction_factor = 0;
  Churned without;
  {
    offheap::Store s(off);
    without = churn(s, keys, ops, 65536, 7);
    CHECK(without.bad_values == 0);
    CHECK(without.stats.chunks_emptied == 0);
  }
  offheap::Store s(o);
  const Churned with = churn(s, keys, ops, 65536, 7);
  WARN("mapped / live: " << with.mapped_over_live << " with compaction (factor 1.2), "
                         << without.mapped_over_live << " without; live " << (with.stats.live_bytes >> 20)
                         << " MiB, mapped " << (with.stats.mapped_bytes >> 20) << " MiB, journal "
                         << (with.stats.journal_bytes >> 20) << " MiB; " << with.stats.compacted_records
                         << " records moved (" << (with.stats.compacted_bytes >> 20) << " MiB), "
                         << with.stats.chunks_emptied << " chunks emptied, " << with.stats.chunks_revived
                         << " taken back, " << with.stats.emptied_chunks << " empty now ("
                         << (with.stats.emptied_bytes >> 20) << " MiB)");
  CHECK(without.mapped_over_live > 1.3);  // the bound is compaction's doing
  CHECK(with.bad_values == 0);
  CHECK(with.mapped_over_live <= 1.3);
  CHECK(with.stats.compacted_records > 0);
  CHECK(with.stats.chunks_emptied > 0);
  CHECK(s.verify() == "");
}

// Two ways compaction used to stop for good, both from a churn seen to
// end at 1.37-1.48x mapped / live: (1) the sparsest chunk was a small one
// (the journal's first chunks are 64 KiB - 512 KiB) that found no room,
// as every emptied chunk was larger (one no larger is the only kind its
// records may move into), and the round ended there, every round, with
// sparse 1 MiB chunks behind it; (2) the tail was full, the free records
// too small for a chunk's largest record, no chunk emptied yet, and no
// new chunk was mapped. Without the maintenance thread and with a fixed
// hash seed the runs are the same every time: of 240 runs (seeds 1-40,
// maintain() every 1,000 - 8,000 operations or only at the end), seed 5
// (every 5,000) met (2), and with (2) fixed alone seed 37 (every 5,000
// and 8,000) met (1); these and two more that end near the bound run
// here. The check is compaction's own: no shard is left due, so the
// journal holds at most the factor times the live bytes, plus
// compaction's floor of 1 MiB a shard.
TEST_CASE("Compaction finishes: no small chunk and no full tail holds it back", "[compaction]") {
  struct Run {
    std::uint64_t seed, every;
  };
  for (const Run r : {Run{5, 5000}, Run{37, 5000}, Run{37, 8000}, Run{12, 2000}, Run{22, 40001}}) {
    offheap::Options o = churn_options();
    o.expected_entries = 4000;
    o.max_chunk_bytes = 1u << 20;
    o.background_maintenance = false;
    o.hash_seed = 1;
    offheap::Store s(o);
    const Churned c = churn(s, 4000, 40000, 65536, r.seed, r.every);
    INFO("seed " << r.seed << ", maintain() every " << r.every << " operations: journal " << c.stats.journal_bytes
                 << " bytes, live " << c.stats.live_bytes << ", " << c.stats.chunks_emptied << " chunks emptied");
    CHECK(c.bad_values == 0);
    CHECK(static_cast<double>(c.stats.journal_bytes) <=
          1.2 * static_cast<double>(c.stats.live_bytes) + static_cast<double>(o.shards) * (1u << 20));
    CHECK(s.verify() == "");
  }
}

namespace {

std::string small_key(unsigned i) {
  char b[16];
  std::snprintf(b, sizeof b, "k%07u", i);
  return b;
}

/// Puts 1,000-byte values under small_key(0, 1, ...) until the shard has
/// `chunks` chunks (one shard), and returns the keys of each chunk.
std::vector<std::vector<unsigned>> fill_chunks(offheap::Store& s, std::uint64_t chunks,
                                               std::uint64_t tail_room_below = 0) {
  const std::string value(1000, 's');
  std::vector<std::vector<unsigned>> in_chunk(s.stats().chunks);
  for (unsigned id = 0;; ++id) {
    s.put(small_key(id), value);
    const offheap::Stats st = s.stats();
    if (st.chunks > in_chunk.size()) in_chunk.resize(st.chunks);
    in_chunk[st.chunks - 1].push_back(id);
    if (st.chunks < chunks) continue;
    if (tail_room_below == 0) break;
    // The tail's room: the last chunk's size less what is in it.
    std::uint64_t before = 0, size = 64 << 10;
    for (std::uint64_t c = 0; c + 1 < chunks; ++c) {
      before += size;
      size = std::min<std::uint64_t>(size * 2, s.options().max_chunk_bytes);
    }
    if (size - (st.journal_bytes - before) < tail_room_below) break;
  }
  return in_chunk;
}

/// One shard, chunks up to 1 MiB, factor 1.2, maintain() by hand.
offheap::Options one_shard_options() {
  offheap::Options o;
  o.shards = 1;
  o.background_maintenance = false;
  o.max_chunk_bytes = 1u << 20;
  o.compaction_factor = 1.2;
  o.expected_entries = 20000;
  return o;
}

/// Removes the first `removed` of every `every` keys of `ids` (in order).
void remove_share(offheap::Store& s, const std::vector<unsigned>& ids, std::size_t removed, std::size_t every) {
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i % every < removed) REQUIRE(s.remove(small_key(ids[i])));
  }
}

}  // namespace

// The first way above, before any chunk was emptied: the journal's first
// chunk (64 KiB) is the sparsest and holds a 16,000-byte record that no
// free record holds and the full tail cannot take; the only chunk that
// could, a new one, would be larger (1 MiB), so that record must stay.
// The 1 MiB chunks behind it, half empty, are emptied all the same.
TEST_CASE("Compaction goes past a small chunk that finds no room before any chunk was emptied", "[compaction]") {
  offheap::Store s(one_shard_options());
  const std::string big(16000, 'B');
  s.put("big", big);
  // 64 KiB, 128, 256, 512, then 1 MiB chunks: the tail is the ninth, with
  // under 10,000 bytes of room.
  const auto in_chunk = fill_chunks(s, 9, 10000);
  REQUIRE(in_chunk.size() == 9);
  // The first chunk: 4 of every 5 small records removed (holes of ~4 KiB),
  // so it is the sparsest; the 128 KiB - 1 MiB ones: 5 of every 10.
  remove_share(s, in_chunk[0], 4, 5);
  for (std::size_t c = 1; c < 8; ++c) remove_share(s, in_chunk[c], 5, 10);
  REQUIRE(s.stats().chunks_emptied == 0);
  for (int i = 0; i < 4; ++i) s.maintain();
  const offheap::Stats st = s.stats();
  INFO("journal " << st.journal_bytes << " bytes, live " << st.live_bytes << ", " << st.chunks_emptied
                  << " chunks emptied");
  CHECK(st.chunks_emptied > 0);
  CHECK(static_cast<double>(st.journal_bytes) <= 1.2 * static_cast<double>(st.live_bytes) + (1u << 20));
  CHECK(s.get("big").value_or("") == big);
  std::string got;
  std::size_t wrong = 0;
  for (const auto& ids : in_chunk) {
    for (unsigned id : ids) {
      if (s.get(small_key(id), got) && got != std::string(1000, 's')) ++wrong;
    }
  }
  CHECK(wrong == 0);
  CHECK(s.verify() == "");
}

// A sync that fails while a chunk's records move (file-backed): the store
// refuses writes from then on, and compaction moves nothing more, in that
// round (which went on past chunks that found no room) or any other.
TEST_CASE("A failed sync stops compaction: nothing more is moved", "[compaction][files]") {
  offheap_test::TempDir dir;
  offheap::Options o = one_shard_options();
  o.path = dir / "store";
  o.durability = offheap::Durability::on_close;
  offheap::Store s(o);
  const auto in_chunk = fill_chunks(s, 11);
  // Two 1 MiB chunks emptied first: a 128 KiB chunk cannot bring either
  // back (they are larger), so it finds no room, and the round goes on.
  for (unsigned c : {4u, 5u}) {
    for (unsigned id : in_chunk[c]) REQUIRE(s.remove(small_key(id)));
  }
  s.maintain();
  REQUIRE(s.stats().emptied_chunks >= 1);
  remove_share(s, in_chunk[1], 7, 10);
  for (unsigned c : {2u, 3u, 6u, 7u, 8u}) remove_share(s, in_chunk[c], 4, 10);
  const offheap::Stats before = s.stats();
  offheap::detail::testing_fail_syncs().store(EIO);
  try {
    s.maintain();
  } catch (const offheap::Error&) {
    // (the failed sync, reported)
  }
  offheap::detail::testing_fail_syncs().store(0);
  const offheap::Stats after = s.stats();
  // One chunk's records at most: the largest chunk here holds 1 MiB of
  // 1,000-byte values, 60% of them live.
  const std::uint64_t one_chunk = (1u << 20) / 1000 * 6 / 10 + 1;
  INFO((after.compacted_records - before.compacted_records) << " records moved in the failing round");
  CHECK(after.compacted_records - before.compacted_records <= one_chunk);
  try {
    s.maintain();
  } catch (const offheap::Error&) {
    // (the store's failed sync, reported again)
  }
  CHECK(s.stats().compacted_records == after.compacted_records);
  CHECK_THROWS_AS(s.put("after", "x"), offheap::Error);
}

TEST_CASE("Readers running through compaction see every value whole and right", "[compaction][concurrency]") {
  const std::uint32_t keys = kSanitized ? 1500 : 6000;
  offheap::Options o = churn_options();
  o.max_chunk_bytes = 256u << 10;
  o.expected_entries = keys;
  offheap::Store s(o);
  constexpr std::size_t kMax = 32768;  // (a shard's journal well past compaction's 1 MiB floor)
  std::string v;
  for (std::uint32_t id = 0; id < keys; ++id) {
    make_value(id, 0, kMax, v);
    s.put(key_of(id), v);
  }
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> reads{0}, wrong{0};
  std::thread reader([&] {
    std::mt19937_64 rng(11);
    std::string got, scratch;
    while (!stop.load(std::memory_order_relaxed)) {
      const auto id = static_cast<std::uint32_t>(rng() % keys);
      if (s.get(key_of(id), got) && !well_formed(id, got, kMax, scratch)) wrong.fetch_add(1);
      reads.fetch_add(1, std::memory_order_relaxed);
    }
  });
  std::mt19937_64 rng(5);
  std::vector<std::uint32_t> version(keys, 0);
  const int rounds = kSanitized ? 6 : 20;
  for (int r = 0; r < rounds; ++r) {
    // Remove two thirds, then put them back at new sizes: sparse chunks.
    for (std::uint32_t id = 0; id < keys; ++id) {
      if (rng() % 3 != 0) s.remove(key_of(id));
    }
    s.maintain();  // compacts (the maintenance thread may be at it too)
    for (std::uint32_t id = 0; id < keys; ++id) {
      if (!s.contains(key_of(id))) {
        make_value(id, ++version[id], kMax, v);
        s.put(key_of(id), v);
      }
    }
  }
  stop = true;
  reader.join();
  const offheap::Stats st = s.stats();
  WARN(reads.load() << " reads; " << st.compacted_records << " records moved, " << st.chunks_emptied
                    << " chunks emptied, " << st.chunks_revived << " taken back");
  CHECK(wrong.load() == 0);
  CHECK(st.compacted_records > 0);
  CHECK(st.chunks_revived > 0);
  CHECK(s.verify() == "");
  std::string got, scratch;
  for (std::uint32_t id = 0; id < keys; ++id) {
    REQUIRE(s.get(key_of(id), got));
    make_value(id, version[id], kMax, scratch);
    CHECK(got == scratch);
  }
}

TEST_CASE("A cache compacts: its policy keeps every record once, values right", "[compaction][cache]") {
  offheap::Options o = churn_options();
  o.max_chunk_bytes = 256u << 10;
  o.capacity_bytes = 24u << 20;
  offheap::LruCache c(o);
  const Churned r = churn(c, kSanitized ? 1500 : 5000, kSanitized ? 20000 : 60000, 16384, 3);
  // A cache evicts: a key the model holds may be gone, never wrong.
  std::string got, scratch;
  std::uint64_t wrong = 0;
  for (std::uint32_t id = 0; id < (kSanitized ? 1500u : 5000u); ++id) {
    if (c.get(key_of(id), got) && !well_formed(id, got, 16384, scratch)) ++wrong;
  }
  CHECK(wrong == 0);
  CHECK(r.stats.compacted_records > 0);
  CHECK(r.stats.policy_small_bytes + r.stats.policy_main_bytes == r.stats.live_bytes);
  CHECK(c.verify() == "");
}

TEST_CASE("No record moves under a walk whose table was replaced: every key left alone is visited",
          "[compaction][walk]") {
  // A walk goes on through an index table replaced under it (frozen: its
  // slots lead where records were when it was replaced). Here, after the
  // walk's first key, the small index is rebuilt at once (a growth) and
  // maintain() runs while compaction is due: a record compaction moved
  // then would leave its key out of the walk (11 of 30 were, before
  // compaction waited for walks). Compaction runs once the walk is over.
  offheap::Options o;
  o.shards = 1;
  o.min_chunk_bytes = 64u << 10;
  o.background_maintenance = false;
  offheap::Store s(o);
  std::vector<std::string> kept;
  for (std::uint32_t id = 0; id < 300; ++id) s.put(key_of(id), std::string(10000, static_cast<char>('a' + id % 26)));
  for (std::uint32_t id = 0; id < 300; ++id) {
    if (id % 10 == 0) {
      kept.push_back(key_of(id));
    } else {
      s.remove(key_of(id));
    }
  }
  const std::uint64_t capacity = s.stats().index_capacity;
  bool armed = false;
  std::vector<std::string> seen;
  std::uint64_t wrong = 0;
  s.for_each([&](std::string_view k, std::string_view v) {
    seen.emplace_back(k);
    if (k.rfind("compact-", 0) == 0) {
      const std::uint32_t id = static_cast<std::uint32_t>(std::stoul(std::string(k.substr(8))));
      wrong += v != std::string(10000, static_cast<char>('a' + id % 26));
    }
    if (armed) return;
    armed = true;
    for (int i = 0; s.stats().index_capacity == capacity; ++i) s.put("grow-" + std::to_string(i), "g");
    s.maintain();
    CHECK(s.stats().compacted_records == 0);
  });
  std::sort(seen.begin(), seen.end());
  std::size_t missed = 0;
  for (const std::string& k : kept) missed += !std::binary_search(seen.begin(), seen.end(), k);
  CHECK(missed == 0);
  CHECK(wrong == 0);
  // The round waited, and runs once the walk is over.
  s.maintain();
  CHECK(s.stats().compacted_records > 0);
  std::string got;
  for (const std::string& k : kept) {
    REQUIRE(s.get(k, got));
    const std::uint32_t id = static_cast<std::uint32_t>(std::stoul(k.substr(8)));
    CHECK(got == std::string(10000, static_cast<char>('a' + id % 26)));
  }
  CHECK(s.verify() == "");
}

TEST_CASE("A file-backed store compacts: emptied chunk files lose their disk blocks, and a reopen keeps every value",
          "[compaction][files]") {
  offheap_test::TempDir dir;
  offheap::Options o = churn_options();
  o.path = dir / "store";
  o.max_chunk_bytes = 1u << 20;
  o.durability = offheap::Durability::periodic;
  o.sync_interval = std::chrono::milliseconds(20);
  const std::uint32_t keys = kSanitized ? 1500 : 4000;
  std::vector<std::uint32_t> version(keys, 0);
  std::vector<bool> present(keys, true);
  std::string v;
  std::uint64_t emptied = 0;
  {
    offheap::Store s(o);
    for (std::uint32_t id = 0; id < keys; ++id) {
      make_value(id, 0, 16384, v);
      s.put(key_of(id), v);
    }
    std::mt19937_64 rng(9);
    for (int pass = 0; pass < 3; ++pass) {
      for (std::uint32_t id = 0; id < keys; ++id) {
        if (rng() % 4 != 0) {
          REQUIRE(s.remove(key_of(id)) == present[id]);
          present[id] = false;
        }
      }
      s.sync();  // periodic: the old records go at a sync
      s.sync();
      s.maintain();
      for (std::uint32_t id = 0; id < keys; ++id) {
        if (rng() % 2 == 0) {
          make_value(id, ++version[id], 16384, v);
          s.put(key_of(id), v);
          present[id] = true;
        }
      }
    }
    for (std::uint32_t id = 0; id < keys; ++id) {
      if (rng() % 4 != 0 && present[id]) {
        s.remove(key_of(id));
        present[id] = false;
      }
    }
    s.sync();
    s.sync();
    s.maintain();
    const offheap::Stats st = s.stats();
    emptied = st.emptied_chunks;
    WARN(st.compacted_records << " records moved; " << st.emptied_chunks << " chunks empty ("
                              << (st.emptied_bytes >> 10) << " KiB)");
    CHECK(st.emptied_chunks > 0);
    CHECK(s.verify() == "");
    // The emptied chunks' files hold (almost) no disk blocks.
    std::uint64_t file_bytes = 0, disk_bytes = 0;
    for (const auto& e : std::filesystem::directory_iterator(o.path)) {
      if (e.path().extension() != ".chunk") continue;
      struct stat sb {};
      REQUIRE(::stat(e.path().c_str(), &sb) == 0);
      file_bytes += static_cast<std::uint64_t>(sb.st_size);
      disk_bytes += static_cast<std::uint64_t>(sb.st_blocks) * 512;
    }
    WARN("chunk files: " << (file_bytes >> 10) << " KiB, on disk " << (disk_bytes >> 10) << " KiB");
    CHECK(disk_bytes + st.emptied_bytes * 9 / 10 <= file_bytes);
  }
  auto check_all = [&](offheap::Store& s) {
    std::string got, scratch;
    for (std::uint32_t id = 0; id < keys; ++id) {
      const bool found = s.get(key_of(id), got);
      REQUIRE(found == present[id]);
      if (!found) continue;
      make_value(id, version[id], 16384, scratch);
      REQUIRE(got == scratch);
    }
  };
  {
    offheap::Store s(o);  // a clean reopen: the state files
    CHECK(s.stats().emptied_chunks == emptied);
    check_all(s);
    CHECK(s.verify() == "");
    // Writers take the emptied chunks back (their blocks reserved again).
    for (std::uint32_t id = 0; id < keys; ++id) {
      make_value(id, ++version[id], 16384, v);
      s.put(key_of(id), v);
      present[id] = true;
    }
    CHECK(s.stats().chunks_revived > 0);
    check_all(s);
    CHECK(s.verify() == "");
  }
}

TEST_CASE("A file-backed store compacting under SIGKILL reopens with every key and every value whole",
          "[compaction][files][crash]") {
  // The child loads keys, then rewrites them at new sizes and removes none:
  // after every kill, every key is there with a value of its own.
  auto* shared = static_cast<std::atomic<std::uint64_t>*>(
      ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  REQUIRE(shared != MAP_FAILED);
  const std::uint32_t keys = 3000;  // (about 1 MiB a shard: past compaction's floor)
  const int kills = kSanitized ? 3 : 9;
  offheap_test::TempDir dir;
  offheap::Options o = churn_options();
  o.path = dir / "store";
  o.max_chunk_bytes = 512u << 10;
  o.durability = offheap::Durability::periodic;
  o.sync_interval = std::chrono::milliseconds(5);
  {
    offheap::Store s(o);
    std::string v;
    for (std::uint32_t id = 0; id < keys; ++id) {
      make_value(id, 0, 16384, v);
      s.put(key_of(id), v);
    }
  }
  std::uint64_t emptied_seen = 0;
  for (int round = 0; round < kills; ++round) {
    new (shared) std::atomic<std::uint64_t>(0);
    // Every mode: each syncs the copies before the old records change.
    o.durability = round % 3 == 0   ? offheap::Durability::periodic
                   : round % 3 == 1 ? offheap::Durability::on_close
                                    : offheap::Durability::every_write;
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      try {
        offheap::Store s(o);
        std::mt19937_64 rng(static_cast<std::uint64_t>(round) + 100);
        std::string v;
        for (std::uint32_t n = 1;; ++n) {
          const auto id = static_cast<std::uint32_t>(rng() % keys);
          // Shrinking values most of the time: chunks go sparse.
          make_value(id, n + static_cast<std::uint32_t>(round) * 0x1000000u, rng() % 4 == 0 ? 16384 : 256, v);
          s.put(key_of(id), v);
          if (n % 256 == 0) shared->store(s.stats().chunks_emptied, std::memory_order_relaxed);
        }
      } catch (...) {
        ::_exit(3);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds((300 + 150 * round) * (kSanitized ? 4 : 1)));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    REQUIRE((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL));
    emptied_seen += shared->load();
    offheap::Options ro = o;
    ro.background_maintenance = false;
    offheap::Store s(ro);
    CHECK(s.stats().rebuilt);
    CHECK(s.verify() == "");
    std::string got, scratch;
    std::uint64_t missing = 0, wrong = 0;
    for (std::uint32_t id = 0; id < keys; ++id) {
      if (!s.get(key_of(id), got)) {
        ++missing;
        continue;
      }
      std::uint32_t version = 0;
      std::memcpy(&version, got.data() + 4, 4);
      bool ok = false;
      for (const std::size_t max : {std::size_t{16384}, std::size_t{256}}) {
        make_value(id, version, max, scratch);
        ok = ok || scratch == got;
      }
      if (!ok) ++wrong;
    }
    CHECK(missing == 0);
    CHECK(wrong == 0);
  }
  WARN(emptied_seen << " chunks emptied by the children before their kills");
  CHECK(emptied_seen > 0);
  ::munmap(shared, 4096);
}

TEST_CASE("A forged emptied mark over records is not trusted: every value stays", "[compaction][files][damage]") {
  namespace format = offheap::detail::format;
  offheap_test::TempDir dir;
  offheap::Options o;
  o.path = dir / "store";
  o.shards = 1;
  o.min_chunk_bytes = 4096;
  o.max_chunk_bytes = 64u << 10;  // many chunks
  o.durability = offheap::Durability::on_close;
  o.background_maintenance = false;
  const std::uint32_t keys = 600;
  std::string v;
  {
    offheap::Store s(o);
    for (std::uint32_t id = 0; id < keys; ++id) {
      make_value(id, 0, 2048, v);
      s.put(key_of(id), v);
    }
    REQUIRE(s.stats().chunks > 3);
  }
  // Mark chunks 0 and 1 emptied, with the right salt: they hold records.
  for (const std::uint32_t chunk : {0u, 1u}) {
    const std::string name = format::chunk_file_name(0, chunk);
    const int fd = ::open((o.path / name).c_str(), O_RDWR);
    REQUIRE(fd >= 0);
    format::ChunkHeader h{};
    REQUIRE(::pread(fd, &h, sizeof h, 0) == static_cast<ssize_t>(sizeof h));
    const std::uint64_t salt = offheap::detail::mix64(h.store_id ^ (std::uint64_t{0} << 20) ^ chunk);
    const std::uint64_t mark = format::emptied_mark(salt);
    REQUIRE(::pwrite(fd, &mark, 8, static_cast<off_t>(format::kEmptiedMarkOffset)) == 8);
    ::close(fd);
  }
  auto check_all = [&](offheap::Store& s) {
    std::string got, want;
    for (std::uint32_t id = 0; id < keys; ++id) {
      REQUIRE(s.get(key_of(id), got));
      make_value(id, 0, 2048, want);
      REQUIRE(got == want);
    }
  };
  {
    offheap::Options ro = o;
    ro.read_only = true;
    offheap::Store s(ro);  // the state file refused: a rebuild that trusts no mark
    CHECK(s.stats().emptied_chunks == 0);
    check_all(s);
  }
  {
    offheap::Store s(o);
    CHECK(s.stats().rebuilt);
    CHECK(s.stats().emptied_chunks == 0);
    check_all(s);
    CHECK(s.verify() == "");
    for (std::uint32_t id = 0; id < keys; ++id) {  // writes land where they should
      make_value(id, 1, 2048, v);
      s.put(key_of(id), v);
    }
  }
  offheap::Store s(o);
  std::string got, want;
  for (std::uint32_t id = 0; id < keys; ++id) {
    REQUIRE(s.get(key_of(id), got));
    make_value(id, 1, 2048, want);
    REQUIRE(got == want);
  }
  CHECK(s.verify() == "");
}
