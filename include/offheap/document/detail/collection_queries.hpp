// SPDX-License-Identifier: Apache-2.0
// A Collection's queries (document/collection.hpp): hits gathered from an
// index on validated copies of its records (in batches, so that no lock
// is held while the caller's visitor runs), each checked against the
// document it leads to; and verify(), which checks every index whole.
#pragma once

#include <offheap/document/detail/collection_state.hpp>

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace offheap::detail {

/// A reader's buffers, one set per nesting depth on each thread (a
/// visitor that queries again gets the next set): no allocation once warm.
struct QueryBuffers {
  std::string doc, okey, okey2, bucket, key, batch;
  std::vector<std::uint32_t> batch_ends;
  std::vector<std::uint64_t> ids;
  TreeBuffers tree;
  TreeBound lo, hi, from, resume;
};
class ReadScratch {
 public:
  ReadScratch() {
    auto& pool = pool_();
    if (depth_() == pool.size()) pool.push_back(std::make_unique<QueryBuffers>());
    b_ = pool[depth_()++].get();
  }
  ~ReadScratch() { --depth_(); }
  ReadScratch(const ReadScratch&) = delete;
  ReadScratch& operator=(const ReadScratch&) = delete;
  QueryBuffers& operator*() noexcept { return *b_; }
  QueryBuffers* operator->() noexcept { return b_; }
  std::string& doc() noexcept { return b_->doc; }

 private:
  static std::vector<std::unique_ptr<QueryBuffers>>& pool_() {
    thread_local std::vector<std::unique_ptr<QueryBuffers>> pool;
    return pool;
  }
  static std::size_t& depth_() {
    thread_local std::size_t depth = 0;
    return depth;
  }
  QueryBuffers* b_;
};

class CollectionQueries : public CollectionState {
 protected:
  using CollectionState::CollectionState;

  template <class Emit>
  std::size_t find_equal(std::string_view field, const Value& value, Emit&& emit) const {
    const std::shared_ptr<Slot> slot = find_slot(field, IndexKind::hash, true);
    if (!slot) no_index(field, "find()", "a hash or ordered");
    ReadScratch sc;
    QueryBuffers& b = *sc;
    b.okey.clear();
    append_ordered_key(value, b.okey);
    if (slot->hash) {
      slot->hash->bucket_key(b.okey, b.bucket);
      for (bool again = true; again;) {
        checked(*slot);
        auto under_lock = [&] { (void)slot->hash->collect(b.bucket, b.ids, b.key, b.doc, 0); };
        again = read_index(*slot, [&] { return slot->hash->collect(b.bucket, b.ids, b.key, b.doc, 3); }, under_lock);
        // (Gathered while rebuilt or dropped: again, through checked().)
        again = again || slot->broken.load(std::memory_order_relaxed);
      }
      std::size_t n = 0;
      for (const DocId id : b.ids) {
        const int r = check_and_emit(*slot, b.bucket, b.okey, id, b, emit);
        if (r < 0) break;
        n += static_cast<std::size_t>(r);
      }
      return n;
    }
    TreeBound& from = b.from;
    set_bound(from, b.okey, true);
    const std::size_t klen = b.okey.size();
    return walk_entries(*slot, from, false, SIZE_MAX, b, emit, [&](std::string_view e) {
      return e.size() == klen + 8 && e.substr(0, klen) == std::string_view(b.okey);
    });
  }

  template <class Emit>
  std::size_t find_in_range(std::string_view field, const Range& r, const std::string_view* prefix,
                            Emit&& emit) const {
    const std::shared_ptr<Slot> slot = find_slot(field, IndexKind::ordered);
    if (!slot) no_index(field, prefix != nullptr ? "find_prefix()" : "find_range()", "an ordered");
    ReadScratch sc;
    QueryBuffers& b = *sc;
    // Bounds on the entries (ordered key + 8-byte id): lo and hi, each
    // inclusive or not, or open.
    TreeBound& lo = b.lo;
    TreeBound& hi = b.hi;
    lo.key.clear();
    hi.key.clear();
    lo.inclusive = hi.inclusive = true;
    lo.unbounded = hi.unbounded = true;
    if (prefix != nullptr) {
      lo.unbounded = hi.unbounded = false;
      lo.key.push_back(static_cast<char>(static_cast<unsigned char>(FieldType::string) + 1));
      detail::doc::append_escaped(*prefix, lo.key);
      lo.key.resize(lo.key.size() - 2);  // (no terminator: any continuation)
      hi.key.assign(lo.key);
      hi.key.append(OrderedTree::kMaxKeyBytes + 1, '\xFF');  // past every entry that begins with lo
    } else {
      if (r.low) {
        lo.unbounded = false;
        append_ordered_key(*r.low, lo.key);
        lo.inclusive = r.low_inclusive;
        if (!lo.inclusive) lo.key.append(8, '\xFF');  // past every id of the value
      }
      if (r.high) {
        hi.unbounded = false;
        append_ordered_key(*r.high, hi.key);
        hi.inclusive = r.high_inclusive;
        if (hi.inclusive) hi.key.append(8, '\xFF');  // every id of the value
      }
      // One bound: the range stays within its type.
      if (r.low && !r.high) {
        set_bound(hi, std::string_view(), false);
        hi.key.push_back(static_cast<char>(static_cast<unsigned char>(r.low->type()) + 2));
      } else if (r.high && !r.low) {
        set_bound(lo, std::string_view(), true);
        lo.key.push_back(static_cast<char>(static_cast<unsigned char>(r.high->type()) + 1));
      }
    }
    const std::string_view pfx = prefix != nullptr ? std::string_view(lo.key) : std::string_view();
    auto above_lo = [&](std::string_view e) {
      if (lo.unbounded) return true;
      const int c = e.compare(lo.key);
      return c > 0 || (c == 0 && lo.inclusive);
    };
    auto below_hi = [&](std::string_view e) {
      if (hi.unbounded) return true;
      const int c = e.compare(hi.key);
      return c < 0 || (c == 0 && hi.inclusive);
    };
    TreeBound& from = b.from;
    set_bound(from, (r.descending ? hi : lo).key, (r.descending ? hi : lo).inclusive);
    from.unbounded = (r.descending ? hi : lo).unbounded;
    auto in_range = [&](std::string_view e) {
      if (prefix != nullptr) return e.substr(0, pfx.size()) == pfx;
      return r.descending ? above_lo(e) : below_hi(e);
    };
    // (The walk starts at its own bound: the other decides where it ends.)
    return walk_entries(*slot, from, r.descending, r.limit, b, emit, in_range);
  }

  /// Every document, on validated copies: fn(DocId, const DocumentView&) -> bool.
  template <class F>
  void walk_documents(F&& fn) const {
    Cursor cursor;
    bool go = true;
    while (go && !cursor.done()) {
      docs().scan(cursor, 256, [&](std::string_view k, std::string_view v) {
        if (k.size() != 9 || k[0] != '\x01') return true;
        const std::optional<DocumentView> d = DocumentView::parse(v);
        if (!d) throw Error(Errc::corrupt_file, "collection: a collection's document record is damaged");
        go = fn(read_be64(k.data() + 1), *d);
        return go;
      });
    }
  }

  std::vector<std::string> verify_all() const {
    std::vector<std::string> problems;
    const WriterLock g(*this);
    // Per index: what the documents say its entries must be.
    std::vector<std::map<std::string, std::vector<DocId>>> want(slots_.size());
    std::uint64_t docs = 0;
    std::string okey, entry;
    walk_documents([&](DocId id, const DocumentView& d) {
      ++docs;
      if (id == 0 || id > kMaxId) {
        problems.push_back("document " + std::to_string(id) + ": an id out of range (1 to 2^62-1): a damaged key");
      }
      for (std::size_t i = 0; i < slots_.size(); ++i) {
        const std::optional<ValueView> v = d.get(slots_[i]->info.field);
        if (!v) continue;
        okey.clear();
        append_ordered_key(*v, okey);
        if (slots_[i]->tree) {
          entry = okey;
          append_be64(entry, id);
        } else {
          slots_[i]->hash->bucket_key(okey, entry);
        }
        want[i][entry].push_back(id);
      }
      return true;
    });
    if (docs != count()) {
      problems.push_back("size() says " + std::to_string(count()) + " documents, the store holds " +
                         std::to_string(docs));
    }
    QueryBuffers b;
    for (std::size_t i = 0; i < slots_.size(); ++i) {
      const Slot& s = *slots_[i];
      const std::string name = "index " + std::string(to_string(s.info.kind)) + "(" + s.info.field + ")";
      if (s.broken.load(std::memory_order_relaxed)) {
        problems.push_back(name + ": broken (rebuilt at the next write)");
        continue;
      }
      if (s.tree) {
        std::vector<std::string> have;
        TreeBound all{"", true, true};
        try {
          (void)walk_tree(*s.tree, all, false, [&](std::string_view e) {
            have.emplace_back(e);
            return true;
          }, b.tree, 0);
        } catch (const Error& e) {
          if (e.code() != Errc::corrupt_file) throw;
          problems.push_back(name + ": damaged: " + e.what());
          continue;
        }
        std::vector<std::string> expected;
        for (const auto& [k, ids] : want[i]) expected.push_back(k);
        if (have != expected) {
          problems.push_back(name + ": " + std::to_string(have.size()) + " entries, the documents make " +
                             std::to_string(expected.size()) + diff_note(have, expected));
        }
        continue;
      }
      std::uint64_t records = 0;
      bool whole = true;
      for (auto& [bucket, ids] : want[i]) {
        try {
          (void)s.hash->collect(bucket, b.ids, b.key, b.doc, 0);
        } catch (const Error& e) {
          if (e.code() != Errc::corrupt_file) throw;
          problems.push_back(name + ": damaged: " + e.what());
          whole = false;
          break;
        }
        std::sort(ids.begin(), ids.end());
        std::vector<DocId> got = b.ids;
        std::sort(got.begin(), got.end());
        if (got != ids) {
          problems.push_back(name + ": a bucket holds " + std::to_string(got.size()) + " ids, its documents are " +
                             std::to_string(ids.size()));
        }
        records += std::max<std::uint64_t>(1, (got.size() + HashPostings::kPageIds - 1) / HashPostings::kPageIds);
      }
      if (!whole) continue;
      std::uint64_t stored = 0;
      const std::string& prefix = s.hash->prefix();
      indexes_->for_each_key([&](std::string_view k) {
        if (k.substr(0, prefix.size()) == prefix) ++stored;
      });
      if (stored != records) {
        problems.push_back(name + ": " + std::to_string(stored) + " records, its buckets make " +
                           std::to_string(records) + " (a bucket no document leads to)");
      }
    }
    return problems;
  }

 private:
  static void set_bound(TreeBound& b, std::string_view key, bool inclusive) {
    b.key.assign(key);
    b.inclusive = inclusive;
    b.unbounded = false;
  }
  [[noreturn]] static void no_index(std::string_view field, const char* call, const char* kinds) {
    throw Error(Errc::invalid_argument, "collection: " + std::string(call) + " on field '" + std::string(field) +
                                            "', which needs " + kinds + " index and has none (create_index() first)");
  }
  /// An index being rebuilt (or dropped) is waited for under the writer
  /// lock; one still broken after it (a write failed inside it, its
  /// rebuild too) or dropped is refused.
  void checked(const Slot& s) const {
    if (!s.broken.load(std::memory_order_relaxed)) [[likely]] return;
    // The flags are read under the lock (the mutex orders them): a writer
    // that takes the lock after it may start a rebuild again, which is
    // no failed write.
    bool dropped = false, broken = false;
    locked([&] {
      dropped = s.dropped.load(std::memory_order_relaxed);
      broken = s.broken.load(std::memory_order_relaxed);
    });
    if (dropped) {
      throw Error(Errc::invalid_argument, "collection: the " + std::string(to_string(s.info.kind)) + " index on '" +
                                              s.info.field + "' was dropped during the query");
    }
    if (broken) {
      throw Error(Errc::io_error, "collection: the " + std::string(to_string(s.info.kind)) + " index on '" +
                                      s.info.field + "' is incomplete after a write failed inside it (the next "
                                      "write rebuilds it)");
    }
  }
  /// One read of an index: `lock_free()` (false: it met the writer too
  /// often), else `under_lock()` under the writer lock; a record missing or
  /// damaged on the way goes to confirm_damage(). True: the index is being
  /// rebuilt or was dropped (the caller goes back to checked()).
  template <class LockFree, class UnderLock>
  bool read_index(const Slot& s, LockFree&& lock_free, UnderLock&& under_lock) const {
    try {
      if (!lock_free()) locked(under_lock);
      return false;
    } catch (const Error& e) {
      if (e.code() != Errc::corrupt_file) throw;
      return confirm_damage(s, under_lock);
    }
  }
  /// A lock-free read of the index met a record missing or damaged while
  /// its version held still: that is what a rebuild or a drop, which
  /// clear records after one move of the version, looks like too. True:
  /// the index is being rebuilt or was dropped (the caller goes back to
  /// checked()). Else the read is done again by `again` under the writer
  /// lock, where no rebuild runs: damage found there is real, the index
  /// is marked damaged (the next write rebuilds it) and the error goes on.
  template <class Again>
  bool confirm_damage(const Slot& s, Again&& again) const {
    bool busy = false;
    locked([&] {
      // (Under the lock: the mutex orders these loads after the stores of
      // the rebuild or drop that held it.)
      busy = s.dropped.load(std::memory_order_relaxed) || s.broken.load(std::memory_order_relaxed);
      if (busy) return;
      try {
        again();
      } catch (const Error& e) {
        if (e.code() == Errc::corrupt_file) s.damaged.store(true, std::memory_order_relaxed);  // (read under the lock)
        throw;
      }
    });
    return busy;
  }
  static std::string diff_note(const std::vector<std::string>& have, const std::vector<std::string>& want) {
    std::vector<std::string> extra, missing;
    std::set_difference(have.begin(), have.end(), want.begin(), want.end(), std::back_inserter(extra));
    std::set_difference(want.begin(), want.end(), have.begin(), have.end(), std::back_inserter(missing));
    return " (" + std::to_string(extra.size()) + " stale, " + std::to_string(missing.size()) + " missing)";
  }

  /// Runs f under the writer lock (or as it is, on the thread that holds it).
  template <class F>
  void locked(F&& f) const {
    if (t_collection_writer == this) {
      f();
      return;
    }
    const std::lock_guard<std::mutex> g(writer_);
    f();
  }

  /// Reads document id, checks that its field's ordered key is `okey`
  /// (else the entry is stale: noted, skipped), and emits it. Returns -1
  /// (the visitor stopped), 0 (skipped) or 1.
  template <class Emit>
  int check_and_emit(const Slot& s, std::string_view entry, std::string_view okey, DocId id, QueryBuffers& b,
                     Emit& emit) const {
    if (!docs().get(doc_key(id), b.doc)) {
      note_stale(s, entry, id);
      return 0;
    }
    const std::optional<DocumentView> d = DocumentView::parse(b.doc);
    if (!d) throw Error(Errc::corrupt_file, "collection: document " + std::to_string(id) + " is damaged");
    const std::optional<ValueView> v = d->get(s.info.field);
    b.okey2.clear();
    if (v) append_ordered_key(*v, b.okey2);
    if (!v || std::string_view(b.okey2) != okey) {
      note_stale(s, entry, id);
      return 0;
    }
    return emit(id, *d) ? 1 : -1;
  }

  /// The tree's entries from `from` while in_range(entry), gathered 64 at
  /// a time (no lock held while emit runs), each checked and emitted;
  /// stops after `limit` emitted. Returns how many were.
  template <class Emit, class InRange>
  std::size_t walk_entries(const Slot& s, TreeBound& from, bool descending, std::size_t limit, QueryBuffers& b,
                           Emit& emit, InRange&& in_range) const {
    std::size_t n = 0;
    for (bool ended = false; !ended && n < limit;) {
      checked(s);
      b.batch.clear();
      b.batch_ends.clear();
      bool full = false;
      auto take = [&](std::string_view e) {
        if (!in_range(e)) {
          ended = true;
          return false;
        }
        b.batch.append(e);
        b.batch_ends.push_back(static_cast<std::uint32_t>(b.batch.size()));
        full = b.batch_ends.size() == std::min<std::size_t>(64, limit - n);  // (a small limit reads no further)
        return !full;
      };
      b.resume = from;  // (a batch gathered while the index was rebuilt is gathered again)
      auto under_lock = [&] {
        b.batch.clear();
        b.batch_ends.clear();
        full = ended = false;
        from = b.resume;
        (void)walk_tree(*s.tree, from, descending, take, b.tree, 0);
      };
      const bool again =
          read_index(s, [&] { return walk_tree(*s.tree, from, descending, take, b.tree, 3); }, under_lock);
      // The walk's last stable() check orders this load after the flag a
      // rebuild or a drop sets before its first change (seq_version.hpp).
      if (again || s.broken.load(std::memory_order_relaxed)) {
        from = b.resume;
        ended = false;
        continue;  // checked() waits for the rebuild (or refuses)
      }
      if (!full) ended = true;  // (the tree ended, or the range did)
      std::uint32_t start = 0;
      for (const std::uint32_t end : b.batch_ends) {
        const std::string_view e(b.batch.data() + start, end - start);
        start = end;
        if (e.size() < 9) {
          throw Error(Errc::corrupt_file, "collection: the ordered index on '" + s.info.field +
                                              "' holds an entry too short to name a document (damaged)");
        }
        const int r = check_and_emit(s, e, e.substr(0, e.size() - 8), read_be64(e.data() + e.size() - 8), b, emit);
        if (r < 0) return n;
        n += static_cast<std::size_t>(r);
        if (n >= limit) return n;
      }
    }
    return n;
  }
};

}  // namespace offheap::detail
