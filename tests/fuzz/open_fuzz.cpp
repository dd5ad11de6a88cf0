// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the open and recovery path of file-backed stores.
//
// At startup, small pristine stores are built (tiny chunks, a few hundred
// writes with overwrites, removals and typed values): each in a cleanly
// closed variant (state files: the open maps the saved index) and a crashed
// one (files captured while the store was open: the open rebuilds from the
// records), with one shard and with two. Their files are held in memory, and
// for each variant its model: the exact contents it must open with (every
// key's final value, typed values as their bytes) and its history (every
// value written for each key up to that variant; the crashed variant carries
// on from its clean one, so its history is a superset).
//
// An input is a variant and a list of patches (see parse() below) applied to
// a fresh copy of that variant's files: xor or overwrite bytes, zero a
// range, truncate; or targeted patches aimed at the records a walk of the
// pristine chunk files found (support/chunk_walk.hpp): a free record's
// capacity, links, footer or flags, a live record's key or value length or
// prev-free bit, a free record forged at the end of a live one. The copy is
// opened read-only, then writable (which runs the writing recovery, then
// closes cleanly), then read-only again. Each open is checked: every key is
// read with get() and get_value(), never-written keys too, for_each walks the
// store, size() is read. With bit 2 of the first byte, a few writes follow
// the writable open (each read back at once) and everything is read again;
// with bits 2 and 3, more writes then reach the free records (removals
// beside them, puts of their classes, growth of the index: write_more) and
// everything is read again.
//
// The oracle. An input is undamaged when its patches changed no byte of the
// variant's files (the same names, sizes and bytes: a patch that writes what
// is there, xors zero or truncates at the end counts as none). Then:
//   - every open, read, write and the close must succeed: an offheap::Error
//     is a finding ([refused]);
//   - each open serves exactly the variant's contents, with the writes of the
//     input applied: every key its exact value, removed and never-written
//     keys absent, get_value equal, for_each yields each expected pair once
//     and nothing else, size() equal ([undamaged]).
// When the patches changed a byte (damaged), an open may throw
// offheap::Error, and so may a read or a write; but
//   - a value served (get, get_value, for_each) must be one this variant
//     wrote for that key, or one a write of this input that threw tried to
//     write ([history]); a never-written key must be absent;
//   - a write after the writable open that returned must read back at once,
//     after the other writes, and after the clean close and reopen: a put's
//     exact value, a removal's absence ([written]);
//   - once the writable open succeeded, the read-only reopen after its clean
//     close must succeed ([reopen]).
// Any other exception ([exception]), a crash, a sanitizer report or a hang
// (libFuzzer's -timeout) is a finding too. A finding prints
// "open_fuzz: FINDING [tag]: ..." and traps.
//
// Planted faults (the oracle's own test): built with
// -DOFFHEAP_FUZZ_PLANTED_FAULTS, the target reads OFFHEAP_FUZZ_PLANTED_FAULT
// and, in the target (never in the engine), imitates a broken store (see
// Fault): run_fuzz.sh with FUZZ_PLANTED_FAULT=... expects each to be found.
//
// Build (clang): clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined
//   -fno-sanitize-recover=undefined -Iinclude -Itests tests/fuzz/open_fuzz.cpp
// Run: tests/fuzz/run_fuzz.sh [build dir] [seconds]
// Replay a finding: <binary> <crash file>
// The scratch directory is under $OFFHEAP_FUZZ_TMPDIR, else /dev/shm (fsync
// is cheap there), else /tmp.
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

/// What a variant holds: the exact contents (key -> the bytes of its final
/// value; removed keys absent) and every value written for each key.
struct Model {
  std::map<std::string, std::string> contents;
  std::unordered_map<std::string, std::unordered_set<std::string>> history;
};

struct Variant {
  std::string label;
  std::vector<File> files;  // sorted by name: chunks, meta, states
  Model model;
  // The pristine chunk files walked: every record in file order, the free
  // and live ones among them, and for the writes that follow an open: the
  // keys of live records beside free records (removing one merges) and the
  // payload sizes that take the free records of each class.
  std::vector<Target> records;
  std::vector<std::size_t> frees, lives;
  std::vector<std::string> merge_keys;
  std::vector<std::uint64_t> free_payloads;
  // For the planted faults: a key of bytes present with an older value of
  // its own (stale), and a value another variant wrote for a key that this
  // one never wrote for it (foreign). Empty keys when there is none.
  std::string stale_key, stale_value, foreign_key, foreign_value;
};

struct World {
  std::string scratch;  // the store directory each input is copied into
  std::vector<std::string> keys;
  std::vector<Kind> kinds;
  std::vector<std::string> never_written;
  std::vector<Variant> variants;
};

World* world = nullptr;

// ---- planted faults ----------------------------------------------------------------------

/// Faults the target can plant to show that the oracle finds them (built
/// with -DOFFHEAP_FUZZ_PLANTED_FAULTS, chosen by OFFHEAP_FUZZ_PLANTED_FAULT).
/// Each imitates an engine that breaks a promise, from the target's side:
enum class Fault {
  none,
  lost_key,        // undamaged: the writable open loses a key (removed behind the oracle)
  changed_value,   // undamaged: the writable open serves an older value of a key
  open_refused,    // undamaged: the read-only open throws offheap::Error
  foreign_value,   // damaged: the writable open serves a value another variant wrote
  lost_write,      // damaged: a write after the open is gone after the clean reopen
  reopen_refused,  // damaged: the reopen after a successful writable open throws
};

#ifdef OFFHEAP_FUZZ_PLANTED_FAULTS
Fault planted_fault = Fault::none;
bool planted(Fault f) { return planted_fault == f; }
Fault parse_fault(std::string_view s) {
  const std::pair<std::string_view, Fault> names[] = {
      {"lost_key", Fault::lost_key},           {"changed_value", Fault::changed_value},
      {"open_refused", Fault::open_refused},   {"foreign_value", Fault::foreign_value},
      {"lost_write", Fault::lost_write},       {"reopen_refused", Fault::reopen_refused}};
  for (const auto& [name, f] : names) {
    if (s == name) return f;
  }
  std::fprintf(stderr, "open_fuzz: unknown OFFHEAP_FUZZ_PLANTED_FAULT \"%.*s\"\n",
               static_cast<int>(s.size()), s.data());
  std::exit(2);
}
#else
constexpr bool planted(Fault) { return false; }
#endif

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

void workload(std::mt19937_64& rng, offheap::Store& s, std::size_t ops, std::uint64_t& version,
              Model& m) {
  World& w = *world;
  auto wrote = [&](const std::string& k, std::string v) {
    m.history[k].insert(v);
    m.contents[k] = std::move(v);
  };
  for (std::size_t op = 0; op < ops; ++op) {
    const std::size_t i = rng() % w.keys.size();
    const std::string& k = w.keys[i];
    const unsigned r = static_cast<unsigned>(rng() % 100);
    ++version;
    if (r < 10) {
      s.remove(k);
      m.contents.erase(k);
      continue;
    }
    if (w.kinds[i] == Kind::u64) {
      const std::uint64_t v = i * 1000 + version;
      s.put_value(k, v);
      wrote(k, bytes_of(v));
      continue;
    }
    if (w.kinds[i] == Kind::pod) {
      const Pod v{version, static_cast<std::uint32_t>(i), 7};
      s.put_value(k, v);
      wrote(k, bytes_of(v));
      continue;
    }
    std::size_t len = rng() % 48;
    if (r < 16) len = 500 + rng() % 2500;  // large records
    std::string v = std::to_string(i) + "/" + std::to_string(version) + "/";
    v.append(len, static_cast<char>('a' + rng() % 26));
    if (r < 22 && r >= 20) v.clear();  // empty values
    s.put(k, v);
    wrote(k, std::move(v));
  }
}

/// Builds one store in `dir` and returns its clean and crashed variants.
void build(const std::string& dir, std::uint32_t shards, std::uint64_t seed) {
  World& w = *world;
  std::mt19937_64 rng(seed);
  std::uint64_t version = seed << 20;
  clear_dir(dir);
  ::rmdir(dir.c_str());
  Model m;
  {
    offheap::Options o = options(dir, false);
    o.durability = offheap::Durability::on_close;  // a real clean close: state files
    o.shards = shards;
    o.hash_seed = seed;
    offheap::Store s(o);
    workload(rng, s, 500, version, m);
  }
  Variant clean;
  clean.label = "clean/" + std::to_string(shards);
  clean.files = capture_dir(dir);
  clean.model = m;
  w.variants.push_back(std::move(clean));
  {
    offheap::Options o = options(dir, false);
    o.durability = offheap::Durability::on_close;
    offheap::Store s(o);
    workload(rng, s, 250, version, m);
    // Captured while the store is open: what a crash leaves (the records
    // are in the shared mappings, no state files, meta not clean).
    Variant crashed;
    crashed.label = "crashed/" + std::to_string(shards);
    crashed.files = capture_dir(dir);
    crashed.model = std::move(m);
    w.variants.push_back(std::move(crashed));
  }
  clear_dir(dir);
}

/// The planted faults' keys and values of each variant (see Variant).
void pick_fault_values() {
  World& w = *world;
  for (Variant& v : w.variants) {
    for (std::size_t i = 0; i < w.keys.size() && v.stale_key.empty(); ++i) {
      const auto now = v.model.contents.find(w.keys[i]);
      if (w.kinds[i] != Kind::bytes || now == v.model.contents.end()) continue;
      for (const std::string& old : v.model.history.at(w.keys[i])) {
        if (old != now->second) {
          v.stale_key = w.keys[i];
          v.stale_value = old;
          break;
        }
      }
    }
    for (const Variant& other : w.variants) {
      for (const auto& [k, values] : other.model.history) {
        const auto mine = v.model.history.find(k);
        for (const std::string& x : values) {
          if (v.foreign_key.empty() && (mine == v.model.history.end() || mine->second.count(x) == 0)) {
            v.foreign_key = k;
            v.foreign_value = x;
          }
        }
      }
    }
  }
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

// ---- the oracle ------------------------------------------------------------------------

/// What the current input may read (see the top of this file).
struct Expect {
  const Variant* v = nullptr;
  bool undamaged = false;
  // Writes after the writable open that returned: key -> what it must read
  // now (nullopt: removed).
  std::map<std::string, std::optional<std::string>> written;
  // Values a write of this input tried to write when it threw, and values
  // such a write may have replaced: either outcome is allowed for the key.
  std::unordered_map<std::string, std::unordered_set<std::string>> maybe;
};
Expect expect;

[[noreturn]] void finding(const char* tag, const std::string& what) {
  std::fprintf(stderr, "open_fuzz: FINDING [%s]: %s (variant %s, %s input)\n", tag, what.c_str(),
               expect.v != nullptr ? expect.v->label.c_str() : "?",
               expect.undamaged ? "undamaged" : "damaged");
  std::fflush(stderr);
  __builtin_trap();
}

std::string shown(const std::string* value) {
  return value == nullptr ? std::string("absent") : "\"" + printable(*value) + "\"";
}

/// The value `k` must have in an undamaged store (nullopt: absent).
std::optional<std::string> exact(const std::string& k) {
  const auto w = expect.written.find(k);
  if (w != expect.written.end()) return w->second;
  const auto c = expect.v->model.contents.find(k);
  if (c != expect.v->model.contents.end()) return c->second;
  return std::nullopt;
}

/// How many keys an undamaged store must hold.
std::size_t exact_count() {
  std::size_t n = expect.v->model.contents.size();
  for (const auto& [k, v] : expect.written) {
    const bool before = expect.v->model.contents.count(k) != 0;
    if (v && !before) ++n;
    if (!v && before) --n;
  }
  return n;
}

/// Judges what a read of `k` returned (`got`: null when absent).
void judge(const std::string& how, const char* op, const std::string& k, const std::string* got) {
  if (expect.undamaged) {
    const std::optional<std::string> want = exact(k);
    if (want.has_value() != (got != nullptr) || (got != nullptr && *got != *want)) {
      finding("undamaged", how + ": " + op + "(" + printable(k) + ") reads " + shown(got) +
                               ", not " + shown(want ? &*want : nullptr));
    }
    return;
  }
  const auto w = expect.written.find(k);
  if (w != expect.written.end()) {
    const std::optional<std::string>& want = w->second;
    if (want.has_value() != (got != nullptr) || (got != nullptr && *got != *want)) {
      finding("written", how + ": " + op + "(" + printable(k) + "), written after the open, reads " +
                             shown(got) + ", not " + shown(want ? &*want : nullptr));
    }
    return;
  }
  if (got == nullptr) return;
  const auto h = expect.v->model.history.find(k);
  if (h != expect.v->model.history.end() && h->second.count(*got) != 0) return;
  const auto m = expect.maybe.find(k);
  if (m != expect.maybe.end() && m->second.count(*got) != 0) return;
  finding("history", how + ": " + op + "(" + printable(k) + ") reads " + shown(got) +
                         ", a value this variant never wrote for that key");
}

/// An offheap::Error from a read or write of the store: a finding when the
/// input is undamaged or (`written`) the key was written after the open.
void on_error(const std::string& how, const std::string& what, const offheap::Error& e,
              bool written = false) {
  if (expect.undamaged) finding("refused", how + ": " + what + " threw: " + e.what());
  if (written) finding("written", how + ": " + what + ", written after the open, threw: " + e.what());
}

void check_key(const offheap::Store& s, const std::string& k, const std::string& how) {
  std::string out;
  bool hit = false;
  try {
    hit = s.get(k, out);
  } catch (const offheap::Error& e) {
    on_error(how, "get(" + printable(k) + ")", e, expect.written.count(k) != 0);
    return;
  }
  judge(how, "get", k, hit ? &out : nullptr);
}

template <class T>
void check_typed(const offheap::Store& s, const std::string& k, const std::string& how) {
  // A put after the open stores bytes: get_value may refuse them.
  const auto w = expect.written.find(k);
  if (w != expect.written.end() && w->second) return;
  std::optional<T> v;
  try {
    v = s.get_value<T>(k);
  } catch (const offheap::Error& e) {
    on_error(how, "get_value(" + printable(k) + ")", e);
    return;
  }
  const std::string got = v ? bytes_of(*v) : std::string();
  judge(how, "get_value", k, v ? &got : nullptr);
}

/// Every read the oracle judges, on the open store `s`.
void check(const offheap::Store& s, const std::string& how) {
  const World& w = *world;
  for (std::size_t i = 0; i < w.keys.size(); ++i) {
    check_key(s, w.keys[i], how);
    if (w.kinds[i] == Kind::u64) check_typed<std::uint64_t>(s, w.keys[i], how);
    if (w.kinds[i] == Kind::pod) check_typed<Pod>(s, w.keys[i], how);
  }
  for (const std::string& k : w.never_written) check_key(s, k, how);
  for (const auto& kv : expect.written) check_key(s, kv.first, how);
  for (const auto& kv : expect.maybe) check_key(s, kv.first, how);

  std::set<std::string> seen;
  try {
    s.for_each([&](std::string_view k, std::string_view v) {
      const std::string key(k), value(v);
      if (!seen.insert(key).second && expect.undamaged) {
        finding("undamaged", how + ": for_each yielded " + printable(key) + " twice");
      }
      judge(how, "for_each", key, &value);
    });
  } catch (const offheap::Error& e) {
    on_error(how, "for_each", e);
  }
  try {
    (void)s.stats();
  } catch (const offheap::Error& e) {
    on_error(how, "stats()", e);
  }
  const std::uint64_t size = s.size();
  if (!expect.undamaged) return;
  const std::size_t want = exact_count();
  if (seen.size() != want) {
    std::string missing;
    for (const auto& [k, v] : expect.v->model.contents) {
      if (missing.empty() && seen.count(k) == 0 && exact(k)) missing = k;
    }
    for (const auto& [k, v] : expect.written) {
      if (missing.empty() && v && seen.count(k) == 0) missing = k;
    }
    finding("undamaged", how + ": for_each yielded " + std::to_string(seen.size()) + " keys, not " +
                             std::to_string(want) +
                             (missing.empty() ? "" : " (" + printable(missing) + " missing)"));
  }
  if (size != want) {
    finding("undamaged",
            how + ": size() is " + std::to_string(size) + ", not " + std::to_string(want));
  }
}

// ---- writes after the writable open ------------------------------------------------------

/// A write that threw: the key may now hold what it held or what the write
/// tried (nullopt: a removal).
void write_threw(const std::string& k, const std::optional<std::string>& tried) {
  const auto w = expect.written.find(k);
  if (w != expect.written.end()) {
    if (w->second) expect.maybe[k].insert(*w->second);
    expect.written.erase(w);
  }
  if (tried) expect.maybe[k].insert(*tried);
}

/// A put, then a read of the key at once. An Error is allowed when the input
/// is damaged.
void write_put(offheap::Store& s, const std::string& k, const std::string& v, const char* how) {
  try {
    s.put(k, v);
  } catch (const offheap::Error& e) {
    on_error(how, "put(" + printable(k) + ")", e);
    write_threw(k, v);
    return;
  }
  expect.written[k] = v;
  check_key(s, k, std::string(how) + ", read back at once");
}

void write_remove(offheap::Store& s, const std::string& k, const char* how) {
  try {
    s.remove(k);
  } catch (const offheap::Error& e) {
    on_error(how, "remove(" + printable(k) + ")", e);
    write_threw(k, std::nullopt);
    return;
  }
  expect.written[k] = std::nullopt;
  check_key(s, k, std::string(how) + ", read back at once");
}

/// A few writes after a writable open of the copy (overwrites, a new key, a
/// removal), then everything is read again.
void write_some(offheap::Store& s, std::uint8_t salt) {
  const World& w = *world;
  for (unsigned j = 0; j < 6; ++j) {
    const std::string k = j == 0 ? std::string("fresh") : w.keys[(salt * 7u + j * 37u) % w.keys.size()];
    if (j == 5) {
      write_remove(s, k, "write_some");
    } else {
      std::string v = "fz/" + std::to_string(j) + "/";
      v.append(j * 300u + salt, 'w');
      write_put(s, k, v, "write_some");
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
  for (const std::string& k : v.merge_keys) write_remove(s, k, "write_more");
  for (std::size_t i = 0; i < v.free_payloads.size(); ++i) {
    const std::string k = "fz-class-" + std::to_string(i);
    const std::uint64_t payload = v.free_payloads[i];
    write_put(s, k,
        std::string(payload > k.size() ? payload - k.size() : 0, static_cast<char>('a' + salt % 26)),
        "write_more");
  }
  std::uint64_t capacity = 0;
  try {
    capacity = s.stats().index_capacity;
  } catch (const offheap::Error& e) {
    on_error("write_more", "stats()", e);
  }
  for (unsigned i = 0; i < 1200; ++i) {
    if (i % 32 == 0) {
      try {
        if (s.stats().index_capacity >= 2 * capacity) break;
      } catch (const offheap::Error& e) {
        on_error("write_more", "stats()", e);
        break;
      }
    }
    write_put(s, "fz-grow-" + std::to_string(i), std::string(i % 50, 'g'), "write_more");
  }
  check(s, "writable open, after more writes");
}

// ---- the three opens -----------------------------------------------------------------------

/// A read-only open of the copy, checked. `after_writable`: the writable
/// open before it succeeded (so this one must too).
void read_only_open(const char* how, bool after_writable) {
  try {
    offheap::Store s(options(world->scratch, true));
    if (planted(Fault::open_refused) && expect.undamaged) {
      throw offheap::Error(offheap::Errc::corrupt_file, "planted fault: open refused");
    }
    if (planted(Fault::reopen_refused) && !expect.undamaged && after_writable) {
      throw offheap::Error(offheap::Errc::corrupt_file, "planted fault: reopen refused");
    }
    check(s, how);
  } catch (const offheap::Error& e) {
    if (expect.undamaged) finding("refused", std::string(how) + " threw: " + e.what());
    if (after_writable) {
      finding("reopen", std::string(how) + " threw after the writable open succeeded and closed: " +
                            e.what());
    }
  } catch (const std::exception& e) {
    finding("exception", std::string(how) + ": an exception other than offheap::Error: " + e.what());
  }
}

/// The writable open (the writing recovery), its checks, the input's writes
/// and a clean close. Returns whether the open succeeded.
bool writable_open(bool writes, std::uint8_t salt, const Variant* more) {
  const char* how = "writable open";
  std::optional<offheap::Store> s;
  try {
    s.emplace(options(world->scratch, false));
  } catch (const offheap::Error& e) {
    if (expect.undamaged) finding("refused", std::string(how) + " threw: " + e.what());
    return false;
  } catch (const std::exception& e) {
    finding("exception", std::string(how) + ": an exception other than offheap::Error: " + e.what());
  }
  try {
    if (planted(Fault::lost_key) && expect.undamaged && !expect.v->model.contents.empty()) {
      s->remove(expect.v->model.contents.begin()->first);
    }
    if (planted(Fault::changed_value) && expect.undamaged && !expect.v->stale_key.empty()) {
      s->put(expect.v->stale_key, expect.v->stale_value);
    }
    if (planted(Fault::foreign_value) && !expect.undamaged && !expect.v->foreign_key.empty()) {
      s->put(expect.v->foreign_key, expect.v->foreign_value);
    }
    check(*s, how);
    if (writes) write_some(*s, salt);
    if (writes && more != nullptr) write_more(*s, *more, salt);
    if (planted(Fault::lost_write) && !expect.undamaged) {
      for (const auto& [k, v] : expect.written) {
        if (v) {
          s->remove(k);
          break;
        }
      }
    }
  } catch (const offheap::Error& e) {
    // Every read and write above catches its own errors: only a planted
    // fault's write gets here.
    finding("exception", std::string(how) + ": an unexpected offheap::Error: " + e.what());
  } catch (const std::exception& e) {
    finding("exception", std::string(how) + ": an exception other than offheap::Error: " + e.what());
  }
  try {
    s->close();
  } catch (const offheap::Error& e) {
    on_error(how, "close()", e);
  }
  return true;
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
  pick_fault_values();
  ::rmdir((top + "/build1").c_str());
  ::rmdir((top + "/build2").c_str());
  ::mkdir(world->scratch.c_str(), 0755);
  std::atexit([] {
    cleanup();
    ::rmdir(world->scratch.substr(0, world->scratch.rfind('/')).c_str());
  });
#ifdef OFFHEAP_FUZZ_PLANTED_FAULTS
  if (const char* f = std::getenv("OFFHEAP_FUZZ_PLANTED_FAULT"); f != nullptr && *f != '\0') {
    planted_fault = parse_fault(f);
    std::fprintf(stderr, "open_fuzz: planted fault %s\n", f);
  }
#endif
  if (std::getenv("OFFHEAP_FUZZ_VERBOSE") != nullptr) {
    for (const Variant& v : world->variants) {
      std::fprintf(stderr, "open_fuzz: variant %s:", v.label.c_str());
      for (const File& f : v.files) std::fprintf(stderr, " %s(%zu)", f.name.c_str(), f.bytes.size());
      std::fprintf(stderr,
                   "\n  %zu keys present, %zu written; %zu records, %zu free, %zu live, %zu keys "
                   "beside free records\n",
                   v.model.contents.size(), v.model.history.size(), v.records.size(),
                   v.frees.size(), v.lives.size(), v.merge_keys.size());
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
  const Variant& v = world->variants[variant];
  std::vector<File> files = v.files;
  for (const Patch& q : patches) apply(v, files, q);
  expect = Expect{};
  expect.v = &v;
  expect.undamaged = std::equal(files.begin(), files.end(), v.files.begin(), v.files.end(),
                                [](const File& a, const File& b) {
                                  return a.name == b.name && a.bytes == b.bytes;
                                });
  clear_dir(world->scratch);
  for (const File& f : files) write_file(world->scratch + "/" + f.name, f.bytes);
  read_only_open("read-only open", false);
  const bool opened = writable_open(writes, data[0], more ? &v : nullptr);
  read_only_open("read-only reopen", opened);  // the result of the recovery and the writes
  return 0;
}
