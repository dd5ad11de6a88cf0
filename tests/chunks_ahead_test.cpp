// SPDX-License-Identifier: Apache-2.0
// Journal chunks made ahead of need (journal.hpp's spare chunk), as a store
// runs them: the maintenance thread (or maintain()) makes the next chunk
// once the last one is half full, the append that needs a chunk takes that
// very file, a clean close removes a spare nobody took (the next open is
// clean, not a rebuild), and a writer killed with a spare on disk recovers
// every acknowledged key and writes into the spare's chunk afterwards.
#include <offheap/offheap.hpp>

#include "support/store_dir.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <thread>

namespace {

std::string key_of(std::uint64_t i) { return "key-" + std::to_string(i); }
std::string value_of(std::uint64_t i) { return std::string(900, static_cast<char>('a' + i % 26)) + std::to_string(i); }

offheap::Options small_chunks(const std::filesystem::path& p) {
  offheap::Options o;
  o.shards = 1;
  o.path = p;
  o.min_chunk_bytes = 64 * 1024;
  return o;
}

std::size_t chunk_files(const std::filesystem::path& dir) { return offheap_test::files_of(dir, ".chunk").size(); }

std::filesystem::path chunk_path(const std::filesystem::path& dir, std::uint64_t c) {
  const std::string digits = std::to_string(c);
  return dir / ("s0000-c" + std::string(5 - digits.size(), '0') + digits + ".chunk");
}

ino_t inode_of(const std::filesystem::path& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 ? st.st_ino : 0;
}

/// Whether the store keeps a spare: a chunk file more than it has chunks
/// (renamed to its chunk name), counted in mapped_bytes (kept under the
/// lock after its file is whole).
bool spare_kept(offheap::Store& s, const std::filesystem::path& dir) {
  const offheap::Stats st = s.stats();
  if (chunk_files(dir) != st.chunks + 1) return false;
  std::uint64_t files = 0;
  for (const std::string& n : offheap_test::files_of(dir, ".chunk")) files += std::filesystem::file_size(dir / n);
  return st.mapped_bytes >= files;
}

/// Puts keys from `next` on until the store keeps a spare, waiting for the
/// maintenance thread after each put; returns the next key.
std::uint64_t put_until_spare(offheap::Store& s, const std::filesystem::path& dir, std::uint64_t next) {
  for (;; ++next) {
    REQUIRE(next < 100'000);
    s.put(key_of(next), value_of(next));
    for (int wait = 0; wait < 50; ++wait) {
      if (spare_kept(s, dir)) return next + 1;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
}

}  // namespace

TEST_CASE("the maintenance thread makes the next chunk ahead, and the append takes that file",
          "[store][files][spare]") {
  offheap_test::TempDir dir;
  const offheap::Options o = small_chunks(dir / "store");
  std::uint64_t n = 0;
  std::uint64_t chunks = 0;
  {
    auto s = offheap::Store::open(o);
    n = put_until_spare(*s, o.path, 0);
    chunks = s->stats().chunks;
    const std::filesystem::path spare = chunk_path(o.path, chunks);
    const ino_t ino = inode_of(spare);
    REQUIRE(ino != 0);
    // Twice the last chunk's records, behind a header page of 4 KiB.
    CHECK(std::filesystem::file_size(spare) == 4096 + 2 * (std::filesystem::file_size(chunk_path(o.path, chunks - 1)) - 4096));
    while (s->stats().chunks == chunks) {
      s->put(key_of(n), value_of(n));
      ++n;
    }
    CHECK(inode_of(spare) == ino);  // the spare's file, not one made by the put
    // A spare again before the next chunk is needed, then a clean close.
    n = put_until_spare(*s, o.path, n);
    CHECK(chunk_files(o.path) == s->stats().chunks + 1);
    chunks = s->stats().chunks;
  }
  CHECK(chunk_files(o.path) == chunks);  // the spare went with the close
  auto s = offheap::Store::open(o);
  CHECK_FALSE(s->stats().rebuilt);     // a clean open: the saved state matched the chunks
  CHECK(s->stats().chunks == chunks);
  CHECK(s->size() == n);
  for (std::uint64_t i = 0; i < n; ++i) REQUIRE(s->get(key_of(i)) == value_of(i));
  CHECK(s->verify().empty());
}

TEST_CASE("maintain() makes the spare where no thread runs", "[store][files][spare]") {
  offheap_test::TempDir dir;
  offheap::Options o = small_chunks(dir / "store");
  o.background_maintenance = false;
  auto s = offheap::Store::open(o);
  std::uint64_t n = 0;
  for (; s->stats().chunks < 2; ++n) s->put(key_of(n), value_of(n));
  // Half of chunk 1 (128 KiB): about 70 records of 900 bytes.
  for (int i = 0; i < 80; ++i, ++n) s->put(key_of(n), value_of(n));
  CHECK(chunk_files(o.path) == 2);  // asked for, not made: nobody ran maintenance
  s->maintain();
  CHECK(chunk_files(o.path) == 3);
  const std::uint64_t mapped = s->stats().mapped_bytes;
  while (s->stats().chunks == 2) {
    s->put(key_of(n), value_of(n));
    ++n;
  }
  CHECK(chunk_files(o.path) == 3);
  // The spare (256 KiB) was counted when it was made, not again when taken
  // (other structures may have grown a page meanwhile).
  CHECK(s->stats().mapped_bytes < mapped + 64 * 1024);
  for (std::uint64_t i = 0; i < n; ++i) REQUIRE(s->get(key_of(i)) == value_of(i));
}

TEST_CASE("a writer killed with a spare chunk on disk recovers every key, then writes into it",
          "[store][files][spare][crash]") {
  offheap_test::TempDir dir;
  const offheap::Options o = small_chunks(dir / "store");
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(fds[0]);
    std::uint64_t n = 0;  // keys put
    {
      auto s = offheap::Store::open(o);
      const auto put_next = [&] {
        s->put(key_of(n), value_of(n));
        ++n;
        if (n > 100'000) ::_exit(1);
      };
      for (int round = 0; round < 3; ++round) {
        // Until the spare is on disk (put_until_spare's REQUIREs would
        // throw in the child: a plain loop), then into it but the last time.
        for (bool spare = false; !spare;) {
          put_next();
          for (int wait = 0; wait < 50 && !spare; ++wait) {
            spare = spare_kept(*s, o.path);
            if (!spare) std::this_thread::sleep_for(std::chrono::milliseconds(1));
          }
        }
        if (round < 2) {
          const std::uint64_t c = s->stats().chunks;
          while (s->stats().chunks == c) put_next();
        }
      }
      if (::write(fds[1], &n, sizeof n) != sizeof n) ::_exit(1);
      ::pause();  // killed here, with the spare on disk
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::uint64_t acked = 0;
  REQUIRE(::read(fds[0], &acked, sizeof acked) == sizeof acked);
  ::close(fds[0]);
  const std::size_t files = chunk_files(o.path);
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  REQUIRE(WIFSIGNALED(status));
  auto s = offheap::Store::open(o);
  CHECK(s->stats().rebuilt);
  CHECK(s->stats().chunks == files);  // the spare is an empty chunk now
  CHECK(s->size() == acked);
  for (std::uint64_t i = 0; i < acked; ++i) REQUIRE(s->get(key_of(i)) == value_of(i));
  // Writes go on into the spare's chunk.
  std::uint64_t n = acked;
  while (s->stats().chunks == files) {
    s->put(key_of(n), value_of(n));
    ++n;
    REQUIRE(n < acked + 100'000);
  }
  for (std::uint64_t i = 0; i < n; ++i) REQUIRE(s->get(key_of(i)) == value_of(i));
  CHECK(s->verify().empty());
}
