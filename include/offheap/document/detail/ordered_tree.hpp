// SPDX-License-Identifier: Apache-2.0
// A B+-tree of byte-string keys whose nodes are records of a Store: the
// ordered secondary index of a Collection (document/collection.hpp) keeps
// there its entries (a value's ordered key followed by the document id),
// so that a range query reads the nodes on one path down and then the
// leaves its matches are in, never the collection.
//
// Records (keys: the tree's prefix, then a big-endian u64):
//   prefix + 0          the tree's meta: root id, next node id (u64 each,
//                       little-endian), height (u32): written when one of
//                       them changes (a split or a collapse of the root)
//   prefix + node id    a node (ids from 1, never reused):
//     [0]     kind: 1 leaf, 2 internal
//     [1..2]  entry count (u16, little-endian)
//     leaf:     [3..10] previous leaf, [11..18] next leaf (0: none), then
//               per entry: key length (u16), key bytes
//     internal: [3..10] child 0, then per entry: key length (u16), key
//               bytes, child (u64): every key under child i (i >= 1) is
//               >= entry i's key, every key under child i-1 below it
//
// A node is split when its bytes pass kMaxNodeBytes; a leaf that becomes
// empty is unlinked and removed, and an internal node that loses its last
// child goes too (nodes are not merged: a leaf holds at least one entry,
// so a scan reads at most one leaf per match beyond the first); a root
// with a single child hands the root to it.
//
// Writers: one at a time (the collection's writer lock), inside
// begin_write()/end_write(), which make the tree's version odd and then
// even again. Readers: lock-free, seqlock-style, on copies of the nodes
// (Store::get): stable() after each node read says whether the tree is
// still the one the read began with; a scan that finds it changed
// descends again from the last key it emitted (Scan below), so a reader
// never follows a half-made split. Nodes read are bounds-checked as they
// are parsed (parse()): a damaged record is refused, never read past.
#pragma once

#include <offheap/detail/memory/big_endian.hpp>
#include <offheap/document/detail/seq_version.hpp>
#include <offheap/error.hpp>
#include <offheap/store.hpp>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace offheap::detail {

inline std::uint64_t read_le64(const char* p) noexcept {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;  // (little-endian hosts: the library's targets)
}
inline void write_le64(char* p, std::uint64_t v) noexcept { std::memcpy(p, &v, 8); }

/// One node's bytes, parsed: the offsets of its entries.
class TreeNode {
 public:
  static constexpr std::uint8_t kLeaf = 1, kInternal = 2;
  static constexpr std::size_t kLeafHeader = 19, kInternalHeader = 11;

  /// Checks the layout of `bytes` and notes where each entry begins.
  /// False for anything malformed (a damaged record).
  bool parse(std::string_view bytes) {
    bytes_ = bytes;
    offsets_.clear();
    if (bytes.size() < 3) return false;
    kind_ = static_cast<std::uint8_t>(bytes[0]);
    if (kind_ != kLeaf && kind_ != kInternal) return false;
    const std::size_t count = static_cast<unsigned char>(bytes[1]) | static_cast<std::size_t>(static_cast<unsigned char>(bytes[2])) << 8;
    std::size_t pos = leaf() ? kLeafHeader : kInternalHeader;
    if (bytes.size() < pos) return false;
    const std::size_t tail = leaf() ? 0 : 8;
    for (std::size_t i = 0; i < count; ++i) {
      if (bytes.size() - pos < 2) return false;
      const std::size_t len = static_cast<unsigned char>(bytes[pos]) | static_cast<std::size_t>(static_cast<unsigned char>(bytes[pos + 1])) << 8;
      if (bytes.size() - pos - 2 < len + tail) return false;
      offsets_.push_back(static_cast<std::uint32_t>(pos));
      pos += 2 + len + tail;
    }
    return pos == bytes.size();
  }

  bool leaf() const noexcept { return kind_ == kLeaf; }
  std::size_t size() const noexcept { return offsets_.size(); }
  std::string_view key(std::size_t i) const noexcept {
    const std::size_t pos = offsets_[i];
    const std::size_t len = static_cast<unsigned char>(bytes_[pos]) | static_cast<std::size_t>(static_cast<unsigned char>(bytes_[pos + 1])) << 8;
    return bytes_.substr(pos + 2, len);
  }
  /// Internal nodes: child i (0 .. size()).
  std::uint64_t child(std::size_t i) const noexcept {
    if (i == 0) return read_le64(bytes_.data() + 3);
    const std::string_view k = key(i - 1);
    return read_le64(k.data() + k.size());
  }
  /// Leaves: the neighbours (0: none).
  std::uint64_t prev() const noexcept { return read_le64(bytes_.data() + 3); }
  std::uint64_t next() const noexcept { return read_le64(bytes_.data() + 11); }

  /// The first entry whose key is >= k (> k if `after`).
  std::size_t lower_bound(std::string_view k, bool after = false) const noexcept {
    std::size_t lo = 0, hi = size();
    while (lo < hi) {
      const std::size_t mid = (lo + hi) / 2;
      const int c = key(mid).compare(k);
      if (c < 0 || (after && c == 0)) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo;
  }
  /// Internal nodes: the child whose keys may include k (the last entry
  /// whose key is <= k leads to it).
  std::size_t child_for(std::string_view k) const noexcept { return lower_bound(k, true); }

  /// Where entry i begins and ends in the bytes (for the writer's splices).
  std::size_t begin_of(std::size_t i) const noexcept { return i < size() ? offsets_[i] : bytes_.size(); }

 private:
  std::string_view bytes_;
  std::vector<std::uint32_t> offsets_;
  std::uint8_t kind_ = 0;
};

/// What a reader reuses between calls (no allocation once warm).
struct TreeBuffers {
  std::string bytes, key;
  TreeNode node;
};

class OrderedTree {
 public:
  /// Nodes are split past this many bytes.
  static constexpr std::size_t kMaxNodeBytes = 2048;
  /// The longest key an entry may have (so that a split node keeps three).
  static constexpr std::size_t kMaxKeyBytes = 520;

  OrderedTree(Store& store, std::string prefix) : store_(store), prefix_(std::move(prefix)) { load(); }

  /// Reads the meta record (an empty tree when there is none).
  void load() {
    std::string meta;
    root_.store(0, std::memory_order_relaxed);
    next_node_ = 1;
    height_ = 0;
    if (store_.get(node_key(0), meta)) {
      if (meta.size() != 20) throw Error(Errc::corrupt_file, "collection: an ordered index's meta record is damaged");
      root_.store(read_le64(meta.data()), std::memory_order_relaxed);
      next_node_ = read_le64(meta.data() + 8);
      std::uint32_t h;
      std::memcpy(&h, meta.data() + 16, 4);
      height_ = h;
    }
  }

  const std::string& prefix() const noexcept { return prefix_; }

  // ---- writers (one at a time) ------------------------------------------------

  /// The tree's version (seq_version.hpp): odd while a writer changes
  /// nodes, so that readers' copies are checked to be of one tree.
  void begin_write() noexcept { version_.begin_write(); }
  void end_write() noexcept { version_.end_write(); }
  SeqVersion& version() noexcept { return version_; }

  /// Adds key; false if it was there. Requires key.size() <= kMaxKeyBytes.
  bool insert(std::string_view key) {
    path_.clear();
    std::uint64_t id = root_.load(std::memory_order_relaxed);
    if (id == 0) {
      id = next_node_++;
      std::string& n = w_.bytes;
      n.clear();
      leaf_header(n, 0, 0);
      append_entry(n, key, nullptr);
      set_count(n, 1);
      put_node(id, n);
      root_.store(id, std::memory_order_relaxed);
      height_ = 1;
      save_meta();
      return true;
    }
    descend(id, key);
    id = leaf_id_;
    TreeNode& node = w_.node;
    const std::size_t pos = node.lower_bound(key);
    if (pos < node.size() && node.key(pos) == key) return false;
    std::string& n = w_.bytes;
    entry_.clear();
    append_entry(entry_, key, nullptr);
    n.insert(node.begin_of(pos), entry_);
    set_count(n, node.size() + 1);
    if (n.size() <= kMaxNodeBytes) {
      put_node(id, n);
      return true;
    }
    split_leaf(id);
    return true;
  }

  /// Removes key; false if it was not there.
  bool erase(std::string_view key) {
    const std::uint64_t root = root_.load(std::memory_order_relaxed);
    if (root == 0) return false;
    path_.clear();
    descend(root, key);
    const std::uint64_t id = leaf_id_;
    TreeNode& node = w_.node;
    const std::size_t pos = node.lower_bound(key);
    if (pos == node.size() || node.key(pos) != key) return false;
    std::string& n = w_.bytes;
    n.erase(node.begin_of(pos), node.begin_of(pos + 1) - node.begin_of(pos));
    const std::size_t left = node.size() - 1;
    set_count(n, left);
    if (left != 0 || id == root) {
      put_node(id, n);
      return true;
    }
    // An empty leaf: out of the chain, then out of its parent.
    const std::uint64_t prev = read_le64(n.data() + 3), next = read_le64(n.data() + 11);
    if (prev != 0) relink(prev, 11, next);
    if (next != 0) relink(next, 3, prev);
    set_key(id);
    store_.remove(key_);
    remove_child();
    return true;
  }

  /// Removes every node and the meta record (an index dropped or rebuilt):
  /// walks the tree down from the root (a tree a crash left half made is
  /// not walked: the collection clears the whole index store then).
  void destroy() {
    std::vector<std::uint64_t> todo;
    if (const std::uint64_t r = root_.load(std::memory_order_relaxed)) todo.push_back(r);
    while (!todo.empty()) {
      const std::uint64_t id = todo.back();
      todo.pop_back();
      if (!store_.get(node_key(id), w_.bytes) || !w_.node.parse(w_.bytes)) continue;
      if (!w_.node.leaf()) {
        for (std::size_t i = 0; i <= w_.node.size(); ++i) todo.push_back(w_.node.child(i));
      }
      store_.remove(node_key(id));
    }
    store_.remove(node_key(0));
    root_.store(0, std::memory_order_relaxed);
    next_node_ = 1;
    height_ = 0;
  }

  std::uint32_t height() const noexcept { return height_; }

  // ---- readers ---------------------------------------------------------------

  std::uint64_t begin_read() const noexcept { return version_.begin_read(); }
  bool stable(std::uint64_t v) const noexcept { return version_.stable(v); }
  std::uint64_t root() const noexcept { return root_.load(std::memory_order_relaxed); }
  /// Records in the tree's store (all trees' and more): a bound on the
  /// leaves one walk may read.
  std::uint64_t records() const noexcept { return store_.size(); }

  /// Reads node `id` into b (copy, then parse); false if it is missing or
  /// damaged (a tree that changed since, or a damaged file).
  bool read_node(std::uint64_t id, TreeBuffers& b) const {
    b.key.clear();
    b.key.append(prefix_);
    append_be64(b.key, id);
    return store_.get(b.key, b.bytes) && b.node.parse(b.bytes);
  }

  /// Descends from the root to the leaf where `key` is or would be, for a
  /// reader: false if a node was missing or damaged (tree changed, or
  /// damage: the caller checks stable()). On true, b holds the leaf.
  bool seek_leaf(std::string_view key, TreeBuffers& b) const {
    std::uint64_t id = root();
    for (std::uint32_t depth = 0; id != 0; ++depth) {
      if (depth > 64 || !read_node(id, b)) return false;
      if (b.node.leaf()) return true;
      id = b.node.child(b.node.child_for(key));
    }
    return false;
  }

 private:
  std::string node_key(std::uint64_t id) const {
    std::string k = prefix_;
    append_be64(k, id);
    return k;
  }
  void set_key(std::uint64_t id) {
    key_.assign(prefix_);
    append_be64(key_, id);
  }
  void put_node(std::uint64_t id, std::string_view bytes) {
    set_key(id);
    store_.put(key_, bytes);
  }
  void save_meta() {
    char m[20];
    write_le64(m, root_.load(std::memory_order_relaxed));
    write_le64(m + 8, next_node_);
    std::memcpy(m + 16, &height_, 4);
    set_key(0);
    store_.put(key_, std::string_view(m, 20));
  }
  static void leaf_header(std::string& n, std::uint64_t prev, std::uint64_t next) {
    n.push_back(static_cast<char>(TreeNode::kLeaf));
    n.append(2, '\0');
    char b[16];
    write_le64(b, prev);
    write_le64(b + 8, next);
    n.append(b, 16);
  }
  static void internal_header(std::string& n, std::uint64_t child0) {
    n.push_back(static_cast<char>(TreeNode::kInternal));
    n.append(2, '\0');
    char b[8];
    write_le64(b, child0);
    n.append(b, 8);
  }
  static void append_entry(std::string& n, std::string_view key, const std::uint64_t* child) {
    const char len[2] = {static_cast<char>(key.size() & 0xFF), static_cast<char>(key.size() >> 8)};
    n.append(len, 2);
    n.append(key);
    if (child != nullptr) {
      char b[8];
      write_le64(b, *child);
      n.append(b, 8);
    }
  }
  static void set_count(std::string& n, std::size_t count) {
    n[1] = static_cast<char>(count & 0xFF);
    n[2] = static_cast<char>(count >> 8);
  }
  [[noreturn]] void damaged(std::uint64_t id) const {
    throw Error(Errc::corrupt_file, "collection: an ordered index's node " + std::to_string(id) +
                                        " is missing or damaged (rebuild_indexes() rebuilds the collection's indexes)");
  }
  void read_for_write(std::uint64_t id) {
    key_.assign(prefix_);
    append_be64(key_, id);
    if (!store_.get(key_, w_.bytes) || !w_.node.parse(w_.bytes)) damaged(id);
  }

  /// Down from `id` to key's leaf, noting (node, child index) on the way;
  /// leaves the leaf in w_ and its id in leaf_id_.
  void descend(std::uint64_t id, std::string_view key) {
    for (std::uint32_t depth = 0;; ++depth) {
      if (depth > 64) damaged(id);
      read_for_write(id);
      if (w_.node.leaf()) break;
      const std::size_t i = w_.node.child_for(key);
      path_.push_back({id, static_cast<std::uint32_t>(i)});
      id = w_.node.child(i);
    }
    leaf_id_ = id;
  }

  /// Rewrites one 8-byte link of leaf `id` at `offset` (3: prev, 11: next).
  void relink(std::uint64_t id, std::size_t offset, std::uint64_t to) {
    read_for_write(id);
    write_le64(w_.bytes.data() + offset, to);
    put_node(id, w_.bytes);
  }

  /// w_ holds leaf `id`, one entry too big: its upper half goes to a new
  /// leaf linked after it, whose first key goes up to the parent.
  void split_leaf(std::uint64_t id) {
    std::string& full = split_.bytes;  // (the writer's buffers: no allocation once warm)
    full.assign(w_.bytes);
    TreeNode& node = split_.node;
    (void)node.parse(full);
    const std::size_t mid = split_point(node, full.size());
    const std::uint64_t right = next_node_++;
    const std::uint64_t next = node.next();
    std::string& r = right_;
    r.clear();
    leaf_header(r, id, next);
    r.append(full, node.begin_of(mid), std::string::npos);
    set_count(r, node.size() - mid);
    std::string& l = left_;
    l.assign(full, 0, node.begin_of(mid));
    set_count(l, mid);
    write_le64(l.data() + 11, right);
    sep_.assign(node.key(mid));
    put_node(right, r);
    put_node(id, l);
    if (next != 0) relink(next, 3, right);
    insert_up(id, sep_, right);
  }

  /// The entry where a node of `total` bytes splits: the first past half.
  static std::size_t split_point(const TreeNode& node, std::size_t total) {
    std::size_t mid = 1;
    while (mid + 1 < node.size() && node.begin_of(mid) < total / 2) ++mid;
    return mid;
  }

  /// After a split of `left`: (sep, right) goes into the parent the path
  /// says, splitting it in turn when it grows too big; a new root above
  /// the old one when the path is empty.
  void insert_up(std::uint64_t left, const std::string& sep, std::uint64_t right) {
    if (path_.empty()) {
      const std::uint64_t id = next_node_++;
      std::string& n = right_;
      n.clear();
      internal_header(n, left);
      append_entry(n, sep, &right);
      set_count(n, 1);
      put_node(id, n);
      root_.store(id, std::memory_order_relaxed);
      ++height_;
      save_meta();
      return;
    }
    const auto [pid, ci] = path_.back();
    path_.pop_back();
    read_for_write(pid);
    std::string& n = w_.bytes;
    entry_.clear();
    append_entry(entry_, sep, &right);
    n.insert(w_.node.begin_of(ci), entry_);
    set_count(n, w_.node.size() + 1);
    if (n.size() <= kMaxNodeBytes) {
      put_node(pid, n);
      save_meta();  // next_node_ moved (ids are never reused)
      return;
    }
    std::string& full = split_.bytes;
    full.assign(n);
    TreeNode& node = split_.node;
    (void)node.parse(full);
    const std::size_t mid = split_point(node, full.size());
    // Entry mid's key goes up; its child becomes the new node's child 0.
    sep_.assign(node.key(mid));
    const std::uint64_t new_id = next_node_++;
    std::string& r = right_;
    r.clear();
    internal_header(r, node.child(mid + 1));
    r.append(full, node.begin_of(mid + 1), std::string::npos);
    set_count(r, node.size() - mid - 1);
    std::string& l = left_;
    l.assign(full, 0, node.begin_of(mid));
    set_count(l, mid);
    put_node(new_id, r);
    put_node(pid, l);
    insert_up(pid, sep_, new_id);
  }
  /// The leaf (or node) the path's last step leads to went away: its
  /// parent drops that child (and goes too if it had no other).
  void remove_child() {
    while (!path_.empty()) {
      const auto [pid, ci] = path_.back();
      path_.pop_back();
      read_for_write(pid);
      std::string& n = w_.bytes;
      const TreeNode& node = w_.node;
      if (node.size() == 0) {  // its only child went: so does it
        set_key(pid);
        store_.remove(key_);
        continue;
      }
      if (ci == 0) {
        // Child 1 becomes child 0; entry 0's key goes.
        const std::uint64_t c1 = node.child(1);
        n.erase(node.begin_of(0), node.begin_of(1) - node.begin_of(0));
        write_le64(n.data() + 3, c1);
      } else {
        n.erase(node.begin_of(ci - 1), node.begin_of(ci) - node.begin_of(ci - 1));
      }
      set_count(n, node.size() - 1);
      put_node(pid, n);
      collapse_root();
      return;
    }
    // Every node on the path went: the tree is empty.
    root_.store(0, std::memory_order_relaxed);
    height_ = 0;
    save_meta();
  }

  /// A root with one child and no key hands the root to the child.
  void collapse_root() {
    bool changed = false;
    for (;;) {
      const std::uint64_t r = root_.load(std::memory_order_relaxed);
      read_for_write(r);
      if (w_.node.leaf() || w_.node.size() != 0) break;
      root_.store(w_.node.child(0), std::memory_order_relaxed);
      --height_;
      set_key(r);
      store_.remove(key_);
      changed = true;
    }
    if (changed) save_meta();
  }

  struct Step {
    std::uint64_t node;
    std::uint32_t child;
  };

  Store& store_;
  const std::string prefix_;
  SeqVersion version_;
  std::atomic<std::uint64_t> root_{0};  // (relaxed: read inside the version's bracket)
  std::uint64_t next_node_ = 1;
  std::uint32_t height_ = 0;
  // The writer's scratch.
  TreeBuffers w_;
  std::string key_, entry_, right_, left_, sep_;
  TreeBuffers split_;
  std::vector<Step> path_;
  std::uint64_t leaf_id_ = 0;
};

/// Where a walk of the tree starts: at `key` (inclusive or not), or at
/// the very first or last key (`unbounded`). A walk moves it along: after
/// each key emitted it is that key, exclusive, so that a walk that gives
/// up can be taken up again from it.
struct TreeBound {
  std::string key;
  bool inclusive = true;
  bool unbounded = false;
};

/// Walks the tree's keys from `from`, ascending (or descending), calling
/// emit(key) -> bool (false: stop) for each, on node copies the tree's
/// version says are of one tree (see the header comment). When the tree
/// changed under it, the walk descends again from the last key emitted:
/// no key present throughout is skipped or repeated. Returns false when
/// it gave up after `max_restarts` (writers kept changing the tree): the
/// caller goes on from `from` under the writer lock. A node missing or
/// damaged in a tree that did not change is damage: Errc::corrupt_file.
template <class Emit>
bool walk_tree(const OrderedTree& tree, TreeBound& from, bool descending, Emit&& emit, TreeBuffers& b,
               unsigned max_restarts) {
  for (unsigned restart = 0;; ++restart) {
    if (restart > max_restarts) return false;
    const std::uint64_t v = tree.begin_read();
    // Down to the first leaf of the walk.
    std::uint64_t id = tree.root();
    if (id == 0) {
      if (tree.stable(v)) return true;  // an empty tree
      continue;
    }
    bool ok = true;
    for (std::uint32_t depth = 0;; ++depth) {
      if (depth > 64 || !tree.read_node(id, b)) {
        ok = false;
        break;
      }
      if (b.node.leaf()) break;
      const std::size_t i = from.unbounded ? (descending ? b.node.size() : 0) : b.node.child_for(from.key);
      id = b.node.child(i);
    }
    if (!tree.stable(v)) continue;
    if (!ok) {
      throw Error(Errc::corrupt_file, "collection: an ordered index's node " + std::to_string(id) +
                                          " is missing or damaged (rebuild_indexes() rebuilds the collection's "
                                          "indexes)");
    }
    // Along the leaves: never more than the store holds records (each leaf
    // is one).
    const std::uint64_t max_leaves = tree.records();
    std::uint64_t leaves = 0;
    for (;;) {
      const TreeNode& n = b.node;
      std::size_t i;  // the first entry to emit (descending: one past it)
      if (from.unbounded) {
        i = descending ? n.size() : 0;
      } else if (descending) {
        i = n.lower_bound(from.key, from.inclusive);
      } else {
        i = n.lower_bound(from.key, !from.inclusive);
      }
      const std::uint64_t next = descending ? n.prev() : n.next();
      if (descending) {
        for (; i > 0; --i) {
          const std::string_view k = n.key(i - 1);
          from.key.assign(k);
          from.inclusive = false;
          from.unbounded = false;
          if (!emit(k)) return true;
        }
      } else {
        for (; i < n.size(); ++i) {
          const std::string_view k = n.key(i);
          from.key.assign(k);
          from.inclusive = false;
          from.unbounded = false;
          if (!emit(k)) return true;
        }
      }
      if (next == 0) return true;
      bool read = ++leaves <= max_leaves && tree.read_node(next, b) && b.node.leaf();
      if (!tree.stable(v)) break;  // descend again from `from`
      // A leaf reached along the chain is never empty (only the root may
      // be, and it has no neighbours) and holds keys past `from`: one that
      // does not is a chain that loops or is out of order (damage), never
      // walked round and round, whatever the walk's bounds. (A walk that
      // began unbounded and is still so met an empty first leaf: the empty
      // test alone refuses the next one.) The cap on leaves is a backstop.
      if (read) {
        const TreeNode& m = b.node;
        if (m.size() == 0) {
          read = false;
        } else if (!from.unbounded) {
          const int c = descending ? m.key(m.size() - 1).compare(from.key) : m.key(0).compare(from.key);
          if (descending ? (c > 0 || (c == 0 && !from.inclusive)) : (c < 0 || (c == 0 && !from.inclusive))) {
            read = false;
          }
        }
      }
      if (!read) {
        throw Error(Errc::corrupt_file, "collection: an ordered index's leaf " + std::to_string(next) +
                                            " is missing, damaged or out of order (rebuild_indexes() rebuilds the "
                                            "collection's indexes)");
      }
    }
  }
}

}  // namespace offheap::detail
