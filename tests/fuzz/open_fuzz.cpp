// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the open and recovery path of file-backed stores.
//
// At startup, small pristine stores are built (tiny chunks, a few hundred
// writes with overwrites, removals and typed values; the history of every
// value written per key kept): each in a cleanly closed variant (state files:
// the open maps the saved index) and a crashed one (files captured while the
// store was open: the open rebuilds from the records), with one shard and
// with two. Their files are held in memory.
//
// An input is a variant and a list of patches (see parse() below) applied to
// a fresh copy of that variant's files: xor or overwrite bytes, zero a
// range, truncate. The copy is opened read-only, then writable (which runs
// the writing recovery); every key is read with get() and get_value(), the
// never-written keys too, and for_each walks the store. With bit 2 of the
// first byte, a few writes follow the writable open and everything is read
// again. An open, read or write may throw offheap::Error; a value that was
// never written for its key, any other exception, a crash, a sanitizer
// report or a hang (libFuzzer's -timeout) is a finding.
//
// Build (clang): clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined
//   -fno-sanitize-recover=undefined -Iinclude -Itests tests/fuzz/open_fuzz.cpp
// Run: tests/fuzz/run_fuzz.sh [build dir] [seconds]
// Replay a finding: <binary> <crash file>
// The scratch directory is under $OFFHEAP_FUZZ_TMPDIR, else /dev/shm (fsync
// is cheap there), else /tmp. OFFHEAP_FUZZ_STRICT_WRITES=1 also makes a put
// that returned but does not read back a finding (beyond the guarantee).
#include <offheap/offheap.hpp>

#include "support/bytes.hpp"
#include "support/scratch_dir.hpp"
#include "support/store_dir.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace {

using offheap_test::bytes_of;
using offheap_test::capture_dir;
using offheap_test::clear_dir;
using offheap_test::File;
using offheap_test::write_file;

/// Keys and values in findings: the first 48 bytes.
std::string printable(std::string_view s) { return offheap_test::printable(s, 48); }

struct Pod {
  std::uint64_t a;
  std::uint32_t b, c;
};

enum class Kind : std::uint8_t { bytes, u64, pod };

struct Variant {
  std::string label;
  std::vector<File> files;  // sorted by name: chunks, meta, states
};

struct World {
  std::string scratch;  // the store directory each input is copied into
  std::vector<std::string> keys;
  std::vector<Kind> kinds;
  std::vector<std::string> never_written;
  std::unordered_map<std::string, std::unordered_set<std::string>> history;
  std::vector<Variant> variants;
};

World* world = nullptr;
bool strict_writes = false;  // OFFHEAP_FUZZ_STRICT_WRITES=1
// Values written by the current input after its writable open (byte 0, bit 2).
std::unordered_map<std::string, std::unordered_set<std::string>> written_now;

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "open_fuzz: FINDING: %s\n", what.c_str());
  std::fflush(stderr);
  __builtin_trap();
}

bool allowed(const std::string& key, std::string_view value) {
  const auto it = world->history.find(key);
  if (it != world->history.end() && it->second.count(std::string(value)) != 0) return true;
  const auto now = written_now.find(key);
  return now != written_now.end() && now->second.count(std::string(value)) != 0;
}

// ---- the pristine stores ---------------------------------------------------------------

offheap::Options options(const std::string& dir, bool read_only) {
  offheap::Options o;
  o.path = dir;
  o.read_only = read_only;
  o.min_chunk_bytes = 4096;
  o.max_chunk_bytes = 16384;
  // Nothing to sync at close: every execution stays cheap. (A clean store
  // still opens from its state files.)
  o.durability = offheap::Durability::none;
  o.background_maintenance = false;
  return o;
}

void workload(std::mt19937_64& rng, offheap::Store& s, std::size_t ops, std::uint64_t& version) {
  World& w = *world;
  for (std::size_t op = 0; op < ops; ++op) {
    const std::size_t i = rng() % w.keys.size();
    const std::string& k = w.keys[i];
    const unsigned r = static_cast<unsigned>(rng() % 100);
    ++version;
    if (r < 10) {
      s.remove(k);
      continue;
    }
    if (w.kinds[i] == Kind::u64) {
      const std::uint64_t v = i * 1000 + version;
      s.put_value(k, v);
      w.history[k].insert(bytes_of(v));
      continue;
    }
    if (w.kinds[i] == Kind::pod) {
      const Pod v{version, static_cast<std::uint32_t>(i), 7};
      s.put_value(k, v);
      w.history[k].insert(bytes_of(v));
      continue;
    }
    std::size_t len = rng() % 48;
    if (r < 16) len = 500 + rng() % 2500;  // large records
    std::string v = std::to_string(i) + "/" + std::to_string(version) + "/";
    v.append(len, static_cast<char>('a' + rng() % 26));
    if (r < 22 && r >= 20) v.clear();  // empty values
    s.put(k, v);
    w.history[k].insert(v);
  }
}

/// Builds one store in `dir` and returns its clean and crashed variants.
void build(const std::string& dir, std::uint32_t shards, std::uint64_t seed) {
  World& w = *world;
  std::mt19937_64 rng(seed);
  std::uint64_t version = seed << 20;
  clear_dir(dir);
  ::rmdir(dir.c_str());
  {
    offheap::Options o = options(dir, false);
    o.durability = offheap::Durability::on_close;  // a real clean close: state files
    o.shards = shards;
    o.hash_seed = seed;
    offheap::Store s(o);
    workload(rng, s, 500, version);
  }
  w.variants.push_back({"clean/" + std::to_string(shards), capture_dir(dir)});
  {
    offheap::Options o = options(dir, false);
    o.durability = offheap::Durability::on_close;
    offheap::Store s(o);
    workload(rng, s, 250, version);
    // Captured while the store is open: what a crash leaves (the records
    // are in the shared mappings, no state files, meta not clean).
    w.variants.push_back({"crashed/" + std::to_string(shards), capture_dir(dir)});
  }
  clear_dir(dir);
}

void cleanup() {
  if (world == nullptr) return;
  clear_dir(world->scratch);
  ::rmdir(world->scratch.c_str());
}

// ---- inputs ----------------------------------------------------------------------------

// Input layout:
//   byte 0          bits 0-1: variant; bit 2: write after the writable open
//   then patches, each:
//     byte          file (mod the variant's file count)
//     byte          op: 0 xor, 1 write, 2 zero, 3 truncate (mod 4); bit 7:
//                   offset relative to 4096 (chunk records, state tables)
//     3 bytes       offset, little-endian (mod the file's size + 1)
//     byte          n: xor/write: n % 16 + 1 data bytes follow; zero:
//                   (n + 1) * 64 bytes
//     data bytes    xor and write only
struct Patch {
  std::size_t file;
  unsigned op;
  std::uint64_t offset;
  std::uint64_t length;
  std::string data;
};

bool parse(const std::uint8_t* p, std::size_t n, std::size_t& variant, std::vector<Patch>& out) {
  if (n == 0) return false;
  variant = p[0] % world->variants.size();
  std::size_t i = 1;
  while (i + 6 <= n && out.size() < 32) {
    Patch q;
    q.file = p[i];
    const unsigned op = p[i + 1];
    q.op = op & 3;
    q.offset = std::uint64_t{p[i + 2]} | std::uint64_t{p[i + 3]} << 8 | std::uint64_t{p[i + 4]} << 16;
    if (op & 0x80) q.offset += 4096;
    const unsigned len = p[i + 5];
    i += 6;
    if (q.op <= 1) {
      q.length = len % 16 + 1;
      if (i + q.length > n) break;
      q.data.assign(reinterpret_cast<const char*>(p + i), q.length);
      i += q.length;
    } else {
      q.length = (std::uint64_t{len} + 1) * 64;
    }
    out.push_back(std::move(q));
  }
  return true;
}

void apply(std::vector<File>& files, const Patch& q) {
  File& f = files[q.file % files.size()];
  std::string& b = f.bytes;
  const std::uint64_t off = q.offset % (b.size() + 1);
  switch (q.op) {
    case 0:
      for (std::size_t j = 0; j < q.data.size() && off + j < b.size(); ++j) b[off + j] ^= q.data[j];
      break;
    case 1:
      for (std::size_t j = 0; j < q.data.size() && off + j < b.size(); ++j) b[off + j] = q.data[j];
      break;
    case 2:
      for (std::uint64_t j = off; j < b.size() && j < off + q.length; ++j) b[j] = 0;
      break;
    default: b.resize(off); break;
  }
}

// ---- checks ----------------------------------------------------------------------------

template <class T>
void check_typed(const offheap::Store& s, const std::string& k) {
  try {
    const std::optional<T> v = s.get_value<T>(k);
    if (v && !allowed(k, bytes_of(*v))) finding("get_value of " + printable(k) + ": a value never written");
  } catch (const offheap::Error&) {
  }
}

void check(const offheap::Store& s, const char* how) {
  const World& w = *world;
  std::string out;
  for (std::size_t i = 0; i < w.keys.size(); ++i) {
    const std::string& k = w.keys[i];
    try {
      if (s.get(k, out) && !allowed(k, out)) {
        finding(std::string(how) + ": get(" + printable(k) + ") returned \"" + printable(out) +
                "\", never written for that key");
      }
    } catch (const offheap::Error&) {
    }
    if (w.kinds[i] == Kind::u64) check_typed<std::uint64_t>(s, k);
    if (w.kinds[i] == Kind::pod) check_typed<Pod>(s, k);
  }
  for (const std::string& k : w.never_written) {
    try {
      if (s.get(k, out)) finding(std::string(how) + ": never-written key " + k + " is present");
    } catch (const offheap::Error&) {
    }
  }
  try {
    s.for_each([&](std::string_view k, std::string_view v) {
      if (!allowed(std::string(k), v)) {
        finding(std::string(how) + ": for_each yielded (" + printable(k) + ", \"" + printable(v) +
                "\"), never written for that key");
      }
    });
  } catch (const offheap::Error&) {
  }
  (void)s.stats();
  (void)s.size();
}

/// A few writes after a writable open of the damaged copy (overwrites, a
/// new key, a removal), then everything is read again. A write or read may
/// throw offheap::Error; a crash or a wrong value is a finding.
void write_some(offheap::Store& s, std::uint8_t salt) {
  const World& w = *world;
  for (unsigned j = 0; j < 6; ++j) {
    const std::string k = j == 0 ? std::string("fresh") : w.keys[(salt * 7u + j * 37u) % w.keys.size()];
    try {
      if (j == 5) {
        s.remove(k);
      } else {
        std::string v = "fz/" + std::to_string(j) + "/";
        v.append(j * 300u + salt, 'w');
        written_now[k].insert(v);
        s.put(k, v);
        if (strict_writes) {
          // Opt-in (OFFHEAP_FUZZ_STRICT_WRITES=1): a put that returned must
          // read back, even in a damaged store.
          std::string out;
          bool hit = false;
          try {
            hit = s.get(k, out);
          } catch (const offheap::Error& e) {
            finding("put(" + printable(k) + ") returned, then get threw: " + e.what());
          }
          if (!hit || out != v) finding("put(" + printable(k) + ") returned, then get did not read it");
        }
      }
    } catch (const offheap::Error&) {
    }
  }
  check(s, "writable open, after writes");
}

void open_and_check(bool read_only, bool writes = false, std::uint8_t salt = 0) {
  try {
    offheap::Store s(options(world->scratch, read_only));
    check(s, read_only ? "read-only open" : "writable open");
    if (writes) write_some(s, salt);
  } catch (const offheap::Error&) {
    // Refusing a damaged store is allowed.
  } catch (const std::exception& e) {
    finding(std::string("an exception other than offheap::Error: ") + e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  world = new World;
  const std::string top = offheap_test::make_scratch_dir("OFFHEAP_FUZZ_TMPDIR", "offheap-fuzz");
  world->scratch = top + "/store";
  for (int i = 0; i < 150; ++i) {
    world->keys.push_back("k" + std::to_string(i));
    world->kinds.push_back(i % 7 == 3 ? Kind::u64 : i % 7 == 5 ? Kind::pod : Kind::bytes);
  }
  world->keys.push_back(std::string(300, 'L'));  // a long key
  world->kinds.push_back(Kind::bytes);
  world->keys.push_back("");
  world->kinds.push_back(Kind::bytes);
  for (int i = 0; i < 10; ++i) world->never_written.push_back("never" + std::to_string(i));
  build(top + "/build1", 1, 0x0F0F1);
  build(top + "/build2", 2, 0x0F0F2);
  ::rmdir((top + "/build1").c_str());
  ::rmdir((top + "/build2").c_str());
  ::mkdir(world->scratch.c_str(), 0755);
  std::atexit([] {
    cleanup();
    ::rmdir(world->scratch.substr(0, world->scratch.rfind('/')).c_str());
  });
  strict_writes = std::getenv("OFFHEAP_FUZZ_STRICT_WRITES") != nullptr;
  if (std::getenv("OFFHEAP_FUZZ_VERBOSE") != nullptr) {
    for (const Variant& v : world->variants) {
      std::fprintf(stderr, "open_fuzz: variant %s:", v.label.c_str());
      for (const File& f : v.files) std::fprintf(stderr, " %s(%zu)", f.name.c_str(), f.bytes.size());
      std::fprintf(stderr, "\n");
    }
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::size_t variant = 0;
  std::vector<Patch> patches;
  if (!parse(data, size, variant, patches)) return 0;
  const bool writes = (data[0] & 4) != 0;
  written_now.clear();
  std::vector<File> files = world->variants[variant].files;
  for (const Patch& q : patches) apply(files, q);
  clear_dir(world->scratch);
  for (const File& f : files) write_file(world->scratch + "/" + f.name, f.bytes);
  open_and_check(true);
  open_and_check(false, writes, data[0]);  // the writing recovery (and writes)
  open_and_check(true);                   // a read-only view of the result
  return 0;
}
