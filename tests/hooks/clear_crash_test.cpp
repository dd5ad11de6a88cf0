// SPDX-License-Identifier: Apache-2.0
// A crash inside clear(), at every step of it, made deterministic: this
// binary is built with OFFHEAP_TESTING_CLEAR_HOOK, so Journal::reset() calls
// a hook after each of its steps (the clear mark stored, each chunk's end
// word set to 0, each chunk zeroed, the mark removed). A forked child fills
// a file-backed store over several chunks, removes keys so that (in
// Durability::periodic) their dead markers sit in chunk 0 while their older
// records, not yet freed, sit in later chunks, then clears it and is killed
// (SIGKILL) after step n, for n = 0, 1, ... until a clear runs to its end.
// After each kill the store must open empty, read-only and writable (the
// writable open finishes the clear), pass verify(), take writes and keep
// exactly those.
//
// Binary offheap_broken_clear_tests builds the same test with
// OFFHEAP_TESTING_NO_CLEAR_MARK (reset() stores no clear mark): there a kill
// between two end words must bring back a removed key (its marker's chunk
// emptied, its record's chunk not), which proves the test can fail.
#include <offheap/offheap.hpp>

#include "support/clear_store.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <csignal>
#include <cstdint>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace {

using offheap::Durability;
using offheap::Options;
using offheap::Store;
using namespace offheap_test::clear_store;

int g_kill_after = 0;  // the child's step at which it dies
int g_steps = 0;

/// The child: fills, removes, clears, and dies after step g_kill_after.
/// Exits 0 if the clear finished first, 2 on an unexpected error.
[[noreturn]] void child(const std::filesystem::path& dir, Durability d) {
  try {
    Store s(options(dir, d));
    for (int i = 0; i < kFillers; ++i) s.put(filler(i), value_of(filler(i)));
    for (int i = 0; i < kKeys; ++i) s.put(key(i), value_of(key(i)));
    // Room in chunk 0 (periodic frees the fillers' records, then their
    // markers, over later syncs), where the next dead markers then go.
    for (int i = 0; i < kFillers; ++i) s.remove(filler(i));
    for (int i = 0; i < 4; ++i) s.sync();
    // Removed keys whose older records (periodic: not freed before a
    // sync) lie in later chunks than their markers.
    for (int i = kRemovedFrom; i < kKeys; ++i) s.remove(key(i));
    offheap::detail::testing_clear_step = [](int) {
      if (g_steps++ == g_kill_after) ::raise(SIGKILL);
    };
    s.clear();
    offheap::detail::testing_clear_step = nullptr;
    ::_exit(0);
  } catch (...) {
    ::_exit(2);
  }
}

struct Outcome {
  bool killed = false;
  std::uint64_t size_read_only = 0, size_writable = 0;
  int present = 0;      // keys read back, of those alive before the clear
  int resurrected = 0;  // keys read back that were removed before it
  std::string verify;
  bool reopen_exact = false;
};

Outcome run_once(Durability d, int kill_after) {
  offheap_test::TempDir dir;
  const std::filesystem::path path = dir / "store";
  g_kill_after = kill_after;
  g_steps = 0;
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) child(path, d);
  int status = 0;
  ::waitpid(pid, &status, 0);
  Outcome out;
  out.killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
  if (!out.killed) {
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
  }
  auto count = [&](Store& s) {
    for (int i = 0; i < kKeys; ++i) {
      if (!s.contains(key(i))) continue;
      if (i < kRemovedFrom) {
        ++out.present;
      } else {
        ++out.resurrected;
      }
    }
  };
  {
    Options o = options(path, d);
    o.read_only = true;
    Store s(o);
    out.size_read_only = s.size();
  }
  {
    Store s(options(path, d));
    out.size_writable = s.size();
    count(s);
    out.verify = s.verify();
    for (int i = 0; i < 10; ++i) s.put(new_key(i), value_of(new_key(i)));
  }
  {
    Store s(options(path, d));
    out.reopen_exact = s.size() == out.size_writable + 10;
    for (int i = 0; i < 10; ++i) {
      out.reopen_exact = out.reopen_exact && s.get(new_key(i)) == value_of(new_key(i));
    }
  }
  return out;
}

}  // namespace

TEST_CASE("a crash at any step of clear() leaves the store empty, never half cleared", "[clear][crash]") {
  int resurrected = 0;
  for (const Durability d : {Durability::periodic, Durability::on_close, Durability::every_write}) {
    int kills = 0;
    for (int step = 0;; ++step) {
      const Outcome o = run_once(d, step);
      INFO(offheap::to_string(d) << ": killed after step " << step);
      resurrected += o.resurrected;
#if !defined(OFFHEAP_TESTING_NO_CLEAR_MARK)
      CHECK(o.size_read_only == 0);
      CHECK(o.size_writable == 0);
      CHECK(o.present == 0);
      CHECK(o.resurrected == 0);
#endif
      CHECK(o.verify == "");
      CHECK(o.reopen_exact);
      if (!o.killed) break;
      ++kills;
    }
    INFO(offheap::to_string(d));
    // The mark, an end word and a zeroing per chunk, the unmark: 12 KiB of
    // records span at least 3 chunks of 4 KiB.
    CHECK(kills >= 8);
  }
#if defined(OFFHEAP_TESTING_NO_CLEAR_MARK)
  // Without the mark, a kill between two end words leaves chunk 0 (the
  // markers) emptied and the later chunks (the records they outrank) not.
  CHECK(resurrected > 0);
#else
  CHECK(resurrected == 0);
#endif
}
