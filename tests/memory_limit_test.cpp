// SPDX-License-Identifier: Apache-2.0
// Options::memory_limit_bytes (detail/memory/memory_budget.hpp): a workload that
// would outgrow the limit never maps more than it, checked after every
// write from stats() (memory_mapped_bytes, which must also equal
// mapped_bytes + emptied_bytes: the count and the components agree) and,
// outside the sanitizers, from the process's own mappings (/proc/self/smaps:
// the store's anonymous mappings are the process's only MAP_NORESERVE ones,
// its files' mappings are under its directory). A store refuses the write
// that would pass the limit with out_of_space and keeps every record; a
// cache evicts instead, on one thread or two; a file-backed store reopens
// under its limit and is refused, whole, under a smaller one.
#include <offheap/offheap.hpp>

#include "support/env.hpp"
#include "support/temp_dir.hpp"
#include "support/zipf.hpp"

#include <catch2/catch.hpp>

#include <malloc.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using offheap_test::kSanitized;

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;

/// SplitMix64's step: the finalizer over the golden-ratio increment.
std::uint64_t mix(std::uint64_t x) noexcept { return offheap_test::mix64(x + 0x9E3779B97F4A7C15ull); }

std::string key_of(std::uint32_t id) {
  char b[24];
  std::snprintf(b, sizeof b, "limit-%08u", id);
  return b;
}

/// (id, version)'s value: log-uniform size over [16, max], its bytes derived
/// from both, so that a value read back says whose it is.
std::string value_of(std::uint32_t id, std::uint32_t version, std::size_t max) {
  const std::uint64_t seed = mix(std::uint64_t{id} << 32 | version);
  const double u = static_cast<double>(seed >> 11) * 0x1.0p-53;
  const auto n = static_cast<std::size_t>(16.0 * std::pow(static_cast<double>(max) / 16.0, u));
  std::string v(n, '\0');
  std::memcpy(v.data(), &id, 4);
  std::memcpy(v.data() + 4, &version, 4);
  for (std::size_t i = 8; i < n; ++i) v[i] = static_cast<char>(mix(seed + i / 8) >> (8 * (i % 8)));
  return v;
}

/// The bytes the process maps with MAP_NORESERVE and read-write (the
/// engine's anonymous mappings; glibc's are not, with one arena), or with
/// a `dir`, its mappings of files under it.
std::uint64_t process_mapped(const std::string& dir) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  std::uint64_t total = 0, size = 0;
  bool counted_kind = false;
  while (std::getline(smaps, line)) {
    unsigned long lo = 0, hi = 0;
    char perms[8] = {};
    if (std::sscanf(line.c_str(), "%lx-%lx %7s", &lo, &hi, perms) == 3 && line.find(' ') != std::string::npos &&
        line.find(':') > line.find(' ')) {
      size = hi - lo;
      const bool rw = perms[0] == 'r' && perms[1] == 'w';
      const std::size_t slash = line.find('/');
      const bool ours_file = !dir.empty() && slash != std::string::npos && line.compare(slash, dir.size(), dir) == 0;
      if (ours_file) total += size;
      counted_kind = dir.empty() && rw && slash == std::string::npos;  // anonymous: decided by VmFlags
    } else if (line.rfind("VmFlags:", 0) == 0 && counted_kind) {
      std::istringstream flags(line.substr(8));
      for (std::string f; flags >> f;) {
        if (f == "nr") total += size;
      }
      counted_kind = false;
    }
  }
  return total;
}

/// Checks the limit from stats(): never passed, and the count equals what
/// the components say they map.
/// (A maintenance thread may map or unmap between the shards' figures and
/// the store's count: the two agree within a few tries, a drift never.)
template <class S>
void check_stats(const S& s, std::uint64_t limit) {
  offheap::Stats st = s.stats();
  for (int tries = 0; tries < 100 && st.memory_mapped_bytes != st.mapped_bytes + st.emptied_bytes; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    st = s.stats();
  }
  REQUIRE(st.memory_limit_bytes == limit);
  REQUIRE(st.memory_mapped_bytes <= limit);
  REQUIRE(st.memory_mapped_bytes == st.mapped_bytes + st.emptied_bytes);
}

bool is_out_of_space(const offheap::Error& e) {
  return e.code() == offheap::Errc::out_of_space &&
         std::string(e.what()).find("memory_limit_bytes") != std::string::npos;
}

}  // namespace

TEST_CASE("A store under memory_limit_bytes maps no more, refuses what would pass it and keeps every record",
          "[memory_limit]") {
  // One arena: threads of earlier tests would otherwise have glibc map
  // NORESERVE heaps of their own while this test counts them.
  ::mallopt(M_ARENA_MAX, 1);
  const std::uint64_t limit = (kSanitized ? 24 : 48) * kMiB;
  const std::uint64_t before = kSanitized ? 0 : process_mapped("");
  std::map<std::uint32_t, std::uint32_t> model;  // id -> version
  std::mt19937_64 rng(offheap_test::env_u64("OFFHEAP_SEED", 20261202));
  {
    offheap::Options o;
    o.memory_limit_bytes = limit;
    o.shards = 2;
    o.max_chunk_bytes = 4 * kMiB;
    o.background_maintenance = false;
    o.compaction_factor = 1.2;
    offheap::Store s(o);
    check_stats(s, limit);
    std::uint64_t refused = 0, written = 0;
    std::uint32_t next_id = 0;
    // Rounds: add new keys until the limit refuses 20 of them; then remove
    // a third and update a third at other sizes (some refused too); compact.
    for (int round = 0; round < 4; ++round) {
      std::uint64_t refused_here = 0;
      while (refused_here < 20) {
        const std::uint32_t id = next_id++;
        const std::string v = value_of(id, 0, 16 * 1024);
        try {
          s.put(key_of(id), v);
          model[id] = 0;
          ++written;
        } catch (const offheap::Error& e) {
          INFO(e.what());
          REQUIRE(is_out_of_space(e));
          REQUIRE_FALSE(s.contains(key_of(id)));  // nothing half-written
          ++refused_here;
        }
        check_stats(s, limit);
      }
      refused += refused_here;
      std::vector<std::uint32_t> ids;
      for (const auto& [id, version] : model) ids.push_back(id);
      for (std::uint32_t id : ids) {
        const std::uint64_t r = rng() % 3;
        if (r == 0) {
          REQUIRE(s.remove(key_of(id)));
          model.erase(id);
        } else if (r == 1) {
          const std::uint32_t version = model[id] + 1;
          try {
            s.put(key_of(id), value_of(id, version, 16 * 1024));
            model[id] = version;
          } catch (const offheap::Error& e) {
            INFO(e.what());
            REQUIRE(is_out_of_space(e));  // the old value stays (checked below)
            ++refused;
          }
        }
        check_stats(s, limit);
      }
      s.maintain();  // compaction empties chunks; they stay counted
      check_stats(s, limit);
    }
    INFO("written " << written << ", refused " << refused);
    CHECK(refused >= 80);
    CHECK(written > 4 * 1000);
    for (const auto& [id, version] : model) {
      const std::optional<std::string> got = s.get(key_of(id));
      REQUIRE(got.has_value());
      REQUIRE(*got == value_of(id, version, 16 * 1024));
    }
    REQUIRE(s.size() == model.size());
    REQUIRE(s.verify().empty());
    const offheap::Stats st = s.stats();
    // The limit was used, not just respected: within a chunk table and a
    // few pages of it.
    CHECK(st.memory_mapped_bytes > limit - limit / 8);
    if (!kSanitized) {
      // The process's own mappings say the same, to the byte.
      REQUIRE(process_mapped("") - before == st.memory_mapped_bytes);
    }
  }
  if (!kSanitized) REQUIRE(process_mapped("") == before);  // all of it unmapped
}

TEMPLATE_TEST_CASE("A cache under memory_limit_bytes evicts instead of passing it", "[memory_limit]",
                   offheap::Cache, offheap::LruCache, offheap::TinyLfuCache) {
  const std::uint64_t limit = (kSanitized ? 12 : 32) * kMiB;
  offheap::Options o;
  o.memory_limit_bytes = limit;
  // Records up to the limit (the capacity may not be more): with the index,
  // the policy and free space, the limit binds before the capacity.
  o.capacity_bytes = limit;
  o.shards = 2;
  o.max_chunk_bytes = 4 * kMiB;
  const bool two_writers = GENERATE(false, true);
  o.background_maintenance = two_writers;
  ::mallopt(M_ARENA_MAX, 1);  // as in the store's test: glibc maps no NORESERVE heap meanwhile
  const std::uint64_t mapped_before = kSanitized ? 0 : process_mapped("");
  TestType c(o);
  const std::uint32_t keys = kSanitized ? 50000 : 150000;  // about 3x the limit
  const std::uint32_t writes = keys * 3;
  // Versions written per key, by the thread that owns the key (id % 2).
  std::vector<std::uint32_t> version(keys, 0);
  std::mutex failure_mutex;
  std::string failure;  // the first write that failed
  auto writer = [&](std::uint32_t part, std::uint32_t parts) {
    std::mt19937_64 rng(7 + part);
    for (std::uint32_t i = 0; i < writes / parts; ++i) {
      std::uint32_t id = static_cast<std::uint32_t>(rng() % keys);
      id -= id % parts;
      id += part;
      if (id >= keys) continue;
      const std::uint32_t v = ++version[id];
      try {
        c.put(key_of(id), value_of(id, v, 4096));  // never out_of_space: it evicts
      } catch (const offheap::Error& e) {
        --version[id];
        const std::lock_guard<std::mutex> g(failure_mutex);
        if (failure.empty()) failure = e.what();
      }
    }
  };
  if (two_writers) {
    std::thread a(writer, 0, 2), b(writer, 1, 2);
    a.join();
    b.join();
  } else {
    writer(0, 1);
  }
  REQUIRE(failure == "");
  check_stats(c, limit);
  if (!kSanitized && !two_writers) {
    // The count is what the process maps (no maintenance thread maps
    // meanwhile): the store's anonymous mappings, to the byte.
    REQUIRE(process_mapped("") - mapped_before == c.stats().memory_mapped_bytes);
  }
  // Read before maintain(): compaction may empty chunks then, which stay
  // counted but hold no records until writers take them back.
  const offheap::Stats st = c.stats();
  INFO("records " << st.records << ", evictions " << st.evictions << " (" << st.limit_evictions
                  << " for the limit), mapped " << st.memory_mapped_bytes << ": live " << st.live_bytes
                  << ", free " << st.free_bytes << " in " << st.free_records << " records, journal "
                  << st.journal_bytes << ", emptied " << st.emptied_bytes << ", index capacity "
                  << st.index_capacity << ", retired index " << st.retired_bytes << ", policy "
                  << st.policy_mapped_bytes << ", chunks " << st.chunks);
  CHECK(st.limit_evictions > 0);
  // The cache still holds records of a good share of the limit, not a few
  // (on this machine: LRU and W-TinyLFU about 3/4; S3-FIFO 30-75%, whose
  // queues give segments back and map them again as entries move between
  // them, and whose evictions leave free space that compaction empties; the
  // rest is the index, the policy, free space and emptied chunks).
  CHECK(st.live_bytes > limit / 5);
  std::uint64_t present = 0;
  for (std::uint32_t id = 0; id < keys; ++id) {
    const std::optional<std::string> got = c.get(key_of(id));
    if (!got) continue;
    ++present;
    REQUIRE(*got == value_of(id, version[id], 4096));  // the latest value, or none
  }
  REQUIRE(present == st.records);
  REQUIRE(c.verify().empty());
  c.maintain();
  check_stats(c, limit);
  REQUIRE(c.verify().empty());
}

TEST_CASE("A file-backed store under memory_limit_bytes reopens under it, and is refused whole under less",
          "[memory_limit]") {
  offheap_test::TempDir dir;
  const std::uint64_t limit = 24 * kMiB;
  offheap::Options o;
  o.path = (dir / "s").string();
  o.memory_limit_bytes = limit;
  o.shards = 2;
  o.max_chunk_bytes = 2 * kMiB;
  o.background_maintenance = false;
  // Pre-sized: a clean reopen maps the saved table, not a third beside
  // the constructor's table and its spare.
  o.expected_entries = GENERATE(0u, 100000u);
  INFO("expected_entries " << o.expected_entries);
  std::uint32_t n = 0;
  {
    offheap::Store s(o);
    for (;; ++n) {
      try {
        s.put(key_of(n), value_of(n, 1, 8192));
      } catch (const offheap::Error& e) {
        INFO(e.what());
        REQUIRE(is_out_of_space(e));
        break;
      }
      if (n % 64 == 0) check_stats(s, limit);
    }
    check_stats(s, limit);
    if (!kSanitized) {
      // Its files' mappings are inside the count (with its anonymous ones).
      const std::uint64_t files = process_mapped(o.path);
      CHECK(files > limit / 2);
      CHECK(files <= s.stats().memory_mapped_bytes);
    }
  }
  REQUIRE(n > 1000);
  {
    offheap::Store s(o);  // the same limit: what it held fits again
    check_stats(s, limit);
    REQUIRE(s.size() == n);
  }
  {
    offheap::Options small = o;
    small.memory_limit_bytes = limit / 2;
    try {
      offheap::Store s(small);
      FAIL("opened " << s.size() << " records under half the limit they needed");
    } catch (const offheap::Error& e) {
      INFO(e.what());
      REQUIRE(is_out_of_space(e));
    }
  }
  offheap::Options none = o;
  none.memory_limit_bytes = 0;
  offheap::Store s(none);
  REQUIRE(s.size() == n);
  for (std::uint32_t id = 0; id < n; ++id) REQUIRE(s.get(key_of(id)) == value_of(id, 1, 8192));
  REQUIRE(s.verify().empty());
}

TEST_CASE("A limit below what a store maps to open is refused with a clear error", "[memory_limit]") {
  {
    offheap::Options c;
    c.memory_limit_bytes = 8 * kMiB;
    c.capacity_bytes = 8 * kMiB + 1;
    try {
      offheap::Cache cache(c);
      FAIL("a cache with more capacity than memory");
    } catch (const offheap::Error& e) {
      INFO(e.what());
      REQUIRE(e.code() == offheap::Errc::invalid_argument);
      REQUIRE(std::string(e.what()).find("memory_limit_bytes") != std::string::npos);
    }
  }
  offheap::Options o;
  o.memory_limit_bytes = 4096;
  try {
    offheap::Store s(o);
    FAIL("a store opened in 4096 bytes");
  } catch (const offheap::Error& e) {
    INFO(e.what());
    REQUIRE(is_out_of_space(e));
  }
  o.memory_limit_bytes = 2 * kMiB;  // enough for a small store
  o.shards = 1;
  offheap::Store s(o);
  s.put("k", "v");
  REQUIRE(s.get("k") == "v");
  check_stats(s, 2 * kMiB);
}

namespace {

/// A cache at its limit in a mode whose evictions free their records only
/// later: after a report (a removal listener) or a sync (periodic).
struct WaitingMode {
  const char* name;
  bool listener;
  bool file;
  std::size_t max_value;    // values of 16 B up to this
  std::uint32_t ttl_every;  // every n-th write with a (long) TTL (0: none): the expiry wheel maps too
  bool background;          // a maintenance thread (else the writer alone reports and syncs)
  std::uint32_t capacity_pct = 100;  // capacity_bytes, in % of the limit
  bool in_turn = false;  // keys written in turn, each one evicted before it comes back (else at random)
};

/// Reads every key back: each present one holds its latest value
/// (`version[id]`); returns how many are present.
template <class C>
std::uint64_t latest_values(const C& c, const std::vector<std::uint32_t>& version, std::size_t max_value) {
  std::uint64_t present = 0;
  for (std::uint32_t id = 0; id < version.size(); ++id) {
    const std::optional<std::string> got = c.get(key_of(id));
    if (!got) continue;
    ++present;
    REQUIRE(*got == value_of(id, version[id], max_value));
  }
  return present;
}

template <class C>
void run_waiting_mode(const WaitingMode& mode) {
  INFO(mode.name);
  offheap_test::TempDir dir;
  const std::uint64_t limit = (kSanitized ? 8 : 16) * kMiB;
  offheap::Options o;
  if (mode.file) {
    o.path = (dir / "c").string();
    o.durability = offheap::Durability::periodic;
  }
  o.memory_limit_bytes = limit;
  o.capacity_bytes = limit / 100 * mode.capacity_pct;
  o.shards = 2;
  o.max_chunk_bytes = 2 * kMiB;
  o.background_maintenance = mode.background;
  std::mutex told_mutex;  // the listener may run on the maintenance thread and the writer's at once
  std::map<offheap::RemovalCause, std::uint64_t> told;
  if (mode.listener) {
    o.on_removal = [&](std::string_view, std::string_view, offheap::RemovalCause cause) {
      const std::lock_guard<std::mutex> g(told_mutex);
      ++told[cause];
    };
  }
  // About 3x the limit (under the sanitizers at most 100,000 keys: small
  // values made this the suite's longest test under TSan, 7 min).
  const std::uint32_t keys = static_cast<std::uint32_t>(
      std::min<std::uint64_t>(kSanitized ? 100000 : 400000, 3 * limit / (mode.max_value / 4 + 48)));
  std::vector<std::uint32_t> version(keys, 0);
  {
    C c(o);
    std::mt19937_64 rng(11);
    std::uint64_t evictions_before = 0, most_evicted = 0;  // by one write
    for (std::uint32_t i = 0; i < keys * (mode.in_turn ? 4 : 2); ++i) {
      const auto id = static_cast<std::uint32_t>(mode.in_turn ? i % keys : rng() % keys);
      const std::uint32_t v = version[id] + 1;
      try {
        if (mode.ttl_every != 0 && i % mode.ttl_every == 0) {
          c.put(key_of(id), value_of(id, v, mode.max_value), offheap::Ttl(std::chrono::hours(1)));
        } else {
          c.put(key_of(id), value_of(id, v, mode.max_value));
        }
      } catch (const offheap::Error& e) {
        const offheap::Stats st = c.stats();
        FAIL("write " << i << " refused: " << e.what() << "\n records " << st.records << ", live "
                      << st.live_bytes << ", free " << st.free_bytes << ", journal mapped "
                      << st.mapped_bytes - st.policy_mapped_bytes << ", emptied " << st.emptied_bytes
                      << ", index capacity " << st.index_capacity << ", retired index " << st.retired_bytes
                      << ", policy " << st.policy_mapped_bytes << ", deferred " << st.deferred_records
                      << ", pending " << st.removals_pending << ", chunks " << st.chunks);
      }
      version[id] = v;
      if (i % 256 == 0) check_stats(c, limit);
      if (!mode.background) {
        const std::uint64_t evictions = c.stats().limit_evictions;
        most_evicted = std::max(most_evicted, evictions - evictions_before);
        evictions_before = evictions;
      }
    }
    check_stats(c, limit);
    const offheap::Stats st = c.stats();
    // One write evicts for the limit what it needs and a bounded share
    // of its shard (1/16 with a listener or periodic, per round, a few
    // rounds; else 1/128 doubling up to 1/8): never most of the shard.
    INFO("most evicted by one write: " << most_evicted);
    if (!mode.background) CHECK(most_evicted < st.records / 2);
    INFO("records " << st.records << ", evictions " << st.evictions << " (" << st.limit_evictions
                    << " for the limit), live " << st.live_bytes << ", mapped " << st.memory_mapped_bytes);
    if (!mode.background) CHECK(st.limit_evictions > 0);
    INFO("evictions without a marker: " << st.markerless_evictions);
    // Keys in turn pack the journal: some evictions found no room for a marker.
    if (mode.in_turn) CHECK(st.markerless_evictions > 0);
    if (!mode.file) CHECK(st.markerless_evictions == 0);
    // A good share of the limit holds records (small ones carry their
    // index slot, policy node and wheel entry: about 100 bytes each; under
    // the sanitizers' 8 MiB limit the fixed part weighs more).
    CHECK(st.live_bytes > limit / (mode.max_value < 256 ? 10 : 5));
    const std::uint64_t present = latest_values(c, version, mode.max_value);
    if (!mode.background) REQUIRE(present == st.records);
    INFO("maintain()");
    c.maintain();
    check_stats(c, limit);
    REQUIRE(c.verify().empty());
    if (mode.listener) {
      // Every eviction and replacement told, once (maintain() reported the rest).
      const offheap::Stats after = c.stats();
      const std::lock_guard<std::mutex> g(told_mutex);
      REQUIRE(told[offheap::RemovalCause::evicted] == after.evictions);
      REQUIRE(after.removals_pending == 0);
    }
  }
  if (mode.file) {
    INFO("reopening");
    C c(o);  // reopens under the same limit, with the latest values
    check_stats(c, limit);
    REQUIRE(c.size() > 0);
    REQUIRE(latest_values(c, version, mode.max_value) == c.size());
    REQUIRE(c.verify().empty());
  }
}

}  // namespace

TEMPLATE_TEST_CASE("A cache whose evictions wait for a listener or a sync keeps writing at memory_limit_bytes",
                   "[memory_limit]", offheap::Cache, offheap::LruCache, offheap::TinyLfuCache) {
  const WaitingMode mode = GENERATE(values<WaitingMode>({
      {"anonymous, a removal listener", true, false, 4096, 0, false},
      {"file-backed, periodic", false, true, 4096, 0, false},
      {"file-backed, periodic, a removal listener", true, true, 4096, 0, false},
      {"anonymous, small values with TTLs", false, false, 64, 1, false},
      {"anonymous, a tenth of the writes with TTLs", false, false, 4096, 10, false},
      {"anonymous, a listener, TTLs, a maintenance thread, capacity 90% of the limit", true, false, 4096, 3,
       true, 90},
      {"file-backed, periodic, small values with TTLs", false, true, 64, 1, false},
      {"file-backed, periodic, a listener, a maintenance thread", true, true, 4096, 0, true},
      // Inserts at the limit: a journal packed to the last bytes, where an
      // eviction's dead marker finds no room and no chunk (it goes without
      // one once its record is settled by syncs).
      {"file-backed, periodic, keys in turn", false, true, 3072, 0, false, 100, true},
  }));
  run_waiting_mode<TestType>(mode);
}

TEST_CASE("A cache refuses at once a record larger than any chunk its limit leaves room for", "[memory_limit]") {
  offheap::Options o;
  o.memory_limit_bytes = 8 * kMiB;
  o.capacity_bytes = 8 * kMiB;
  o.shards = 1;
  o.max_chunk_bytes = 64 * kMiB;
  o.background_maintenance = false;
  offheap::LruCache c(o);
  for (std::uint32_t id = 0; id < 40000; ++id) c.put(key_of(id), value_of(id, 1, 4096));  // about 4x the limit
  const offheap::Stats before = c.stats();
  REQUIRE(before.limit_evictions > 0);
  // 6 MiB: within the capacity, but no chunk mapped under an 8 MiB limit
  // holds it, nor could one be mapped beside them; evicting would not
  // help, so nothing is evicted for it.
  const std::string big(6 * kMiB, 'x');
  try {
    c.put("big", big);
    FAIL("a 6 MiB record in chunks mapped under an 8 MiB limit");
  } catch (const offheap::Error& e) {
    INFO(e.what());
    REQUIRE(is_out_of_space(e));
  }
  const offheap::Stats after = c.stats();
  REQUIRE(after.records == before.records);
  REQUIRE(after.evictions == before.evictions);
  REQUIRE_FALSE(c.contains("big"));
  check_stats(c, 8 * kMiB);
}

namespace {
// A SIGKILL keeps what the page cache holds (markers and frees too): the
// cache reopens with what it held, under the same limit. Then under a
// tenth less: its shards' policies evict at open (markers, syncs, and
// evictions without markers once the syncs settle the records) until
// the rest fits; each shard maps its first policy segments before the
// rebuilds run side by side.
struct Profile {
  const char* name;
  std::size_t max_value;
  bool ttl;
  // Under less: small records (whose policy nodes and index slots weigh)
  // reopen, evicting, unless the index table or (with TTLs) the expiry
  // wheel, rebuilt before the policy and not optional, does not fit: the
  // open is then refused whole. Large records' chunks alone pass it:
  // refused.
  enum class Tighter { opens, may_refuse, refused } tighter;
  std::uint64_t tenths;  // the tighter limit, in tenths of the first
};

/// A periodic cache of type C killed at its limit by SIGKILL, `trials`
/// times, reopened under a tighter limit and under the same one.
/// `must_open`: the tighter limit is half the policy's mapping less than
/// the files map under the first one, and the open must evict to fit
/// (profile.tenths is then unused).
template <class C>
void killed_at_limit(const Profile& profile, int trials, bool must_open) {
  using T = Profile::Tighter;
  INFO(profile.name);
  int opened_evicting = 0;  // trials whose tighter open evicted at open
  for (int trial = 0; trial < trials; ++trial) {
    INFO("trial " << trial);
    offheap_test::TempDir dir;
    const std::uint64_t limit = (kSanitized ? 8 : 16) * kMiB;
    offheap::Options o;
    o.path = (dir / "c").string();
    o.durability = offheap::Durability::periodic;
    o.memory_limit_bytes = limit;
    o.capacity_bytes = limit;
    o.shards = 2;
    o.max_chunk_bytes = 2 * kMiB;
    o.background_maintenance = false;
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      try {
        C c(o);
        for (std::uint32_t i = 0;; ++i) {
          const std::uint32_t id = i % 200000;  // about 3x what the limit holds
          const std::string v = value_of(id, i / 200000, profile.max_value);
          if (profile.ttl) {
            c.put(key_of(id), v, offheap::Ttl(std::chrono::hours(1)));
          } else {
            c.put(key_of(id), v);
          }
        }
      } catch (...) {
        ::_exit(3);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds((kSanitized ? 3000 : 1200) + 300 * trial));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    // A write the limit refused would have ended the child (exit 3).
    REQUIRE(WIFSIGNALED(status));
    std::filesystem::copy(dir / "c", dir / "tighter", std::filesystem::copy_options::recursive);
    // The same files under less: recovered, the shards' policies evict at
    // open until the rest fits; or the open is refused whole, and the files
    // then open under the first limit with everything.
    std::uint64_t tighter_limit = limit / 10 * profile.tenths;
    if (must_open) {
      // Less by half of what the policy maps when these files reopen under
      // the first limit (a copy, opened and closed): the policy must evict
      // at open, and the chunks and index tables, which no eviction
      // shrinks, keep the other half as margin. (A fixed fraction of the
      // limit lands within a few KiB of that floor or past it, by where
      // the kill found the journal's last chunks.)
      std::filesystem::copy(dir / "c", dir / "probe", std::filesystem::copy_options::recursive);
      offheap::Options p = o;
      p.path = (dir / "probe").string();
      C probe(p);
      const offheap::Stats st = probe.stats();
      INFO("the same files under the first limit: " << st.memory_mapped_bytes << " bytes mapped, "
                                                    << st.policy_mapped_bytes << " by the policy");
      REQUIRE(st.policy_mapped_bytes > 0);
      tighter_limit = st.memory_mapped_bytes - st.policy_mapped_bytes / 2;
    }
    {
      offheap::Options t = o;
      t.path = (dir / "tighter").string();
      t.memory_limit_bytes = tighter_limit;
      t.capacity_bytes = t.memory_limit_bytes;
      bool opened = false;
      const int evicting_before = opened_evicting;
      std::string refused_why;
      try {
        C c(t);
        opened = true;
        check_stats(c, t.memory_limit_bytes);
        INFO("held " << c.size() << ", evicted at open " << c.stats().limit_evictions << " ("
                     << c.stats().markerless_evictions << " without a marker)");
        opened_evicting += c.stats().limit_evictions > 0;
        REQUIRE(c.size() > 0);
        REQUIRE(c.verify().empty());
        c.put("after", "the reopened cache writes");
        REQUIRE(c.get("after") == "the reopened cache writes");
      } catch (const offheap::Error& e) {
        refused_why = e.what();
        REQUIRE_FALSE(opened);
        REQUIRE(e.code() == offheap::Errc::out_of_space);
        REQUIRE(std::string(e.what()).find("memory_limit_bytes") != std::string::npos);
      }
      if (profile.tighter == T::refused) REQUIRE_FALSE(opened);
      INFO("the tighter open: " << refused_why);
      if (must_open) {
        REQUIRE(opened);
        REQUIRE(opened_evicting > evicting_before);  // this open evicted to fit
      }
      if (!opened) {
        t.memory_limit_bytes = limit;  // a refused open changed nothing
        t.capacity_bytes = limit;
        C c(t);
        REQUIRE(c.size() > 0);
        REQUIRE(c.verify().empty());
      }
    }
    C c(o);  // throws if the limit refuses the reopen
    check_stats(c, limit);
    REQUIRE(c.size() > 0);
    REQUIRE(c.verify().empty());
    INFO("evicted at open: " << c.stats().limit_evictions);
    // Every record is some version the child wrote for its key.
    std::uint64_t present = 0;
    c.for_each([&](std::string_view k, std::string_view v) {
      const std::uint32_t id = static_cast<std::uint32_t>(std::stoul(std::string(k.substr(k.find('-') + 1))));
      std::uint32_t version = 0;
      REQUIRE(v.size() >= 8);
      std::memcpy(&version, v.data() + 4, 4);
      REQUIRE(v == value_of(id, version, profile.max_value));
      ++present;
    });
    REQUIRE(present == c.size());
    c.put("after", "the reopened cache writes");
    REQUIRE(c.get("after") == "the reopened cache writes");
  }
  INFO("tighter opens that evicted at open: " << opened_evicting);
}

}  // namespace

TEST_CASE("A periodic cache killed at its limit reopens under the same limit", "[memory_limit][crash]") {
  using T = Profile::Tighter;
  const Profile profile = GENERATE(values<Profile>({{"small values", 64, false, T::opens, 7},
                                                    {"small values with TTLs", 64, true, T::may_refuse, 8},
                                                    {"values up to 3 KiB", 3072, false, T::refused, 8}}));
  killed_at_limit<offheap::Cache>(profile, 3, false);
}

TEMPLATE_TEST_CASE("A periodic LRU or W-TinyLFU cache killed at its limit reopens under less, evicting at open",
                   "[memory_limit][crash]", offheap::LruCache, offheap::TinyLfuCache) {
  // The records' node words are hints: a segment the limit refuses for a
  // word's number costs the number, not the open.
  killed_at_limit<TestType>(Profile{"small values", 64, false, Profile::Tighter::opens, 0}, 2, true);
}
