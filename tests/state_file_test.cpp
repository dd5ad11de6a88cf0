// SPDX-License-Identifier: Apache-2.0
// A state file is checked before it is trusted, also when its checksums are
// right: a file can be damaged and then "repaired" by anything that
// recomputes them, or written by another program. Two crafted files, each
// with valid checksums: an index whose control bytes hold no empty slot
// (every probe for a missing key would loop forever), and a header whose
// index offset makes offset + size wrap around. Both must send the open to
// a rebuild, with every record.
#include <offheap/offheap.hpp>
#include <offheap/detail/files/format.hpp>
#include <offheap/detail/index/hash.hpp>
#include <offheap/detail/index/index.hpp>
#include <offheap/detail/journal/free_lists.hpp>

#include "support/durable_image.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <csignal>
#include <cstdint>
#include <cstring>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

namespace fs = std::filesystem;
namespace fmt = offheap::detail::format;
using offheap::detail::IndexTable;
using offheap_test::TempDir;

namespace {

offheap::Options opts(const fs::path& dir) {
  offheap::Options o;
  o.path = dir;
  o.shards = 1;
  o.background_maintenance = false;
  return o;
}

/// The state file's table checksum, as the format defines it.
std::uint64_t body_hash(const std::string& file, const fmt::StateHeader& h) {
  using offheap::detail::mix64;
  const auto* free_table = reinterpret_cast<const std::uint64_t*>(file.data() + h.free_table_offset);
  const auto* index = reinterpret_cast<const std::uint64_t*>(file.data() + h.index_offset);
  const std::uint64_t a = fmt::hash64(free_table, h.free_table_bytes / 8);
  const std::uint64_t b = fmt::hash64(index, sizeof(IndexTable) / 8);
  const std::uint64_t c =
      fmt::hash64(index + sizeof(IndexTable) / 8, (h.index_bytes - sizeof(IndexTable)) / 8);
  return mix64(a ^ mix64(b ^ mix64(c)));
}

/// A clean store of 20 keys in one shard; returns its state file's bytes.
std::string clean_store(const fs::path& dir) {
  {
    offheap::Store s(opts(dir));
    for (int i = 0; i < 20; ++i) s.put("key-" + std::to_string(i), "value-" + std::to_string(i));
  }
  return offheap_test::read_dir_files(dir).at(fmt::state_file_name(0));
}

void write_state(const fs::path& dir, const std::string& bytes) {
  offheap_test::FileImages files = offheap_test::read_dir_files(dir);
  files[fmt::state_file_name(0)] = bytes;
  offheap_test::write_dir_files(dir, files);
}

/// In a child (a hang is reported, not suffered): opens the store, checks
/// every key and a missing one. "" or what went wrong.
std::string open_and_read_in_child(const fs::path& dir) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    ::alarm(10);
    std::string result;
    try {
      offheap::Store s(opts(dir));
      if (!s.stats().rebuilt) result += "not rebuilt; ";
      for (int i = 0; i < 20; ++i) {
        if (s.get("key-" + std::to_string(i)) != "value-" + std::to_string(i)) result += "wrong value; ";
      }
      if (s.contains("missing")) result += "a missing key found; ";
      if (!s.verify().empty()) result += "verify: " + s.verify();
    } catch (const std::exception& e) {
      result += std::string("threw: ") + e.what();
    }
    if (result.empty()) result = "ok";
    (void)!::write(fds[1], result.data(), result.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string out;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) {
    return WTERMSIG(status) == SIGALRM ? "hung (killed after 10 s)"
                                       : "died of signal " + std::to_string(WTERMSIG(status));
  }
  return out == "ok" ? "" : out;
}

}  // namespace

TEST_CASE("a state file whose index has no empty slot is not trusted", "[files][state]") {
  TempDir tmp;
  const fs::path dir = tmp / "store";
  std::string file = clean_store(dir);
  fmt::StateHeader h{};
  std::memcpy(&h, file.data(), sizeof h);
  REQUIRE(h.index_full == 20);
  // Every empty control byte becomes a tombstone; the header's counts (and
  // so its load check) stay as they were; both checksums are made to match.
  char* ctrl = file.data() + h.index_offset + sizeof(IndexTable);
  std::size_t changed = 0;
  for (std::uint64_t i = 0; i < h.index_capacity; ++i) {
    if (ctrl[i] == 0) {
      ctrl[i] = 1;
      ++changed;
    }
  }
  REQUIRE(changed > 0);
  h.body_hash = body_hash(file, h);
  fmt::seal(h);
  std::memcpy(file.data(), &h, sizeof h);
  write_state(dir, file);
  CHECK(open_and_read_in_child(dir) == "");
}

TEST_CASE("a state file whose offsets wrap around is not trusted", "[files][state]") {
  TempDir tmp;
  const fs::path dir = tmp / "store";
  std::string file = clean_store(dir);
  fmt::StateHeader h{};
  std::memcpy(&h, file.data(), sizeof h);
  // index_offset + index_bytes wraps to a value below the file's size.
  h.index_offset = ~std::uint64_t{0} - 4095;  // page-aligned, past the free table
  fmt::seal(h);
  std::memcpy(file.data(), &h, sizeof h);
  write_state(dir, file);
  CHECK(open_and_read_in_child(dir) == "");
}
