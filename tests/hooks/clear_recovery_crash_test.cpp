// SPDX-License-Identifier: Apache-2.0
// Review coverage (review11): a clear() killed after step n, then the
// recovery that finishes it killed after step m of its own reset(), then a
// further open. The store must open empty, pass verify(), take writes and
// keep exactly those. clear_crash_test.cpp never kills the recovery.
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

int g_kill = 0;
int g_step = 0;

/// Runs fn in a child killed after step `kill` of reset(); true if killed.
template <class F>
bool run_killed(int kill, F&& fn) {
  g_kill = kill;
  g_step = 0;
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    try {
      offheap::detail::testing_clear_step = [](int) {
        if (g_step++ == g_kill) ::raise(SIGKILL);
      };
      fn();
      offheap::detail::testing_clear_step = nullptr;
      ::_exit(0);
    } catch (...) {
      ::_exit(2);
    }
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) return true;
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  return false;
}

}  // namespace

TEST_CASE("review11: a crash inside the recovery that finishes a clear, then another open",
          "[clear][crash]") {
  for (const Durability d : {Durability::periodic, Durability::every_write}) {
    for (const int n : {1, 3, 6}) {
      int recovery_kills = 0;
      for (int m = 0;; ++m) {
        INFO(offheap::to_string(d) << ": clear killed after step " << n
                                   << ", recovery after step " << m);
        offheap_test::TempDir dir;
        const std::filesystem::path path = dir / "store";
        const bool clear_killed = run_killed(n, [&] {
          Store s(options(path, d));
          for (int i = 0; i < kKeys; ++i) s.put(key(i), value_of(key(i)));
          for (int i = kRemovedFrom; i < kKeys; ++i) s.remove(key(i));
          s.clear();
        });
        REQUIRE(clear_killed);
        const bool recovery_killed = run_killed(m, [&] { Store s(options(path, d)); });
        {
          Options o = options(path, d);
          o.read_only = true;
          Store s(o);
          CHECK(s.size() == 0);
        }
        {
          Store s(options(path, d));
          CHECK(s.size() == 0);
          CHECK(s.verify() == "");
          for (int i = 0; i < 10; ++i) s.put(new_key(i), "x");
        }
        {
          Store s(options(path, d));
          CHECK(s.size() == 10);
        }
        if (!recovery_killed) break;
        ++recovery_kills;
      }
      CHECK(recovery_kills >= 8);
    }
  }
}
