// SPDX-License-Identifier: Apache-2.0
// File-backed stores: round trips through close and reopen (in this process
// and in a new one), crashes (a child that dies without closing), every
// durability mode, the lock, read-only opens, options that contradict the
// store, foreign and damaged directories, and a full disk.
#include <offheap/offheap.hpp>

#include "support/error_of.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

using offheap::Durability;
using offheap::Errc;
using offheap::Options;
using offheap::Store;
using offheap_test::TempDir;
namespace fs = std::filesystem;

using offheap_test::error_of;

namespace {

struct Point {
  double x, y;
  bool operator==(const Point&) const = default;
};

}  // namespace

// Two doubles, no padding: put_value takes it once declared (value_type.hpp).
template <>
struct offheap::ValueTypeTag<Point> {
  static constexpr bool padding_free = true;
};

namespace {

/// What a store should hold: key -> value (typed values as their bytes).
using Model = std::map<std::string, std::string>;

Options file_options(const fs::path& dir, Durability d = Durability::on_close) {
  Options o;
  o.path = dir;
  o.shards = 3;
  o.min_chunk_bytes = 4096;
  o.max_chunk_bytes = 64 * 1024;  // many chunk files
  o.durability = d;
  o.background_maintenance = false;
  return o;
}

std::string value_for(std::uint64_t i, std::uint64_t version) {
  std::string v = "v" + std::to_string(version) + ":" + std::to_string(i) + ":";
  v.append((i * 7 + version * 13) % 300, static_cast<char>('a' + (i + version) % 26));
  return v;
}

/// Writes, overwrites and removes ~3000 keys, and a few typed values;
/// returns what the store must hold.
Model fill(Store& s, std::uint64_t seed = 1) {
  Model m;
  std::mt19937_64 rng(seed);
  for (std::uint64_t i = 0; i < 3000; ++i) {
    const std::string k = "key-" + std::to_string(i);
    s.put(k, value_for(i, 0));
    m[k] = value_for(i, 0);
  }
  for (std::uint64_t round = 1; round <= 3; ++round) {
    for (int j = 0; j < 1500; ++j) {
      const std::uint64_t i = rng() % 3000;
      const std::string k = "key-" + std::to_string(i);
      if (rng() % 4 == 0) {
        CHECK(s.remove(k) == (m.erase(k) == 1));
      } else {
        s.put(k, value_for(i, round));
        m[k] = value_for(i, round);
      }
    }
  }
  for (int i = 0; i < 20; ++i) {
    const std::string k = "point-" + std::to_string(i);
    const Point p{i * 1.5, -i * 2.0};
    s.put_value(k, p);
    m[k] = std::string(reinterpret_cast<const char*>(&p), sizeof p);
  }
  s.put("", "the empty key");
  m[""] = "the empty key";
  s.put("big", std::string(50000, 'B'));  // most of a 64 KiB chunk
  m["big"] = std::string(50000, 'B');
  return m;
}

/// Every key of the model reads back with its value (typed ones as Point),
/// size() agrees, for_each visits exactly the model, verify() passes.
void check_holds(const Store& s, const Model& m) {
  CHECK(s.verify() == "");
  CHECK(s.size() == m.size());
  std::string out;
  std::size_t wrong = 0;
  for (const auto& [k, v] : m) {
    if (k.rfind("point-", 0) == 0) {
      const int i = std::stoi(k.substr(6));
      const std::optional<Point> p = s.get_value<Point>(k);
      if (!p || !(*p == Point{i * 1.5, -i * 2.0})) ++wrong;
    } else if (!s.get(k, out) || out != v) {
      ++wrong;
    }
  }
  CHECK(wrong == 0);
  Model seen;
  s.for_each([&](std::string_view k, std::string_view v) { seen.emplace(k, v); });
  CHECK(seen == m);
}

/// Runs fn in a child process; returns its exit status (fn's return value,
/// 99 for an exception, 128 + n for a signal).
template <class F>
int in_child(F&& fn) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int code = 99;
    try {
      code = fn();
    } catch (...) {
    }
    ::_exit(code);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

TEST_CASE("a file-backed store reopens with every record, type and removal", "[files]") {
  TempDir dir;
  Options o = file_options(dir / "store");
  o.max_chunk_bytes = 1 << 20;
  Model m;
  {
    Store s(o);
    CHECK_FALSE(s.stats().rebuilt);
    m = fill(s);
    check_holds(s, m);
    CHECK(s.stats().chunks > 3 * 2);  // several chunk files per shard
  }
  {
    Store s(o);
    const offheap::Stats st = s.stats();
    CHECK_FALSE(st.rebuilt);  // a clean close: the index was mapped, no record read
    CHECK(st.corrupt_records == 0);
    check_holds(s, m);
    // And it goes on working: more writes, another clean round trip.
    s.put("after", "reopen");
    m["after"] = "reopen";
    CHECK(s.remove("key-1") == (m.erase("key-1") == 1));
  }
  {
    Options by_default;
    by_default.path = dir / "store";  // shards, seed and chunk sizes from the files
    Store s(by_default);
    CHECK(s.stats().shards == 3);
    check_holds(s, m);
  }
  // In a new process.
  const int code = in_child([&] {
    Store s(o);
    std::string out;
    for (const auto& [k, v] : m) {
      if (k.rfind("point-", 0) == 0) continue;
      if (!s.get(k, out) || out != v) return 1;
    }
    return s.size() == m.size() && s.verify().empty() && !s.stats().rebuilt ? 0 : 2;
  });
  CHECK(code == 0);
}

TEST_CASE("a process that dies without closing loses no completed write", "[files]") {
  for (const Durability d :
       {Durability::none, Durability::on_close, Durability::periodic, Durability::every_write}) {
    INFO("durability " << offheap::to_string(d));
    TempDir dir;
    const Options o = file_options(dir / "store", d);
    Model m;
    {
      Store s(o);
      m = fill(s, 7);
    }
    // The child reopens, changes things and dies without closing.
    const int code = in_child([&] {
      Store s(o);
      s.put("key-5", "changed by the child");
      s.remove("key-6");
      for (int i = 0; i < 500; ++i) s.put("child-" + std::to_string(i), std::string(i, 'c'));
      ::_exit(0);
      return 0;
    });
    REQUIRE(code == 0);
    m["key-5"] = "changed by the child";
    m.erase("key-6");
    for (int i = 0; i < 500; ++i) m["child-" + std::to_string(i)] = std::string(i, 'c');
    Store s(o);
    CHECK(s.stats().rebuilt);
    check_holds(s, m);
  }
}

TEST_CASE("Durability::none rebuilds at every open, the others reopen clean", "[files]") {
  for (const Durability d :
       {Durability::none, Durability::on_close, Durability::periodic, Durability::every_write}) {
    INFO("durability " << offheap::to_string(d));
    TempDir dir;
    const Options o = file_options(dir / "store", d);
    Model m;
    {
      Store s(o);
      m = fill(s, 3);
      s.sync();
    }
    Store s(o);
    CHECK(s.stats().rebuilt == (d == Durability::none));
    check_holds(s, m);
  }
}

TEST_CASE("periodic durability frees an update's old record only after a sync", "[files]") {
  TempDir dir;
  Options o = file_options(dir / "store", Durability::periodic);
  Store s(o);
  for (int i = 0; i < 100; ++i) s.put("k" + std::to_string(i), std::string(40, 'a'));
  s.sync();
  CHECK(s.stats().deferred_records == 0);
  for (int i = 0; i < 100; ++i) s.put("k" + std::to_string(i), std::string(40, 'b'));
  const offheap::Stats before = s.stats();
  CHECK(before.deferred_records == 100);  // kept whole, marked superseded
  CHECK(s.verify() == "");
  const std::uint64_t free_before = before.free_records;
  s.sync();
  const offheap::Stats after = s.stats();
  CHECK(after.deferred_records == 0);
  CHECK(after.free_records + after.records > free_before);  // the old records are free now
  CHECK(s.verify() == "");
  std::string out;
  CHECK(s.get("k7", out));
  CHECK(out == std::string(40, 'b'));
}

TEST_CASE("maintain() syncs a periodic store without a background thread", "[files]") {
  TempDir dir;
  Options o = file_options(dir / "store", Durability::periodic);
  o.sync_interval = std::chrono::milliseconds(1);
  Store s(o);
  s.put("a", "1");
  s.put("a", "2");
  CHECK(s.stats().deferred_records == 1);
  ::usleep(5000);
  s.maintain();
  CHECK(s.stats().deferred_records == 0);
  CHECK(s.verify() == "");
}

TEST_CASE("the background maintenance thread syncs a periodic store", "[files]") {
  TempDir dir;
  Options o = file_options(dir / "store", Durability::periodic);
  o.sync_interval = std::chrono::milliseconds(5);
  o.background_maintenance = true;
  Store s(o);
  s.put("a", "1");
  s.put("a", "2");
  bool synced = false;
  for (int i = 0; i < 400 && !synced; ++i) {
    ::usleep(5000);
    synced = s.stats().deferred_records == 0;
  }
  CHECK(synced);
  std::string out;
  CHECK(s.get("a", out));
  CHECK(out == "2");
}

TEST_CASE("a store directory is open in one writable store at a time", "[files]") {
  TempDir dir;
  const Options o = file_options(dir / "store");
  {
    Store s(o);
    s.put("a", "1");
    CHECK(error_of([&] { Store again(o); }) == Errc::locked);
    Options ro = o;
    ro.read_only = true;
    CHECK(error_of([&] { Store reader(ro); }) == Errc::locked);
    // Another process too.
    CHECK(in_child([&] {
            try {
              Store other(o);
            } catch (const offheap::Error& e) {
              return e.code() == Errc::locked ? 0 : 1;
            }
            return 2;
          }) == 0);
    try {
      Store again(o);
    } catch (const offheap::Error& e) {
      CHECK_THAT(e.what(), Catch::Contains("open in another store object or process"));
    }
  }
  Store s(o);  // free again once the first one is gone
  CHECK(s.get("a") == std::optional<std::string>("1"));
}

TEST_CASE("a read-only open reads and refuses every write", "[files]") {
  TempDir dir;
  Options o = file_options(dir / "store");
  Model m;
  {
    Store s(o);
    m = fill(s, 11);
  }
  Options ro = o;
  ro.read_only = true;
  {
    Store r1(ro);
    Store r2(ro);  // readers share
    check_holds(r1, m);
    CHECK(r2.size() == m.size());
    CHECK(error_of([&] { r1.put("x", "y"); }) == Errc::read_only);
    CHECK(error_of([&] { r1.put_if_absent("x", "y"); }) == Errc::read_only);
    CHECK(error_of([&] { r1.replace("key-1", "y"); }) == Errc::read_only);
    CHECK(error_of([&] { r1.remove("key-2"); }) == Errc::read_only);
    CHECK(error_of([&] { r1.put_value("x", 1); }) == Errc::read_only);
    CHECK(error_of([&] { r1.clear(); }) == Errc::read_only);
    CHECK(error_of([&] { Store writer(o); }) == Errc::locked);
    check_holds(r1, m);
  }
  CHECK(error_of([&] {
          Options missing = ro;
          missing.path = dir / "nothing-here";
          Store s(missing);
        }) == Errc::invalid_argument);
  CHECK(error_of([] {
          Options mem;
          mem.read_only = true;
          Store s(mem);
        }) == Errc::invalid_argument);
}

TEST_CASE("a read-only open of a crashed store rebuilds in memory and writes nothing", "[files]") {
  TempDir dir;
  const Options o = file_options(dir / "store");
  Model m;
  {
    Store s(o);
    m = fill(s, 5);
  }
  REQUIRE(in_child([&] {
            Store s(o);
            s.put("key-3", "new");
            ::_exit(0);
            return 0;
          }) == 0);
  m["key-3"] = "new";
  std::map<std::string, std::string> before;
  for (const auto& e : fs::directory_iterator(dir / "store")) {
    before[e.path().filename().string()] = read_file(e.path());
  }
  {
    Options ro = o;
    ro.read_only = true;
    Store r(ro);
    CHECK(r.stats().rebuilt);
    check_holds(r, m);
  }
  std::map<std::string, std::string> after;
  for (const auto& e : fs::directory_iterator(dir / "store")) {
    after[e.path().filename().string()] = read_file(e.path());
  }
  CHECK(before == after);
}

TEST_CASE("options that contradict the store on disk are refused", "[files]") {
  TempDir dir;
  Options o = file_options(dir / "store");
  o.hash_seed = 42;
  { Store s(o); }
  Options other_shards = o;
  other_shards.shards = 5;
  CHECK(error_of([&] { Store s(other_shards); }) == Errc::invalid_argument);
  Options other_seed = o;
  other_seed.hash_seed = 43;
  CHECK(error_of([&] { Store s(other_seed); }) == Errc::invalid_argument);
  Options bad_interval = o;
  bad_interval.sync_interval = std::chrono::milliseconds(0);
  CHECK(error_of([&] { Store s(bad_interval); }) == Errc::invalid_argument);
  // StorePolicy and SingleWriterPolicy share the record format.
  {
    offheap::OffHeapStore<offheap::SingleWriterPolicy> single(o);
    single.put("k", "v");
  }
  // Without a writer lock, a maintenance thread would be a second writer
  // (its periodic syncs free records): refused, clearly.
  Options periodic = o;
  periodic.durability = offheap::Durability::periodic;
  periodic.background_maintenance = true;
  const std::string what = [&] {
    try {
      offheap::OffHeapStore<offheap::SingleWriterPolicy> s(periodic);
    } catch (const offheap::Error& e) {
      CHECK(e.code() == Errc::invalid_argument);
      return std::string(e.what());
    }
    return std::string("accepted");
  }();
  CHECK(what.find("background_maintenance = false") != std::string::npos);
  periodic.background_maintenance = false;
  offheap::OffHeapStore<offheap::SingleWriterPolicy> by_hand(periodic);
  CHECK(by_hand.get("k") == std::optional<std::string>("v"));
}

TEST_CASE("foreign, older, newer and damaged directories are refused with a clear error", "[files]") {
  TempDir dir;
  const Options o = file_options(dir / "store");
  {
    Store s(o);
    fill(s);
  }
  const fs::path meta = dir / "store" / "meta";
  const std::string good = read_file(meta);

  SECTION("a directory of other files") {
    fs::create_directories(dir / "other");
    write_file(dir / "other" / "notes.txt", "mine");
    Options foreign = o;
    foreign.path = dir / "other";
    try {
      Store s(foreign);
      FAIL("opened");
    } catch (const offheap::Error& e) {
      CHECK(e.code() == Errc::invalid_argument);
      CHECK_THAT(e.what(), Catch::Contains("no offheap store"));
    }
    CHECK(read_file(dir / "other" / "notes.txt") == "mine");
  }
  SECTION("an older or a newer format version") {
    // Older: 3, records without node words; newer: one this library does not know.
    for (const std::uint32_t version : {offheap::kFormatVersion - 1, offheap::kFormatVersion + 1}) {
      INFO("format version " << version);
      std::string other = good;
      other[8] = static_cast<char>(version);  // format_version
      write_file(meta, other);
      try {
        Store s(o);
        FAIL("opened");
      } catch (const offheap::Error& e) {
        CHECK(e.code() == Errc::format_version);
        CHECK_THAT(e.what(), Catch::Contains("format version " + std::to_string(version)));
        CHECK_THAT(e.what(), Catch::Contains("reads version " + std::to_string(offheap::kFormatVersion)));
      }
    }
  }
  SECTION("a meta file that is not ours") {
    write_file(meta, "hello, world: this is no offheap meta file at all, at all, at all......................");
    CHECK(error_of([&] { Store s(o); }) == Errc::corrupt_file);
  }
  SECTION("a damaged meta file") {
    std::string bad = good;
    bad[40] ^= 1;  // inside the store id: the checksum fails
    write_file(meta, bad);
    CHECK(error_of([&] { Store s(o); }) == Errc::corrupt_file);
  }
  SECTION("a truncated meta file") {
    write_file(meta, good.substr(0, 50));
    CHECK(error_of([&] { Store s(o); }) == Errc::corrupt_file);
  }
  SECTION("a missing chunk file") {
    bool removed = false;
    for (const auto& e : fs::directory_iterator(dir / "store")) {
      if (!removed && e.path().filename().string().find("-c00000.chunk") != std::string::npos) {
        // Chunk 0 of a shard that has chunk 1 too.
        const std::string one = e.path().filename().string().replace(6, 6, "c00001");
        if (fs::exists(dir / "store" / one)) {
          fs::remove(e.path());
          removed = true;
        }
      }
    }
    REQUIRE(removed);
    CHECK(error_of([&] { Store s(o); }) == Errc::corrupt_file);
  }
  SECTION("a chunk file of another store") {
    TempDir other;
    {
      Store s(file_options(other / "store"));
      s.put("k", std::string(5000, 'w'));
    }
    for (const auto& e : fs::directory_iterator(other / "store")) {
      if (e.path().extension() == ".chunk") {
        fs::copy_file(e.path(), dir / "store" / e.path().filename(),
                      fs::copy_options::overwrite_existing);
      }
    }
    CHECK(error_of([&] { Store s(o); }) == Errc::corrupt_file);
  }
}

TEST_CASE("a damaged or stale state file is not trusted: the store is rebuilt", "[files]") {
  TempDir dir;
  const Options o = file_options(dir / "store");
  Model m;
  {
    Store s(o);
    m = fill(s, 9);
  }
  const fs::path state = dir / "store" / "s0001.state";
  REQUIRE(fs::exists(state));
  std::string bytes = read_file(state);
  SECTION("a flipped bit in the index table") {
    bytes[bytes.size() - 100] ^= 0x10;
  }
  SECTION("a flipped bit in the header") {
    bytes[20] ^= 0x01;
  }
  SECTION("truncated") {
    bytes.resize(bytes.size() / 2);
  }
  write_file(state, bytes);
  Store s(o);
  CHECK(s.stats().rebuilt);
  check_holds(s, m);
}

TEST_CASE("clear() on a file-backed store stays cleared through reopen and crash", "[files]") {
  TempDir dir;
  const Options o = file_options(dir / "store");
  {
    Store s(o);
    fill(s, 2);
    s.clear();
    CHECK(s.empty());
    s.put("after-clear", "1");
  }
  {
    Store s(o);
    CHECK(s.size() == 1);
    CHECK(s.get("after-clear") == std::optional<std::string>("1"));
    CHECK(s.verify() == "");
  }
  REQUIRE(in_child([&] {
            Store s(o);
            fill(s, 4);
            s.clear();
            s.put("x", "y");
            ::_exit(0);
            return 0;
          }) == 0);
  Store s(o);
  CHECK(s.stats().rebuilt);
  CHECK(s.size() == 1);
  CHECK(s.get("x") == std::optional<std::string>("y"));
  CHECK(s.verify() == "");
}

TEST_CASE("a full disk is an out_of_space error, and the store keeps everything", "[files]") {
  TempDir dir;
  Options o = file_options(dir / "store");
  o.shards = 1;
  o.max_chunk_bytes = 16 << 20;
  struct rlimit old {};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &old) == 0);
  void (*old_handler)(int) = std::signal(SIGXFSZ, SIG_IGN);
  Model m;
  {
    Store s(o);
    struct rlimit low = old;
    low.rlim_cur = 1 << 20;  // no file may pass 1 MiB
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &low) == 0);
    Errc code = Errc::io_error;
    std::string what;
    int stored = 0;
    try {
      for (; stored < 1000; ++stored) {
        const std::string k = "big-" + std::to_string(stored);
        const std::string v(10000, static_cast<char>('a' + stored % 26));
        s.put(k, v);
        m[k] = v;
      }
    } catch (const offheap::Error& e) {
      code = e.code();
      what = e.what();
    }
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &old) == 0);
    CHECK(code == Errc::out_of_space);
    CHECK_THAT(what, Catch::Contains("posix_fallocate"));
    CHECK(stored > 10);
    check_holds(s, m);
    // The limit lifted, the store goes on.
    s.put("after", std::string(300000, 'z'));
    m["after"] = std::string(300000, 'z');
    check_holds(s, m);
  }
  std::signal(SIGXFSZ, old_handler);
  Store s(o);
  check_holds(s, m);
}

TEST_CASE("after a failed sync the store refuses writes, and a reopen has everything", "[files]") {
  struct FailSyncs {
    explicit FailSyncs(int err) { offheap::detail::testing_fail_syncs().store(err); }
    ~FailSyncs() { offheap::detail::testing_fail_syncs().store(0); }
  };
  for (const Durability d : {Durability::on_close, Durability::periodic, Durability::every_write}) {
    INFO("durability " << offheap::to_string(d));
    TempDir dir;
    const Options o = file_options(dir / "store", d);
    Model m;
    {
      Store s(o);
      m = fill(s, 13);
      {
        const FailSyncs fail(EIO);
        if (d == Durability::every_write) {
          // The write is in memory but not known to be on disk: reported.
          const Errc code = error_of([&] { s.put("during", "failure"); });
          CHECK(code == Errc::io_error);
          m["during"] = "failure";
        } else {
          try {
            s.sync();
            FAIL("sync() succeeded");
          } catch (const offheap::Error& e) {
            CHECK(e.code() == Errc::io_error);
            CHECK_THAT(e.what(), Catch::Contains("Input/output error"));
          }
        }
      }
      // Syncs would work again, but what reached the disk is unknown:
      // the store refuses writes until it is reopened.
      CHECK(error_of([&] { s.put("after", "failure"); }) == Errc::io_error);
      CHECK(error_of([&] { s.remove("key-1"); }) == Errc::io_error);
      CHECK(error_of([&] { s.sync(); }) == Errc::io_error);
      CHECK(error_of([&] { s.close(); }) == Errc::io_error);
      check_holds(s, m);  // reads go on
    }
    Store s(o);
    CHECK(s.stats().rebuilt);  // not closed cleanly
    check_holds(s, m);
    s.put("after", "reopen");
  }
}
