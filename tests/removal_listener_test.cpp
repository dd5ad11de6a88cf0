// SPDX-License-Identifier: Apache-2.0
// The removal listener (Options::on_removal): every removed record reported
// once, with the key and the value it held and the right cause, from the
// maintenance thread; its space kept until then; counts equal to the
// stats; removals that wait survive no crash (file-backed stores do not
// bring them back); clear() and close() refused from inside it.
#include <offheap/offheap.hpp>

#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

using offheap::Cache;
using offheap::Errc;
using offheap::Options;
using offheap::RemovalCause;
using offheap::Store;

namespace {

struct Report {
  std::string key;
  std::string value;
  RemovalCause cause;
  bool operator==(const Report&) const = default;
};

/// Collects the listener's calls (from whichever thread makes them).
struct Reports {
  std::mutex m;
  std::vector<Report> calls;
  std::set<std::thread::id> threads;
  offheap::RemovalListener listener() {
    return [this](std::string_view k, std::string_view v, RemovalCause c) {
      const std::lock_guard<std::mutex> g(m);
      calls.push_back(Report{std::string(k), std::string(v), c});
      threads.insert(std::this_thread::get_id());
    };
  }
  std::vector<Report> take() {
    const std::lock_guard<std::mutex> g(m);
    return calls;
  }
  std::uint64_t count(RemovalCause c) {
    const std::lock_guard<std::mutex> g(m);
    std::uint64_t n = 0;
    for (const Report& r : calls) n += r.cause == c ? 1 : 0;
    return n;
  }
};

std::string key_of(std::uint64_t i) { return "key-" + std::to_string(i); }
std::string value_of(std::uint64_t i, std::uint64_t version = 0) {
  return "value-" + std::to_string(i) + "-v" + std::to_string(version) + std::string(i % 50, 'x');
}

Options manual(Reports& r) {
  Options o;
  o.shards = 2;
  o.background_maintenance = false;
  o.on_removal = r.listener();
  return o;
}

}  // namespace

TEST_CASE("The listener hears each removal once, with its key, value and cause, in order", "[removal]") {
  Reports r;
  Store s(manual(r));
  s.put("a", "1");
  s.put("a", "22");              // replaced: a -> 1
  s.put("b", "3");
  CHECK(s.remove("a"));          // explicit: a -> 22
  CHECK_FALSE(s.remove("zz"));   // nothing
  CHECK(s.replace("b", "44"));   // replaced: b -> 3
  CHECK_FALSE(s.put_if_absent("b", "5"));
  // Nothing is reported before maintenance runs; the removals wait.
  CHECK(r.take().empty());
  offheap::Stats st = s.stats();
  CHECK(st.removals_pending == 3);
  CHECK(st.retired_records == 3);
  CHECK(st.retired_record_bytes > 0);
  s.maintain();
  const std::vector<Report> got = r.take();
  // Shards report one after the other: compare per key, in order.
  std::map<std::string, std::vector<Report>> by_key;
  for (const Report& x : got) by_key[x.key].push_back(x);
  CHECK(got.size() == 3);
  CHECK(by_key["a"] == std::vector<Report>{{"a", "1", RemovalCause::replaced}, {"a", "22", RemovalCause::explicit_remove}});
  CHECK(by_key["b"] == std::vector<Report>{{"b", "3", RemovalCause::replaced}});
  st = s.stats();
  CHECK(st.removals_reported == 3);
  CHECK(st.removals_replaced == 2);
  CHECK(st.removes == 1);
  CHECK(st.removals_pending == 0);
  CHECK(st.retired_records == 0);
  CHECK(st.retired_record_bytes == 0);
  CHECK(st.listener_errors == 0);
  s.maintain();  // nothing more
  CHECK(r.take().size() == 3);
  CHECK(s.get("b") == std::optional<std::string>("44"));
}

TEST_CASE("A removed record's space is not reused before its report", "[removal]") {
  Reports r;
  Store s(manual(r));
  for (std::uint64_t i = 0; i < 2000; ++i) s.put(key_of(i), value_of(i));
  for (std::uint64_t i = 0; i < 2000; ++i) REQUIRE(s.remove(key_of(i)));
  // Writes that would take the freed space if it were free.
  for (std::uint64_t i = 2000; i < 4000; ++i) s.put(key_of(i), value_of(i, 7));
  for (std::uint64_t i = 2000; i < 2500; ++i) s.put(key_of(i), value_of(i, 8));  // replacements too
  s.maintain();
  std::map<std::string, std::string> explicit_removed;
  std::uint64_t replaced = 0;
  for (const Report& x : r.take()) {
    if (x.cause == RemovalCause::explicit_remove) {
      CHECK(explicit_removed.emplace(x.key, x.value).second);  // once each
    } else {
      REQUIRE(x.cause == RemovalCause::replaced);
      const std::uint64_t i = std::stoull(x.key.substr(4));
      CHECK(x.value == value_of(i, 7));
      ++replaced;
    }
  }
  CHECK(replaced == 500);
  REQUIRE(explicit_removed.size() == 2000);
  for (std::uint64_t i = 0; i < 2000; ++i) CHECK(explicit_removed[key_of(i)] == value_of(i));
  // After the reports the space is free again: writing the same again
  // takes no more journal than the first time did.
  const std::uint64_t journal = s.stats().journal_bytes;
  for (std::uint64_t i = 4000; i < 6000; ++i) s.put(key_of(i), value_of(i - 4000));
  CHECK(s.stats().journal_bytes <= journal + 4096);
}

TEST_CASE("Updates are not made in place while the listener needs the old value", "[removal]") {
  Reports r;
  Store s(manual(r));
  s.put("k", std::string(100, 'a'));
  s.put("k", std::string(90, 'b'));  // would fit in place
  s.maintain();
  REQUIRE(r.take() == std::vector<Report>{{"k", std::string(100, 'a'), RemovalCause::replaced}});
  CHECK(s.get("k") == std::optional<std::string>(std::string(90, 'b')));
}

TEST_CASE("A cache reports every eviction once, counts equal the stats, two writers stay under the limit",
          "[removal][cache]") {
  Reports r;
  Options o;
  o.shards = 2;
  o.capacity_bytes = 256 << 10;
  o.on_removal = r.listener();  // background maintenance on
  std::atomic<std::uint64_t> max_live{0};
  std::map<std::string, std::string> last;  // per thread key space: the last value written
  std::mutex last_m;
  {
    Cache c(o);
    const std::uint64_t share = o.capacity_bytes / o.shards;
    const std::uint64_t limit = o.shards * (share + std::max<std::uint64_t>(share / 16, 4096));
    auto writer = [&](std::uint64_t t) {
      std::map<std::string, std::string> mine;
      for (std::uint64_t n = 0; n < 40000; ++n) {
        const std::uint64_t i = t * 1000000 + n % 9000;
        const std::string v = value_of(i, n);
        c.put(key_of(i), v);
        mine[key_of(i)] = v;
        if (n % 97 == 0) {
          c.remove(key_of(i));
          mine.erase(key_of(i));
        }
        if (n % 256 == 0) {
          const std::uint64_t live = c.stats().live_bytes;
          std::uint64_t seen = max_live.load();
          while (live > seen && !max_live.compare_exchange_weak(seen, live)) {
          }
        }
      }
      const std::lock_guard<std::mutex> g(last_m);
      last.insert(mine.begin(), mine.end());
    };
    std::thread other(writer, 1);
    writer(0);
    other.join();
    CHECK(max_live.load() <= limit);
    // Wait for the maintenance thread to catch up (bounded): the shards
    // at their share and every removal reported. (A round leaves a shard
    // written since the round before to its writers: the last record a
    // write left over the share goes a round or two after the writes
    // stop, and is reported then.)
    for (int i = 0; i < 2000; ++i) {
      const offheap::Stats now = c.stats();
      if (now.removals_pending == 0 && now.live_bytes <= now.capacity_bytes) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    const offheap::Stats st = c.stats();
    CHECK(st.removals_pending == 0);
    CHECK(st.live_bytes <= st.capacity_bytes);
    const std::uint64_t reported = r.take().size();
    CHECK(reported == st.removals_reported);
    CHECK(r.count(RemovalCause::evicted) == st.evictions);
    CHECK(r.count(RemovalCause::explicit_remove) == st.removes);
    CHECK(r.count(RemovalCause::replaced) == st.removals_replaced);
    CHECK(st.evictions > 1000);
    // Reported from the maintenance thread only.
    CHECK(r.threads.size() == 1);
    CHECK(r.threads.count(std::this_thread::get_id()) == 0);
    // Every key written ends either in the cache with its last value, or
    // reported with that value as its last removal (evicted or removed).
    std::map<std::string, Report> final_removal;
    for (const Report& x : r.take()) final_removal[x.key] = x;
    std::uint64_t present = 0;
    for (const auto& [k, v] : last) {
      const std::optional<std::string> got = c.get(k);
      if (got) {
        CHECK(*got == v);
        ++present;
      } else {
        REQUIRE(final_removal.count(k) == 1);
        CHECK(final_removal[k].value == v);
        CHECK(final_removal[k].cause == RemovalCause::evicted);
      }
    }
    CHECK(present == c.size());
  }
}

TEST_CASE("Every put ends as a live record or exactly one report", "[removal]") {
  Reports r;
  std::uint64_t puts = 0;
  std::uint64_t live = 0;
  {
    Options o = manual(r);
    o.capacity_bytes = 64 << 10;
    Cache c(o);
    for (std::uint64_t n = 0; n < 20000; ++n) {
      c.put(key_of(n % 3000), value_of(n % 3000, n));
      ++puts;
      if (n % 11 == 0) c.remove(key_of((n * 7) % 3000));
      if (n % 500 == 0) c.maintain();
    }
    c.maintain();
    live = c.size();
    CHECK(c.stats().removals_pending == 0);
  }
  // The destructor reports nothing more: all was reported by maintain().
  CHECK(r.take().size() == puts - live);
}

TEST_CASE("An anonymous store reports what still waits when it goes", "[removal]") {
  Reports r;
  {
    Store s(manual(r));
    s.put("x", "1");
    s.remove("x");
  }
  CHECK(r.take() == std::vector<Report>{{"x", "1", RemovalCause::explicit_remove}});
}

TEST_CASE("A listener that throws is counted, its record is still freed", "[removal]") {
  std::uint64_t calls = 0;
  Options o;
  o.shards = 1;
  o.background_maintenance = false;
  o.on_removal = [&](std::string_view, std::string_view, RemovalCause) {
    ++calls;
    throw std::runtime_error("listener failed");
  };
  Store s(o);
  for (int i = 0; i < 10; ++i) s.put("k", std::to_string(i));
  s.maintain();
  const offheap::Stats st = s.stats();
  CHECK(calls == 9);
  CHECK(st.listener_errors == 9);
  CHECK(st.removals_reported == 9);
  CHECK(st.retired_records == 0);
  s.put("k", "again");  // the store goes on
  CHECK(s.get("k") == std::optional<std::string>("again"));
}

TEST_CASE("The listener may write the store but not clear or close it", "[removal]") {
  Store* self = nullptr;
  std::vector<std::string> errors;
  std::uint64_t seen = 0;
  Options o;
  o.shards = 2;
  o.background_maintenance = false;
  o.on_removal = [&](std::string_view k, std::string_view v, RemovalCause) {
    ++seen;
    self->put(std::string("copy-") + std::string(k), v);  // a write from inside: fine
    for (int which = 0; which < 2; ++which) {
      try {
        if (which == 0) {
          self->clear();
        } else {
          self->close();
        }
      } catch (const offheap::Error& e) {
        errors.push_back(std::to_string(static_cast<int>(e.code())) + e.what());
      }
    }
  };
  Store s(o);
  self = &s;
  s.put("a", "1");
  s.remove("a");
  s.maintain();
  CHECK(seen == 1);
  REQUIRE(errors.size() == 2);
  CHECK_THAT(errors[0], Catch::Contains("clear() called from inside the removal listener"));
  CHECK_THAT(errors[1], Catch::Contains("close() called from inside the removal listener"));
  CHECK(s.get("copy-a") == std::optional<std::string>("1"));
  CHECK(s.stats().listener_errors == 0);
}

TEST_CASE("clear() drops the removals still waiting, unreported", "[removal]") {
  Reports r;
  Store s(manual(r));
  for (int i = 0; i < 5; ++i) s.put("k" + std::to_string(i), "v");
  for (int i = 0; i < 3; ++i) s.remove("k" + std::to_string(i));
  s.clear();
  s.maintain();
  CHECK(r.take().empty());
  const offheap::Stats st = s.stats();
  CHECK(st.removals_unreported == 3);
  CHECK(st.removals_pending == 0);
  CHECK(st.retired_records == 0);
  CHECK(st.records == 0);
}

TEST_CASE("A single-writer store refuses a listener with background maintenance", "[removal]") {
  Options o;
  o.on_removal = [](std::string_view, std::string_view, RemovalCause) {};
  try {
    offheap::OffHeapStore<offheap::SingleWriterPolicy> s(o);
    FAIL("accepted");
  } catch (const offheap::Error& e) {
    CHECK(e.code() == Errc::invalid_argument);
    CHECK_THAT(e.what(), Catch::Contains("on_removal"));
  }
  o.background_maintenance = false;
  offheap::OffHeapStore<offheap::SingleWriterPolicy> s(o);
  s.put("a", "1");
  s.put("a", "2");
  std::uint64_t before = s.stats().removals_pending;
  CHECK(before == 1);
}

TEST_CASE("A file-backed store does not bring back a removal that waited for its report at a crash",
          "[removal][files]") {
  for (const offheap::Durability d : {offheap::Durability::on_close, offheap::Durability::periodic,
                                      offheap::Durability::every_write, offheap::Durability::none}) {
    INFO("durability " << offheap::to_string(d));
    offheap_test::TempDir dir;
    Options o;
    o.path = dir / "store";
    o.shards = 2;
    o.durability = d;
    o.background_maintenance = false;
    o.on_removal = [](std::string_view, std::string_view, RemovalCause) {};
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      try {
        Store s(o);
        for (std::uint64_t i = 0; i < 300; ++i) s.put(key_of(i), value_of(i));
        for (std::uint64_t i = 0; i < 100; ++i) s.put(key_of(i), value_of(i, 1));  // replaced
        s.sync();
        for (std::uint64_t i = 100; i < 200; ++i) s.remove(key_of(i));  // waiting for reports
        s.sync();  // periodic: the old records may be freed by syncs; not while they wait
        s.sync();
        s.sync();
        if (s.stats().removals_pending != 200) ::_exit(4);
        ::_exit(0);  // a crash: no close, no destructor, no report
      } catch (...) {
        ::_exit(3);
      }
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
    Reports r;
    o.on_removal = r.listener();
    Store s(o);
    CHECK(s.stats().rebuilt);
    CHECK(s.size() == 200);
    for (std::uint64_t i = 0; i < 100; ++i) CHECK(s.get(key_of(i)) == std::optional<std::string>(value_of(i, 1)));
    for (std::uint64_t i = 100; i < 200; ++i) CHECK_FALSE(s.contains(key_of(i)));
    for (std::uint64_t i = 200; i < 300; ++i) CHECK(s.get(key_of(i)) == std::optional<std::string>(value_of(i)));
    CHECK(s.verify().empty());
    // What waited at the crash is not reported after it (at most once).
    s.maintain();
    CHECK(r.take().empty());
  }
}

TEST_CASE("A file-backed store reports what waits at close, then reopens clean", "[removal][files]") {
  offheap_test::TempDir dir;
  Reports r;
  Options o = manual(r);
  o.path = dir / "store";
  {
    Store s(o);
    for (std::uint64_t i = 0; i < 100; ++i) s.put(key_of(i), value_of(i));
    for (std::uint64_t i = 0; i < 50; ++i) s.remove(key_of(i));
    s.close();
    CHECK(r.count(RemovalCause::explicit_remove) == 50);
  }
  Store s(o);
  CHECK_FALSE(s.stats().rebuilt);
  CHECK(s.size() == 50);
  CHECK(s.verify().empty());
  const offheap::Stats st = s.stats();
  CHECK(st.retired_records == 0);
}

TEST_CASE("A listener may call sync() and maintain() while close() reports, with a backlog past a batch",
          "[removal][files]") {
  for (const offheap::Durability d : {offheap::Durability::every_write, offheap::Durability::periodic}) {
    INFO("durability " << offheap::to_string(d));
    offheap_test::TempDir dir;
    Store* self = nullptr;
    std::uint64_t seen = 0, inner_errors = 0;
    Options o;
    o.path = dir / "store";
    o.shards = 1;
    o.durability = d;
    o.background_maintenance = false;
    o.on_removal = [&](std::string_view, std::string_view, RemovalCause) {
      ++seen;
      try {
        self->maintain();  // returns at once: this shard's batch is in flight
        self->sync();      // during close(): close() makes it durable
      } catch (const offheap::Error&) {
        ++inner_errors;
      }
    };
    {
      Store s(o);
      self = &s;
      for (std::uint64_t i = 0; i < 600; ++i) s.put(key_of(i), value_of(i));
      for (std::uint64_t i = 0; i < 600; ++i) s.remove(key_of(i));  // 600 waiting: more than a batch
      s.maintain();
      CHECK(seen == 600);
      for (std::uint64_t i = 0; i < 300; ++i) s.put(key_of(i), value_of(i, 1));
      for (std::uint64_t i = 0; i < 300; ++i) s.put(key_of(i), value_of(i, 2));  // 300 replaced
      s.close();
      CHECK(seen == 900);
      CHECK(inner_errors == 0);
    }
    o.on_removal = nullptr;
    Store s(o);
    CHECK_FALSE(s.stats().rebuilt);
    CHECK(s.size() == 300);
    CHECK(s.get(key_of(7)) == std::optional<std::string>(value_of(7, 2)));
    CHECK(s.verify().empty());
  }
}

TEST_CASE("The in-listener guard is per store: another store may be cleared from inside it", "[removal]") {
  Store other;
  other.put("x", "1");
  bool cleared = false;
  Options o;
  o.background_maintenance = false;
  o.on_removal = [&](std::string_view, std::string_view, RemovalCause) {
    other.clear();
    cleared = other.empty();
  };
  Store s(o);
  s.put("a", "1");
  s.remove("a");
  s.maintain();
  CHECK(cleared);
  CHECK(s.stats().listener_errors == 0);
}
