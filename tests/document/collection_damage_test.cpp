// SPDX-License-Identifier: Apache-2.0
// Collection (document/collection.hpp) after review: damage crafted in its
// files (a leaf chain that loops, duplicate index numbers, an older copy
// of the indexes, a posting page count at its largest, a document record
// that fails its checksum, an id out of range, a failed index creation)
// gets an error or is repaired, never a hang or a wrong answer; and
// readers beside rebuilds and drops of healthy indexes get no error.
#include <offheap/document/collection.hpp>

#include "support/doc_model.hpp"
#include "support/env.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using offheap::Collection;
using offheap::DocId;
using offheap::Document;
using offheap::DocumentView;
using offheap::Errc;
using offheap::IndexKind;
using offheap::Range;
using offheap::Store;
using offheap::Value;
using offheap_test::ids_of;
using offheap_test::range_ids;

namespace {

namespace fs = std::filesystem;

offheap::Options in_dir(const offheap_test::TempDir& dir, const char* sub = nullptr) {
  offheap::Options o;
  o.path = dir / "people";
  if (sub != nullptr) o.path /= sub;
  return o;
}

/// The records of index number n, kind k ('o', 'h'), in the indexes store.
std::string index_prefix(std::uint32_t n, char k) {
  std::string p;
  for (int s = 24; s >= 0; s -= 8) p.push_back(static_cast<char>(n >> s));
  p.push_back(k);
  return p;
}
std::string be64(std::uint64_t v) {
  std::string s;
  offheap::detail::append_be64(s, v);
  return s;
}

/// Ends the process (the test fails) if the scope is not left in time: a
/// hang is reported, not waited for.
class Watchdog {
 public:
  explicit Watchdog(int seconds) {
    t_ = std::thread([this, seconds] {
      std::unique_lock<std::mutex> l(m_);
      if (!cv_.wait_for(l, std::chrono::seconds(seconds), [&] { return done_; })) {
        std::fprintf(stderr, "collection_damage_test: hung (more than %d s)\n", seconds);
        std::_Exit(3);
      }
    });
  }
  ~Watchdog() {
    {
      const std::lock_guard<std::mutex> g(m_);
      done_ = true;
    }
    cv_.notify_all();
    t_.join();
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread t_;
};

template <class F>
Errc error_of(F&& f) {
  try {
    f();
  } catch (const offheap::Error& e) {
    return e.code();
  }
  return Errc{};
}

/// Flips one byte of `marker` in the files under `dir`; how many files had it.
int damage_bytes(const fs::path& dir, const std::string& marker) {
  int n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    const std::string all((std::istreambuf_iterator<char>(f)), {});
    const auto pos = all.find(marker);
    if (pos == std::string::npos) continue;
    f.seekp(static_cast<std::streamoff>(pos));
    f.put('Q');
    ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("An ordered index whose leaf chain reaches an empty leaf that links to itself is damage, whatever the bounds",
          "[document][collection][damage]") {
  offheap_test::TempDir dir;
  {
    Collection c(in_dir(dir));
    c.create_index("k", IndexKind::ordered);
    for (int i = 0; i < 400; ++i) c.insert(Document{{"k", i}});
  }
  {
    // The first leaf becomes empty, its next link itself (same record count).
    Store s(in_dir(dir, "indexes"));
    const std::string p = index_prefix(1, 'o');
    std::string meta, bytes;
    REQUIRE(s.get(p + be64(0), meta));
    std::uint64_t id = offheap::detail::read_le64(meta.data());
    offheap::detail::TreeNode n;
    for (;;) {
      REQUIRE(s.get(p + be64(id), bytes));
      REQUIRE(n.parse(bytes));
      if (n.leaf()) break;
      id = n.child(0);
    }
    std::string leaf(1, '\x01');
    leaf.append(2, '\0');
    char links[16];
    offheap::detail::write_le64(links, 0);
    offheap::detail::write_le64(links + 8, id);
    leaf.append(links, 16);
    s.put(p + be64(id), leaf);
  }
  const Watchdog w(60);
  Collection c(in_dir(dir));
  REQUIRE(error_of([&] { (void)range_ids(c, "k", Range{}); }) == Errc::corrupt_file);
  Range low;
  low.low = 0;
  REQUIRE(error_of([&] { (void)range_ids(c, "k", low); }) == Errc::corrupt_file);
  Range down;
  down.descending = true;
  REQUIRE(error_of([&] { (void)range_ids(c, "k", down); }) == Errc::corrupt_file);
  // verify() (under the writer lock) reports it.
  const std::vector<std::string> problems = c.verify();
  REQUIRE(problems.size() == 1);
  REQUIRE(problems[0].find("damaged") != std::string::npos);
  // A reader found it damaged: the next write rebuilds the index.
  c.insert(Document{{"k", 1000}});
  REQUIRE(range_ids(c, "k", Range{}).size() == 401);
  REQUIRE(c.verify().empty());
}

TEST_CASE("Readers beside rebuilds and drops of healthy indexes get exact answers or the drop's refusal, no damage",
          "[document][collection][damage]") {
  offheap::Options o;
  Collection c(o);
  const int n = offheap_test::kSanitized ? 1500 : 4000;
  for (int i = 0; i < n; ++i) c.insert(Document{{"k", i}, {"h", i % 2}});
  c.create_index("k", IndexKind::ordered);
  c.create_index("h", IndexKind::hash);
  std::atomic<bool> stop{false};
  std::mutex m;
  std::map<std::string, int> errors;  // other than the refusals of a dropped or missing index
  std::atomic<long> wrong{0}, answers{0};
  auto reader = [&](bool hash) {
    while (!stop.load()) {
      try {
        if (hash) {
          if (static_cast<int>(ids_of(c, "h", 0).size()) != (n + 1) / 2) ++wrong;
        } else {
          if (static_cast<int>(range_ids(c, "k", Range{}).size()) != n) ++wrong;
        }
        ++answers;
      } catch (const offheap::Error& e) {
        if (e.code() == Errc::invalid_argument) continue;  // dropped, or not there (yet)
        const std::lock_guard<std::mutex> g(m);
        ++errors[e.what()];
      }
    }
  };
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(offheap_test::kSanitized ? 6 : 4);
  {
    std::thread r1(reader, false), r2(reader, true), r3(reader, false);
    while (std::chrono::steady_clock::now() < until) {
      c.rebuild_indexes();
      c.drop_index("k", IndexKind::ordered);
      c.drop_index("h", IndexKind::hash);
      c.create_index("k", IndexKind::ordered);
      c.create_index("h", IndexKind::hash);
    }
    stop = true;
    r1.join();
    r2.join();
    r3.join();
  }
  for (const auto& [what, count] : errors) UNSCOPED_INFO(count << " x " << what);
  REQUIRE(errors.empty());
  REQUIRE(wrong == 0);
  REQUIRE(answers > 0);
  REQUIRE(c.verify().empty());
}

TEST_CASE("A collection record that gives two indexes one number, or one field and kind twice, is damage",
          "[document][collection][damage]") {
  const bool same_field = GENERATE(false, true);
  const IndexKind kind = GENERATE(IndexKind::hash, IndexKind::ordered);
  offheap_test::TempDir dir;
  {
    Collection c(in_dir(dir));
    c.create_index("a", kind);
    c.create_index("b", kind);
    c.insert(Document{{"a", 1}, {"b", 2}});
  }
  {
    Store s(in_dir(dir, "documents"));
    const std::string key("\0collection", 11);
    std::string meta;
    REQUIRE(s.get(key, meta));
    // Each index: number (u32), kind (u8), name length (u16), name.
    const std::string a("\x01\x00" "a", 3), b("\x01\x00" "b", 3);
    const std::size_t pa = meta.rfind(a), pb = meta.rfind(b);
    REQUIRE(pa != std::string::npos);
    REQUIRE(pb != std::string::npos);
    if (same_field) {
      meta[pb + 2] = 'a';
    } else {
      std::memcpy(meta.data() + pb - 5, meta.data() + pa - 5, 4);
    }
    s.put(key, meta);
  }
  REQUIRE(error_of([&] { Collection c(in_dir(dir)); }) == Errc::corrupt_file);
}

TEST_CASE("An older copy of the indexes with the same record count is not trusted at a clean open",
          "[document][collection][damage]") {
  offheap_test::TempDir dir;
  {
    Collection c(in_dir(dir));
    c.create_index("h", IndexKind::hash);
    c.create_index("k", IndexKind::ordered);
    c.insert(Document{{"h", 1}, {"k", 1}});
    c.insert(Document{{"h", 2}, {"k", 2}});
  }
  fs::copy(dir / "people" / "indexes", dir / "old", fs::copy_options::recursive);
  {
    Collection c(in_dir(dir));
    c.update(1, Document{{"h", 2}, {"k", 2}});
    c.insert(Document{{"h", 3}, {"k", 3}});  // still two buckets, one leaf: the same record count
  }
  fs::remove_all(dir / "people" / "indexes");
  fs::copy(dir / "old", dir / "people" / "indexes", fs::copy_options::recursive);
  {
    Collection c(in_dir(dir));
    REQUIRE(ids_of(c, "h", 2).size() == 2);
    REQUIRE(ids_of(c, "h", 3).size() == 1);
    Range two;
    two.low = two.high = 2;
    REQUIRE(range_ids(c, "k", two).size() == 2);
    REQUIRE(c.verify().empty());
  }
  // And a collection closed cleanly opens clean again (answers as before).
  Collection c(in_dir(dir));
  REQUIRE(ids_of(c, "h", 2).size() == 2);
  REQUIRE(c.verify().empty());
}

TEST_CASE("A hash bucket whose page count is at its largest is refused by an add, and rebuilt by the next write",
          "[document][collection][damage]") {
  offheap_test::TempDir dir;
  {
    Collection c(in_dir(dir));
    c.create_index("h", IndexKind::hash);
    for (int i = 0; i < 10; ++i) c.insert(Document{{"h", 1}});
  }
  {
    Store s(in_dir(dir, "indexes"));
    const std::string bucket = index_prefix(1, 'h') + offheap::ordered_key(Value(1));
    std::string p0;
    REQUIRE(s.get(bucket, p0));
    const std::uint32_t pages = 0xFFFFFFFFu;
    std::memcpy(p0.data(), &pages, 4);
    s.put(bucket, p0);
  }
  Collection c(in_dir(dir));
  // (No reader first: the add meets the count itself.)
  REQUIRE(error_of([&] { c.insert(Document{{"h", 1}}); }) == Errc::corrupt_file);
  c.insert(Document{{"h", 1}});  // rebuilds the index first
  REQUIRE(ids_of(c, "h", 1).size() == 11);
  REQUIRE(c.verify().empty());
}

TEST_CASE("A document whose record fails its checksum can be removed, and an update of it removes it",
          "[document][collection][damage]") {
  offheap_test::TempDir dir;
  {
    Collection c(in_dir(dir));
    c.create_index("h", IndexKind::hash);
    for (int i = 1; i <= 50; ++i) {
      c.insert(Document{{"h", 1}, {"m", i == 8 ? "MARKER_EIGHT_123" : i == 9 ? "MARKER_NINE_4567" : "plain"}});
    }
  }
  REQUIRE(damage_bytes(dir / "people" / "documents", "MARKER_EIGHT_123") == 1);
  REQUIRE(damage_bytes(dir / "people" / "documents", "MARKER_NINE_4567") == 1);
  Collection c(in_dir(dir));
  REQUIRE(error_of([&] { (void)c.get(8); }) == Errc::corrupt_file);
  REQUIRE(c.remove(8));
  REQUIRE(c.size() == 49);
  REQUIRE_FALSE(c.get(8).has_value());
  REQUIRE_FALSE(c.remove(8));
  REQUIRE(error_of([&] { (void)c.update(9, Document{{"h", 2}}); }) == Errc::corrupt_file);
  REQUIRE(c.size() == 48);
  REQUIRE_FALSE(c.get(9).has_value());
  REQUIRE_FALSE(c.update(9, Document{{"h", 2}}));
  // Their entries are stale: skipped.
  REQUIRE(ids_of(c, "h", 1).size() == 48);
  int visited = 0;
  c.for_each([&](DocId, const DocumentView&) { ++visited; });
  REQUIRE(visited == 48);
}

TEST_CASE("A failed index creation leaves no records, and an id out of range does not use up the ids",
          "[document][collection][damage]") {
  offheap_test::TempDir dir;
  {
    Collection c(in_dir(dir));
    for (int i = 0; i < 300; ++i) c.insert(Document{{"a", i}});
    c.insert(Document{{"a", std::string(600, 'x')}});  // too long for an ordered index
    REQUIRE(error_of([&] { c.create_index("a", IndexKind::ordered); }) == Errc::invalid_argument);
  }
  {
    Store s(in_dir(dir, "indexes"));
    std::size_t left = 0;
    const std::string p = index_prefix(1, 'o');
    s.for_each([&](std::string_view k, std::string_view) { left += k.substr(0, p.size()) == p ? 1 : 0; });
    REQUIRE(left == 0);
  }
  {
    // A document under an id past 2^62-1, and the collection not closed cleanly.
    Store s(in_dir(dir, "documents"));
    std::string doc, meta;
    REQUIRE(s.get(std::string(1, '\x01') + be64(1), doc));
    s.put(std::string(1, '\x01') + be64(std::uint64_t{1} << 63), doc);
    const std::string key("\0collection", 11);
    REQUIRE(s.get(key, meta));
    meta[1] = 0;
    s.put(key, meta);
  }
  Collection c(in_dir(dir));
  const DocId id = c.insert(Document{{"a", 1}});
  REQUIRE(id > 301);
  REQUIRE(id < 10000);
  bool reported = false;
  for (const std::string& p : c.verify()) reported = reported || p.find("out of range") != std::string::npos;
  REQUIRE(reported);
}
