// SPDX-License-Identifier: Apache-2.0
// Damaged files. The guarantee: after bit flips, truncation at random
// offsets or zeroed pages in any of a store's files (meta, chunk files'
// header pages and records, state files), every reopen either throws
// offheap::Error or returns only values that were written for their keys:
// never a crash, a hang, or a wrong value.
//
// Two reference stores are built once, with a few thousand keys over three
// shards and 9-12 chunk files per shard (4 KiB - 64 KiB chunks):
// overwrites, removals, typed values, large values, and the history of every
// value ever written per key kept here. "clean" was closed (state files
// present); "crashed" was written to by a child that _exit()ed without
// closing (no state files: the open rebuilds from the records).
//
// Each iteration copies a reference, damages the copy (one damage, or a few,
// each described in the failure message), and opens it in a child process,
// so that a crash, a sanitizer report or a hang (an alarm) is reported with
// the damage that caused it and the run goes on. The read test's child opens
// read-only first (which writes nothing), then writable, and checks every key
// with get() and get_value(), the never-written keys, and for_each(); it
// reports what verify() says (damage may break the invariants it checks, so
// that is not asserted). The write test's child opens writable, writes (300
// puts and removals), reads back, reads everything, closes cleanly and
// reopens: what the writes stored must read back, before and after.
//
// The free-record test aims its damage instead: on copies of "clean" (whose
// open maps the saved free lists and reads no record) it walks the chunk
// files (support/chunk_walk.hpp) and damages one free record's capacity,
// links or footer, or a live record's prev-free bit or key length, or forges
// a free record at the end of a live one; its child then writes what reaches
// the damage (the records beside it freed, its size class taken, every size,
// index growth, removals and overwrites). Besides the write test's checks,
// keys that read back whole right after the open and were not written since
// must still read the same: no write may go through a damaged link or
// length into a record it does not own.
//
// The one-shard test confines its damage (the same kinds) to one shard's
// chunk and state files: every open either throws offheap::Error or serves
// every key of the other shards exactly as written (get and for_each, no
// exception), and each key of the damaged shard absent, exact or refused
// (an exception), never an older value; after the writable open's close a
// reopen must succeed and serve the same. Which shard holds a key is read
// from the chunk files' names (a scratch store of the same shard count and
// hash seed holds every key), not from the engine's hash. It requires that
// damaged stores do open, with the damage visible, in both references.
//
// Environment (for reproducing and exploring):
//   OFFHEAP_DAMAGE_SEED        the damage seed (decimal or 0x..), or "random"
//   OFFHEAP_DAMAGE_ITERATIONS  iterations of the read test (default 300; the
//                              write test runs half as many)
//   OFFHEAP_DAMAGE_FREE_ITERATIONS  iterations of the free-record test
//                              (default 32: each of its 16 damages twice)
//   OFFHEAP_DAMAGE_SHARD_ITERATIONS  iterations of the one-shard test
//                              (default 180)
//   OFFHEAP_DAMAGE_KIND=<name> the free-record test runs that damage only
//   OFFHEAP_DAMAGE_ONLY=<n>    the free-record test runs iteration n only
//   OFFHEAP_DAMAGE_ALL=1       do not stop after the first few failures
//   OFFHEAP_DAMAGE_KEEP=<dir>  keep a copy of each failing damaged directory
//   OFFHEAP_DAMAGE_VERBOSE=1   print what the opens did (also on success)
//   OFFHEAP_DAMAGE_TIMEOUT     seconds a child may take (default 5; healthy
//                              children take well under 1 s, also with ASan)
//   OFFHEAP_TEST_TMPDIR        where the copies go (default /dev/shm, else /tmp)
#include <offheap/offheap.hpp>

#include "support/bytes.hpp"
#include "support/chunk_walk.hpp"
#include "support/env.hpp"
#include "support/file_io.hpp"
#include "support/scratch_dir.hpp"
#include "support/store_dir.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;
using offheap::Errc;
using offheap::Options;
using offheap::Store;
using offheap_test::bytes_of;
using offheap_test::copy_dir;
using offheap_test::env;
using offheap_test::env_u64;
using offheap_test::files_of;
using offheap_test::flip_byte;
using offheap_test::hex_prefix;
using offheap_test::printable;
using offheap_test::read_u64;
using offheap_test::ScratchDir;
using offheap_test::truncate_to;
using offheap_test::write_bytes;
using offheap_test::zero_range;

struct Pod {
  std::uint64_t a;
  std::uint32_t b, c;
};

/// The damage seed: fixed unless OFFHEAP_DAMAGE_SEED says otherwise.
std::uint64_t damage_seed(std::uint64_t fallback) {
  const char* v = env("OFFHEAP_DAMAGE_SEED");
  if (v == nullptr) return fallback;
  if (std::string_view(v) == "random") {
    return std::random_device{}() ^
           static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }
  return std::strtoull(v, nullptr, 0);
}

// ---- keys, values, history ------------------------------------------------------

enum class Kind : std::uint8_t { bytes, u64, f64, pod };

struct Keys {
  std::vector<std::string> names;
  std::vector<Kind> kinds;
  std::vector<std::string> never_written;  // must read absent from every open

  Keys() {
    for (int i = 0; i < 2400; ++i) {
      names.push_back("key-" + std::to_string(i));
      kinds.push_back(i % 10 == 3 ? Kind::u64 : i % 10 == 6 ? Kind::f64 : i % 10 == 9 ? Kind::pod
                                                                                     : Kind::bytes);
    }
    for (int i = 0; i < 60; ++i) {  // long keys: 100 - 1,000 bytes
      std::string k = "long-" + std::to_string(i) + "-";
      k.append(100 + static_cast<std::size_t>(i) * 15, static_cast<char>('a' + i % 26));
      names.push_back(k);
      kinds.push_back(Kind::bytes);
    }
    names.push_back("");  // the empty key
    kinds.push_back(Kind::bytes);
    for (int i = 0; i < 40; ++i) never_written.push_back("absent-" + std::to_string(i));
  }
};

/// Every value ever written per key (typed values as their bytes), and what
/// each key holds now.
struct History {
  std::unordered_map<std::string, std::unordered_set<std::string>> values;
  std::map<std::string, std::string> current;
  std::uint64_t version = 0;

  void put(const std::string& k, const std::string& v) {
    values[k].insert(v);
    current[k] = v;
  }
  bool allows(const std::string& k, std::string_view v) const {
    const auto it = values.find(k);
    return it != values.end() && it->second.count(std::string(v)) != 0;
  }
};

std::string bytes_value(std::size_t key, std::uint64_t version, std::size_t len,
                        std::mt19937_64& rng) {
  std::string v = "#" + std::to_string(key) + "/v" + std::to_string(version) + "/";
  const char fill = static_cast<char>('a' + rng() % 26);
  if (len > v.size()) v.append(len - v.size(), fill);
  if (len < v.size() && len % 5 == 0) v.resize(len);  // some short and empty values
  return v;
}

/// A deterministic sequence of writes: applied to `store` when it is given,
/// and always to `h`. Consumes the same random numbers either way.
void workload(std::mt19937_64& rng, const Keys& keys, History& h, std::size_t ops, Store* store) {
  for (std::size_t op = 0; op < ops; ++op) {
    const std::size_t i = rng() % keys.names.size();
    const std::string& k = keys.names[i];
    const unsigned r = static_cast<unsigned>(rng() % 100);
    const std::uint64_t ver = ++h.version;
    if (r < 9) {
      if (store != nullptr) store->remove(k);
      h.current.erase(k);
      continue;
    }
    switch (keys.kinds[i]) {
      case Kind::u64: {
        const std::uint64_t v = i * 1000003u + ver;
        if (store != nullptr) store->put_value(k, v);
        h.put(k, bytes_of(v));
        continue;
      }
      case Kind::f64: {
        const double v = static_cast<double>(ver) * 0.5 + static_cast<double>(i);
        if (store != nullptr) store->put_value(k, v);
        h.put(k, bytes_of(v));
        continue;
      }
      case Kind::pod: {
        const Pod v{ver, static_cast<std::uint32_t>(i), ~static_cast<std::uint32_t>(i)};
        if (store != nullptr) store->put_value(k, v);
        h.put(k, bytes_of(v));
        continue;
      }
      case Kind::bytes: break;
    }
    std::size_t len = rng() % 160;
    if (r < 12) len = 2048 + rng() % (24 * 1024);  // large: a few KiB - 26 KiB
    const std::string v = bytes_value(i, ver, len, rng);
    if (store != nullptr) store->put(k, v);
    h.put(k, v);
  }
}

Options store_options(const fs::path& dir, bool read_only = false) {
  Options o;
  o.path = dir;
  o.read_only = read_only;
  o.min_chunk_bytes = 4096;
  o.max_chunk_bytes = 64 * 1024;
  o.background_maintenance = false;
  return o;
}

/// The reference stores' shard count and hash seed.
constexpr std::uint32_t kReferenceShards = 3;
constexpr std::uint64_t kReferenceHashSeed = 0x5EED;

struct Variant {
  const char* name;
  fs::path dir;
  History history;
};

/// The reference stores, built once per process.
struct Reference {
  ScratchDir tmp;
  Keys keys;
  Variant clean{"clean", {}, {}};
  Variant crashed{"crashed", {}, {}};

  Reference() {
    const fs::path work = tmp / "work";
    clean.dir = tmp / "clean";
    crashed.dir = tmp / "crashed";
    std::mt19937_64 rng(0xDA3A6E);
    History h;
    {
      Options o = store_options(work);
      o.shards = kReferenceShards;
      o.hash_seed = kReferenceHashSeed;
      Store s(o);
      workload(rng, keys, h, 7000, &s);
    }  // closed cleanly: state files
    copy_dir(work, clean.dir);
    clean.history = h;

    // The crash: a child writes more and leaves without closing.
    std::cout.flush();
    std::cerr.flush();
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      int code = 1;
      try {
        auto* s = new Store(store_options(work));
        workload(rng, keys, h, 3000, s);
        code = 0;
      } catch (...) {
      }
      ::_exit(code);  // no destructor: the store is not closed
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      throw std::runtime_error("the crashing child failed to write");
    }
    workload(rng, keys, h, 3000, nullptr);  // the same writes, into the history
    copy_dir(work, crashed.dir);
    crashed.history = h;
  }
};

const Reference& reference() {
  static const Reference r;
  return r;
}

// ---- damage -------------------------------------------------------------------------

enum class Region : std::uint8_t { meta, chunk_header, chunk_records, state };
enum class DamageType : std::uint8_t { flip, truncate, zero_page };

const char* region_name(Region r) {
  switch (r) {
    case Region::meta: return "meta";
    case Region::chunk_header: return "chunk header page";
    case Region::chunk_records: return "chunk records";
    case Region::state: return "state file";
  }
  return "?";
}


/// The file names of shard `shard`'s files among `names` (all if shard < 0).
std::vector<std::string> of_shard(std::vector<std::string> names, int shard) {
  if (shard < 0) return names;
  char prefix[16];
  std::snprintf(prefix, sizeof prefix, "s%04d", shard);
  std::erase_if(names, [&](const std::string& n) {
    return n.rfind(prefix, 0) != 0 || (n.size() > 5 && n[5] != '-' && n[5] != '.');
  });
  return names;
}

/// Picks and applies one damage in `dir` (only in shard `shard`'s chunk
/// and state files if shard >= 0: never the meta file, which every shard
/// shares); returns its description.
std::string damage_once(const fs::path& dir, bool has_state, std::mt19937_64& rng,
                        int shard = -1) {
  const unsigned r = static_cast<unsigned>(rng() % 100);
  Region region;
  if (has_state) {
    region = r < 10 ? Region::meta : r < 25 ? Region::chunk_header
                                   : r < 70 ? Region::chunk_records : Region::state;
  } else {
    region = r < 10 ? Region::meta : r < 30 ? Region::chunk_header : Region::chunk_records;
  }
  if (shard >= 0 && region == Region::meta) region = Region::chunk_records;
  std::string file = "meta";
  if (region == Region::chunk_header || region == Region::chunk_records) {
    const std::vector<std::string> chunks = of_shard(files_of(dir, ".chunk"), shard);
    if (chunks.empty()) return "nothing (no chunk file)";
    file = chunks[rng() % chunks.size()];
  } else if (region == Region::state) {
    const std::vector<std::string> states = of_shard(files_of(dir, ".state"), shard);
    if (states.empty()) return "nothing (no state file)";
    file = states[rng() % states.size()];
  }
  const fs::path p = dir / file;
  const std::uint64_t size = fs::file_size(p);
  if (size == 0) return file + ": empty, left alone";
  // The byte range the damage aims at.
  std::uint64_t lo = 0, hi = size;
  if (region == Region::chunk_header) {
    hi = std::min<std::uint64_t>(size, rng() % 4 == 0 ? 4096 : 72);  // mostly header + end word
  } else if (region == Region::chunk_records) {
    lo = std::min<std::uint64_t>(size, 4096);
    // Aim at the bytes that hold records (below the chunk's end word), most of the time.
    const std::uint64_t end = read_u64(p, 64) & 0x0000FFFFFFFFFFFFull;
    if (end != 0 && 4096 + end <= size && rng() % 8 != 0) hi = 4096 + end;
    if (lo >= hi) lo = 0;
  } else if (region == Region::state && rng() % 2 == 0) {
    hi = std::min<std::uint64_t>(size, 192);  // the header
  }
  const unsigned t = static_cast<unsigned>(rng() % 100);
  const DamageType type = t < 55 ? DamageType::flip : t < 80 ? DamageType::zero_page
                                                             : DamageType::truncate;
  std::ostringstream d;
  d << file << " (" << region_name(region) << ", " << size << " bytes): ";
  switch (type) {
    case DamageType::flip: {
      const unsigned flips = 1 + static_cast<unsigned>(rng() % 3);
      d << "bit flips at";
      for (unsigned i = 0; i < flips; ++i) {
        const std::uint64_t off = lo + rng() % (hi - lo);
        const auto mask = static_cast<unsigned char>(1u << (rng() % 8));
        flip_byte(p, off, mask);
        d << " " << off << "^0x" << std::hex << unsigned{mask} << std::dec;
      }
      break;
    }
    case DamageType::zero_page: {
      const std::uint64_t off = (lo + rng() % (hi - lo)) / 4096 * 4096;
      const std::uint64_t n = std::min<std::uint64_t>(4096, size - off);
      zero_range(p, off, n);
      d << "zeroed " << n << " bytes at " << off;
      break;
    }
    case DamageType::truncate: {
      const std::uint64_t to = lo + rng() % (hi - lo);
      truncate_to(p, to);
      d << "truncated to " << to << " bytes";
      break;
    }
  }
  return d.str();
}

/// One damage, or a few (in shard `shard`'s files only, if shard >= 0).
std::string damage(const fs::path& dir, bool has_state, std::mt19937_64& rng, int shard = -1) {
  const unsigned n = rng() % 4 == 0 ? 2 + static_cast<unsigned>(rng() % 3) : 1;
  std::string all;
  for (unsigned i = 0; i < n; ++i) {
    if (i != 0) all += "; ";
    all += damage_once(dir, has_state, rng, shard);
  }
  return all;
}

// ---- the child: open, read everything, report --------------------------------------

/// Lines written to the parent through a pipe: "P phase", "S name count",
/// "N note", "F failure".
class Reporter {
 public:
  explicit Reporter(int fd) : fd_(fd) {}
  void phase(const std::string& p) { send('P', p); }
  void fail(const std::string& m) {
    if (++failures_ <= 8) send('F', m);
  }
  void note(const std::string& m) { send('N', m); }
  void count(const std::string& name, std::uint64_t n = 1) { counts_[name] += n; }
  void flush_counts() {
    for (const auto& [k, v] : counts_) send('S', k + " " + std::to_string(v));
    counts_.clear();
  }

 private:
  void send(char tag, std::string m) {
    for (char& c : m) {
      if (c == '\n') c = ' ';
    }
    m = std::string(1, tag) + " " + m + "\n";
    const char* p = m.data();
    std::size_t n = m.size();
    while (n != 0) {
      const ssize_t w = ::write(fd_, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return;
      p += w;
      n -= static_cast<std::size_t>(w);
    }
  }
  int fd_;
  int failures_ = 0;
  std::map<std::string, std::uint64_t> counts_;
};

std::string errc_name(const offheap::Error& e) { return std::string(offheap::to_string(e.code())); }

template <class T>
void check_typed(const Store& s, const std::string& k, const History& h, Reporter& rep,
                 const std::string& label) {
  try {
    const std::optional<T> v = s.get_value<T>(k);
    if (v && !h.allows(k, bytes_of(*v))) {
      rep.fail(label + ": get_value(" + printable(k) + ") returned " + hex_prefix(bytes_of(*v)) +
               ", never written for it");
    }
  } catch (const offheap::Error& e) {
    rep.count(label + ".get_value_threw." + errc_name(e));
  }
}

/// Reads every key (get, get_value), the never-written keys, and for_each;
/// every value must be one written for its key.
void check_contents(const Store& s, const Keys& keys, const History& h, Reporter& rep,
                    const std::string& label) {
  std::string out;
  for (std::size_t i = 0; i < keys.names.size(); ++i) {
    const std::string& k = keys.names[i];
    try {
      if (s.get(k, out)) {
        rep.count(label + ".served");
        if (!h.allows(k, out)) {
          rep.fail(label + ": get(" + printable(k) + ") returned \"" + printable(out) + "\" (" +
                   hex_prefix(out) + "), never written for that key");
        } else {
          const auto it = h.current.find(k);
          rep.count(label + (it != h.current.end() && it->second == out ? ".exact" : ".older"));
        }
      } else {
        rep.count(label + ".absent");
      }
    } catch (const offheap::Error& e) {
      rep.count(label + ".get_threw." + errc_name(e));
    }
    switch (keys.kinds[i]) {
      case Kind::u64: check_typed<std::uint64_t>(s, k, h, rep, label); break;
      case Kind::f64: check_typed<double>(s, k, h, rep, label); break;
      case Kind::pod: check_typed<Pod>(s, k, h, rep, label); break;
      case Kind::bytes: break;
    }
  }
  for (const std::string& k : keys.never_written) {
    try {
      if (s.get(k, out)) rep.fail(label + ": never-written key " + k + " read \"" + printable(out) + "\"");
    } catch (const offheap::Error& e) {
      rep.count(label + ".get_threw." + errc_name(e));
    }
  }
  try {
    std::uint64_t visited = 0;
    s.for_each([&](std::string_view k, std::string_view v) {
      ++visited;
      if (!h.allows(std::string(k), v)) {
        rep.fail(label + ": for_each yielded (" + printable(k) + ", \"" + printable(v) + "\" " +
                 hex_prefix(v) + "), never written for that key");
      }
    });
    rep.count(label + ".for_each_visited", visited);
  } catch (const offheap::Error& e) {
    rep.count(label + ".for_each_threw." + errc_name(e));
  }
  const offheap::Stats st = s.stats();
  rep.count(label + ".corrupt_records", st.corrupt_records);
  if (st.rebuilt) rep.count(label + ".rebuilt");
}

/// Opens `dir` and checks it; returns the store (null if the open threw).
std::unique_ptr<Store> open_and_check(const fs::path& dir, bool read_only, const Keys& keys,
                                      const History& h, Reporter& rep, const std::string& label,
                                      bool read_all = true) {
  rep.phase(label + " open");
  std::unique_ptr<Store> s;
  try {
    s = std::make_unique<Store>(store_options(dir, read_only));
  } catch (const offheap::Error& e) {
    rep.count(label + ".open_threw." + errc_name(e));
    rep.count(label + ".open_threw");
    return nullptr;
  } catch (const std::exception& e) {
    rep.fail(label + ": the open threw a non-offheap exception: " + e.what());
    return nullptr;
  }
  rep.count(label + ".opened");
  if (read_all) {
    rep.phase(label + " reads");
    check_contents(*s, keys, h, rep, label);
  }
  return s;
}

/// A writable open's verify() (reported, not asserted: it checks invariants
/// that damage may legitimately break).
void run_verify(const Store& s, Reporter& rep, const std::string& label) {
  rep.phase(label + " verify()");
  const std::string problem = s.verify();
  if (problem.empty()) {
    rep.count(label + ".verify_ok");
  } else {
    rep.count(label + ".verify_problem");
    rep.note(label + " verify(): " + problem);
  }
}

/// The reads of one damaged copy: read-only open, then writable open.
void child_reads(const fs::path& dir, const Keys& keys, const History& h, Reporter& rep) {
  {
    const auto s = open_and_check(dir, true, keys, h, rep, "ro");
  }
  rep.phase("ro close");
  const auto s = open_and_check(dir, false, keys, h, rep, "rw");
  if (s) run_verify(*s, rep, "rw");
  rep.phase("rw close");
}

/// Every key written after a damaged open reads exactly as written (or
/// absent, if removed): `expect` maps key -> value (nullopt: removed).
void check_written(const Store& st, const std::map<std::string, std::optional<std::string>>& expect,
                   Reporter& rep, const std::string& when) {
  std::string out;
  for (const auto& [k, v] : expect) {
    try {
      const bool hit = st.get(k, out);
      if (v && (!hit || out != *v)) {
        rep.fail(when + ": key " + printable(k) + " written after the damaged open reads " +
                 (hit ? "\"" + printable(out) + "\"" : std::string("absent")) + ", not \"" +
                 printable(*v) + "\"");
      } else if (!v && hit) {
        rep.fail(when + ": key " + printable(k) + " removed after the damaged open reads \"" +
                 printable(out) + "\"");
      }
    } catch (const offheap::Error& e) {
      rep.fail(when + ": key " + printable(k) + " written after the damaged open throws: " + e.what());
    }
  }
}

/// A writable open, writes, read-back, close, reopen: the writes must survive.
void child_writes(const fs::path& dir, const Keys& keys, const History& h0, Reporter& rep,
                  std::uint64_t seed) {
  // The reads of the damaged store come after the writes here (the read test
  // covers them): the writes meet the damage as the open left it.
  std::unique_ptr<Store> s = open_and_check(dir, false, keys, h0, rep, "rw", false);
  if (!s) return;
  run_verify(*s, rep, "rw");
  History h = h0;
  std::mt19937_64 rng(seed);
  // key -> what it must read now (nullopt: absent)
  std::map<std::string, std::optional<std::string>> expect;
  rep.phase("rw writes");
  // A few new keys, then overwrites (of every size) and removals of random
  // existing keys: enough to reuse free records and old records' space.
  for (int i = 0; i < 300; ++i) {
    std::string k;
    std::optional<std::string> v;
    if (i < 8) {
      k = "post-damage-" + std::to_string(i);
      v = "new/" + std::to_string(i) + "/" + std::string(rng() % 200, 'n');
    } else if (i % 10 != 0) {
      k = keys.names[rng() % keys.names.size()];
      const std::size_t len = rng() % 8 == 0 ? 1000 + rng() % 20000 : rng() % 300;
      v = "over/" + std::to_string(i) + "/" + std::string(len, 'o');
    } else {
      k = keys.names[rng() % keys.names.size()];
    }
    rep.phase("rw write " + printable(k) + (v ? " put" : " remove"));
    try {
      if (v) {
        s->put(k, *v);
        h.put(k, *v);
      } else {
        s->remove(k);
        h.current.erase(k);
      }
      expect[k] = v;
      rep.count("writes.ok");
    } catch (const offheap::Error& e) {
      rep.count("writes.threw." + errc_name(e));
      rep.note("write of " + printable(k) + " threw: " + e.what());
      expect.erase(k);  // either outcome acceptable for this key now
      if (v) h.values[k].insert(*v);
    }
  }
  auto check_expected = [&](const Store& st, const std::string& when) {
    check_written(st, expect, rep, when);
  };
  rep.phase("rw read-back");
  check_expected(*s, "read-back");
  rep.phase("rw reads after the writes");
  check_contents(*s, keys, h, rep, "rw");
  rep.phase("rw close()");
  try {
    s->close();
  } catch (const offheap::Error& e) {
    rep.note(std::string("close() threw: ") + e.what());
    rep.count("close_threw");
  }
  s.reset();
  std::unique_ptr<Store> again = open_and_check(dir, false, keys, h, rep, "reopen");
  if (!again) {
    rep.fail("the reopen after writes and a clean close threw (the damaged open had succeeded)");
    return;
  }
  rep.phase("reopen read-back");
  check_expected(*again, "after reopen");
  run_verify(*again, rep, "reopen");
  rep.phase("reopen close");
}

// ---- the parent: run a child, collect its report ------------------------------------

struct ChildReport {
  std::vector<std::string> failures;
  std::vector<std::string> notes;
  std::map<std::string, std::uint64_t> counts;
  std::string last_phase;
  std::string death;  // empty: exited 0
};

/// The gist of a sanitizer report (or a failed assertion) in a child's
/// stderr: its first error line and the engine's frames under it, for the
/// failure message (the whole report still goes to stderr).
std::string report_gist(const std::string& err) {
  std::istringstream in(err);
  std::string first, frames;
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    if (first.empty()) {
      if (line.find("runtime error:") != std::string::npos ||
          line.find("ERROR: ") != std::string::npos ||
          line.find("Assertion") != std::string::npos) {
        first = line.substr(line.find_first_not_of(' '));
        if (first.rfind("==", 0) == 0) first = first.substr(first.find("==", 2) + 2);
      }
      continue;
    }
    // "    #3 0x... in offheap::detail::FreeLists::unlink(...) /path/free_lists.hpp:99"
    const std::size_t hash = line.find('#'), in_at = line.find(" in ");
    if (hash == std::string::npos || in_at == std::string::npos ||
        line.find("offheap") == std::string::npos ||
        line.find("offheap_test") != std::string::npos) {
      continue;
    }
    std::string fn = line.substr(in_at + 4);
    const std::size_t paren = fn.find('(');
    const std::size_t space = fn.rfind(' ');
    std::string where = space != std::string::npos ? fn.substr(space + 1) : "";
    if (where.rfind('/') != std::string::npos) where = where.substr(where.rfind('/') + 1);
    if (paren != std::string::npos) fn = fn.substr(0, paren);
    if (fn.rfind("offheap::", 0) == 0) fn = fn.substr(9);
    frames += (n == 0 ? " at " : " < ") + fn + " " + where;
    if (++n == 5) break;
  }
  return first.empty() ? "" : first + frames;
}

template <class F>
ChildReport run_child(F&& body, unsigned timeout_s) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  // The child's stderr, kept to quote a sanitizer report in the failure.
  std::FILE* err = std::tmpfile();
  REQUIRE(err != nullptr);
  std::cout.flush();
  std::cerr.flush();
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    // Catch's handlers of fatal signals, inherited, would print a second
    // test report from here: its output (stdout) goes nowhere. Sanitizer
    // reports and failed assertions (stderr) go to a file the parent
    // copies to its stderr.
    const int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (devnull >= 0) ::dup2(devnull, 1);
    ::dup2(::fileno(err), 2);
    ::alarm(timeout_s);
    Reporter rep(fds[1]);
    try {
      body(rep);
    } catch (const std::exception& e) {
      rep.fail(std::string("uncaught exception: ") + e.what());
    } catch (...) {
      rep.fail("uncaught non-standard exception");
    }
    rep.flush_counts();
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string text;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  ChildReport r;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.size() < 2) continue;
    const std::string body_text = line.substr(2);
    switch (line[0]) {
      case 'P': r.last_phase = body_text; break;
      case 'F': r.failures.push_back(body_text); break;
      case 'N': r.notes.push_back(body_text); break;
      case 'S': {
        const std::size_t sp = body_text.rfind(' ');
        r.counts[body_text.substr(0, sp)] += std::strtoull(body_text.c_str() + sp + 1, nullptr, 10);
        break;
      }
      default: break;
    }
  }
  std::string err_text;
  std::rewind(err);
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, err)) > 0;) err_text.append(buf, n);
  std::fclose(err);
  if (!err_text.empty()) {
    std::cerr << err_text;
    std::cerr.flush();
  }
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    r.death = sig == SIGALRM ? "hung (no progress in " + std::to_string(timeout_s) + " s)"
                             : "killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
    r.death = "exited with status " + std::to_string(WEXITSTATUS(status)) +
              " (a sanitizer report is on stderr)";
  }
  if (!r.death.empty()) {
    const std::string gist = report_gist(err_text);
    if (!gist.empty()) r.death += ": " + gist;
  }
  return r;
}

struct Campaign {
  std::uint64_t seed;
  std::size_t max_failures;
  unsigned timeout_s;
  const char* keep_dir;
  std::vector<std::string> failures;
  std::map<std::string, std::uint64_t> counts;
  std::map<std::string, std::uint64_t> deaths;  // "phase: how" -> count
  std::map<std::string, std::uint64_t> verify_notes;  // the first few, verbatim
  std::map<std::string, std::uint64_t> write_notes;
  double slowest_child = 0;  // seconds
  std::size_t iterations_run = 0;

  explicit Campaign(std::uint64_t default_seed)
      : seed(damage_seed(default_seed)),
        max_failures(env("OFFHEAP_DAMAGE_ALL") != nullptr ? ~std::size_t{0} : 4),
        timeout_s(static_cast<unsigned>(env_u64("OFFHEAP_DAMAGE_TIMEOUT", 5))),
        keep_dir(env("OFFHEAP_DAMAGE_KEEP")) {}

  bool stopped() const { return failures.size() >= max_failures; }

  /// Damages a copy of `v` and runs `body(dir, history, reporter)` on it in a child.
  template <class Body>
  void iteration(std::size_t it, const Variant& v, const fs::path& scratch, Body&& body) {
    iteration_with(
        it, v, scratch,
        [](const fs::path& dir, bool has_state, std::mt19937_64& rng) {
          return damage(dir, has_state, rng);
        },
        std::forward<Body>(body));
  }

  /// The same with the damage chosen by `damager(dir, has_state, rng)`,
  /// which returns its description.
  template <class Damager, class Body>
  void iteration_with(std::size_t it, const Variant& v, const fs::path& scratch, Damager&& damager,
                      Body&& body) {
    std::mt19937_64 rng(seed ^ (0x9E3779B97F4A7C15ull * (it + 1)));
    const fs::path dir = scratch / "damaged";
    copy_dir(v.dir, dir);
    const bool has_state = !files_of(dir, ".state").empty();
    const std::string what = damager(dir, has_state, rng);
    std::string kept;
    if (keep_dir != nullptr) {
      kept = std::string(keep_dir) + "/" + v.name + "-seed" + std::to_string(seed) + "-it" +
             std::to_string(it);
      fs::create_directories(keep_dir);
      copy_dir(dir, kept);
    }
    const std::uint64_t child_seed = rng();
    const auto start = std::chrono::steady_clock::now();
    const ChildReport r = run_child([&](Reporter& rep) { body(dir, v.history, rep, child_seed); },
                                    timeout_s);
    if (r.death.empty()) {
      slowest_child = std::max(
          slowest_child,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    ++iterations_run;
    for (const auto& [k, n] : r.counts) counts[std::string(v.name) + "." + k] += n;
    for (const std::string& n : r.notes) {
      if (n.find("verify()") != std::string::npos && verify_notes.size() < 12) {
        verify_notes[n + " [" + v.name + ", iteration " + std::to_string(it) + "]"] += 1;
      } else if (n.find("threw") != std::string::npos && write_notes.size() < 12) {
        write_notes[n + " [" + v.name + ", iteration " + std::to_string(it) + "]"] += 1;
      }
    }
    const std::string where = std::string("seed ") + std::to_string(seed) + ", iteration " +
                              std::to_string(it) + ", " + v.name + " store, damage: " + what;
    for (const std::string& f : r.failures) failures.push_back(where + "\n  " + f);
    if (!r.death.empty()) {
      ++deaths[r.last_phase + ": " + r.death];
      failures.push_back(where + "\n  the child " + r.death + " during \"" + r.last_phase + "\"");
    }
    if (!r.failures.empty() || !r.death.empty()) {
      if (!kept.empty()) failures.back() += "\n  damaged copy kept in " + kept;
    } else if (!kept.empty()) {
      fs::remove_all(kept);
    }
    fs::remove_all(dir);
  }

  /// Ends a run: its counts printed (print_summary), each failure reported;
  /// false if it stopped early on failures (then the floors on its counts
  /// mean nothing), unless OFFHEAP_DAMAGE_ALL=1 ran it on.
  bool ran_through(const char* title) const {
    print_summary(title);
    for (const std::string& f : failures) FAIL_CHECK(f);
    if (stopped() && env("OFFHEAP_DAMAGE_ALL") == nullptr) {
      WARN("stopped after " << failures.size() << " failures (OFFHEAP_DAMAGE_ALL=1 runs on)");
      return false;
    }
    return true;
  }

  /// The counts behind the run: printed when something failed, or always
  /// with OFFHEAP_DAMAGE_VERBOSE=1.
  void print_summary(const char* title) const {
    if (failures.empty() && env("OFFHEAP_DAMAGE_VERBOSE") == nullptr) return;
    std::ostringstream o;
    o << "damage (" << title << "): seed " << seed << " (OFFHEAP_DAMAGE_SEED), " << iterations_run
      << " iterations, " << failures.size() << " failures\n";
    for (const auto& [k, n] : counts) o << "  " << k << " = " << n << "\n";
    for (const auto& [k, n] : deaths) o << "  child death: " << k << " x" << n << "\n";
    for (const auto& [k, n] : verify_notes) o << "  " << k << "\n";
    for (const auto& [k, n] : write_notes) o << "  " << k << "\n";
    o << "  slowest child: " << slowest_child << " s\n";
    std::cout << o.str() << std::flush;
  }

  std::uint64_t count(const std::string& k) const {
    const auto it = counts.find(k);
    return it == counts.end() ? 0 : it->second;
  }
  /// Sums the counts whose name starts with `prefix` and ends with `suffix`.
  std::uint64_t sum(const std::string& prefix, const std::string& suffix = "") const {
    std::uint64_t n = 0;
    for (const auto& [k, v] : counts) {
      if (k.rfind(prefix, 0) == 0 && k.size() >= suffix.size() &&
          k.compare(k.size() - suffix.size(), suffix.size(), suffix) == 0) {
        n += v;
      }
    }
    return n;
  }
};

Errc open_error(const fs::path& dir, bool read_only) {
  try {
    Store s(store_options(dir, read_only));
  } catch (const offheap::Error& e) {
    return e.code();
  }
  FAIL("the open of " << dir << " succeeded");
  return Errc::io_error;
}

/// Every key reads exactly its current value, and nothing else is there.
void check_exact(const Store& s, const Keys& keys, const History& h) {
  std::string out;
  std::size_t wrong = 0;
  for (const std::string& k : keys.names) {
    const auto it = h.current.find(k);
    const bool hit = s.get(k, out);
    if (hit != (it != h.current.end()) || (hit && out != it->second)) ++wrong;
  }
  CHECK(wrong == 0);
  std::size_t visited = 0, bad = 0;
  s.for_each([&](std::string_view k, std::string_view v) {
    ++visited;
    const auto it = h.current.find(std::string(k));
    if (it == h.current.end() || it->second != v) ++bad;
  });
  CHECK(visited == h.current.size());
  CHECK(bad == 0);
  CHECK(s.size() == h.current.size());
}

// ---- damage aimed at free records of clean-closed stores ---------------------------
//
// A clean open maps the saved index and free-list table and reads no record,
// so what the writers then believe about free records (headers, links,
// footers) and about the records beside them comes from the chunk files as
// they are. Each iteration walks the copy's chunk files (support/
// chunk_walk.hpp), aims one damage at a free record or at a live record
// beside one, and hands the child a plan of writes that reach it: the keys
// of the records beside it (removed or overwritten: release() merges with
// free neighbours), puts of its size class (take() pops the class down to
// it), then puts of every size, enough new keys to double the index
// (grow_index() rehashes every record), removals and overwrites.

namespace cw = offheap_test::chunk_walk;

enum class FreeDamage : std::uint8_t {
  cap_zero,            // a free record's capacity field 0
  cap_unaligned,       // ... not a multiple of 8
  cap_eight,           // ... 8 (below the 16-byte minimum)
  cap_past_chunk,      // ... running past the chunk
  cap_other_class,     // ... another class's size, inside the chunk
  next_misaligned,     // a next link not a multiple of 8
  prev_misaligned,     // a prev link not a multiple of 8
  link_outside,        // a link to a chunk the shard lacks, or past its chunk or tail
  link_live,           // a link to a live record (or into one)
  link_other_class,    // a link to a free record of another class
  link_self,           // a link to the record itself
  footer_mismatch,     // a footer that disagrees with the header
  prev_free_set,       // a live record's prev-free bit set after a live record
  prev_free_cleared,   // ... cleared after a free record
  key_len_past_chunk,  // a live record's key length running past its chunk
  forged_predecessor,  // prev-free set, and the live record before ends in a forged
                       // free record (header, links, footer) as a crafted value could
};
constexpr std::size_t kFreeDamages = 16;

const char* free_damage_name(FreeDamage d) {
  static const char* const names[kFreeDamages] = {
      "cap_zero",        "cap_unaligned",     "cap_eight",          "cap_past_chunk",
      "cap_other_class", "next_misaligned",   "prev_misaligned",    "link_outside",
      "link_live",       "link_other_class",  "link_self",          "footer_mismatch",
      "prev_free_set",   "prev_free_cleared", "key_len_past_chunk", "forged_predecessor"};
  return names[static_cast<std::size_t>(d)];
}

/// The writes that reach a damaged record, found by the parent for the child.
struct FreeWritePlan {
  FreeDamage kind = FreeDamage::cap_zero;
  bool landed = false;                      // the damage found its target and was written
  std::vector<std::string> neighbour_keys;  // keys of live records beside it
  std::uint64_t drain_payload = 0;          // payload of a put from its size class (0: none)
  std::uint64_t drain_count = 0;            // free records of that class in its shard
  // Where the damage is (a chunk file's name and the record's file offset)
  // and its first 40 bytes as damaged: changed after the child's writes, it
  // was reached (relinked, merged, taken or rewritten).
  std::string file;
  std::uint64_t at = 0;
  std::string bytes;
};

/// The smallest capacity of the free-list class `capacity` belongs to.
std::uint64_t class_min(std::uint64_t capacity) {
  if (capacity <= 4096) return capacity;
  std::uint64_t p = 1;
  while (p * 2 <= capacity) p *= 2;
  return p == 4096 ? 4104 : p;
}

struct RecordRef {
  std::size_t chunk = 0;  // index into WalkedStore::chunks
  std::size_t index = 0;  // into its records
};

/// A store directory's chunk files, walked, with their bytes.
struct WalkedStore {
  struct Chunk {
    fs::path path;
    std::string bytes;
    cw::Chunk walk;
  };
  std::vector<Chunk> chunks;

  explicit WalkedStore(const fs::path& dir) {
    for (const std::string& n : files_of(dir, ".chunk")) {
      Chunk c;
      c.path = dir / n;
      c.bytes = offheap_test::read_file(c.path);
      c.walk = cw::walk(c.bytes, n);
      chunks.push_back(std::move(c));
    }
  }
  const cw::Record& rec(RecordRef r) const { return chunks[r.chunk].walk.records[r.index]; }
  const Chunk& chunk(RecordRef r) const { return chunks[r.chunk]; }
  std::uint32_t shard(RecordRef r) const { return chunks[r.chunk].walk.shard; }
  std::uint64_t loc(RecordRef r) const { return chunks[r.chunk].walk.location_of(rec(r)); }
  std::string key(RecordRef r) const { return cw::key_of(chunk(r).bytes, rec(r)); }
  cw::State state(RecordRef r) const { return rec(r).state(); }

  /// Every record for which pred(ref) holds.
  template <class Pred>
  std::vector<RecordRef> select(Pred&& pred) const {
    std::vector<RecordRef> out;
    for (std::size_t c = 0; c < chunks.size(); ++c) {
      for (std::size_t i = 0; i < chunks[c].walk.records.size(); ++i) {
        if (pred(RecordRef{c, i})) out.push_back({c, i});
      }
    }
    return out;
  }
  std::vector<RecordRef> with_state(cw::State s) const {
    return select([&](RecordRef r) { return state(r) == s; });
  }
  /// The records before and after `r` in its chunk that are live.
  std::vector<RecordRef> live_neighbours(RecordRef r) const {
    std::vector<RecordRef> out;
    if (r.index > 0 && state({r.chunk, r.index - 1}) == cw::State::live) {
      out.push_back({r.chunk, r.index - 1});
    }
    if (r.index + 1 < chunks[r.chunk].walk.records.size() &&
        state({r.chunk, r.index + 1}) == cw::State::live) {
      out.push_back({r.chunk, r.index + 1});
    }
    return out;
  }
  /// How many chunk files shard `s` has.
  std::uint32_t chunks_of_shard(std::uint32_t s) const {
    std::uint32_t n = 0;
    for (const Chunk& c : chunks) n += c.walk.shard == s;
    return n;
  }
  std::string describe(RecordRef r) const {
    const cw::Record& x = rec(r);
    std::ostringstream o;
    o << chunk(r).walk.name << " " << cw::state_name(x.state()) << " record at offset " << x.offset
      << " (file offset " << x.file_offset << ", capacity " << x.capacity;
    if (x.state() == cw::State::live) o << ", key " << printable(key(r), 24);
    o << ", Location 0x" << std::hex << loc(r) << std::dec << ")";
    return o.str();
  }
};

template <class T>
const T& pick(const std::vector<T>& v, std::mt19937_64& rng) {
  return v[rng() % v.size()];
}

template <class T>
void write_le(const fs::path& p, std::uint64_t off, T v) {
  write_bytes(p, off, &v, sizeof v);
}

std::string hex_word(std::uint64_t w) {
  std::ostringstream o;
  o << "0x" << std::hex << w;
  return o.str();
}

/// Applies one damage of `kind` to the clean-closed store in `dir`, filling
/// `plan`; returns its description.
std::string damage_free_record(const fs::path& dir, FreeDamage kind, std::mt19937_64& rng,
                               FreeWritePlan& plan) {
  const WalkedStore ws(dir);
  plan = FreeWritePlan{};
  plan.kind = kind;
  std::ostringstream d;
  d << free_damage_name(kind) << ": ";
  for (const WalkedStore::Chunk& c : ws.chunks) {
    // An undamaged reference walks to its end: anything else is the walker's
    // mistake (or the format's change), and every aim below would be off.
    if (!c.walk.stopped.empty())
      return d.str() + "NOT LANDED: " + c.walk.name + ": the walk stopped: " + c.walk.stopped;
  }
  const std::vector<RecordRef> frees = ws.with_state(cw::State::free);
  const std::vector<RecordRef> lives = ws.with_state(cw::State::live);
  auto same_shard = [&](const std::vector<RecordRef>& v, std::uint32_t s) {
    std::vector<RecordRef> out;
    for (const RecordRef& r : v) {
      if (ws.shard(r) == s) out.push_back(r);
    }
    return out;
  };
  // The writes that reach free record f: its live neighbours' keys, and its class.
  auto aim_at_free = [&](RecordRef f) {
    for (const RecordRef& n : ws.live_neighbours(f)) plan.neighbour_keys.push_back(ws.key(n));
    const std::uint64_t cap = ws.rec(f).capacity;
    plan.drain_payload = class_min(cap);
    for (const RecordRef& g : same_shard(frees, ws.shard(f))) {
      plan.drain_count += cw::size_class(ws.rec(g).capacity) == cw::size_class(cap);
    }
  };
  auto aim_at_live = [&](RecordRef l) {
    plan.neighbour_keys.push_back(ws.key(l));
    for (const RecordRef& n : ws.live_neighbours(l)) plan.neighbour_keys.push_back(ws.key(n));
  };
  RecordRef aimed{};  // the damaged record
  auto landed = [&](const std::string& what) {
    plan.landed = true;
    plan.file = ws.chunk(aimed).walk.name;
    plan.at = ws.rec(aimed).file_offset;
    plan.bytes = offheap_test::read_file(ws.chunk(aimed).path).substr(plan.at, cw::kMinRecord);
    // Each key once, in order.
    std::vector<std::string> keys;
    for (const std::string& k : plan.neighbour_keys) {
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
    }
    plan.neighbour_keys = keys;
    d << what;
    return d.str();
  };
  auto not_landed = [&](const std::string& why) { return d.str() + "NOT LANDED: " + why; };
  if (frees.empty()) return not_landed("no free record in the store");

  switch (kind) {
    case FreeDamage::cap_zero:
    case FreeDamage::cap_unaligned:
    case FreeDamage::cap_eight:
    case FreeDamage::cap_past_chunk:
    case FreeDamage::cap_other_class: {
      const RecordRef f = pick(frees, rng);
      const cw::Record& r = ws.rec(f);
      const cw::Chunk& c = ws.chunk(f).walk;
      std::uint64_t cap = 0;
      std::string how;
      if (kind == FreeDamage::cap_unaligned) {
        cap = rng() % 2 == 0 || r.capacity <= 8 ? r.capacity + 1 + rng() % 7
                                                : r.capacity - 1 - rng() % 7;
      } else if (kind == FreeDamage::cap_eight) {
        cap = 8;
      } else if (kind == FreeDamage::cap_past_chunk) {
        const std::uint64_t room = c.data_bytes - r.offset - cw::kRecordHeader;
        cap = rng() % 3 == 0 ? 0xFFFFFFF8u : room + 8 * (1 + rng() % 8);
      } else if (kind == FreeDamage::cap_other_class) {
        // Another free record's capacity, or one 8-64 bytes off, or double or
        // half: a different class, inside the chunk's records.
        std::vector<std::uint64_t> caps;
        for (const RecordRef& g : same_shard(frees, ws.shard(f)))
          caps.push_back(ws.rec(g).capacity);
        for (std::uint64_t k = 1; k <= 8; ++k) {
          caps.push_back(r.capacity + 8 * k);
          if (r.capacity >= 16 + 8 * k) caps.push_back(r.capacity - 8 * k);
        }
        caps.push_back(r.capacity * 2);
        caps.push_back(r.capacity / 2 / 8 * 8);
        std::vector<std::uint64_t> fit;
        for (const std::uint64_t x : caps) {
          if (x >= 16 && cw::size_class(x) != cw::size_class(r.capacity) &&
              r.offset + cw::kRecordHeader + x <= c.end) {
            fit.push_back(x);
          }
        }
        if (fit.empty()) return not_landed("no other class fits after " + ws.describe(f));
        cap = pick(fit, rng);
      }
      write_le(ws.chunk(f).path, r.value_len_at(), static_cast<std::uint32_t>(cap));
      aim_at_free(f);
      aimed = f;
      return landed(ws.describe(f) + ": capacity field " + std::to_string(cap) + " (was " +
                    std::to_string(r.capacity) + ")");
    }

    case FreeDamage::next_misaligned:
    case FreeDamage::prev_misaligned:
    case FreeDamage::link_outside:
    case FreeDamage::link_live:
    case FreeDamage::link_other_class:
    case FreeDamage::link_self: {
      const RecordRef f = pick(frees, rng);
      const cw::Record& r = ws.rec(f);
      const std::uint32_t shard = ws.shard(f);
      const std::uint32_t chunk = ws.chunk(f).walk.chunk;
      bool next = rng() % 2 == 0;
      if (kind == FreeDamage::next_misaligned) next = true;
      if (kind == FreeDamage::prev_misaligned) next = false;
      std::uint64_t link = 0;
      std::string how;
      switch (kind) {
        case FreeDamage::next_misaligned:
        case FreeDamage::prev_misaligned: {
          // 1-7 bytes into a record of the shard (live two times out of three).
          const std::vector<RecordRef> live = same_shard(lives, shard);
          const RecordRef g = rng() % 3 != 0 && !live.empty() ? pick(live, rng)
                                                              : pick(same_shard(frees, shard), rng);
          link = ws.loc(g) + 1 + rng() % 7;
          how = "into " + ws.describe(g);
          break;
        }
        case FreeDamage::link_outside: {
          const std::uint32_t n = ws.chunks_of_shard(shard);
          const cw::Chunk& c = ws.chunk(f).walk;
          switch (rng() % 4) {
            case 0:
              link = cw::location(n + static_cast<std::uint32_t>(rng() % 3), 8 * (rng() % 64));
              how = "a chunk the shard does not have (it has " + std::to_string(n) + ")";
              break;
            case 1:
              link = cw::location(chunk, c.data_bytes + 8 * (rng() % 64));
              how = "past the end of its chunk (" + std::to_string(c.data_bytes) + " bytes)";
              break;
            case 2:
              link = cw::location(chunk, c.data_bytes - 8 * (1 + rng() % 4));
              how = "a record that would run past its chunk";
              break;
            default: {
              // Past the tail: inside the shard's last chunk, beyond its records.
              const WalkedStore::Chunk* last = nullptr;
              for (const WalkedStore::Chunk& k : ws.chunks) {
                if (k.walk.shard == shard && (last == nullptr || k.walk.chunk > last->walk.chunk))
                  last = &k;
              }
              if (last->walk.end + cw::kMinRecord < last->walk.data_bytes) {
                link = cw::location(
                    last->walk.chunk,
                    last->walk.end +
                        8 * (rng() % ((last->walk.data_bytes - last->walk.end) / 8 - 4)));
                how = "past the tail of " + last->walk.name + " (records end at " +
                      std::to_string(last->walk.end) + ")";
              } else {
                link = ~std::uint64_t{0} - 8;
                how = "chunk 65535";
              }
              break;
            }
          }
          break;
        }
        case FreeDamage::link_live: {
          const std::vector<RecordRef> live = same_shard(lives, shard);
          if (live.empty()) return not_landed("no live record in shard " + std::to_string(shard));
          const RecordRef g = pick(live, rng);
          const std::uint64_t words = ws.rec(g).bytes() / 8;
          // At its start, or at an aligned word inside it (its header words
          // too: a link store there rewrites its lengths).
          const std::uint64_t w = rng() % 2 == 0 ? 0 : rng() % words;
          link = ws.loc(g) + 8 * w;
          how = (w == 0 ? "at " : "word " + std::to_string(w) + " of ") + ws.describe(g);
          break;
        }
        case FreeDamage::link_other_class: {
          std::vector<RecordRef> other;
          for (const RecordRef& g : same_shard(frees, shard)) {
            if (cw::size_class(ws.rec(g).capacity) != cw::size_class(r.capacity))
              other.push_back(g);
          }
          if (other.empty())
            return not_landed("no free record of another class in shard " + std::to_string(shard));
          const RecordRef g = pick(other, rng);
          link = ws.loc(g);
          how = "at " + ws.describe(g);
          break;
        }
        default:
          link = ws.loc(f);
          how = "at itself";
          break;
      }
      const std::uint64_t old =
          next ? cw::link_next(ws.chunk(f).bytes, r) : cw::link_prev(ws.chunk(f).bytes, r);
      write_le(ws.chunk(f).path, next ? r.next_link_at() : r.prev_link_at(), link);
      aim_at_free(f);
      aimed = f;
      return landed(ws.describe(f) + ": " + (next ? "next" : "prev") + " link " + hex_word(link) +
                    " (was " + hex_word(old) + "), " + how);
    }

    case FreeDamage::footer_mismatch: {
      std::vector<RecordRef> big;
      for (const RecordRef& f : frees) {
        if (ws.rec(f).capacity > 16) big.push_back(f);
      }
      if (big.empty()) return not_landed("no free record over 16 bytes");
      const RecordRef f = pick(big, rng);
      const cw::Record& r = ws.rec(f);
      const std::string& bytes = ws.chunk(f).bytes;
      // A stale free header inside the record (left by an earlier merge)
      // that the footer could be made to agree with.
      std::uint64_t stale = 0;
      for (std::uint64_t p = r.payload_at(); p + cw::kMinRecord <= r.file_offset + r.bytes();
           p += 8) {
        const std::uint64_t w1 = cw::load_u64(bytes, p + 8);
        const std::uint64_t cap = static_cast<std::uint32_t>(w1);
        if (((w1 >> 48) & 3) == 2 && p + cw::kRecordHeader + cap == r.file_offset + r.bytes()) {
          stale = cap;
        }
      }
      std::uint64_t footer = 0;
      std::string how;
      switch (stale != 0 && rng() % 2 == 0 ? 9 : rng() % 5) {
        case 0:
          footer = cw::footer_for(r.capacity + 8 * (1 + rng() % 8));
          how = "a larger capacity";
          break;
        case 1:
          footer = cw::footer_for(16 + 8 * (rng() % ((r.capacity - 16) / 8)));
          how = "a smaller capacity";
          break;
        case 2:
          footer = 0;
          how = "zero";
          break;
        case 3:
          footer = cw::footer_for(r.capacity) ^ (std::uint64_t{1} << (1 + rng() % 40));
          how = "one bit flipped";
          break;
        case 4:
          footer = cw::footer_for(r.capacity + 1 + rng() % 7);
          how = "an unaligned capacity";
          break;
        default:
          footer = cw::footer_for(stale);
          how = "the capacity of a stale free header inside the record";
          break;
      }
      write_le(ws.chunk(f).path, r.footer_at(), footer);
      aim_at_free(f);
      aimed = f;
      return landed(ws.describe(f) + ": footer " + hex_word(footer) + " (" + how + "; was " +
                    hex_word(cw::footer(bytes, r)) + ")");
    }

    case FreeDamage::prev_free_set:
    case FreeDamage::prev_free_cleared: {
      const bool set = kind == FreeDamage::prev_free_set;
      const std::vector<RecordRef> targets = ws.select([&](RecordRef m) {
        return ws.state(m) == cw::State::live && m.index > 0 &&
               (ws.state({m.chunk, m.index - 1}) == cw::State::free) != set;
      });
      if (targets.empty())
        return not_landed("no live record after a " + std::string(set ? "live" : "free") + " one");
      const RecordRef m = pick(targets, rng);
      const cw::Record& r = ws.rec(m);
      const auto flags =
          static_cast<std::uint8_t>(set ? r.flags | cw::kPrevFreeBit : r.flags & ~cw::kPrevFreeBit);
      write_le(ws.chunk(m).path, r.flags_at(), flags);
      aim_at_live(m);
      aimed = m;
      const RecordRef p{m.chunk, m.index - 1};
      if (ws.state(p) == cw::State::free) aim_at_free(p);
      return landed(ws.describe(m) + ": prev-free bit " + (set ? "set" : "cleared") +
                    ", the record before: " + ws.describe(p));
    }

    case FreeDamage::key_len_past_chunk: {
      if (lives.empty()) return not_landed("no live record");
      const RecordRef l = pick(lives, rng);
      const cw::Record& r = ws.rec(l);
      const std::uint64_t room = ws.chunk(l).walk.data_bytes - r.offset - cw::kRecordHeader;
      const std::uint64_t k =
          rng() % 2 == 0 ? 0xFFFF : std::min<std::uint64_t>(0xFFFF, room + 1 + rng() % 64);
      if (k <= room) return not_landed(ws.describe(l) + " has room for a 64 KiB key");
      write_le(ws.chunk(l).path, r.key_len_at(), static_cast<std::uint16_t>(k));
      aim_at_live(l);
      aimed = l;
      return landed(ws.describe(l) + ": key length " + std::to_string(k) + " (was " +
                    std::to_string(r.key_len) + "; " + std::to_string(room) +
                    " bytes to the chunk's end)");
    }

    case FreeDamage::forged_predecessor: {
      // A live record L followed by a live record M: the end of L's payload
      // becomes a free record (even stamp, free state, capacity, links,
      // footer), M's prev-free bit is set. Freeing M then finds the forged
      // record through the footer and unlinks it: its links are the write
      // targets, here a live record's words or a misaligned address.
      const std::vector<RecordRef> pairs = ws.select([&](RecordRef l) {
        return ws.state(l) == cw::State::live && ws.rec(l).capacity >= 40 &&
               l.index + 1 < ws.chunk(l).walk.records.size() &&
               ws.state({l.chunk, l.index + 1}) == cw::State::live &&
               !ws.rec({l.chunk, l.index + 1}).prev_free();
      });
      if (pairs.empty()) return not_landed("no live record of 40+ bytes before another live one");
      const RecordRef l = pick(pairs, rng);
      const RecordRef m{l.chunk, l.index + 1};
      const cw::Record& lr = ws.rec(l);
      const cw::Record& mr = ws.rec(m);
      const std::uint64_t fake_cap =
          16 + 8 * (rng() % std::min<std::uint64_t>(4, (lr.capacity - 40) / 8 + 1));
      const std::uint64_t fake = mr.file_offset - cw::kRecordHeader - fake_cap;  // file offset
      std::vector<RecordRef> others;
      for (const RecordRef& g : same_shard(lives, ws.shard(l))) {
        if (g.chunk != l.chunk || (g.index != l.index && g.index != m.index)) others.push_back(g);
      }
      if (others.empty()) return not_landed("no third live record in the shard");
      const RecordRef t = pick(others, rng);
      // An even target (a 16-byte fake's prev link is its footer: an odd one
      // would not read as 16).
      const bool misaligned = rng() % 2 == 0;
      const std::uint64_t target =
          ws.loc(t) + (misaligned ? 2 + 2 * (rng() % 3) : 8 * (rng() % (ws.rec(t).bytes() / 8)));
      const std::uint64_t next = rng() % 2 == 0 ? cw::kNone : target;
      const std::uint64_t words[5] = {lr.stamp + 2, fake_cap | std::uint64_t{2} << 48, 0, next,
                                      target};
      const fs::path& p = ws.chunk(l).path;
      write_bytes(p, fake, words, sizeof words);
      if (fake_cap > 16) write_le(p, mr.file_offset - 8, cw::footer_for(fake_cap));
      write_le(p, mr.flags_at(), static_cast<std::uint8_t>(mr.flags | cw::kPrevFreeBit));
      plan.neighbour_keys.push_back(ws.key(m));
      aimed = m;
      return landed("the last " + std::to_string(cw::kRecordHeader + fake_cap) + " bytes of " +
                    ws.describe(l) + " forged as a free record of capacity " +
                    std::to_string(fake_cap) + " (next " + hex_word(next) + ", prev " +
                    hex_word(target) + (misaligned ? ", misaligned, " : ", ") + "into " +
                    ws.describe(t) + "); prev-free bit set in " + ws.describe(m));
    }
  }
  return not_landed("unknown damage");
}

/// The child of the free-record test: a writable open of the damaged copy,
/// the plan's writes, then puts of every size, growth, removals and
/// overwrites; everything written must read back, before and after a clean
/// close and reopen, and what read back whole right after the open and was
/// not written since must still read the same.
void child_free_writes(const fs::path& dir, const Keys& keys, const History& h0, Reporter& rep,
                       std::uint64_t seed, const FreeWritePlan& plan) {
  std::unique_ptr<Store> s = open_and_check(dir, false, keys, h0, rep, "rw", false);
  if (!s) return;
  History h = h0;
  std::mt19937_64 rng(seed);

  rep.phase("rw reads before the writes");
  std::map<std::string, std::string> intact;  // read exactly right after the open
  {
    std::string out;
    for (const std::string& k : keys.names) {
      try {
        const auto it = h.current.find(k);
        if (s->get(k, out) && it != h.current.end() && it->second == out) intact[k] = out;
      } catch (const offheap::Error& e) {
        rep.count("rw.get_threw." + errc_name(e));
      }
    }
  }
  rep.count("free.intact_at_open", intact.size());

  std::map<std::string, std::optional<std::string>> expect;  // key -> what it must read now
  std::vector<std::string> written;
  auto put = [&](const std::string& k, const std::string& v, const char* what) {
    rep.phase("rw " + std::string(what) + ": put " + printable(k, 24) + " (" +
              std::to_string(v.size()) + " bytes)");
    intact.erase(k);
    try {
      s->put(k, v);
      h.put(k, v);
      expect[k] = v;
      written.push_back(k);
      rep.count("free.writes.ok");
      rep.count(std::string("free.") + what);
      return true;
    } catch (const offheap::Error& e) {
      rep.count("free.writes.threw." + errc_name(e));
      rep.note("put of " + printable(k) + " threw: " + e.what());
      expect.erase(k);  // either outcome acceptable for this key now
      h.values[k].insert(v);
      return false;
    }
  };
  auto remove = [&](const std::string& k, const char* what) {
    rep.phase("rw " + std::string(what) + ": remove " + printable(k, 24));
    intact.erase(k);
    try {
      s->remove(k);
      h.current.erase(k);
      expect[k] = std::nullopt;
      rep.count("free.writes.ok");
      rep.count(std::string("free.") + what);
    } catch (const offheap::Error& e) {
      rep.count("free.writes.threw." + errc_name(e));
      rep.note("remove of " + printable(k) + " threw: " + e.what());
      expect.erase(k);
    }
  };
  auto sized = [](const std::string& k, std::uint64_t payload, char fill) {
    // A value whose record has exactly `payload` payload bytes.
    return std::string(payload > k.size() ? payload - k.size() : 0, fill);
  };

  // 1. The records beside the damage: removed, or overwritten with another
  // size (the old record is freed either way: release() merges).
  for (std::size_t i = 0; i < plan.neighbour_keys.size(); ++i) {
    const std::string& k = plan.neighbour_keys[i];
    if (i % 2 == 0) {
      remove(k, "neighbour");
    } else {
      put(k, "moved/" + std::string(100 + rng() % 3000, 'm'), "neighbour");
    }
  }
  // 2. Its size class, popped down to it (the new keys spread over the
  // shards: four times the class's records).
  if (plan.drain_payload != 0) {
    for (std::uint64_t i = 0; i < plan.drain_count * 4 + 4; ++i) {
      const std::string k = "drain-" + std::to_string(i);
      put(k, sized(k, plan.drain_payload, 'd'), "drain");
    }
  }
  // 3. Every exact size class and a few large ones: takes and splits free
  // records of every class; every seventh key removed again (merges).
  std::vector<std::uint64_t> sizes;
  for (std::uint64_t p = 16; p <= 4096; p += 8) sizes.push_back(p);
  for (const std::uint64_t p : {4104, 5000, 8192, 9000, 16384, 20000, 32768, 40000})
    sizes.push_back(p);
  std::shuffle(sizes.begin(), sizes.end(), rng);
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const std::string k = "size-" + std::to_string(sizes[i]);
    put(k, sized(k, sizes[i], static_cast<char>('a' + i % 26)), "sizes");
    if (i % 7 == 6) remove("size-" + std::to_string(sizes[i - 3]), "merges");
  }
  // 4. New keys until every shard's index has doubled at least once.
  const std::uint64_t capacity0 = s->stats().index_capacity;
  for (int i = 0; i < 3000; ++i) {
    if (i % 64 == 0 && s->stats().index_capacity >= 2 * capacity0) break;
    const std::string k = "grow-" + std::to_string(i);
    put(k, std::string(rng() % 64, 'g'), "grow");
  }
  const std::uint64_t capacity1 = s->stats().index_capacity;
  if (capacity1 > capacity0) rep.count("free.index_grew");
  if (capacity1 >= 2 * capacity0) rep.count("free.index_doubled");
  // 5. Removals and overwrites of old and new keys.
  for (int i = 0; i < 200; ++i) {
    const std::string k = rng() % 2 == 0 || written.empty() ? keys.names[rng() % keys.names.size()]
                                                            : written[rng() % written.size()];
    if (rng() % 3 == 0) {
      remove(k, "churn");
    } else {
      const std::size_t len = rng() % 8 == 0 ? 4000 + rng() % 20000 : rng() % 400;
      put(k, "churn/" + std::to_string(i) + "/" + std::string(len, 'c'), "churn");
    }
  }

  auto check_back = [&](const Store& st, const std::string& when) {
    check_written(st, expect, rep, when);
    std::string out;
    // What read back whole after the open and was not written since: the
    // writes went through no damaged link or length into it.
    std::size_t lost = 0;
    std::string first;
    for (const auto& [k, v] : intact) {
      bool same = false;
      std::string why;
      try {
        const bool hit = st.get(k, out);
        same = hit && out == v;
        if (!same) why = hit ? "reads \"" + printable(out) + "\"" : std::string("reads absent");
      } catch (const offheap::Error& e) {
        why = std::string("throws: ") + e.what();
      }
      if (!same && lost++ == 0) first = printable(k) + " " + why;
    }
    if (lost != 0) {
      rep.fail(
          when + ": " + std::to_string(lost) +
          " keys that read back whole after the damaged open "
          "and were not written since no longer do (a write went through the damage into them), "
          "e.g. " +
          first);
    }
  };
  rep.phase("rw read-back");
  check_back(*s, "read-back");
  rep.phase("rw reads after the writes");
  check_contents(*s, keys, h, rep, "rw");
  run_verify(*s, rep, "rw");
  rep.phase("rw close()");
  try {
    s->close();
  } catch (const offheap::Error& e) {
    rep.note(std::string("close() threw: ") + e.what());
    rep.count("close_threw");
  }
  s.reset();
  if (!plan.file.empty()) {
    const std::string now = offheap_test::read_file(dir / plan.file);
    if (now.compare(plan.at, plan.bytes.size(), plan.bytes) != 0) rep.count("free.reached");
  }
  std::unique_ptr<Store> again = open_and_check(dir, false, keys, h, rep, "reopen");
  if (!again) {
    rep.fail("the reopen after writes and a clean close threw (the damaged open had succeeded)");
    return;
  }
  rep.phase("reopen read-back");
  check_back(*again, "after reopen");
  run_verify(*again, rep, "reopen");
  rep.phase("reopen close");
}

// ---- damage confined to one shard ---------------------------------------------------
//
// Shards share nothing but the meta file: damage in one shard's chunk and
// state files must leave every other shard's keys exactly as they were.

/// The shard of every key of Keys (names and never_written) in the
/// reference stores: each key written into a scratch store of the same shard
/// count and hash seed, and its shard read from the name of the chunk file
/// its record lands in (support/chunk_walk.hpp), not from the engine's hash.
/// Checked against the records of both references.
struct ShardMap {
  std::unordered_map<std::string, std::uint32_t> shard;

  explicit ShardMap(const Reference& ref) {
    ScratchDir tmp;
    const fs::path dir = tmp / "map";
    {
      Options o = store_options(dir);
      o.shards = kReferenceShards;
      o.hash_seed = kReferenceHashSeed;
      Store s(o);
      for (const std::string& k : ref.keys.names) s.put(k, "x");
      for (const std::string& k : ref.keys.never_written) s.put(k, "x");
    }
    add(dir, true);
    REQUIRE(shard.size() == ref.keys.names.size() + ref.keys.never_written.size());
    add(ref.clean.dir, false);
    add(ref.crashed.dir, false);
  }

  std::uint32_t of(const std::string& key) const { return shard.at(key); }

 private:
  /// Reads the shard of each live or dead record's key in `dir`: new keys
  /// are added (`fill`) or must agree with the map.
  void add(const fs::path& dir, bool fill) {
    for (const std::string& n : files_of(dir, ".chunk")) {
      const std::string bytes = offheap_test::read_file(dir / n);
      const cw::Chunk c = cw::walk(bytes, n);
      INFO(dir << "/" << n);
      REQUIRE(c.stopped.empty());
      REQUIRE(c.shard < kReferenceShards);
      for (const cw::Record& r : c.records) {
        if (r.state() != cw::State::live && r.state() != cw::State::dead) continue;
        const std::string k = cw::key_of(bytes, r);
        const auto it = shard.find(k);
        if (it == shard.end()) {
          REQUIRE(fill);
          shard.emplace(k, c.shard);
        } else {
          INFO("key " << printable(k));
          REQUIRE(it->second == c.shard);
        }
      }
    }
  }
};

const ShardMap& shard_map() {
  static const ShardMap m(reference());
  return m;
}

/// The oracle for a store whose damage is confined to shard `damaged`:
/// every key of every other shard reads exactly its current value (or
/// absent, if it has none), without an exception, in get() and for_each();
/// a key of the damaged shard reads absent or exactly its current value (or
/// its read throws offheap::Error); never-written keys read absent.
void check_other_shards(const Store& s, const Keys& keys, const History& h, const ShardMap& map,
                        std::uint32_t damaged, Reporter& rep, const std::string& label) {
  std::string out;
  std::uint64_t other_present = 0;  // keys of other shards with a current value
  bool damage_seen = false;         // a key of the damaged shard reads otherwise than written
  for (const std::string& k : keys.names) {
    const auto it = h.current.find(k);
    const bool in_damaged = map.of(k) == damaged;
    if (!in_damaged && it != h.current.end()) ++other_present;
    try {
      const bool hit = s.get(k, out);
      if (hit && it != h.current.end() && out == it->second) {
        rep.count(label + (in_damaged ? ".damaged_shard.exact" : ".other_shards.exact"));
        continue;
      }
      if (!hit && it == h.current.end()) continue;  // absent, as it should be
      if (in_damaged && !hit) {
        rep.count(label + ".damaged_shard.lost");
        damage_seen = true;
        continue;
      }
      rep.fail(
          label + ": " + (in_damaged ? "key of the damaged shard " : "key of undamaged shard ") +
          std::to_string(map.of(k)) + " " + printable(k) + " reads " +
          (hit ? "\"" + printable(out) + "\" (" + hex_prefix(out) + ")" : std::string("absent")) +
          ", not " +
          (it != h.current.end() ? "\"" + printable(it->second) + "\"" : std::string("absent")) +
          (hit && h.allows(k, out) ? " (an older value of the key)" : ""));
    } catch (const offheap::Error& e) {
      if (in_damaged) {
        rep.count(label + ".damaged_shard.get_threw");
        damage_seen = true;
      } else {
        rep.fail(label + ": get(" + printable(k) + ") of undamaged shard " +
                 std::to_string(map.of(k)) + " threw: " + e.what());
      }
    }
  }
  for (const std::string& k : keys.never_written) {
    try {
      if (s.get(k, out))
        rep.fail(label + ": never-written key " + k + " reads \"" + printable(out) + "\"");
    } catch (const offheap::Error& e) {
      if (map.of(k) != damaged) rep.fail(label + ": get(" + k + ") threw: " + e.what());
    }
  }
  try {
    std::uint64_t other_visited = 0;
    std::string first;
    s.for_each([&](std::string_view kv, std::string_view v) {
      const std::string k(kv);
      const auto it = h.current.find(k);
      const auto sh = map.shard.find(k);
      const bool in_damaged = sh != map.shard.end() && sh->second == damaged;
      if (sh != map.shard.end() && !in_damaged) ++other_visited;
      if (it == h.current.end() || it->second != v) {
        if (first.empty()) {
          first =
              "for_each yielded " + printable(k) + " = \"" + printable(std::string(v)) + "\" (" +
              (sh == map.shard.end() ? std::string("a key never written")
                                     : "shard " + std::to_string(sh->second)) +
              "), not " +
              (it != h.current.end() ? "\"" + printable(it->second) + "\"" : std::string("absent"));
        }
      }
    });
    if (!first.empty()) rep.fail(label + ": " + first);
    if (other_visited != other_present) {
      rep.fail(label + ": for_each visited " + std::to_string(other_visited) +
               " keys of the undamaged shards, which hold " + std::to_string(other_present));
    }
  } catch (const offheap::Error& e) {
    rep.count(label + ".for_each_threw");  // (meeting the damaged shard's damage)
  }
  if (damage_seen) rep.count(label + ".damage_seen");
}

/// Opens a store whose damage is confined to shard `damaged`: read-only,
/// then writable (verify(), close), then writable again after that close.
/// Every open may throw offheap::Error; what an open serves must pass
/// check_other_shards. The second writable open must succeed if the first
/// did.
void child_shard_reads(const fs::path& dir, const Keys& keys, const History& h, const ShardMap& map,
                       std::uint32_t damaged, Reporter& rep) {
  for (const char* label : {"ro", "rw", "reopen"}) {
    const bool ro = std::string_view(label) == "ro";
    rep.phase(std::string(label) + " open");
    std::unique_ptr<Store> s;
    try {
      s = std::make_unique<Store>(store_options(dir, ro));
    } catch (const offheap::Error& e) {
      rep.count(std::string(label) + ".open_threw." + errc_name(e));
      rep.count(std::string(label) + ".open_threw");
      if (std::string_view(label) == "reopen") {
        rep.fail(std::string("the reopen after the writable open and its close threw: ") +
                 e.what());
      }
      if (std::string_view(label) == "rw") return;
      continue;
    }
    rep.count(std::string(label) + ".opened");
    rep.phase(std::string(label) + " reads");
    check_other_shards(*s, keys, h, map, damaged, rep, label);
    if (!ro) {
      run_verify(*s, rep, label);
      rep.phase(std::string(label) + " close()");
      try {
        s->close();
      } catch (const offheap::Error& e) {
        rep.note(std::string(label) + " close() threw: " + e.what());
        rep.count(std::string(label) + ".close_threw");
      }
    }
  }
}
}  // namespace

TEST_CASE("damage: the reference stores reopen exactly while undamaged", "[files][damage]") {
  const Reference& ref = reference();
  ScratchDir scratch;
  for (const Variant* v : {&ref.clean, &ref.crashed}) {
    INFO(v->name << " reference");
    const bool clean = v == &ref.clean;
    CHECK(files_of(v->dir, ".state").size() == (clean ? 3u : 0u));
    for (int shard = 0; shard < 3; ++shard) {
      char prefix[16];
      std::snprintf(prefix, sizeof prefix, "s%04d-", shard);
      std::size_t chunks = 0;
      for (const std::string& f : files_of(v->dir, ".chunk")) chunks += f.rfind(prefix, 0) == 0;
      CHECK(chunks >= 4);  // several chunk files per shard
    }
    const fs::path dir = scratch / v->name;
    copy_dir(v->dir, dir);
    {
      Store s(store_options(dir, true));
      CHECK(s.stats().rebuilt == !clean);
      check_exact(s, ref.keys, v->history);
    }
    {
      Store s(store_options(dir));
      CHECK(s.stats().rebuilt == !clean);
      CHECK(s.stats().corrupt_records == 0);
      CHECK(s.verify().empty());
      check_exact(s, ref.keys, v->history);
    }
  }
  // support/chunk_walk.hpp reads the clean reference as the engine wrote it
  // (the free-record test aims by it): every chunk walked to its end, the
  // free and live records the store counts, footers and prev-free bits
  // consistent.
  const WalkedStore ws(ref.clean.dir);
  std::uint64_t free_records = 0, free_bytes = 0, live = 0, bad_footers = 0, bad_prev_free = 0;
  for (const WalkedStore::Chunk& c : ws.chunks) {
    INFO(c.walk.name);
    CHECK(c.walk.stopped.empty());
    // (A chunk may end in fewer bytes than a record needs: left unused.)
    CHECK(c.walk.end - (c.walk.records.empty() ? 0 : c.walk.records.back().end()) < cw::kMinRecord);
    for (std::size_t i = 0; i < c.walk.records.size(); ++i) {
      const cw::Record& r = c.walk.records[i];
      bad_prev_free += r.prev_free() != (i > 0 && c.walk.records[i - 1].state() == cw::State::free);
      if (r.state() == cw::State::free) {
        ++free_records;
        free_bytes += r.capacity;
        if (r.capacity > 16) bad_footers += cw::footer(c.bytes, r) != cw::footer_for(r.capacity);
      } else if (r.state() == cw::State::live) {
        ++live;
      }
    }
  }
  const fs::path dir = scratch / "walked";
  copy_dir(ref.clean.dir, dir);
  Store s(store_options(dir, true));
  const offheap::Stats st = s.stats();
  CHECK(free_records == st.free_records);
  CHECK(free_bytes == st.free_bytes);
  CHECK(live == st.records);
  CHECK(bad_footers == 0);
  CHECK(bad_prev_free == 0);
  CHECK(free_records >= 50);  // enough to aim at
}

TEST_CASE("damage: meta, chunk header and state damage is refused or stepped over",
          "[files][damage]") {
  const Reference& ref = reference();
  ScratchDir scratch;
  const fs::path dir = scratch / "d";
  const fs::path chunk = dir / "s0001-c00002.chunk";
  const std::uint32_t bad_version = 99;

  SECTION("meta: a damaged magic is corrupt_file") {
    copy_dir(ref.clean.dir, dir);
    flip_byte(dir / "meta", 3, 0x20);
    CHECK(open_error(dir, true) == Errc::corrupt_file);
    CHECK(open_error(dir, false) == Errc::corrupt_file);
  }
  SECTION("meta: another format version is format_version") {
    copy_dir(ref.crashed.dir, dir);
    write_bytes(dir / "meta", 8, &bad_version, 4);
    CHECK(open_error(dir, true) == Errc::format_version);
    CHECK(open_error(dir, false) == Errc::format_version);
  }
  SECTION("meta: a flip in any field fails its checksum") {
    copy_dir(ref.clean.dir, dir);
    for (std::uint64_t off = 12; off < 96; off += 7) {
      flip_byte(dir / "meta", off, 0x04);
      INFO("offset " << off);
      CHECK(open_error(dir, true) == Errc::corrupt_file);
      CHECK(open_error(dir, false) == Errc::corrupt_file);
      flip_byte(dir / "meta", off, 0x04);
    }
    Store s(store_options(dir, true));  // undone: opens again
    check_exact(s, ref.keys, ref.clean.history);
  }
  SECTION("meta: truncated or zeroed") {
    copy_dir(ref.clean.dir, dir);
    zero_range(dir / "meta", 0, 96);
    CHECK(open_error(dir, false) == Errc::corrupt_file);
    truncate_to(dir / "meta", 40);
    CHECK(open_error(dir, true) == Errc::corrupt_file);
    truncate_to(dir / "meta", 0);
    CHECK(open_error(dir, false) == Errc::corrupt_file);
  }
  SECTION("chunk header: magic, version, checksum, truncation") {
    for (const Variant* v : {&ref.clean, &ref.crashed}) {
      INFO(v->name);
      copy_dir(v->dir, dir);
      flip_byte(chunk, 0, 0x01);
      CHECK(open_error(dir, true) == Errc::corrupt_file);
      flip_byte(chunk, 0, 0x01);
      write_bytes(chunk, 8, &bad_version, 4);
      CHECK(open_error(dir, false) == Errc::format_version);
      copy_dir(v->dir, dir);
      flip_byte(chunk, 25, 0x10);  // data_bytes
      CHECK(open_error(dir, false) == Errc::corrupt_file);
      copy_dir(v->dir, dir);
      truncate_to(chunk, fs::file_size(chunk) - 4096);
      CHECK(open_error(dir, true) == Errc::corrupt_file);
      truncate_to(chunk, 100);
      CHECK(open_error(dir, false) == Errc::corrupt_file);
      copy_dir(v->dir, dir);
      fs::remove(chunk);  // a chunk missing in the middle
      CHECK(open_error(dir, false) == Errc::corrupt_file);
    }
  }
  SECTION("state files: any damage makes the open rebuild, with every value") {
    std::mt19937_64 rng(17);
    for (int i = 0; i < 12; ++i) {
      copy_dir(ref.clean.dir, dir);
      const fs::path state = dir / "s0002.state";
      const std::uint64_t size = fs::file_size(state);
      // The header is 192 bytes; the tables start at the next page (4096):
      // the bytes between are padding that no check covers.
      std::string what;
      bool changed = true;
      if (i % 3 == 0) {
        const std::uint64_t off = i < 6 ? rng() % 192 : 4096 + rng() % (size - 4096);
        flip_byte(state, off, static_cast<unsigned char>(1u << (rng() % 8)));
        what = "flip at " + std::to_string(off);
      } else if (i % 3 == 1) {
        const std::uint64_t off = i < 6 ? 0 : 4096 + (rng() % (size - 4096)) / 4096 * 4096;
        const std::uint64_t n = std::min<std::uint64_t>(4096, size - off);
        std::string before(n, '\0');
        const int fd = ::open(state.c_str(), O_RDONLY | O_CLOEXEC);
        REQUIRE(::pread(fd, before.data(), n, static_cast<off_t>(off)) == static_cast<ssize_t>(n));
        ::close(fd);
        changed = before.find_first_not_of('\0') != std::string::npos;
        zero_range(state, off, n);
        what = "zeroed page at " + std::to_string(off);
      } else {
        const std::uint64_t to = rng() % size;
        truncate_to(state, to);
        what = "truncated to " + std::to_string(to);
      }
      INFO("s0002.state: " << what << (changed ? "" : " (the page was zeros already)"));
      for (const bool ro : {true, false}) {
        Store s(store_options(dir, ro));
        if (changed) CHECK(s.stats().rebuilt);
        check_exact(s, ref.keys, ref.clean.history);
        if (!ro) CHECK(s.verify().empty());
      }
    }
  }
}

TEST_CASE("damage: every open of a damaged store throws offheap::Error or serves written values",
          "[files][damage]") {
  const Reference& ref = reference();
  ScratchDir scratch;
  Campaign c(0xD4A6E5EED);
  const std::size_t n = env_u64("OFFHEAP_DAMAGE_ITERATIONS", 300);
  INFO("damage seed " << c.seed << " (set OFFHEAP_DAMAGE_SEED to repeat)");
  for (std::size_t it = 0; it < n && !c.stopped(); ++it) {
    const Variant& v = it % 2 == 0 ? ref.clean : ref.crashed;
    c.iteration(it, v, scratch.path(),
                [&](const fs::path& dir, const History& h, Reporter& rep, std::uint64_t) {
                  child_reads(dir, ref.keys, h, rep);
                });
  }
  if (!c.ran_through("reads")) return;
  // The test can fail: damaged opens do succeed and serve values, and some
  // damage is refused.
  for (const char* v : {"clean", "crashed"}) {
    INFO(v);
    const std::string p = std::string(v) + ".";
    CHECK(c.count(p + "ro.opened") > 0);
    CHECK(c.count(p + "rw.opened") > 0);
    CHECK(c.count(p + "ro.served") > 0);
    CHECK(c.count(p + "rw.served") > 0);
    CHECK(c.count(p + "rw.open_threw.corrupt_file") > 0);
  }
  CHECK(c.sum("clean.", ".get_threw.corrupt_file") > 0);      // damaged records refused on read
  CHECK(c.sum("crashed.", ".corrupt_records") > 0);           // and dropped by recovery
}

TEST_CASE("damage: writes after a damaged open read back and survive a clean reopen",
          "[files][damage][writes]") {
  const Reference& ref = reference();
  ScratchDir scratch;
  Campaign c(0x3217E5EED);
  const std::size_t n = env_u64("OFFHEAP_DAMAGE_ITERATIONS", 300) / 2;
  INFO("damage seed " << c.seed << " (set OFFHEAP_DAMAGE_SEED to repeat)");
  for (std::size_t it = 0; it < n && !c.stopped(); ++it) {
    const Variant& v = it % 2 == 0 ? ref.clean : ref.crashed;
    c.iteration(it, v, scratch.path(),
                [&](const fs::path& dir, const History& h, Reporter& rep, std::uint64_t s) {
                  child_writes(dir, ref.keys, h, rep, s);
                });
  }
  c.print_summary("writes");
  for (const std::string& f : c.failures) FAIL_CHECK(f);
  if (c.stopped()) return;
  CHECK(c.sum("", ".writes.ok") > 0);
  CHECK(c.sum("", ".reopen.opened") > 0);
}

TEST_CASE(
    "damage: writes after damage aimed at free records of a clean-closed store throw or read back",
    "[files][damage][free]") {
  // OFFHEAP_DAMAGE_FREE_ITERATIONS (default 2 per damage kind, the kinds in
  // turn), OFFHEAP_DAMAGE_KIND=<name> (only that kind), OFFHEAP_DAMAGE_ONLY=<n>
  // (only iteration n: the seed and n fix the damage), and the variables at
  // the top of this file.
  const Reference& ref = reference();
  ScratchDir scratch;
  Campaign c(0xF4EE5EED);
  const std::size_t n = env_u64("OFFHEAP_DAMAGE_FREE_ITERATIONS", 2 * kFreeDamages);
  const char* only_kind = env("OFFHEAP_DAMAGE_KIND");
  const char* only_it = env("OFFHEAP_DAMAGE_ONLY");
  INFO("damage seed " << c.seed << " (set OFFHEAP_DAMAGE_SEED to repeat)");
  std::map<std::string, std::size_t> landed;
  std::vector<std::string> missed;
  for (std::size_t it = 0; it < n && !c.stopped(); ++it) {
    const auto kind = static_cast<FreeDamage>(it % kFreeDamages);
    if (only_kind != nullptr && std::string_view(only_kind) != free_damage_name(kind)) continue;
    if (only_it != nullptr && it != std::strtoull(only_it, nullptr, 0)) continue;
    FreeWritePlan plan;
    std::string what;
    c.iteration_with(
        it, ref.clean, scratch.path(),
        [&](const fs::path& dir, bool has_state, std::mt19937_64& rng) {
          REQUIRE(has_state);  // a clean-closed store: the open maps its state
          what = damage_free_record(dir, kind, rng, plan);
          return what;
        },
        [&](const fs::path& dir, const History& h, Reporter& rep, std::uint64_t s) {
          child_free_writes(dir, ref.keys, h, rep, s, plan);
        });
    if (plan.landed) {
      ++landed[free_damage_name(kind)];
    } else {
      missed.push_back("iteration " + std::to_string(it) + ": " + what);
    }
  }
  if (!c.ran_through("free records")) return;
  // The test can fail: every damage found its target and was written, and
  // the children's writes went down every path.
  for (const std::string& m : missed) FAIL_CHECK("the damage did not land: " << m);
  if (only_kind == nullptr && only_it == nullptr && n >= kFreeDamages) {
    for (std::size_t k = 0; k < kFreeDamages; ++k) {
      const char* name = free_damage_name(static_cast<FreeDamage>(k));
      INFO(name);
      CHECK(landed[name] > 0);
    }
  }
  if (only_it == nullptr) {
    CHECK(c.count("clean.rw.opened") > 0);
    CHECK(c.count("clean.free.neighbour") > 0);      // writes of the records beside the damage
    CHECK(c.count("clean.free.drain") > 0);          // puts from the damaged record's class
    CHECK(c.count("clean.free.merges") > 0);         // removals beside free records
    CHECK(c.count("clean.free.index_doubled") > 0);  // every shard's index grew
    CHECK(c.count("clean.reopen.opened") > 0);
  }
}

TEST_CASE("damage: damage in one shard's files leaves every other shard's keys exact",
          "[files][damage][shard]") {
  // OFFHEAP_DAMAGE_SHARD_ITERATIONS (default 180), and the variables at the
  // top of this file. Iteration i damages shard (i / 2) % 3 of the clean
  // (even i) or the crashed (odd i) reference.
  const Reference& ref = reference();
  const ShardMap& map = shard_map();
  ScratchDir scratch;
  Campaign c(0x5A4D5EED);
  const std::size_t n = env_u64("OFFHEAP_DAMAGE_SHARD_ITERATIONS", 180);
  INFO("damage seed " << c.seed << " (set OFFHEAP_DAMAGE_SEED to repeat)");
  // Every shard holds keys with values, and keys of every shard are absent.
  std::uint64_t per_shard[kReferenceShards] = {};
  for (const auto& [k, v] : ref.clean.history.current) ++per_shard[map.of(k)];
  for (const std::uint64_t x : per_shard) REQUIRE(x >= 100);
  for (std::size_t it = 0; it < n && !c.stopped(); ++it) {
    const Variant& v = it % 2 == 0 ? ref.clean : ref.crashed;
    const auto damaged = static_cast<std::uint32_t>((it / 2) % kReferenceShards);
    c.iteration_with(
        it, v, scratch.path(),
        [&](const fs::path& dir, bool has_state, std::mt19937_64& rng) {
          return "shard " + std::to_string(damaged) + ": " +
                 damage(dir, has_state, rng, static_cast<int>(damaged));
        },
        [&](const fs::path& dir, const History& h, Reporter& rep, std::uint64_t) {
          child_shard_reads(dir, ref.keys, h, map, damaged, rep);
        });
  }
  if (!c.ran_through("one shard")) return;
  // Not vacuous: damaged stores do open (a quarter of the iterations at
  // least, in each reference), and serve the other shards while the
  // damaged shard shows its damage (keys lost or refused); some damage is
  // refused at the open.
  for (const char* v : {"clean", "crashed"}) {
    INFO(v);
    const std::string p = std::string(v) + ".";
    CHECK(c.count(p + "ro.opened") * 8 >= n);
    CHECK(c.count(p + "rw.opened") * 8 >= n);
    CHECK(c.count(p + "reopen.opened") * 8 >= n);
    CHECK(c.count(p + "rw.other_shards.exact") > 0);
    CHECK(c.count(p + "rw.damage_seen") > 0);
    CHECK(c.count(p + "rw.open_threw") > 0);
  }
  CHECK(c.sum("crashed.", ".damaged_shard.lost") > 0);     // dropped by recovery
  CHECK(c.sum("clean.", ".damaged_shard.get_threw") > 0);  // refused by a read
}

// A walk goes on through an index table that growth replaced under it
// (its slots frozen): each key it meets there is confirmed through a
// lookup in the current table. A record damaged on disk while the store
// is open (growth's rehash, which drops a record that fails its checksum,
// has passed) and met that way is skipped and counted, as one met in the
// live table is, so that a walk salvages what is intact; the lookup's
// corrupt_file used to escape the walk.
TEST_CASE("A walk through a replaced index table skips records damaged meanwhile and visits every intact one",
          "[files][damage]") {
  offheap_test::TempDir tmp;
  Options o;
  o.path = tmp / "store";
  o.shards = 1;
  o.hash_seed = 7;
  o.background_maintenance = false;
  constexpr int kKeys = 24, kIntact = 4;
  const auto key = [](int i) { return "walked-" + std::to_string(i); };
  const auto value = [](int i) { return "value-of-" + std::to_string(i) + std::string(40, 'v'); };
  Store s(o);
  for (int i = 0; i < kKeys; ++i) s.put(key(i), value(i));
  const std::uint64_t capacity = s.stats().index_capacity;
  bool armed = false;
  int damaged = 0, visited = 0, wrong = 0;
  s.for_each([&](std::string_view k, std::string_view v) {
    if (k.rfind("walked-", 0) != 0) return;
    const int i = std::stoi(std::string(k.substr(7)));
    if (v != value(i)) ++wrong;
    ++visited;
    if (armed) return;
    armed = true;
    // The index grows (a small table is rebuilt at once): the walk's
    // table is replaced, and every slot after this one is read frozen.
    for (int g = 0; s.stats().index_capacity == capacity; ++g) s.put("grow-" + std::to_string(g), "g");
    // Then one value byte of every other key's record is flipped in its
    // chunk file, which the store maps (shared): bit rot under the store.
    for (const auto& entry : fs::directory_iterator(o.path)) {
      if (entry.path().extension() != ".chunk") continue;
      const std::string bytes = offheap_test::read_file(entry.path());
      for (const auto& r : offheap_test::chunk_walk::walk(bytes, entry.path().filename().string()).records) {
        if (r.state() != offheap_test::chunk_walk::State::live) continue;
        const std::string rk = offheap_test::chunk_walk::key_of(bytes, r);
        if (rk.rfind("walked-", 0) != 0 || rk == k || std::stoi(rk.substr(7)) < kIntact) continue;
        offheap_test::flip_byte(entry.path(), r.payload_at() + r.key_len + 3, 0x01);
        ++damaged;
      }
    }
  });
  REQUIRE(armed);
  // The table was rebuilt, not migrated: a table a migration drains stays
  // live (walked through copy_record()), which would prove nothing here.
  REQUIRE(s.stats().index_migrations == 0);
  CHECK(wrong == 0);
  // The first key and the intact ones; every damaged one met once, and
  // counted, none of them thrown out of the walk.
  CHECK(damaged >= kKeys - kIntact - 1);
  CHECK(visited == kKeys - damaged);
  CHECK(s.stats().corrupt_records == static_cast<std::uint64_t>(damaged));
  // A read of a damaged key still says so; the others read right.
  std::string out;
  int refused = 0, read_right = 0;
  for (int i = 0; i < kKeys; ++i) {
    try {
      read_right += s.get(key(i), out) && out == value(i);
    } catch (const offheap::Error& e) {
      refused += e.code() == Errc::corrupt_file;
    }
  }
  CHECK(refused == damaged);
  CHECK(read_right == kKeys - damaged);
}
