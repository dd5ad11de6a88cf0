// SPDX-License-Identifier: Apache-2.0
// The hash index of a Collection (document/collection.hpp): per indexed
// value, the ids of the documents that hold it, in pages of store records
// under one key per value (its bucket), so that an equality query is one
// lookup (plus one per further page of 256 ids) and then one per match.
//
// Records (keys: the index's prefix, then the bucket):
//   bucket              page 0: page count (u32), 0 (u32), then ids (u64
//                       each, little-endian)
//   bucket + be32(p)    page p (1 .. count-1): ids
// The bucket is the value's ordered key (document/ordered_key.hpp, which
// is prefix-free: no bucket is a prefix of another, so page keys never
// meet another bucket), or, past 200 bytes, 0xFF and a 128-bit hash of it
// (an ordered key never begins with 0xFF). Two values that share a hashed
// bucket share its ids: every hit is checked against the document anyway.
//
// Adding appends to the last page (a new page when it is full); removing
// moves the last id into the hole (so pages stay full but the last) and
// drops an emptied last page: two record writes at most, after a search
// of the pages for the id. Writers are serialized by the collection and
// bracket their changes with the index's SeqVersion; readers copy the
// pages and trust the ids only if the version did not move (collect()).
#pragma once

#include <offheap/detail/index/hash.hpp>
#include <offheap/document/detail/ordered_tree.hpp>
#include <offheap/document/detail/seq_version.hpp>
#include <offheap/error.hpp>
#include <offheap/store.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace offheap::detail {

class HashPostings {
 public:
  static constexpr std::size_t kPageIds = 256;
  static constexpr std::size_t kHeader = 8;
  static constexpr std::size_t kMaxPlainBucket = 200;

  HashPostings(Store& store, std::string prefix) : store_(store), prefix_(std::move(prefix)) {}

  const std::string& prefix() const noexcept { return prefix_; }
  SeqVersion& version() noexcept { return version_; }

  /// The bucket record's key for a value whose ordered key is `okey`.
  void bucket_key(std::string_view okey, std::string& out) const {
    out.assign(prefix_);
    if (okey.size() <= kMaxPlainBucket) {
      out.append(okey);
      return;
    }
    out.push_back('\xFF');
    // The store's own key hash, under two fixed seeds (a bucket's key is
    // on disk: the seeds never change).
    static const SeededHash first(0x243F6A8885A308D3ull), second(0x13198A2E03707344ull);
    const std::uint64_t h1 = first(okey), h2 = second(okey);
    append_be64(out, h1);
    append_be64(out, h2);
  }

  // ---- writers (one at a time, inside the version's write bracket) ----------

  /// Adds id to the bucket. Throws Errc::corrupt_file for a bucket whose
  /// page 0 is malformed, whose page count is 0, or at its largest (one
  /// more page would wrap it), or whose last page is missing or malformed:
  /// an add there would leave ids no reader finds (the collection marks
  /// the index broken and rebuilds it).
  void add(std::string_view bucket, std::uint64_t id) {
    std::string& p0 = page_;
    if (!store_.get(bucket, p0)) {
      p0.assign(kHeader, '\0');
      set_pages(p0, 1);
      append_id(p0, id);
      store_.put(bucket, p0);
      return;
    }
    if (!page0_ok(p0)) damaged();
    const std::uint32_t pages = page_count(p0);
    if (pages == 0 || pages == ~std::uint32_t{0}) damaged();
    if (pages == 1) {
      if (ids_in(p0, 0) < kPageIds) {
        append_id(p0, id);
        store_.put(bucket, p0);
        return;
      }
    } else {
      page_key(bucket, pages - 1, key_);
      std::string& last = other_;
      if (!store_.get(key_, last) || last.size() % 8 != 0) damaged();
      if (ids_in(last, pages - 1) < kPageIds) {
        append_id(last, id);
        store_.put(key_, last);
        return;
      }
    }
    // A new page after the last, then the count that makes it seen.
    page_key(bucket, pages, key_);
    other_.clear();
    append_id(other_, id);
    store_.put(key_, other_);
    set_pages(p0, pages + 1);
    store_.put(bucket, p0);
  }

  /// Removes id from the bucket; false if it was not there.
  bool remove(std::string_view bucket, std::uint64_t id) {
    std::string& p0 = page_;
    if (!store_.get(bucket, p0)) return false;
    if (!page0_ok(p0) || page_count(p0) == 0) return false;  // (damaged: left to the rebuild add() or a query asks for)
    const std::uint32_t pages = page_count(p0);
    // Where the id is: page 0 in p0, any other in other_.
    std::uint32_t at_page = 0;
    std::size_t at = find_id(p0, 0, id);
    if (at == npos) {
      for (at_page = 1; at_page < pages; ++at_page) {
        page_key(bucket, at_page, key_);
        // A missing page: a count that lies (damage) ends the search.
        if (!store_.get(key_, other_)) return false;
        if ((at = find_id(other_, at_page, id)) != npos) break;
      }
      if (at == npos) return false;
    }
    const std::uint32_t last_page = pages - 1;
    if (last_page == 0) {
      // One page: the last id fills the hole.
      move_last_into(p0, at);
      if (ids_in(p0, 0) == 0) {
        store_.remove(bucket);
      } else {
        store_.put(bucket, p0);
      }
      return true;
    }
    std::string& holder = at_page == 0 ? p0 : other_;
    std::string& last = last_;
    std::string& last_key = last_key_;
    last.clear();
    page_key(bucket, last_page, last_key);
    if (at_page == last_page) {
      move_last_into(holder, at);
    } else {
      if (!store_.get(last_key, last) || ids_in(last, last_page) == 0) {
        return false;  // (a damaged bucket: the collection rebuilds it)
      }
      const std::uint64_t moved = read_le64(last.data() + last.size() - 8);
      write_le64(holder.data() + at, moved);
      last.resize(last.size() - 8);
      if (at_page == 0) {
        store_.put(bucket, p0);
      } else {
        page_key(bucket, at_page, key_);
        store_.put(key_, other_);
      }
    }
    std::string& tail = at_page == last_page ? holder : last;
    if (tail.empty()) {
      // The last page emptied: the count first (readers stop short of it).
      set_pages(p0, last_page);
      store_.put(bucket, p0);
      store_.remove(last_key);
    } else {
      store_.put(last_key, tail);
    }
    return true;
  }

  // ---- readers ---------------------------------------------------------------

  /// Copies the bucket's ids into `ids` (cleared first) from pages that
  /// the version says are of one state; false when writers kept changing
  /// them `max_restarts` times (the caller reads again under the writer
  /// lock). `buf` is scratch.
  bool collect(std::string_view bucket, std::vector<std::uint64_t>& ids, std::string& buf, std::string& key,
               unsigned max_restarts) const {
    for (unsigned restart = 0; restart <= max_restarts; ++restart) {
      ids.clear();
      const std::uint64_t v = version_.begin_read();
      if (!store_.get(bucket, buf)) {
        if (version_.stable(v)) return true;
        continue;
      }
      bool ok = buf.size() >= kHeader && (buf.size() - kHeader) % 8 == 0;
      const std::uint32_t pages = ok ? page_count(buf) : 0;
      ok = ok && pages != 0;  // (a count of 0 is damage: a bucket holds page 0 at least)
      if (ok) take_ids(buf, kHeader, ids);
      for (std::uint32_t p = 1; ok && p < pages; ++p) {
        page_key(bucket, p, key);
        ok = store_.get(key, buf) && buf.size() % 8 == 0;
        if (ok) take_ids(buf, 0, ids);
      }
      if (!version_.stable(v)) continue;
      if (!ok) {
        throw Error(Errc::corrupt_file, "collection: a hash index's bucket is damaged (rebuild_indexes() rebuilds "
                                        "the collection's indexes)");
      }
      return true;
    }
    return false;
  }

 private:
  static constexpr std::size_t npos = ~std::size_t{0};

  static bool page0_ok(const std::string& p0) noexcept {
    return p0.size() >= kHeader && (p0.size() - kHeader) % 8 == 0;
  }
  [[noreturn]] static void damaged() {
    throw Error(Errc::corrupt_file, "collection: a hash index's bucket is damaged (its page count or a page; the "
                                    "index is rebuilt at the next write)");
  }
  static std::uint32_t page_count(const std::string& p0) noexcept {
    std::uint32_t n;
    std::memcpy(&n, p0.data(), 4);
    return n;
  }
  static void set_pages(std::string& p0, std::uint32_t n) noexcept { std::memcpy(p0.data(), &n, 4); }
  static std::size_t ids_in(const std::string& page, std::uint32_t p) noexcept {
    return (page.size() - (p == 0 ? kHeader : 0)) / 8;
  }
  static void append_id(std::string& page, std::uint64_t id) {
    char b[8];
    write_le64(b, id);
    page.append(b, 8);
  }
  static std::size_t find_id(const std::string& page, std::uint32_t p, std::uint64_t id) noexcept {
    for (std::size_t at = p == 0 ? kHeader : 0; at + 8 <= page.size(); at += 8) {
      if (read_le64(page.data() + at) == id) return at;
    }
    return npos;
  }
  /// The page's last id goes to byte offset `at` and the page ends one id
  /// sooner.
  static void move_last_into(std::string& page, std::size_t at) noexcept {
    std::memcpy(page.data() + at, page.data() + page.size() - 8, 8);
    page.resize(page.size() - 8);
  }
  static void take_ids(const std::string& page, std::size_t from, std::vector<std::uint64_t>& ids) {
    for (std::size_t at = from; at + 8 <= page.size(); at += 8) ids.push_back(read_le64(page.data() + at));
  }
  static void page_key(std::string_view bucket, std::uint32_t p, std::string& out) {
    out.assign(bucket);
    const char b[4] = {static_cast<char>(p >> 24), static_cast<char>(p >> 16), static_cast<char>(p >> 8),
                       static_cast<char>(p)};
    out.append(b, 4);
  }

  Store& store_;
  const std::string prefix_;
  SeqVersion version_;
  std::string page_, other_, key_, last_, last_key_;  // the writer's scratch
};

}  // namespace offheap::detail
