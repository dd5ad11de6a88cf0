// SPDX-License-Identifier: Apache-2.0
// Process-crash torture: a child process opens a file-backed store and
// writes, overwrites and removes, reporting each operation over a pipe
// before it starts and after it returns; the parent kills it with SIGKILL at
// a random moment (sometimes while it is still opening, i.e. recovering from
// the previous kill), reopens the store and checks every key against the
// acknowledged history. Only an operation in flight may go either way.
//
// OFFHEAP_CRASH_CYCLES sets the number of kills (default 100; .ci/run: 300).
#include <offheap/offheap.hpp>

#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

using offheap::Durability;
using offheap::Options;
using offheap::Store;
using offheap_test::TempDir;

namespace {

constexpr std::uint32_t kKeys = 400;

enum Op : std::uint8_t { put, remove, put_if_absent, replace, clear, sync };
enum Phase : std::uint8_t { before = 1, after = 2 };

struct Message {
  std::uint8_t phase;
  std::uint8_t op;
  std::uint8_t result;
  std::uint8_t pad;
  std::uint32_t key;
  std::uint64_t seq;
};
static_assert(sizeof(Message) == 16);

std::string key_of(std::uint32_t k) { return "key-" + std::to_string(k); }

/// The value of write number `seq` to key k: unique, of varied length (a
/// few bytes to 40 KiB), so that records of every size are freed, split
/// and merged.
std::string value_of(std::uint32_t k, std::uint64_t seq) {
  std::string v = "s" + std::to_string(seq) + "-k" + std::to_string(k) + "-";
  const std::uint64_t len = seq % 50 == 0 ? 20000 + seq % 20000 : (seq * 37) % 700;
  v.append(len, static_cast<char>('a' + seq % 26));
  return v;
}

using State = std::optional<std::string>;  // absent or a value

Options store_options(const std::filesystem::path& dir, Durability d) {
  Options o;
  o.path = dir;
  o.shards = 4;
  o.min_chunk_bytes = 4096;
  o.max_chunk_bytes = 256 * 1024;
  o.durability = d;
  o.sync_interval = std::chrono::milliseconds(3);
  return o;
}

[[noreturn]] void child(const std::filesystem::path& dir, Durability d, std::uint64_t seed,
                        std::uint64_t first_seq, int fd) {
  try {
    Store s(store_options(dir, d));
    std::mt19937_64 rng(seed);
    for (std::uint64_t seq = first_seq;; ++seq) {
      Message m{};
      const std::uint64_t r = rng() % 1000;
      m.op = r < 550 ? put : r < 800 ? remove : r < 880 ? put_if_absent : r < 990 ? replace
             : r < 999 ? sync : clear;
      m.key = static_cast<std::uint32_t>(rng() % kKeys);
      m.seq = seq;
      m.phase = before;
      if (::write(fd, &m, sizeof m) != sizeof m) ::_exit(3);
      const std::string k = key_of(m.key);
      switch (m.op) {
        case put: s.put(k, value_of(m.key, seq)); break;
        case remove: m.result = s.remove(k); break;
        case put_if_absent: m.result = s.put_if_absent(k, value_of(m.key, seq)); break;
        case replace: m.result = s.replace(k, value_of(m.key, seq)); break;
        case clear: s.clear(); break;
        case sync: s.sync(); break;
      }
      m.phase = after;
      if (::write(fd, &m, sizeof m) != sizeof m) ::_exit(3);
    }
  } catch (const std::exception& e) {
    std::cerr << "crash_test child: " << e.what() << "\n";
    ::_exit(4);
  }
}

/// What each key may hold: a set of states (more than one after an
/// operation whose outcome the parent did not see).
struct Model {
  std::vector<std::set<State>> keys = std::vector<std::set<State>>(kKeys, {State{}});

  void acknowledged(const Message& m) {
    std::set<State>& s = keys[m.key];
    const State v = value_of(m.key, m.seq);
    switch (m.op) {
      case put: s = {v}; break;
      case remove: s = {State{}}; break;
      case put_if_absent:
        if (m.result) {
          s = {v};
        } else {
          s.erase(State{});
        }
        break;
      case replace:
        if (m.result) {
          s = {v};
        } else {
          s = {State{}};
        }
        break;
      case clear:
        for (auto& k : keys) k = {State{}};
        break;
      case sync: break;
    }
  }
  void in_flight(const Message& m) {
    std::set<State>& s = keys[m.key];
    const State v = value_of(m.key, m.seq);
    switch (m.op) {
      case put: s.insert(v); break;
      case remove: s.insert(State{}); break;
      case put_if_absent:
        if (s.count(State{})) s.insert(v);
        break;
      case replace:
        if (s.size() > s.count(State{})) s.insert(v);
        break;
      case clear:
        for (auto& k : keys) k.insert(State{});
        break;
      case sync: break;
    }
  }
};

}  // namespace

TEST_CASE("SIGKILL at any moment loses no acknowledged write and resurrects no removal",
          "[files][crash]") {
  const char* env = std::getenv("OFFHEAP_CRASH_CYCLES");
  const int cycles = env != nullptr ? std::atoi(env) : 100;
  const std::uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  TempDir tmp;
  const std::filesystem::path dir = tmp / "store";
  const Durability modes[] = {Durability::none, Durability::on_close, Durability::periodic,
                              Durability::every_write};
  Model model;
  std::vector<std::string> history(kKeys);  // debugging aid: what happened to each key
  std::string clears;
  std::uint64_t seq = 1, acknowledged = 0, in_flight = 0, wrong = 0, failed_opens = 0,
                rebuilt = 0, checked = 0, child_errors = 0, verify_failures = 0;
  for (int cycle = 0; cycle < cycles; ++cycle) {
    const Durability d = modes[rng() % 4];
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(fds[0]);
      child(dir, d, rng(), seq, fds[1]);
    }
    ::close(fds[1]);
    // Kill after 0-40 ms: early kills land in the child's open (recovery).
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::microseconds(rng() % 3 == 0 ? rng() % 3000 : rng() % 40000);
    std::vector<Message> messages;
    Message buf[256];
    std::size_t partial = 0;  // bytes of a message read so far
    auto drain = [&](int timeout_ms) {
      pollfd p{fds[0], POLLIN, 0};
      if (::poll(&p, 1, timeout_ms) <= 0) return false;
      const ssize_t n = ::read(fds[0], reinterpret_cast<char*>(buf) + partial, sizeof buf - partial);
      if (n <= 0) return false;
      const std::size_t total = partial + static_cast<std::size_t>(n);
      const std::size_t whole = total / sizeof(Message);
      messages.insert(messages.end(), buf, buf + whole);
      partial = total % sizeof(Message);
      if (partial != 0) std::memmove(buf, reinterpret_cast<char*>(buf) + whole * sizeof(Message), partial);
      return true;
    };
    while (std::chrono::steady_clock::now() < deadline) drain(1);
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)) {
      ++child_errors;
      std::cerr << "crash_test: cycle " << cycle << ": the child "
                << (WIFSIGNALED(status) ? "died of signal " + std::to_string(WTERMSIG(status))
                                        : "exited with " + std::to_string(WEXITSTATUS(status)))
                << "\n";
    }
    while (drain(0)) {
    }
    ::close(fds[0]);
    // Replay: a `before` followed by its `after` is acknowledged.
    for (std::size_t i = 0; i < messages.size(); ++i) {
      const Message& m = messages[i];
      if (m.phase != before) continue;
      const bool acked =
          i + 1 < messages.size() && messages[i + 1].phase == after && messages[i + 1].seq == m.seq;
      {
        std::string e = " c" + std::to_string(cycle) + ":" + "PRIAXS"[m.op] + std::to_string(m.seq) +
                        (acked ? "=" + std::to_string(messages[i + 1].result) : "?");
        if (m.op == Op::clear) clears += e; else if (m.op != Op::sync) history[m.key] += e;
        if (history[m.key].size() > 400) history[m.key].erase(0, 200);
      }
      if (acked) {
        model.acknowledged(messages[i + 1]);
        ++acknowledged;
        ++i;
      } else {
        model.in_flight(m);
        ++in_flight;
      }
      seq = m.seq + 1;
    }
    // Two kills in three: reopen, check and close cleanly now; otherwise
    // the next child opens the killed store (a rebuild, maybe killed too).
    if (rng() % 3 == 0) continue;
    try {
      Options o = store_options(dir, modes[rng() % 4]);
      o.background_maintenance = false;
      Store s(o);
      rebuilt += s.stats().rebuilt;
      clears += " open" + std::to_string(cycle);
      std::string out;
      for (std::uint32_t k = 0; k < kKeys; ++k) {
        State got;
        if (s.get(key_of(k), out)) got = out;
        ++checked;
        if (model.keys[k].count(got) == 0) {
          ++wrong;
          std::cerr << "crash_test: cycle " << cycle << " (child " << offheap::to_string(d)
                    << ", last " << messages.size() << " messages, last seq "
                    << (messages.empty() ? 0 : messages.back().seq) << ") key " << k << ": read "
                    << (got ? got->substr(0, 24) : std::string("(absent)")) << ", allowed:";
          for (const State& a : model.keys[k]) std::cerr << " " << (a ? a->substr(0, 24) : "(absent)");
          std::cerr << "; history:" << history[k] << "; clears:" << clears.substr(clears.size() > 200 ? clears.size() - 200 : 0) << "\n";
        }
        model.keys[k] = {got};
      }
      const std::string problem = s.verify();
      if (!problem.empty()) {
        ++verify_failures;
        std::cerr << "crash_test: cycle " << cycle << ": verify: " << problem << "\n";
      }
      s.close();  // clean: the next child opens without a rebuild
    } catch (const offheap::Error& e) {
      ++failed_opens;
      std::cerr << "crash_test: cycle " << cycle << ": reopen failed: " << e.what() << "\n";
    }
  }
  std::cout << "crash torture: " << cycles << " kills, " << acknowledged
            << " acknowledged operations, " << in_flight << " in flight, " << checked
            << " key checks, " << rebuilt << " rebuilds, " << failed_opens << " failed reopens, "
            << wrong << " wrong or lost values, " << verify_failures << " verify failures, "
            << child_errors << " child errors (seed " << seed << ")\n";
  CHECK(failed_opens == 0);
  CHECK(wrong == 0);
  CHECK(verify_failures == 0);
  CHECK(child_errors == 0);
  CHECK(acknowledged > static_cast<std::uint64_t>(cycles));  // the children got work done
}
