// SPDX-License-Identifier: Apache-2.0
// Collection: documents (document.hpp) by id, with secondary indexes on
// their fields, kept in two stores of one directory (or of anonymous
// memory): `documents` (the documents, and the collection's own record)
// and `indexes` (every index's records: document/detail/ordered_tree.hpp for the
// ordered ones, document/detail/hash_postings.hpp for the hash ones).
//
//   Collection people(options);            // options.path: the directory
//   people.create_index("last", IndexKind::hash);
//   people.create_index("age", IndexKind::ordered);
//   const DocId id = people.insert(Document{{"first", "Ada"}, {"last", "Lovelace"}, {"age", 36}});
//   people.find("last", "Lovelace", [](DocId, const DocumentView& d) { ... });
//   people.find_range("age", Range{.low = 30, .high = 40}, [](DocId, const DocumentView& d) { ... });
//
// Writers (insert, update, remove, index creation and drop) take the
// collection's writer lock, one at a time. Readers take no lock: a
// document is one record (Store::get), and an index is read on copies of
// its records validated by its version (document/detail/seq_version.hpp), falling
// back to the writer lock only when writers changed the index under a
// reader three times running.
//
// Consistency. A write touches the document and its index entries in
// separate steps, in this order: entries for the new values are added,
// then the document is written, then the entries of its old values are
// removed. So an index never misses a document that holds a value (at any
// moment, and after a crash between any two steps), it may only hold
// entries that no longer match (stale). Every query checks each hit
// against the document it leads to and skips the stale ones (a reader
// notes them, and the next write removes those that are still stale). A
// query running beside writers returns each document that matched when it
// was read; a document updated from one matching value to another during
// a range query may be returned twice (once per value), and one being
// written may be missed (the query returns what held before or after).
// for_each() beside writers may visit a document twice (the store's scan
// is at-least-once for records moved during it). Readers beside a
// rebuild or a drop of an index wait for it (or are refused: dropped);
// an index a reader finds damaged is rebuilt by the next write.
// A collection not closed cleanly (a crash, a SIGKILL, a power loss), or
// whose indexes directory is not the one its last clean close wrote (a
// random epoch kept in both, and the record count, say), has its indexes
// rebuilt from the documents at its next open (an index's own
// multi-record changes, such as a tree node's split, are not atomic), and
// its document count and id counter recomputed; an index that a write
// failed inside (out_of_space, an I/O error) is rebuilt before the next
// write, and refuses queries until then.
//
// Index keys: a field's value's ordered key (document/ordered_key.hpp):
// values of different types never match, and an ordered index sorts by
// type first (integers and reals are separate ranges: find_range(low: 1)
// never returns 1.5). A range with one bound stays within that bound's
// type. A document without the field (or whose field is null, which is a
// value like the others) is indexed under null or not at all: missing
// fields are not indexed. The ordered index takes values whose ordered key
// is at most kMaxOrderedKey bytes (strings of about 500 bytes); a write
// of a longer one is refused with Errc::invalid_argument, nothing changed.
// Lists are indexed as one value (not each element).
//
// Limits: ids are 1 .. kMaxId (2^62-1), generated from 1 upward and never
// reused (also across a crash: ids are handed out from blocks recorded
// ahead; an id a document holds is passed over); kNoId is never one.
// Options::default_ttl and on_removal are refused (they would act on the
// collection's own records). close() must not run while other threads
// use the collection (as a Store's destructor); reads and writes after it
// get Errc::closed. A document is a value of the documents
// store: at most what its chunks hold (Options::max_chunk_bytes).
//
// Memory handed out: get() and the find() overload that returns a vector
// give copies. Every visitor (read, for_each, find, find_range,
// find_prefix) gets a DocumentView of a copy of the document in a buffer
// of the call or of the calling thread (no allocation once warm: read()),
// valid only during that
// call, as are the ValueViews and string_views it hands out: copy what
// you keep (DocumentView::to_document()). Queries gather their hits in
// batches (a hash index: one lookup of the value's bucket, then one per
// match; an ordered index: up to 64 entries at a time), so no lock is held
// while a visitor runs, and a visitor may query the collection again.
//
// Costs and damage. Ordered-index leaves are freed when empty but not
// merged; removing an id from a hash bucket searches its pages, so
// updates of a field whose value most documents share cost in proportion.
// The stores' options apply to both stores; write the documents store only
// through the collection. A record that is no document (damage) is
// reported by get, read and for_each, indexed by nothing, and dropped by
// remove. One whose bytes fail their checksum: get, read and queries that
// reach it throw Errc::corrupt_file, for_each passes over it (verify()
// reports the count that differs), remove drops it, update and modify drop
// it and throw Errc::corrupt_file. Damage in an index (a leaf chain that
// loops, a page count that lies, a collection record naming two indexes
// alike) is Errc::corrupt_file, never a hang; rebuild_indexes() rebuilds
// all. A document id past kMaxId in the files is reported by verify() and
// does not use up the ids. tests/document/collection_crash_test.cpp kills
// a writer at random and checks every document, verify() and queries of
// every kind after each reopen.
#pragma once

#include <offheap/document/detail/collection_queries.hpp>
#include <offheap/document.hpp>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace offheap {

class Collection : private detail::CollectionQueries {
 public:
  using detail::CollectionState::kMaxOrderedKey;
  using detail::CollectionState::kMaxId;
  using detail::CollectionState::kNoId;

  /// Opens (or creates) the collection: in options.path (a directory,
  /// holding `documents` and `indexes`), or in anonymous memory. Other
  /// options apply to both stores. A collection not closed cleanly has its
  /// indexes rebuilt here. Throws: the stores' errors;
  /// Errc::format_version for a directory of another collection format;
  /// Errc::invalid_argument for a read-only open of one not closed cleanly
  /// (its indexes cannot be trusted, nor rebuilt read-only).
  explicit Collection(Options options) : detail::CollectionQueries(std::move(options)) {}
  Collection(const Collection&) = delete;
  Collection& operator=(const Collection&) = delete;
  /// Closes (as close(), errors swallowed: call close() to see them).
  ~Collection() = default;

  // ---- writes ------------------------------------------------------------------

  /// Adds the document under a new id, which it returns.
  DocId insert(const Document& doc) { return write_new(kNoId, doc); }
  /// Adds the document under `id`; false (nothing written) if the id is
  /// taken. Later generated ids are above it.
  bool insert(DocId id, const Document& doc) {
    check_id(id);
    return write_new(id, doc) != kNoId;
  }
  /// Replaces document `id`; false if there is none. Throws
  /// Errc::corrupt_file for a document whose record fails its checksum
  /// (damage on disk): that record is removed (size() counts it no
  /// more), nothing is written.
  bool update(DocId id, const Document& doc) {
    return valid_id(id) && write_update(id, &doc, nullptr);
  }
  /// Calls fn(Document&) on a copy of document `id` and stores what fn
  /// leaves, as one write under the writer lock; false if there is none;
  /// a damaged record as update().
  template <class F>
    requires std::is_invocable_v<F&, Document&>
  bool modify(DocId id, F&& fn) {
    const detail::DocumentChange change(fn);  // (refers to fn: lives as long as this call)
    return valid_id(id) && write_update(id, nullptr, &change);
  }
  /// Removes document `id` and its index entries; false if there is none.
  /// A record that is damaged (fails its checksum, or is no document) is
  /// removed too (true); the entries that led to it are stale from then
  /// on, skipped by queries and dropped by later writes.
  bool remove(DocId id) { return valid_id(id) && write_remove(id); }

  // ---- reads -------------------------------------------------------------------

  bool contains(DocId id) const { return docs().contains(doc_key(id)); }
  /// Calls fn(const DocumentView&) once on a copy of document `id` (kept in
  /// a buffer of the calling thread: no allocation once warm). Returns: if
  /// fn returns void, whether the document exists; else an optional of
  /// what fn returned. The view is valid during the call only.
  template <class F>
  auto read(DocId id, F&& fn) const {
    using R = std::invoke_result_t<F&, const DocumentView&>;
    detail::ReadScratch scratch;
    std::optional<DocumentView> view;
    if (docs().get(doc_key(id), scratch.doc())) {
      view = DocumentView::parse(scratch.doc());
      if (!view) throw Error(Errc::corrupt_file, "collection: document " + std::to_string(id) + " is damaged");
    }
    if constexpr (std::is_void_v<R>) {
      if (view) fn(*view);
      return view.has_value();
    } else {
      return view ? std::optional<R>(fn(*view)) : std::optional<R>();
    }
  }
  /// A copy of document `id`, or nullopt.
  std::optional<Document> get(DocId id) const {
    std::optional<Document> out;
    (void)read(id, [&](const DocumentView& d) { out = d.to_document(); });
    return out;
  }
  /// Calls fn(DocId, const DocumentView&) for every document (-> bool:
  /// false stops), in no particular order; documents written meanwhile may
  /// or may not be visited, and one moved by a write during the walk may
  /// be visited twice (Store::scan's promise: at least once). A document
  /// whose record fails its checksum (damage on disk) is passed over (the
  /// scan skips it): get() throws Errc::corrupt_file for it, verify()
  /// reports that size() counts more documents than the store holds, and
  /// remove() drops it. One whose bytes are no document throws
  /// Errc::corrupt_file.
  template <class F>
  void for_each(F&& fn) const {
    walk_documents([&](DocId id, const DocumentView& d) { return call_visitor(fn, id, d); });
  }
  /// Documents in the collection.
  std::uint64_t size() const noexcept { return count(); }

  // ---- indexes -----------------------------------------------------------------

  /// Creates an index on `field` (one of each kind per field) and fills it
  /// from the documents there, under the writer lock (writes wait for
  /// it; readers go on). Returns false if that index exists.
  bool create_index(std::string_view field, IndexKind kind) { return add_index(field, kind); }
  /// Drops it and its records; false if there was none.
  bool drop_index(std::string_view field, IndexKind kind) { return remove_index(field, kind); }
  std::vector<IndexInfo> indexes() const { return index_list(); }
  /// Rebuilds every index from the documents (what an open after a crash
  /// does).
  void rebuild_indexes() { rebuild_all(); }

  /// Calls fn(DocId, const DocumentView&) (-> bool: false stops) for each
  /// document whose `field` equals `value`, through the field's hash index
  /// (or its ordered index); returns how many fn was called for. Throws:
  /// Errc::invalid_argument if the field has no index.
  template <class F>
  std::size_t find(std::string_view field, const Value& value, F&& fn) const {
    return find_equal(field, value, [&](DocId id, const DocumentView& d) { return call_visitor(fn, id, d); });
  }
  /// The documents whose `field` equals `value`, copied.
  std::vector<std::pair<DocId, Document>> find(std::string_view field, const Value& value) const {
    std::vector<std::pair<DocId, Document>> out;
    find(field, value, [&](DocId id, const DocumentView& d) { out.emplace_back(id, d.to_document()); });
    return out;
  }
  /// Through the field's ordered index: documents whose value lies in the
  /// range, in the index's order (ascending, or descending), at most
  /// range.limit of them. Throws: Errc::invalid_argument if the field has
  /// no ordered index.
  template <class F>
  std::size_t find_range(std::string_view field, const Range& range, F&& fn) const {
    return find_in_range(field, range, nullptr,
                         [&](DocId id, const DocumentView& d) { return call_visitor(fn, id, d); });
  }
  /// Strings that begin with `prefix`, in order, as find_range.
  template <class F>
  std::size_t find_prefix(std::string_view field, std::string_view prefix, F&& fn, bool descending = false,
                          std::size_t limit = SIZE_MAX) const {
    Range r;
    r.descending = descending;
    r.limit = limit;
    return find_in_range(field, r, &prefix,
                         [&](DocId id, const DocumentView& d) { return call_visitor(fn, id, d); });
  }

  /// Checks every index against the documents: each document's indexed
  /// fields have their entries, each entry leads to a document that holds
  /// its value, the count is right, ids are in range. Returns what is
  /// wrong (empty: all good), a damaged index too. Takes the writer lock.
  std::vector<std::string> verify() const { return verify_all(); }

  // ---- durability --------------------------------------------------------------

  /// Writes both stores' changes to their files (Store::sync).
  void sync() { sync_all(); }
  /// Marks the collection clean and closes both stores; idempotent.
  void close() { close_all(); }

  Store& documents() { return docs(); }

 private:
  template <class F>
  static bool call_visitor(F& fn, DocId id, const DocumentView& d) {
    if constexpr (std::is_same_v<std::invoke_result_t<F&, DocId, const DocumentView&>, bool>) {
      return fn(id, d);
    } else {
      fn(id, d);
      return true;
    }
  }
};

}  // namespace offheap
