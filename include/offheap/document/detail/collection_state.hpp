// SPDX-License-Identifier: Apache-2.0
// The engine of a Collection (document/collection.hpp): its two stores,
// its record, its indexes, and the steps of its writes in their order.
// Queries are in document/detail/collection_queries.hpp.
//
// The collection's record (key "\0collection" in the documents store):
//   [0]       format: 0xC2 (0xC1, from before [34..41]: opened once as
//             not clean, its indexes rebuilt)
//   [1]       clean: 1 once closed cleanly, 0 while open
//   [2..9]    ids below this are handed out or reserved (u64 LE)
//   [10..17]  documents (u64 LE; trusted only when clean)
//   [18..21]  the next index number (u32 LE; numbers are never reused)
//   [22..25]  index count (u32 LE)
//   [26..33]  records in the indexes store (u64 LE; written at a clean
//             close: an open that finds another count, say a lost or
//             replaced indexes directory, rebuilds them)
//   [34..41]  the epoch of that close (u64 LE, random, not 0): written
//             first into the indexes store (key kEpochKey), which is then
//             closed, and then here with clean = 1; an open that finds
//             another there (an older copy of the indexes, even one of
//             the same size) or none rebuilds the indexes
//   then per index: number (u32 LE), kind (u8), field name length (u16
//   LE), name
// Documents: "\x01" + the id (big-endian u64), the encoded document.
// An index numbered n keeps its records in the indexes store under the
// prefix be32(n) + 'o' (ordered) or 'h' (hash), n >= 1 (no two indexes
// share a number, nor a (field, kind): a record that says so is damage).
#pragma once

#include <offheap/document/detail/hash_postings.hpp>
#include <offheap/document/detail/ordered_tree.hpp>
#include <offheap/document.hpp>
#include <offheap/document/query.hpp>
#include <offheap/error.hpp>
#include <offheap/store.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <random>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace offheap::detail {

/// A reference to fn(Document&), for modify() (no allocation).
class DocumentChange {
 public:
  template <class F>
  DocumentChange(F&& fn) noexcept  // NOLINT: converts from any callable
      : ctx_(static_cast<void*>(&fn)), call_([](void* c, Document& d) { (*static_cast<std::remove_reference_t<F>*>(c))(d); }) {}
  void operator()(Document& d) const { call_(ctx_, d); }

 private:
  void* ctx_;
  void (*call_)(void*, Document&);
};

/// The collection whose writer lock this thread holds (a modify()
/// function runs under it): its queries need no lock there, and its
/// writes, which would deadlock, are refused.
inline thread_local const void* t_collection_writer = nullptr;

class CollectionState {
 public:
  static constexpr DocId kNoId = ~DocId{0};
  /// Ids are 1 .. kMaxId (explicit ones too): no counter wraps.
  static constexpr DocId kMaxId = (DocId{1} << 62) - 1;
  /// The longest ordered key an ordered index takes (the tree's key less
  /// the id after it).
  static constexpr std::size_t kMaxOrderedKey = OrderedTree::kMaxKeyBytes - 8;

 protected:
  /// The writer lock, refused to a thread that holds it already.
  class WriterLock {
   public:
    explicit WriterLock(const CollectionState& c) : c_(c) {
      if (t_collection_writer == &c) {
        throw Error(Errc::invalid_argument,
                    "collection: a collection written from inside its own modify() function, which runs under "
                    "its writer lock");
      }
      c.writer_.lock();
      outer_ = t_collection_writer;  // (another collection's, held around this one)
      t_collection_writer = &c;
    }
    ~WriterLock() {
      t_collection_writer = outer_;
      c_.writer_.unlock();
    }
    WriterLock(const WriterLock&) = delete;
    WriterLock& operator=(const WriterLock&) = delete;

   private:
    const CollectionState& c_;
    const void* outer_ = nullptr;
  };

  struct Slot {
    IndexInfo info;
    std::uint32_t number = 0;
    std::unique_ptr<OrderedTree> tree;   // ordered
    std::unique_ptr<HashPostings> hash;  // hash
    std::atomic<bool> broken{false};     // a write failed inside, or a rebuild is under way: readers wait
    std::atomic<bool> dropped{false};    // drop_index() took it
    // A reader met damage in it, under the writer lock (so that it is no
    // rebuild): the next write rebuilds it, close() leaves it untrusted.
    mutable std::atomic<bool> damaged{false};
    bool needs_rebuild() const noexcept {  // (the writer's, under the writer lock: the mutex orders both flags)
      return broken.load(std::memory_order_relaxed) || damaged.load(std::memory_order_relaxed);
    }
    SeqVersion& version() noexcept { return tree ? tree->version() : hash->version(); }
  };

  explicit CollectionState(Options options) { open(std::move(options)); }
  ~CollectionState() {
    try {
      close_all();
    } catch (...) {  // (close() reports them)
    }
  }

  /// The documents store; Errc::closed after close() (which lets go of
  /// both stores and their directories: the same directory may then be
  /// opened again).
  Store& docs() const {
    if (!docs_) [[unlikely]] throw Error(Errc::closed, "collection: a read of a closed collection");
    return *docs_;
  }

  struct DocKey {
    char b[9];
    operator std::string_view() const noexcept { return {b, 9}; }  // NOLINT
  };
  static DocKey doc_key(DocId id) noexcept {
    DocKey k;
    k.b[0] = '\x01';
    for (int i = 8; i >= 1; --i, id >>= 8) k.b[i] = static_cast<char>(id & 0xFF);
    return k;
  }
  static bool valid_id(DocId id) noexcept { return id != 0 && id <= kMaxId; }
  static void check_id(DocId id) {
    if (id == 0 || id > kMaxId) {
      throw Error(Errc::invalid_argument, "collection: a collection's document ids are 1 to 2^62-1 (got " +
                                              std::to_string(id) + ")");
    }
  }

  std::uint64_t count() const noexcept { return count_.load(std::memory_order_relaxed); }

  // ---- writes ------------------------------------------------------------------

  DocId write_new(DocId id, const Document& doc) {
    const WriterLock g(*this);
    before_write();
    encode(doc);
    if (id != kNoId && docs_->contains(doc_key(id))) return kNoId;
    const DocumentView view = parsed(enc_);
    if (id == kNoId) {
      id = take_id();
    } else if (id >= next_id_) {
      next_id_ = id + 1;
      reserve_ids();
    }
    current_id_ = id;
    entries_for(view, id, new_);  // (refuses a key too long: nothing of the document written yet)
    add_entries();
    try {
      docs_->put(doc_key(id), enc_);
    } catch (...) {
      remove_entries(new_);  // best effort: what stays is stale, skipped by queries
      throw;
    }
    count_.fetch_add(1, std::memory_order_relaxed);
    return id;
  }

  bool write_update(DocId id, const Document* doc, const DocumentChange* change) {
    const WriterLock g(*this);
    before_write();
    std::string damage;
    switch (load(id, damage)) {
      case Loaded::absent:
        return false;
      case Loaded::dropped:
        throw Error(Errc::corrupt_file, "collection: document " + std::to_string(id) +
                                            " was damaged (its record fails its checksum): it was removed, nothing "
                                            "written (" + damage + ")");
      case Loaded::present:
        break;
    }
    const DocumentView before = parsed(old_);
    if (change != nullptr) {
      Document d = before.to_document();
      (*change)(d);
      encode(d);
    } else {
      encode(*doc);
    }
    const DocumentView after = parsed(enc_);
    current_id_ = id;
    entries_for(after, id, new_);
    entries_for(before, id, old_entries_);
    // New entries first, then the document, then the old entries: the
    // index never misses the document (collection.hpp).
    add_entries(&old_entries_);
    try {
      docs_->put(doc_key(id), enc_);
    } catch (...) {
      remove_entries(new_, &old_entries_);  // best effort, as in write_new
      throw;
    }
    remove_entries(old_entries_, &new_);
    return true;
  }

  bool write_remove(DocId id) {
    const WriterLock g(*this);
    before_write();
    std::string damage;
    const Loaded l = load(id, damage);
    if (l != Loaded::present) return l == Loaded::dropped;  // a damaged one is removed too
    const std::optional<DocumentView> before = DocumentView::parse(old_);
    if (!before) {
      // A record that is not a document (damage): it goes; entries that
      // led to it are stale, skipped by queries.
      docs_->remove(doc_key(id));
      count_.fetch_sub(1, std::memory_order_relaxed);
      return true;
    }
    current_id_ = id;
    entries_for(*before, id, old_entries_, false);
    docs_->remove(doc_key(id));
    count_.fetch_sub(1, std::memory_order_relaxed);
    remove_entries(old_entries_);
    return true;
  }

  // ---- indexes -------------------------------------------------------------------

  bool add_index(std::string_view field, IndexKind kind) {
    if (field.empty() || field.size() > 65535) {
      throw Error(Errc::invalid_argument, "collection: an index's field name must be 1 to 65,535 bytes");
    }
    if (kind != IndexKind::hash && kind != IndexKind::ordered) {
      throw Error(Errc::invalid_argument, "collection: an unknown IndexKind");
    }
    const WriterLock g(*this);
    before_write();
    if (find_slot(field, kind)) return false;
    auto slot = make_slot(IndexInfo{std::string(field), kind}, next_index_++);
    try {
      backfill(*slot);
    } catch (...) {
      // Its records go (its number may be used again after a reopen:
      // next_index_ was not saved); left ones go at the next rebuild.
      try {
        clear_records(*slot);
      } catch (...) {}  // (the first error goes on)
      throw;
    }
    {
      const std::unique_lock<std::shared_mutex> r(registry_);
      slots_.push_back(slot);
    }
    save_meta(false);
    return true;
  }

  bool remove_index(std::string_view field, IndexKind kind) {
    const WriterLock g(*this);
    before_write();
    std::shared_ptr<Slot> slot = find_slot(field, kind);
    if (!slot) return false;
    {
      const std::unique_lock<std::shared_mutex> r(registry_);
      std::erase(slots_, slot);
    }
    save_meta(false);
    slot->dropped.store(true, std::memory_order_relaxed);
    begin_change(*slot);
    clear_records(*slot);  // (a crash before it ends leaves records no index names: cleared at the next open)
    return true;
  }

  std::vector<IndexInfo> index_list() const {
    const std::shared_lock<std::shared_mutex> r(registry_);
    std::vector<IndexInfo> out;
    for (const auto& s : slots_) out.push_back(s->info);
    return out;
  }

  void rebuild_all() {
    const WriterLock g(*this);
    before_write();
    rebuild_locked();
  }

  /// The slot of (field, kind) (hash first, then ordered, when `any`).
  std::shared_ptr<Slot> find_slot(std::string_view field, IndexKind kind, bool any = false) const {
    const std::shared_lock<std::shared_mutex> r(registry_);
    std::shared_ptr<Slot> other;
    for (const auto& s : slots_) {
      if (s->info.field != field) continue;
      if (s->info.kind == kind) return s;
      if (any) other = s;
    }
    return other;
  }

  /// A reader met a stale entry: noted for the next write to remove (if
  /// it is still stale then). `entry`: the tree's key, or the bucket.
  void note_stale(const Slot& s, std::string_view entry, DocId id) const {
    const std::lock_guard<std::mutex> g(stale_mutex_);
    if (stale_.size() >= 1024) return;  // (the next queries note them again)
    stale_.push_back({s.number, std::string(entry), id});
    stale_waiting_.store(true, std::memory_order_relaxed);
  }

  // ---- lifecycle -----------------------------------------------------------------

  void sync_all() {
    const WriterLock g(*this);
    (void)docs();  // (closed: refused)
    indexes_->sync();
    docs_->sync();
  }

  void close_all() {
    const WriterLock g(*this);
    if (closed_) return;
    closed_ = true;
    if (!read_only_) {
      // An index a failed write left broken (or a reader found damaged)
      // is not trusted: the next open rebuilds it.
      bool broken = false;
      for (const auto& sl : slots_) broken = broken || sl->needs_rebuild();
      // The indexes, with this close's epoch, reach the disk before the
      // mark that trusts them.
      epoch_ = 0;
      if (!broken) {
        try {
          const std::uint64_t e = new_epoch();
          char b[8];
          write_le64(b, e);
          indexes_->put(epoch_key(), std::string_view(b, 8));
          epoch_ = e;
        } catch (const Error&) {
          broken = true;  // (not marked: rebuilt at the next open)
        }
      }
      index_records_ = indexes_->size();
      indexes_->close();
      save_meta(!broken);
    }
    docs_->close();
    indexes_.reset();
    docs_.reset();
  }

  mutable std::mutex writer_;

 private:
  struct Entries {
    std::vector<std::string> keys;  // per slot (slots_' order)
    std::vector<bool> has;
  };
  struct Stale {
    std::uint32_t number;
    std::string entry;
    DocId id;
  };

  static constexpr char kMetaKey[] = "\0collection";
  static constexpr std::string_view meta_key() noexcept { return {kMetaKey, sizeof kMetaKey - 1}; }
  static constexpr std::uint8_t kFormat = 0xC2, kFormatNoEpoch = 0xC1;
  static constexpr std::uint64_t kIdBlock = 4096;
  static constexpr std::size_t kMetaHeader = 42, kMetaHeaderNoEpoch = 34;
  // The epoch's key in the indexes store: index number 0, never an index's.
  static constexpr char kEpochKey[] = "\0\0\0\0epoch";
  static constexpr std::string_view epoch_key() noexcept { return {kEpochKey, sizeof kEpochKey - 1}; }

  static std::uint64_t new_epoch() {
    std::uint64_t e = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    try {
      std::random_device rd;
      e = e * 0x9E3779B97F4A7C15ull ^ static_cast<std::uint64_t>(rd()) << 32 ^ rd();
    } catch (...) {}  // (no random device: the clock alone)
    return e == 0 ? 1 : e;
  }

  static Options sub_options(const Options& o, const char* sub) {
    Options s = o;
    if (!o.path.empty()) s.path = o.path / sub;
    if (!o.name.empty()) s.name = o.name + "/" + sub;
    return s;
  }

  static DocumentView parsed(const std::string& bytes) {
    std::optional<DocumentView> v = DocumentView::parse(bytes);
    if (!v) throw Error(Errc::corrupt_file, "collection: a collection's record is not a whole document");
    return *v;
  }

  void open(Options options) {
    // Options that would act on the collection's own records (index
    // nodes, its record) are refused rather than applied to them.
    if (options.default_ttl.count() != 0) {
      throw Error(Errc::invalid_argument, "collection: Options::default_ttl does not apply to a collection (its index "
                                          "records would expire)");
    }
    if (options.on_removal) {
      throw Error(Errc::invalid_argument, "collection: Options::on_removal does not apply to a collection (it would "
                                          "hear of its index records)");
    }
    if (!options.path.empty()) std::filesystem::create_directories(options.path);
    read_only_ = options.read_only;
    docs_ = std::make_unique<Store>(sub_options(options, "documents"));
    indexes_ = std::make_unique<Store>(sub_options(options, "indexes"));
    std::string meta;
    bool clean = true;
    if (docs_->get(meta_key(), meta)) {
      clean = load_meta(meta);
    } else if (docs_->size() != 0) {
      throw Error(Errc::format_version, options.path.string() + ": holds records but no collection");
    } else {
      next_id_ = reserved_ = 1;
    }
    if (!clean) {
      if (read_only_) {
        throw Error(Errc::invalid_argument, "collection: the collection in " + options.path.string() +
                                                " was not closed cleanly: open it writable once to rebuild its "
                                                "indexes");
      }
      recount();
      rebuild_locked();
    }
    if (!read_only_) {
      save_meta(false);  // open: not clean until close() says so
      if (!options.path.empty() && options.durability != Durability::none) docs_->sync();
    }
  }

  /// Reads the collection's record; returns whether it says clean.
  bool load_meta(const std::string& m) {
    auto bad = [] {
      return Error(Errc::corrupt_file, "collection: a collection's own record is damaged");
    };
    const bool old = !m.empty() && static_cast<std::uint8_t>(m[0]) == kFormatNoEpoch;
    if (m.empty() || (static_cast<std::uint8_t>(m[0]) != kFormat && !old)) {
      throw Error(Errc::format_version, "collection: a collection of another format (its record begins with " +
                                           std::to_string(m.empty() ? 0 : static_cast<unsigned char>(m[0])) + ")");
    }
    const std::size_t header = old ? kMetaHeaderNoEpoch : kMetaHeader;
    if (m.size() < header) throw bad();
    bool clean = m[1] == 1 && !old;  // (an older record has no epoch: its indexes are rebuilt once)
    reserved_ = read_le64(m.data() + 2);
    next_id_ = reserved_;  // (a clean close records the next id itself)
    count_.store(read_le64(m.data() + 10), std::memory_order_relaxed);
    std::uint32_t n, count;
    std::memcpy(&n, m.data() + 18, 4);
    std::memcpy(&count, m.data() + 22, 4);
    next_index_ = n;
    if (clean && read_le64(m.data() + 26) != indexes_->size()) clean = false;
    if (clean) {  // the indexes store must hold this close's epoch (not an older copy's, nor none)
      std::string e;
      clean = indexes_->get(epoch_key(), e) && e.size() == 8 && read_le64(e.data()) == read_le64(m.data() + 34) &&
              read_le64(e.data()) != 0;
    }
    std::size_t pos = header;
    for (std::uint32_t i = 0; i < count; ++i) {
      if (m.size() - pos < 7) throw bad();
      std::uint32_t number;
      std::uint16_t len;
      std::memcpy(&number, m.data() + pos, 4);
      const auto kind = static_cast<IndexKind>(m[pos + 4]);
      std::memcpy(&len, m.data() + pos + 5, 2);
      pos += 7;
      if (m.size() - pos < len || (kind != IndexKind::hash && kind != IndexKind::ordered) || number == 0 ||
          number >= next_index_) {
        throw bad();
      }
      const std::string_view field(m.data() + pos, len);
      for (const auto& s : slots_) {  // (one number: shared records; one (field, kind): two answers)
        if (s->number == number || (s->info.kind == kind && s->info.field == field)) throw bad();
      }
      slots_.push_back(make_slot(IndexInfo{std::string(field), kind}, number));
      pos += len;
    }
    if (pos != m.size()) throw bad();
    return clean;
  }

  void save_meta(bool clean) {
    std::string m(kMetaHeader, '\0');
    m[0] = static_cast<char>(kFormat);
    m[1] = clean ? 1 : 0;
    write_le64(m.data() + 2, clean ? next_id_ : reserved_);
    write_le64(m.data() + 10, count_.load(std::memory_order_relaxed));
    std::memcpy(m.data() + 18, &next_index_, 4);
    const auto n = static_cast<std::uint32_t>(slots_.size());
    std::memcpy(m.data() + 22, &n, 4);
    write_le64(m.data() + 26, clean ? index_records_ : 0);
    write_le64(m.data() + 34, clean ? epoch_ : 0);
    for (const auto& s : slots_) {
      char h[7];
      std::memcpy(h, &s->number, 4);
      h[4] = static_cast<char>(s->info.kind);
      const auto len = static_cast<std::uint16_t>(s->info.field.size());
      std::memcpy(h + 5, &len, 2);
      m.append(h, 7);
      m.append(s->info.field);
    }
    docs_->put(meta_key(), m);
  }

  std::shared_ptr<Slot> make_slot(IndexInfo info, std::uint32_t number) {
    auto s = std::make_shared<Slot>();
    s->info = std::move(info);
    s->number = number;
    std::string prefix;
    prefix.push_back(static_cast<char>(number >> 24));
    prefix.push_back(static_cast<char>(number >> 16));
    prefix.push_back(static_cast<char>(number >> 8));
    prefix.push_back(static_cast<char>(number));
    if (s->info.kind == IndexKind::ordered) {
      s->tree = std::make_unique<OrderedTree>(*indexes_, prefix + 'o');
    } else {
      s->hash = std::make_unique<HashPostings>(*indexes_, prefix + 'h');
    }
    return s;
  }

  /// The next free id (one a document holds is passed over: a record
  /// whose counter lies, or ids given by the caller).
  DocId take_id() {
    while (next_id_ <= kMaxId && docs_->contains(doc_key(next_id_))) ++next_id_;
    if (next_id_ > kMaxId) throw Error(Errc::out_of_space, "collection: a collection ran out of document ids");
    const DocId id = next_id_++;
    reserve_ids();
    return id;
  }
  /// Ids below reserved_ are on disk as handed out: a crash never hands
  /// one out again.
  void reserve_ids() {
    if (next_id_ < reserved_) return;
    reserved_ = std::min(next_id_ + kIdBlock, kMaxId + 1);
    save_meta(false);
  }

  void encode(const Document& d) {
    enc_.resize(d.encoded_size());
    d.encode_to(std::span<std::byte>(reinterpret_cast<std::byte*>(enc_.data()), enc_.size()));
  }

  /// Each slot's entry for the document (has: the field is there).
  /// `check`: refuse (before anything is written) an ordered key too long.
  void entries_for(const DocumentView& d, DocId id, Entries& out, bool check = true) {
    out.keys.resize(slots_.size());
    out.has.assign(slots_.size(), false);
    for (std::size_t i = 0; i < slots_.size(); ++i) {
      const Slot& s = *slots_[i];
      const std::optional<ValueView> v = d.get(s.info.field);
      if (!v) continue;
      okey_.clear();
      append_ordered_key(*v, okey_);
      if (s.tree) {
        if (check && okey_.size() > kMaxOrderedKey) {
          throw Error(Errc::invalid_argument, "collection: field '" + s.info.field + "' holds a value whose ordered key is " +
                                                  std::to_string(okey_.size()) + " bytes: its ordered index takes " +
                                                  std::to_string(kMaxOrderedKey) + " at most");
        }
        out.keys[i].assign(okey_);
        append_be64(out.keys[i], id);
      } else {
        s.hash->bucket_key(okey_, out.keys[i]);
      }
      out.has[i] = true;
    }
  }

  /// Adds new_'s entries (those not also in `old`).
  void add_entries(const Entries* old = nullptr) {
    for (std::size_t i = 0; i < slots_.size(); ++i) {
      if (!new_.has[i]) continue;
      if (old != nullptr && old->has[i] && old->keys[i] == new_.keys[i]) continue;
      change(*slots_[i], [&](Slot& s) {
        if (s.tree) {
          s.tree->insert(new_.keys[i]);
        } else {
          s.hash->add(new_.keys[i], id_of_entry(i));
        }
      });
    }
  }
  /// Removes e's entries (those not also in `keep`).
  void remove_entries(const Entries& e, const Entries* keep = nullptr) {
    for (std::size_t i = 0; i < slots_.size(); ++i) {
      if (!e.has[i]) continue;
      if (keep != nullptr && keep->has[i] && keep->keys[i] == e.keys[i]) continue;
      change(*slots_[i], [&](Slot& s) {
        if (s.tree) {
          s.tree->erase(e.keys[i]);
        } else {
          s.hash->remove(e.keys[i], current_id_);
        }
      });
    }
  }
  DocId id_of_entry(std::size_t) const noexcept { return current_id_; }

  enum class Loaded { absent, present, dropped };
  /// Document id into old_ (present), or absent. One whose record fails
  /// its checksum (damage on disk) cannot be read: it is dropped
  /// (drop_damaged()), the store's message in `damage`.
  Loaded load(DocId id, std::string& damage) {
    try {
      return docs_->get(doc_key(id), old_) ? Loaded::present : Loaded::absent;
    } catch (const Error& e) {
      if (e.code() != Errc::corrupt_file) throw;
      damage = e.what();
      drop_damaged(id);
      return Loaded::dropped;
    }
  }
  /// A document record that fails its checksum leaves the store (whose
  /// writers drop a damaged record they meet; contains() throws if it is
  /// still there) and the count; entries that led to it are stale.
  void drop_damaged(DocId id) {
    (void)docs_->remove(doc_key(id));
    if (docs_->contains(doc_key(id))) {
      throw Error(Errc::corrupt_file, "collection: document " + std::to_string(id) + " is damaged, not removed");
    }
    if (count_.load(std::memory_order_relaxed) != 0) count_.fetch_sub(1, std::memory_order_relaxed);
  }

  /// One index change inside its version's bracket; a failure inside
  /// marks the index broken (before_write() rebuilds it).
  template <class F>
  void change(Slot& s, F&& f) {
    if (s.broken.load(std::memory_order_relaxed)) return;  // rebuilt whole later
    const SeqWriteScope w(s.version());
    try {
      f(s);
    } catch (...) {
      s.broken.store(true, std::memory_order_relaxed);
      throw;
    }
  }

  /// At the start of each write: rebuilds broken indexes, drops the stale
  /// entries readers noted that are still stale.
  void before_write() {
    if (closed_) throw Error(Errc::closed, "collection: a write to a closed collection");
    for (const auto& s : slots_) {
      if (s->needs_rebuild()) rebuild_slot(*s);
    }
    if (!stale_waiting_.load(std::memory_order_relaxed)) return;
    std::vector<Stale> todo;
    {
      const std::lock_guard<std::mutex> g(stale_mutex_);
      todo.swap(stale_);
      stale_waiting_.store(false, std::memory_order_relaxed);
    }
    for (const Stale& st : todo) {
      for (std::size_t i = 0; i < slots_.size(); ++i) {
        Slot& s = *slots_[i];
        if (s.number != st.number) continue;
        // Still stale: the document is gone, or its entry is another.
        bool stale = true;
        if (docs_->get(doc_key(st.id), old_)) {
          const DocumentView d = parsed(old_);
          current_id_ = st.id;
          entries_for(d, st.id, old_entries_, false);
          stale = !(old_entries_.has[i] && old_entries_.keys[i] == st.entry);
        }
        if (!stale) continue;
        current_id_ = st.id;
        change(s, [&](Slot& x) {
          if (x.tree) {
            x.tree->erase(st.entry);
          } else {
            x.hash->remove(st.entry, st.id);
          }
        });
      }
    }
  }

  void rebuild_locked() {
    // The whole indexes store goes (and with it what dropped indexes or a
    // crash left behind), then each index is filled again.
    for (const auto& s : slots_) begin_change(*s);
    indexes_->clear();
    for (const auto& s : slots_) {
      if (s->tree) s->tree->load();
      backfill(*s);
    }
  }

  void rebuild_slot(Slot& s) {
    begin_change(s);
    clear_records(s);
    if (s.tree) s.tree->load();
    backfill(s);
  }

  /// Before a rebuild or a drop removes the slot's records: broken first,
  /// then the version moved, so that a reader whose walk read anything
  /// written after this sees the flag (its stable() check's acquire
  /// fence pairs with begin_write()'s release fence) and waits.
  static void begin_change(Slot& s) {
    s.broken.store(true, std::memory_order_relaxed);
    s.version().begin_write();
    s.version().end_write();
  }

  /// Removes every record of the slot's index.
  void clear_records(Slot& s) {
    const std::string& prefix = s.tree ? s.tree->prefix() : s.hash->prefix();
    indexes_->for_each_key([&](std::string_view k) {
      if (k.substr(0, prefix.size()) == prefix) indexes_->remove(k);
    });
  }

  /// Fills the slot's index from every document (the slot is broken, or
  /// not yet published: no reader uses it meanwhile).
  void backfill(Slot& s) {
    s.broken.store(true, std::memory_order_relaxed);
    Entries one;
    std::vector<Slot*> only{&s};
    Cursor cursor;
    std::string key;
    while (!cursor.done()) {
      docs_->scan(cursor, 256, [&](std::string_view k, std::string_view v) {
        if (k.size() != 9 || k[0] != '\x01') return;
        const DocId id = read_be64(k.data() + 1);
        const std::optional<DocumentView> d = DocumentView::parse(v);
        if (!d) return;  // a damaged record indexes nothing (get() and for_each() report it; remove() drops it)
        const std::optional<ValueView> val = d->get(s.info.field);
        if (!val) return;
        okey_.clear();
        append_ordered_key(*val, okey_);
        const SeqWriteScope w(s.version());
        if (s.tree) {
          if (okey_.size() > kMaxOrderedKey) {
            throw Error(Errc::invalid_argument, "collection: document " + std::to_string(id) + "'s field '" +
                                                    s.info.field + "' is too long for an ordered index (" +
                                                    std::to_string(okey_.size()) + " bytes of key; at most " +
                                                    std::to_string(kMaxOrderedKey) + ")");
          }
          key.assign(okey_);
          append_be64(key, id);
          s.tree->insert(key);
        } else {
          s.hash->bucket_key(okey_, key);
          s.hash->add(key, id);
        }
      });
    }
    s.damaged.store(false, std::memory_order_relaxed);  // (set and read under the writer lock, which orders it)
    s.broken.store(false, std::memory_order_relaxed);
  }

  /// After an unclean close: the document count and the highest id.
  void recount() {
    std::uint64_t n = 0;
    DocId top = 0;
    docs_->for_each_key([&](std::string_view k) {
      if (k.size() != 9 || k[0] != '\x01') return;
      ++n;
      // (An id above kMaxId is no id this collection hands out: a damaged
      // key, which verify() reports; it does not use up the ids.)
      const DocId id = read_be64(k.data() + 1);
      if (id <= kMaxId) top = std::max(top, id);
    });
    count_.store(n, std::memory_order_relaxed);
    next_id_ = std::max(reserved_, top + 1);
    reserved_ = next_id_;
  }

 protected:
  std::unique_ptr<Store> docs_, indexes_;
  mutable std::shared_mutex registry_;  // slots_ for readers (writers change it under writer_ too)
  std::vector<std::shared_ptr<Slot>> slots_;
  mutable std::mutex stale_mutex_;
  mutable std::vector<Stale> stale_;
  mutable std::atomic<bool> stale_waiting_{false};

 private:
  std::atomic<std::uint64_t> count_{0};
  DocId next_id_ = 1, reserved_ = 1;
  std::uint32_t next_index_ = 1;
  bool read_only_ = false, closed_ = false;
  // The writer's scratch.
  std::string enc_, old_, okey_;
  Entries new_, old_entries_;
  DocId current_id_ = 0;
  std::uint64_t index_records_ = 0;  // the indexes store's, at close
  std::uint64_t epoch_ = 0;          // the epoch of the close (0: none)
};

}  // namespace offheap::detail
