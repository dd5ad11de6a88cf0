// SPDX-License-Identifier: Apache-2.0
// The spare chunk (journal.hpp, chunk_file.hpp): the next chunk made ahead
// of need with no lock held, handed over under the lock, taken by the append
// that needs it; and the races with the writer making the same chunk
// itself: whichever file holds the chunk's name at the end is the one the
// journal maps, and no temporary file is left.
#include <offheap/detail/journal/journal.hpp>

#include "support/store_name.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

using offheap::detail::FileBacking;
using offheap::detail::Journal;
using offheap::detail::JournalConfig;
using offheap::detail::Location;

namespace {
const offheap::detail::StoreName& kName = offheap_test::store_name("spare chunk test");
constexpr std::uint64_t kMin = 64 * 1024;

auto no_leftover() {
  return [](Location, std::byte*, std::uint64_t) {};
}

/// A file-backed journal in a fresh directory.
struct FileJournal {
  offheap_test::TempDir dir;
  FileBacking files;
  JournalConfig config;
  std::unique_ptr<Journal> j;
  FileJournal() {
    files.dir_fd = ::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    REQUIRE(files.dir_fd >= 0);
    files.dir_path = dir.path().string();
    files.store_id = 0x5EED;
    files.sync_new_files = false;
    config.files = &files;
    config.shard = 3;
    j = std::make_unique<Journal>(config, kName);
  }
  ~FileJournal() {
    j.reset();
    ::close(files.dir_fd);
  }
  std::filesystem::path chunk_path(std::uint32_t c) const {
    return dir.path() / offheap::detail::format::chunk_file_name(config.shard, c);
  }
  /// The inode of chunk c's file (0: none).
  ino_t inode(std::uint32_t c) const {
    struct stat st {};
    return ::stat(chunk_path(c).c_str(), &st) == 0 ? st.st_ino : 0;
  }
  /// Files in the directory whose names end in ".tmp".
  int temporaries() const {
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
      const std::string name = e.path().filename().string();
      n += name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0;
    }
    return n;
  }
  int chunk_files() const {
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
      n += e.path().extension() == ".chunk";
    }
    return n;
  }
};

/// Appends records of `bytes` until the journal asks for a spare; returns
/// how many it appended.
int append_until_request(Journal& j, std::uint64_t bytes) {
  int n = 0;
  do {
    j.append(bytes, no_leftover());
    ++n;
    REQUIRE(n < 1'000'000);
  } while (!j.take_spare_request());
  return n;
}

/// Appends until the journal asks for a spare, then makes it (not kept).
struct Made {
  Journal::SparePlan plan;
  std::byte* base;
};
Made make_requested_spare(Journal& j) {
  append_until_request(j, 1024);
  const Journal::SparePlan plan = j.plan_spare();
  std::byte* base = j.make_spare(plan);
  REQUIRE(base != nullptr);
  return {plan, base};
}
}  // namespace

TEST_CASE("an append asks for a spare once the last chunk is half full, once", "[journal][spare]") {
  Journal j(JournalConfig{}, kName);
  CHECK_FALSE(j.take_spare_request());               // no chunk yet
  const int n = append_until_request(j, 1024);
  CHECK(n == 32);                                    // 32 KiB of a 64 KiB chunk
  CHECK(j.tail_offset() == kMin / 2);
  j.append(1024, no_leftover());
  CHECK_FALSE(j.take_spare_request());               // said once
  const Journal::SparePlan plan = j.plan_spare();
  CHECK(plan.chunk == 1);
  CHECK(plan.size == 2 * kMin);
}

TEST_CASE("an anonymous spare is taken by the append that needs a chunk", "[journal][spare]") {
  Journal j(JournalConfig{}, kName);
  const auto [plan, base] = make_requested_spare(j);
  REQUIRE(j.keep_spare(plan, base));
  CHECK(j.spare_bytes() == 2 * kMin);
  CHECK(j.mapped_bytes() == 3 * kMin);               // counted once kept
  CHECK(j.plan_spare().size == 0);                   // one at a time
  while (j.chunks() == 1) j.append(1024, no_leftover());
  CHECK(j.chunk_start(1) == base);                   // the spare, not a new mapping
  CHECK(j.chunk_size(1) == 2 * kMin);
  CHECK(j.spare_bytes() == 0);
  CHECK(j.mapped_bytes() == 3 * kMin);               // not counted twice
  // The next one is asked for at half of chunk 1.
  CHECK(append_until_request(j, 1024) == static_cast<int>(kMin / 1024) - 1);
}

TEST_CASE("a spare smaller than the record that needs a chunk is dropped", "[journal][spare]") {
  FileJournal f;
  Journal& j = *f.j;
  const auto [plan, base] = make_requested_spare(j);
  REQUIRE(j.keep_spare(plan, base));
  CHECK(f.chunk_files() == 2);                       // chunk 0 and the spare under its name
  CHECK(std::filesystem::file_size(f.chunk_path(1)) == 4096 + 2 * kMin);
  j.append(512 * 1024, no_leftover());               // larger than the spare's 128 KiB
  CHECK(j.chunks() == 2);
  CHECK(j.chunk_size(1) == 512 * 1024);
  CHECK(j.spare_bytes() == 0);
  // The writer's file under the name (its size; the inode number may be reused).
  CHECK(std::filesystem::file_size(f.chunk_path(1)) == 4096 + 512 * 1024);
  CHECK(f.chunk_files() == 2);
  CHECK(f.temporaries() == 0);
  CHECK(j.mapped_bytes() == 2 * 4096 + kMin + 512 * 1024);
}

TEST_CASE("a file spare is kept under its chunk name and taken whole", "[journal][spare]") {
  FileJournal f;
  Journal& j = *f.j;
  const auto [plan, base] = make_requested_spare(j);
  CHECK(f.temporaries() == 0);
  const ino_t spare = f.inode(1);
  CHECK(spare != 0);
  CHECK(std::filesystem::file_size(f.chunk_path(1)) == 4096 + 2 * kMin);
  REQUIRE(j.keep_spare(plan, base));
  while (j.chunks() == 1) j.append(1024, no_leftover());
  CHECK(f.inode(1) == spare);                        // taken, not made again
  CHECK(j.chunk_start(1) == base);
}

TEST_CASE("the writer makes the chunk first: the spare is refused, the writer's file stays", "[journal][spare]") {
  FileJournal f;
  Journal& j = *f.j;
  append_until_request(j, 1024);
  const Journal::SparePlan plan = j.plan_spare();
  SECTION("the spare's file was renamed first: the writer's replaces it") {
    std::byte* base = j.make_spare(plan);
    REQUIRE(base != nullptr);
    const ino_t spare = f.inode(1);
    j.append(kMin, no_leftover());                   // a chunk needed before the spare is kept
    REQUIRE(j.chunks() == 2);
    const ino_t writers = f.inode(1);
    CHECK(writers != spare);                         // (the spare's file is still open: a new inode)
    CHECK_FALSE(j.keep_spare(plan, base));           // the journal moved on
    j.drop_spare(plan, base);
    CHECK(f.inode(1) == writers);                    // not unlinked by the drop
  }
  SECTION("the writer's file came first: the spare's rename refuses to replace it") {
    j.append(kMin, no_leftover());
    REQUIRE(j.chunks() == 2);
    const ino_t writers = f.inode(1);
    CHECK(j.make_spare(plan) == nullptr);
    CHECK(f.inode(1) == writers);
  }
  CHECK(f.temporaries() == 0);
  CHECK(f.chunk_files() == 2);
  // Records written through the journal's mapping reach the file under the name.
  const Location l = j.append(64, no_leftover());
  REQUIRE(l.chunk() == 1);
  std::memset(j.at(l), 0xAB, 64);
  REQUIRE(j.sync_chunk(1) == 0);
  std::FILE* file = std::fopen(f.chunk_path(1).c_str(), "rb");
  REQUIRE(file != nullptr);
  std::fseek(file, static_cast<long>(4096 + l.offset()), SEEK_SET);
  unsigned char b[64];
  REQUIRE(std::fread(b, 1, 64, file) == 64);
  std::fclose(file);
  for (unsigned char c : b) CHECK(c == 0xAB);
}

TEST_CASE("a kept spare goes with its file at a close, and none is kept after", "[journal][spare]") {
  FileJournal f;
  Journal& j = *f.j;
  const auto [plan, base] = make_requested_spare(j);
  REQUIRE(j.keep_spare(plan, base));
  CHECK(f.chunk_files() == 2);
  j.close_spares();
  CHECK(f.chunk_files() == 1);
  CHECK(j.spare_bytes() == 0);
  CHECK(j.mapped_bytes() == 4096 + kMin);
  CHECK(j.chunks() == 1);
  CHECK(j.plan_spare().size == 0);
}

TEST_CASE("a spare made but never kept is removed at a close too", "[journal][spare]") {
  FileJournal f;
  Journal& j = *f.j;
  const auto [plan, base] = make_requested_spare(j);
  j.close_spares();                                  // e.g. close() between make and keep
  CHECK_FALSE(j.keep_spare(plan, base));
  j.drop_spare(plan, base);
  CHECK(f.chunk_files() == 1);
  CHECK(f.temporaries() == 0);
}

TEST_CASE("a spare is refused when the writer tried to make that chunk meanwhile, and failed",
          "[journal][spare]") {
  FileJournal f;
  Journal& j = *f.j;
  const auto [plan, base] = make_requested_spare(j);
  // The writer's own attempt fails (its file may not grow past 96 KiB):
  // such an attempt may have replaced the spare's file and removed its
  // own, so the spare is not kept, though the journal is still at chunk 1.
  struct rlimit old {};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &old) == 0);
  void (*old_handler)(int) = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old;
  small.rlim_cur = 96 * 1024;
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
  bool threw = false;
  try {
    j.append(kMin, no_leftover());                   // needs chunk 1: the writer makes it
  } catch (const offheap::Error&) {
    threw = true;
  }
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &old) == 0);
  std::signal(SIGXFSZ, old_handler);
  REQUIRE(threw);
  CHECK(j.chunks() == 1);
  CHECK_FALSE(j.keep_spare(plan, base));
  j.drop_spare(plan, base);
  // The writer then makes chunk 1 itself; the journal and the directory agree.
  j.append(kMin, no_leftover());
  CHECK(j.chunks() == 2);
  CHECK(f.chunk_files() == 2);
  CHECK(f.temporaries() == 0);
}

TEST_CASE("one spare maker at a time: a second one's temporary name is refused", "[journal][spare]") {
  FileJournal f;
  Journal& j = *f.j;
  append_until_request(j, 1024);
  const Journal::SparePlan plan = j.plan_spare();
  // A temporary file of another maker under the spare's name.
  const std::string tmp = f.chunk_path(1).string() + ".spare.tmp";
  std::FILE* other = std::fopen(tmp.c_str(), "wb");
  REQUIRE(other != nullptr);
  std::fclose(other);
  CHECK(j.make_spare(plan) == nullptr);              // O_EXCL: not truncated, not used
  CHECK(std::filesystem::exists(tmp));               // and not removed: it is the other's
  CHECK(f.chunk_files() == 1);
}

TEST_CASE("no spare under a memory limit", "[journal][spare]") {
  static const std::string text = "spare chunk test, limited";
  static offheap::detail::StoreName limited(text, std::uint64_t{64} << 20);
  Journal j(JournalConfig{}, limited);
  for (int i = 0; i < 64; ++i) {
    j.append(1024, no_leftover());
    CHECK_FALSE(j.take_spare_request());
  }
  CHECK(j.plan_spare().size == 0);
}
