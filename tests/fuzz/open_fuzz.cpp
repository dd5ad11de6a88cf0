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
// range, truncate; or targeted patches aimed at the records a walk of the
// pristine chunk files found (support/chunk_walk.hpp): a free record's
// capacity, links, footer or flags, a live record's key or value length or
// prev-free bit, a free record forged at the end of a live one. The copy is
// opened read-only, then writable (which runs the writing recovery); every
// key is read with get() and get_value(), the never-written keys too, and
// for_each walks the store. With bit 2 of the first byte, a few writes
// follow the writable open and everything is read again; with bits 2 and 3,
// more writes then reach the free records (removals beside them, puts of
// their classes, growth of the index: write_more) and everything is read
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
#include "support/chunk_walk.hpp"
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

namespace cw = offheap_test::chunk_walk;

/// One record of a variant's chunk files, as the pristine files lay it out
/// (support/chunk_walk.hpp): what the targeted patches aim at.
struct Target {
  std::size_t file = 0;  // index into the variant's files
  cw::Record rec;
  std::uint32_t shard = 0, chunk = 0;
  std::uint64_t chunk_bytes = 0;        // the chunk's size
  std::size_t after = ~std::size_t{0};  // index of the next record in its chunk, if any
};

struct Variant {
  std::string label;
  std::vector<File> files;  // sorted by name: chunks, meta, states
  // The pristine chunk files walked: every record in file order, the free
  // and live ones among them, and for the writes that follow an open: the
  // keys of live records beside free records (removing one merges) and the
  // payload sizes that take the free records of each class.
  std::vector<Target> records;
  std::vector<std::size_t> frees, lives;
  std::vector<std::string> merge_keys;
  std::vector<std::uint64_t> free_payloads;
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
// Values written by the current input after its writable open (byte 0, bits 2-3).
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
  w.variants.push_back({"clean/" + std::to_string(shards), capture_dir(dir), {}, {}, {}, {}, {}});
  {
    offheap::Options o = options(dir, false);
    o.durability = offheap::Durability::on_close;
    offheap::Store s(o);
    workload(rng, s, 250, version);
    // Captured while the store is open: what a crash leaves (the records
    // are in the shared mappings, no state files, meta not clean).
    w.variants.push_back(
        {"crashed/" + std::to_string(shards), capture_dir(dir), {}, {}, {}, {}, {}});
  }
  clear_dir(dir);
}

/// The smallest capacity of the free-list class `capacity` belongs to: a put
/// of that payload takes any free record of the class.
std::uint64_t class_min(std::uint64_t capacity) {
  if (capacity <= 4096) return capacity;
  std::uint64_t p = 1;
  while (p * 2 <= capacity) p *= 2;
  return p == 4096 ? 4104 : p;
}

/// Walks a variant's chunk files (see Variant).
void walk(Variant& v) {
  for (std::size_t f = 0; f < v.files.size(); ++f) {
    const cw::Chunk c = cw::walk(v.files[f].bytes, v.files[f].name);
    if (c.name.size() != 18 || c.name.compare(12, 6, ".chunk") != 0) continue;
    const std::size_t first = v.records.size();
    for (std::size_t i = 0; i < c.records.size(); ++i) {
      Target t;
      t.file = f;
      t.rec = c.records[i];
      t.shard = c.shard;
      t.chunk = c.chunk;
      t.chunk_bytes = c.data_bytes;
      if (i + 1 < c.records.size()) t.after = first + i + 1;
      const std::size_t at = v.records.size();
      v.records.push_back(t);
      if (t.rec.state() == cw::State::free) v.frees.push_back(at);
      if (t.rec.state() == cw::State::live) v.lives.push_back(at);
    }
    for (std::size_t i = 0; i < c.records.size(); ++i) {
      if (c.records[i].state() != cw::State::free) continue;
      const std::uint64_t payload = class_min(c.records[i].capacity);
      if (std::find(v.free_payloads.begin(), v.free_payloads.end(), payload) ==
          v.free_payloads.end()) {
        v.free_payloads.push_back(payload);
      }
      for (const std::size_t j : {i - 1, i + 1}) {
        if (j < c.records.size() && c.records[j].state() == cw::State::live) {
          v.merge_keys.push_back(cw::key_of(v.files[f].bytes, c.records[j]));
        }
      }
    }
  }
}

void cleanup() {
  if (world == nullptr) return;
  clear_dir(world->scratch);
  ::rmdir(world->scratch.c_str());
}

// ---- inputs ----------------------------------------------------------------------------

// Input layout:
//   byte 0          bits 0-1: variant (0 clean/1, 1 crashed/1, 2 clean/2,
//                   3 crashed/2); bit 2: write after the writable open;
//                   bit 3 (with bit 2): then more writes (write_more)
//   then patches, each:
//     byte          file (mod the variant's file count)
//     byte          op: 0 xor, 1 write, 2 zero, 3 truncate (mod 4); bit 7:
//                   offset relative to 4096 (chunk records, state tables)
//     3 bytes       offset, little-endian (mod the file's size + 1)
//     byte          n: xor/write: n % 16 + 1 data bytes follow; zero:
//                   (n + 1) * 64 bytes
//     data bytes    xor and write only
//   or a targeted patch, when bits 4-6 of the op byte are all set: aimed at
//   a record the pristine variant's walk found (see Aim), no data bytes:
//     byte          n: the n-th free (or live) record, mod their count
//     byte          0x70 | aim (bits 0-3; bit 7 ignored)
//     3 bytes       arg, little-endian
//     byte          sub
enum class Aim : unsigned {
  free_cap_set,        // a free record's capacity field := arg
  free_cap_zero,       // ... := 0
  free_cap_delta,      // ... += (int8) sub
  free_cap_other,      // ... := the capacity of the arg-th free record
  free_next_set,       // its next link := Location(chunk sub, offset arg)
  free_prev_set,       // its prev link := Location(chunk sub, offset arg)
  free_next_record,    // its next link := the arg-th record of its shard, + sub % 8 bytes
  free_prev_record,    // its prev link := the arg-th record of its shard, + sub % 8 bytes
  free_link_self,      // its next (sub even) or prev (odd) link := itself
  free_footer_set,     // its footer := (arg << 1) | 1, or arg itself if sub is odd
  free_footer_delta,   // its footer := ((capacity + (int8) sub) << 1) | 1
  free_flags_xor,      // its flags ^= sub (state bits, prev-free bit)
  live_key_len_set,    // a live record's key length := arg (0xFFFF if sub is odd)
  live_prev_free,      // a live record's prev-free bit flipped
  live_forge,          // a live record followed by a live one: its tail forged as a free
                       // record linking to the arg-th record of its shard + sub % 8
                       // bytes, the next one's prev-free bit set
  live_value_len_set,  // a live record's value length := arg << (sub % 9)
};
constexpr unsigned kAims = 16;

struct Patch {
  std::size_t file;
  unsigned op;
  std::uint64_t offset;
  std::uint64_t length;
  std::string data;
  bool targeted = false;  // then: file is n, op the Aim, offset the arg, length the sub
};

bool parse(const std::uint8_t* p, std::size_t n, std::size_t& variant, std::vector<Patch>& out) {
  if (n == 0) return false;
  variant = p[0] % world->variants.size();
  std::size_t i = 1;
  while (i + 6 <= n && out.size() < 32) {
    Patch q;
    q.file = p[i];
    const unsigned op = p[i + 1];
    if ((op & 0x70) == 0x70) {
      q.targeted = true;
      q.op = (op & 0x0f) % kAims;
      q.offset =
          std::uint64_t{p[i + 2]} | std::uint64_t{p[i + 3]} << 8 | std::uint64_t{p[i + 4]} << 16;
      q.length = p[i + 5];
      i += 6;
      out.push_back(std::move(q));
      continue;
    }
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

template <class T>
void store_le(std::string& b, std::uint64_t off, T v) {
  if (off + sizeof v <= b.size()) std::memcpy(b.data() + off, &v, sizeof v);
}

/// The `n`-th record of the variant in shard `shard`, or null.
const Target* record_of_shard(const Variant& v, std::uint32_t shard, std::uint64_t n) {
  std::size_t count = 0;
  for (const Target& t : v.records) count += t.shard == shard;
  if (count == 0) return nullptr;
  n %= count;
  for (const Target& t : v.records) {
    if (t.shard == shard && n-- == 0) return &t;
  }
  return nullptr;
}

/// A targeted patch (see Aim), at the records of the pristine variant `v`.
void apply_targeted(const Variant& v, std::vector<File>& files, const Patch& q) {
  const auto aim = static_cast<Aim>(q.op);
  const std::uint64_t arg = q.offset;
  const auto sub = static_cast<unsigned>(q.length);
  const auto delta = static_cast<std::int64_t>(static_cast<std::int8_t>(sub));
  if (aim < Aim::live_key_len_set) {
    if (v.frees.empty()) return;
    const Target& t = v.records[v.frees[q.file % v.frees.size()]];
    const cw::Record& r = t.rec;
    std::string& b = files[t.file].bytes;
    auto link_to = [&](const Target* g, unsigned extra) {
      return g == nullptr ? cw::kNone : cw::location(g->chunk, g->rec.offset) + extra % 8;
    };
    switch (aim) {
      case Aim::free_cap_set:
        store_le(b, r.value_len_at(), static_cast<std::uint32_t>(arg));
        break;
      case Aim::free_cap_zero:
        store_le(b, r.value_len_at(), std::uint32_t{0});
        break;
      case Aim::free_cap_delta:
        store_le(b, r.value_len_at(),
                 static_cast<std::uint32_t>(static_cast<std::int64_t>(r.capacity) + delta));
        break;
      case Aim::free_cap_other:
        store_le(b, r.value_len_at(),
                 static_cast<std::uint32_t>(v.records[v.frees[arg % v.frees.size()]].rec.capacity));
        break;
      case Aim::free_next_set:
        store_le(b, r.next_link_at(), cw::location(sub, arg));
        break;
      case Aim::free_prev_set:
        store_le(b, r.prev_link_at(), cw::location(sub, arg));
        break;
      case Aim::free_next_record:
        store_le(b, r.next_link_at(), link_to(record_of_shard(v, t.shard, arg), sub));
        break;
      case Aim::free_prev_record:
        store_le(b, r.prev_link_at(), link_to(record_of_shard(v, t.shard, arg), sub));
        break;
      case Aim::free_link_self:
        store_le(b, sub % 2 == 0 ? r.next_link_at() : r.prev_link_at(),
                 cw::location(t.chunk, r.offset));
        break;
      case Aim::free_footer_set:
        store_le(b, r.footer_at(), sub % 2 == 0 ? cw::footer_for(arg) : arg);
        break;
      case Aim::free_footer_delta:
        store_le(b, r.footer_at(),
                 cw::footer_for(
                     static_cast<std::uint64_t>(static_cast<std::int64_t>(r.capacity) + delta)));
        break;
      default:
        store_le(b, r.flags_at(), static_cast<std::uint8_t>(r.flags ^ sub));
        break;
    }
    return;
  }
  if (v.lives.empty()) return;
  const Target& t = v.records[v.lives[q.file % v.lives.size()]];
  const cw::Record& r = t.rec;
  std::string& b = files[t.file].bytes;
  switch (aim) {
    case Aim::live_key_len_set:
      store_le(b, r.key_len_at(), static_cast<std::uint16_t>(sub % 2 != 0 ? 0xFFFF : arg));
      break;
    case Aim::live_prev_free:
      store_le(b, r.flags_at(), static_cast<std::uint8_t>(r.flags ^ cw::kPrevFreeBit));
      break;
    case Aim::live_forge: {
      // The end of this record's payload becomes a free record of 16 bytes
      // (its prev link doubles as its footer: an even word reads as 16) or
      // more (with a footer), and the record after it says "the record
      // before me is free": freeing that one unlinks the forgery.
      if (t.after >= v.records.size() || r.capacity < 40) return;
      const Target& m = v.records[t.after];
      if (m.rec.state() != cw::State::live) return;
      const std::uint64_t cap =
          16 + 8 * (arg % std::min<std::uint64_t>(4, (r.capacity - 40) / 8 + 1));
      const Target* g = record_of_shard(v, t.shard, arg >> 2);
      const std::uint64_t link =
          g == nullptr ? cw::kNone : cw::location(g->chunk, g->rec.offset) + ((sub % 8) & ~1u);
      const std::uint64_t fake = m.rec.file_offset - cw::kRecordHeader - cap;
      store_le(b, fake, r.stamp + 2);
      store_le(b, fake + 8, cap | std::uint64_t{2} << 48);
      store_le(b, fake + 16, std::uint64_t{0});
      store_le(b, fake + 24, sub & 0x80 ? cw::kNone : link);
      store_le(b, fake + 32, link);
      if (cap > 16) store_le(b, m.rec.file_offset - 8, cw::footer_for(cap));
      store_le(b, m.rec.flags_at(), static_cast<std::uint8_t>(m.rec.flags | cw::kPrevFreeBit));
      break;
    }
    default:
      store_le(b, r.value_len_at(), static_cast<std::uint32_t>(arg << (sub % 9)));
      break;
  }
}

void apply(const Variant& v, std::vector<File>& files, const Patch& q) {
  if (q.targeted) {
    apply_targeted(v, files, q);
    return;
  }
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

/// A put after a writable open of the damaged copy. It may throw
/// offheap::Error (the caller catches it).
void put(offheap::Store& s, const std::string& k, const std::string& v) {
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
        put(s, k, v);
      }
    } catch (const offheap::Error&) {
    }
  }
  check(s, "writable open, after writes");
}

/// More writes, aimed at the free records of the variant as its pristine
/// files hold them: the keys beside free records removed (release() merges
/// with free neighbours), a put of each free record's class (take() pops and
/// splits them), then new keys until the index has doubled (grow_index()
/// rehashes every record); then everything is read again.
void write_more(offheap::Store& s, const Variant& v, std::uint8_t salt) {
  for (const std::string& k : v.merge_keys) {
    try {
      s.remove(k);
    } catch (const offheap::Error&) {
    }
  }
  for (std::size_t i = 0; i < v.free_payloads.size(); ++i) {
    const std::string k = "fz-class-" + std::to_string(i);
    const std::uint64_t payload = v.free_payloads[i];
    try {
      put(s, k,
          std::string(payload > k.size() ? payload - k.size() : 0,
                      static_cast<char>('a' + salt % 26)));
    } catch (const offheap::Error&) {
    }
  }
  try {
    const std::uint64_t capacity = s.stats().index_capacity;
    for (unsigned i = 0; i < 1200; ++i) {
      if (i % 32 == 0 && s.stats().index_capacity >= 2 * capacity) break;
      try {
        put(s, "fz-grow-" + std::to_string(i), std::string(i % 50, 'g'));
      } catch (const offheap::Error&) {
      }
    }
  } catch (const offheap::Error&) {
  }
  check(s, "writable open, after more writes");
}

void open_and_check(bool read_only, bool writes = false, std::uint8_t salt = 0,
                    const Variant* more = nullptr) {
  try {
    offheap::Store s(options(world->scratch, read_only));
    check(s, read_only ? "read-only open" : "writable open");
    if (writes) write_some(s, salt);
    if (writes && more != nullptr) write_more(s, *more, salt);
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
  for (Variant& v : world->variants) walk(v);
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
      std::fprintf(stderr, "\n  %zu records, %zu free, %zu live, %zu keys beside free records\n",
                   v.records.size(), v.frees.size(), v.lives.size(), v.merge_keys.size());
    }
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::size_t variant = 0;
  std::vector<Patch> patches;
  if (!parse(data, size, variant, patches)) return 0;
  const bool writes = (data[0] & 4) != 0;
  const bool more = (data[0] & 8) != 0;
  written_now.clear();
  const Variant& v = world->variants[variant];
  std::vector<File> files = v.files;
  for (const Patch& q : patches) apply(v, files, q);
  clear_dir(world->scratch);
  for (const File& f : files) write_file(world->scratch + "/" + f.name, f.bytes);
  open_and_check(true);
  open_and_check(false, writes, data[0], more ? &v : nullptr);  // the writing recovery (and writes)
  open_and_check(true);                   // a read-only view of the result
  return 0;
}
