// SPDX-License-Identifier: Apache-2.0
// The graph's records in its store: the four kinds of key, and the bytes of
// each kind of value. The only code that knows these offsets; graph.hpp,
// adjacency.hpp and check.hpp go through the helpers below.
//
// Keys: one byte that names the kind, then ids, fixed width, big-endian (so
// that the keys of a kind sort by id wherever keys are ever listed in
// order; the store itself hashes them).
//
//   meta   'M'                                         1 byte
//   node   'N' | node id (8)                           9 bytes
//   edge   'E' | edge id (8)                           9 bytes
//   page   'A' | node id (8) | page number (4)        13 bytes
//
// Values: integers little-endian, every field at its natural alignment.
//
//   meta (48 bytes)
//     0  "offgraph"            8  magic: this store holds a graph
//     8  format version        4  kGraphFormatVersion; another is refused
//    12  flags                 4  bit 0: clean (set by close, cleared by open)
//    16  node ids reserved     8  every node id ever handed out is below it
//    24  edge ids reserved     8  the same for edge ids
//    32  node count            8  exact while clean
//    40  edge count            8  exact while clean
//
//   node: the node's page directory, then its properties
//     0  pages                 4  directory entries that follow
//     4  next page number      4  the next page gets it; never reused
//     8  directory             pages x 16, ascending first edge ids:
//          0  first edge id    8  the page holds ids >= this one and
//                                 below the next entry's first edge id
//          8  page number      4
//         12  zero             4
//     8 + 16 x pages: properties (Document::encode; empty: no field)
//
//   page: the entries of one slice of a node's adjacency, ascending edge id,
//   1 to kPageEntries of them, 16 bytes each
//     0  word                  8  bits 0-55 edge id; bit 56 out (the node is
//                                 the edge's from), 57 in (the node is its
//                                 to), 58 undirected; 59-63 zero
//     8  neighbour id          8  the edge's other end (the node itself for
//                                 a self-loop, whose one entry has out and in)
//
//   edge (24 bytes, then the properties)
//     0  from                  8
//     8  to                    8
//    16  kind                  1  0 directed, 1 undirected
//    17  zero                  7
//    24  properties (Document::encode; empty: no field)
//
// A page number names one page for its whole life: a rewrite in place keeps
// it (an append, an entry dropped), a merge writes the result under a fresh
// number. A reader holding an old directory therefore either finds the page
// it names (with entries in that page's id range) or finds it gone, never
// another page's entries under its number.
//
// Thread safety: pure functions over bytes the caller owns.
#pragma once

#include <offheap/detail/memory/big_endian.hpp>
#include <offheap/graph/types.hpp>

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace offheap::graph_detail {

static_assert(std::endian::native == std::endian::little,
              "the graph's records are little-endian and read in place; a big-endian port "
              "must byte-swap in load/store below");

inline constexpr std::uint32_t kGraphFormatVersion = 1;
inline constexpr char kMagic[8] = {'o', 'f', 'f', 'g', 'r', 'a', 'p', 'h'};
/// The most entries a page holds: 4 KiB of entries. An append rewrites the
/// node's last page, so this bounds what one added edge copies; a new page
/// rewrites the node's directory (16 bytes a page), once per kPageEntries
/// edges.
inline constexpr std::uint32_t kPageEntries = 256;
inline constexpr std::size_t kEntryBytes = 16;
inline constexpr std::size_t kDirEntryBytes = 16;
inline constexpr std::size_t kNodeHeaderBytes = 8;
inline constexpr std::size_t kEdgeHeaderBytes = 24;
inline constexpr std::size_t kMetaBytes = 48;

inline constexpr std::uint64_t kIdBits = 56;
inline constexpr std::uint64_t kIdMask = (std::uint64_t{1} << kIdBits) - 1;
inline constexpr std::uint64_t kOut = std::uint64_t{1} << 56;
inline constexpr std::uint64_t kIn = std::uint64_t{1} << 57;
inline constexpr std::uint64_t kUndirected = std::uint64_t{1} << 58;

inline std::uint64_t load64(const char* p) noexcept {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline std::uint32_t load32(const char* p) noexcept {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline void store64(char* p, std::uint64_t v) noexcept { std::memcpy(p, &v, 8); }
inline void store32(char* p, std::uint32_t v) noexcept { std::memcpy(p, &v, 4); }

// ---- keys ----------------------------------------------------------------------

/// A key of up to 13 bytes, built on the stack.
struct Key {
  std::array<char, 13> bytes{};
  std::uint8_t size = 0;
  // (Bounded by the array, which `size` never passes, so that the compiler
  // sees it too: else g++ -O2 -Warray-bounds flags the long-key branches of
  // the key hash, inlined on this 14-byte object.)
  std::string_view view() const noexcept { return {bytes.data(), size < bytes.size() ? size : bytes.size()}; }
  operator std::string_view() const noexcept { return view(); }
};

using detail::put_be64;
using detail::read_be64;
inline void put_be32(char* p, std::uint32_t v) noexcept {
  for (int i = 3; i >= 0; --i, v >>= 8) p[i] = static_cast<char>(v & 0xff);
}
inline std::uint32_t get_be32(const char* p) noexcept {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

inline constexpr char kMetaPrefix = 'M';
inline constexpr char kNodePrefix = 'N';
inline constexpr char kEdgePrefix = 'E';
inline constexpr char kPagePrefix = 'A';

inline Key meta_key() noexcept {
  Key k;
  k.bytes[0] = kMetaPrefix;
  k.size = 1;
  return k;
}
inline Key node_key(NodeId n) noexcept {
  Key k;
  k.bytes[0] = kNodePrefix;
  put_be64(k.bytes.data() + 1, n);
  k.size = 9;
  return k;
}
inline Key edge_key(EdgeId e) noexcept {
  Key k;
  k.bytes[0] = kEdgePrefix;
  put_be64(k.bytes.data() + 1, e);
  k.size = 9;
  return k;
}
inline Key page_key(NodeId n, std::uint32_t page) noexcept {
  Key k;
  k.bytes[0] = kPagePrefix;
  put_be64(k.bytes.data() + 1, n);
  put_be32(k.bytes.data() + 9, page);
  k.size = 13;
  return k;
}

/// What a key of the store is, for the walks of check.hpp.
struct ParsedKey {
  char kind = 0;  // kNodePrefix, kEdgePrefix, kPagePrefix, kMetaPrefix; 0: not the graph's
  std::uint64_t id = 0;
  std::uint32_t page = 0;
};
inline ParsedKey parse_key(std::string_view k) noexcept {
  ParsedKey p;
  if (k.size() == 1 && k[0] == kMetaPrefix) {
    p.kind = kMetaPrefix;
  } else if (k.size() == 9 && (k[0] == kNodePrefix || k[0] == kEdgePrefix)) {
    p.kind = k[0];
    p.id = read_be64(k.data() + 1);
  } else if (k.size() == 13 && k[0] == kPagePrefix) {
    p.kind = kPagePrefix;
    p.id = read_be64(k.data() + 1);
    p.page = get_be32(k.data() + 9);
  }
  return p;
}

// ---- meta ------------------------------------------------------------------------

struct Meta {
  bool clean = false;
  std::uint64_t node_ids = 1;  // reserved: every id handed out is below
  std::uint64_t edge_ids = 1;
  std::uint64_t nodes = 0;
  std::uint64_t edges = 0;
};

inline std::array<char, kMetaBytes> encode_meta(const Meta& m) noexcept {
  std::array<char, kMetaBytes> b{};
  std::memcpy(b.data(), kMagic, 8);
  store32(b.data() + 8, kGraphFormatVersion);
  store32(b.data() + 12, m.clean ? 1u : 0u);
  store64(b.data() + 16, m.node_ids);
  store64(b.data() + 24, m.edge_ids);
  store64(b.data() + 32, m.nodes);
  store64(b.data() + 40, m.edges);
  return b;
}

// ---- adjacency entries -------------------------------------------------------------

struct Entry {
  std::uint64_t word = 0;  // edge id and flags, as stored
  NodeId neighbour = 0;
  EdgeId edge() const noexcept { return word & kIdMask; }
  EdgeKind kind() const noexcept {
    return (word & kUndirected) != 0 ? EdgeKind::undirected : EdgeKind::directed;
  }
  /// Whether a walk in direction d follows this entry.
  bool follows(Direction d) const noexcept {
    if ((word & kUndirected) != 0 || d == Direction::both) return true;
    return (word & (d == Direction::out ? kOut : kIn)) != 0;
  }
};

inline Entry load_entry(const char* p) noexcept { return {load64(p), load64(p + 8)}; }
inline void store_entry(char* p, const Entry& e) noexcept {
  store64(p, e.word);
  store64(p + 8, e.neighbour);
}

/// The entries an edge puts at its two ends (one, with out and in, for a
/// self-loop).
inline std::uint64_t from_word(EdgeId e, NodeId from, NodeId to, EdgeKind kind) noexcept {
  std::uint64_t w = e | kOut | (kind == EdgeKind::undirected ? kUndirected : 0);
  if (from == to) w |= kIn;
  return w;
}
inline std::uint64_t to_word(EdgeId e, EdgeKind kind) noexcept {
  return e | kIn | (kind == EdgeKind::undirected ? kUndirected : 0);
}

/// The index of the first entry of a page (`count` entries at `p`) whose
/// edge id is at least `id`.
inline std::size_t lower_entry(const char* p, std::size_t count, EdgeId id) noexcept {
  std::size_t lo = 0, hi = count;
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo) / 2;
    if ((load64(p + mid * kEntryBytes) & kIdMask) < id) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// ---- node records ------------------------------------------------------------------

struct DirEntry {
  EdgeId first = 0;
  std::uint32_t page = 0;
};

/// A node record's header and directory, read where they lie (a copy the
/// caller keeps: the bytes of a node record, or of its first part).
class DirectoryView {
 public:
  DirectoryView() = default;
  /// Requires: bytes hold at least kNodeHeaderBytes + 16 x pages (well_formed).
  explicit DirectoryView(std::string_view bytes) noexcept : bytes_(bytes) {}

  /// Whether `record` (a node record's bytes) is long enough for the
  /// directory its header announces.
  static bool well_formed(std::string_view record) noexcept {
    if (record.size() < kNodeHeaderBytes) return false;
    const std::uint64_t pages = load32(record.data());
    return kNodeHeaderBytes + pages * kDirEntryBytes <= record.size();
  }
  static std::size_t bytes_for(std::uint32_t pages) noexcept { return kNodeHeaderBytes + pages * kDirEntryBytes; }

  std::uint32_t pages() const noexcept { return load32(bytes_.data()); }
  std::uint32_t next_page() const noexcept { return load32(bytes_.data() + 4); }
  DirEntry at(std::size_t i) const noexcept {
    const char* p = bytes_.data() + kNodeHeaderBytes + i * kDirEntryBytes;
    return {load64(p), load32(p + 8)};
  }
  /// The index of the page that holds `id` if any does: the last entry
  /// whose first edge id is <= id; pages() if id is below them all.
  std::size_t page_of(EdgeId id) const noexcept {
    std::size_t lo = 0, hi = pages();  // first entry with first > id
    while (lo < hi) {
      const std::size_t mid = lo + (hi - lo) / 2;
      if (at(mid).first <= id) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo == 0 ? pages() : lo - 1;
  }
  /// The index of the first page that may hold ids above `after`.
  std::size_t first_page_after(EdgeId after) const noexcept {
    const std::size_t i = page_of(after + 1);
    return i == pages() ? 0 : i;
  }
  /// Properties: what follows the directory in a whole node record.
  std::string_view properties() const noexcept { return bytes_.substr(bytes_for(pages())); }
  std::string_view directory_bytes() const noexcept { return bytes_.substr(0, bytes_for(pages())); }

 private:
  std::string_view bytes_;
};

inline void store_dir_entry(char* p, const DirEntry& d) noexcept {
  store64(p, d.first);
  store32(p + 8, d.page);
  store32(p + 12, 0);
}

// ---- edge records ------------------------------------------------------------------

struct EdgeHeader {
  NodeId from = 0;
  NodeId to = 0;
  EdgeKind kind = EdgeKind::directed;
};

inline bool edge_well_formed(std::string_view v) noexcept {
  return v.size() >= kEdgeHeaderBytes && static_cast<unsigned char>(v[16]) <= 1;
}
inline EdgeHeader load_edge_header(std::string_view v) noexcept {
  return {load64(v.data()), load64(v.data() + 8),
          v[16] != 0 ? EdgeKind::undirected : EdgeKind::directed};
}
inline void store_edge_header(char* p, const EdgeHeader& h) noexcept {
  std::memset(p, 0, kEdgeHeaderBytes);
  store64(p, h.from);
  store64(p + 8, h.to);
  p[16] = h.kind == EdgeKind::undirected ? 1 : 0;
}

/// Whether adjacency entry `e`, found at node `at`, is the one edge `h`
/// (numbered `id`) puts there: the same id, the right end, the right
/// neighbour and kind.
inline bool entry_matches(const Entry& e, NodeId at, EdgeId id, const EdgeHeader& h) noexcept {
  if (e.edge() != id || e.kind() != h.kind) return false;
  if (h.from == h.to) return at == h.from && e.neighbour == at && (e.word & (kOut | kIn)) == (kOut | kIn);
  if (at == h.from) return e.neighbour == h.to && (e.word & (kOut | kIn)) == kOut;
  if (at == h.to) return e.neighbour == h.from && (e.word & (kOut | kIn)) == kIn;
  return false;
}

}  // namespace offheap::graph_detail
