// SPDX-License-Identifier: Apache-2.0
// Process-crash torture: a child process opens a file-backed store and
// writes, overwrites and removes, publishing each operation in shared
// memory before it starts and after it returns; the parent kills it with
// SIGKILL, reopens the store and checks every key against the acknowledged
// history. Only an operation in flight may go either way.
//
// The kills are aimed, not left to luck. Each cycle aims at one of:
//   recovery  the child's open of a store left unclean by an earlier kill
//             (a rebuild from the records): the kill comes a random part of
//             a typical rebuild's duration after the child says "opening";
//   writes    an operation: after a random number of operations (0-800),
//             at the next one the parent sees in flight (its "before"
//             published, its "after" not), half the time only one that
//             writes a 20-40 KiB value;
//   anywhere  a random moment in the first 25 ms, as a process crash comes.
// Every fourth cycle aims at recovery (the cycle before leaves the store
// unclean), the others at writes or, one in four, anywhere.
// Every kill is then classified by what the child had published: inside an
// operation (a "before" without its "after"), inside the open of an unclean
// store, inside the open of a clean one, or between operations. The test
// requires floors: at least 20% of the kills inside operations and at least
// 5% (and at least one) inside recovery, so that a change which made the
// kills miss them (or made the child too fast or slow to be hit) fails the
// test instead of passing it vacuously.
//
// After the last kill the store is reopened and every key checked, then
// closed cleanly and reopened once more (no rebuild) and checked again.
//
// The same torture runs on a file-backed cache (offheap::Cache, a capacity
// below the data written, a removal listener set, background maintenance
// on): there any key may also be absent (evicted), but never hold a value
// other than its acknowledged one or one in flight, and a removal or an
// eviction is never undone. A third of the cache's writes carry a TTL of
// 1-150 ms on a clock the parent moves between cycles (in the shared
// channel, read by child and parent alike): a value names its deadline,
// and no value is ever read back after it, whether its record expired
// while the store was open, while it was closed, or while it was being
// recovered.
//
// Environment:
//   OFFHEAP_CRASH_CYCLES  the number of kills (default 100; .ci/run: 300)
//   OFFHEAP_CRASH_SEED    the seed (printed at the start of every run): it
//                         fixes each cycle's aim, the durability modes and
//                         each child's sequence of operations; where exactly
//                         a kill lands still depends on timing
#include <offheap/offheap.hpp>

#include "support/env.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <new>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

using offheap::Cache;
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

/// What a child publishes, in memory shared with the parent (MAP_SHARED,
/// mapped before the fork): its progress through the open, then its
/// messages. A message is written before `count` covers it (release), so
/// the parent reads only whole messages, also after the kill.
struct Channel {
  static constexpr std::uint64_t kMessages = std::uint64_t{1} << 18;  // 4 MiB
  enum Progress : std::uint32_t { started = 0, opening = 1, opened = 2 };
  std::atomic<std::uint32_t> progress;
  std::atomic<std::uint32_t> rebuilt;   // the open's stats().rebuilt (once opened)
  std::atomic<std::uint64_t> open_ns;   // how long the open took (once opened)
  std::atomic<std::uint64_t> count;     // messages published
  std::atomic<std::uint64_t> reported;  // a cache's removal listener calls
  std::atomic<std::uint64_t> clock_ms;  // the cache's clock (the parent moves it between cycles)
  Message messages[kMessages];

  void reset() {
    progress.store(started);
    rebuilt.store(0);
    open_ns.store(0);
    count.store(0);
    reported.store(0);
  }
};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);

std::string key_of(std::uint32_t k) { return "key-" + std::to_string(k); }

/// The store's clock for a cache (expiry), read from the channel.
struct ChannelClock : offheap::Clock {
  const std::atomic<std::uint64_t>* t;
  explicit ChannelClock(const std::atomic<std::uint64_t>& c) : t(&c) {}
  std::uint64_t now_ms() const noexcept override { return t->load(std::memory_order_relaxed); }
};

/// The deadline of write number `seq` made at `clock` (ms): a third of
/// the cache's writes expire 1-150 ms later; 0 for none.
std::uint64_t deadline_of(bool ttls, std::uint64_t seq, std::uint64_t clock) {
  return ttls && seq % 3 == 1 ? clock + 1 + (seq * 13) % 150 : 0;
}

/// The value of write number `seq` to key k: unique, of varied length (a
/// few bytes to 40 KiB), so that records of every size are freed, split
/// and merged; with a deadline, it names it ("@<ms>-").
std::string value_of(std::uint32_t k, std::uint64_t seq, std::uint64_t deadline = 0) {
  std::string v = "s" + std::to_string(seq) + "-k" + std::to_string(k) + "-";
  if (deadline != 0) v += "@" + std::to_string(deadline) + "-";
  const std::uint64_t len = seq % 50 == 0 ? 20000 + seq % 20000 : (seq * 37) % 700;
  v.append(len, static_cast<char>('a' + seq % 26));
  return v;
}
/// Whether operation `m` writes one of the large values (20-40 KiB): an
/// operation long enough that a kill aimed at it lands inside it.
bool large_write(const Message& m) {
  return (m.op == put || m.op == put_if_absent || m.op == replace) && m.seq % 50 == 0;
}

using State = std::optional<std::string>;  // absent or a value

/// A cache's capacity: about half of what the children keep written, and
/// room in each shard's share for the largest value.
constexpr std::uint64_t kCacheCapacity = 256 * 1024;

template <class S>
Options store_options(const std::filesystem::path& dir, Durability d) {
  Options o;
  if constexpr (!std::is_same_v<S, Store>) o.capacity_bytes = kCacheCapacity;
  o.path = dir;
  o.shards = 4;
  o.min_chunk_bytes = 4096;
  o.max_chunk_bytes = 256 * 1024;
  o.durability = d;
  o.sync_interval = std::chrono::milliseconds(3);
  return o;
}

std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

template <class S>
[[noreturn]] void child(const std::filesystem::path& dir, Durability d, std::uint64_t seed,
                        std::uint64_t first_seq, Channel& ch) {
  try {
    const std::uint64_t t0 = now_ns();
    ch.progress.store(Channel::opening, std::memory_order_release);
    Options o = store_options<S>(dir, d);
    const ChannelClock clock(ch.clock_ms);
    if constexpr (!std::is_same_v<S, Store>) {
      o.clock = &clock;
      // Removals and evictions wait for this listener (their records kept,
      // file-backed: dead markers written): what a crash must not undo.
      o.on_removal = [&ch](std::string_view, std::string_view, offheap::RemovalCause) {
        ch.reported.fetch_add(1, std::memory_order_relaxed);
      };
    }
    S s(o);
    ch.rebuilt.store(s.stats().rebuilt ? 1 : 0, std::memory_order_relaxed);
    ch.open_ns.store(now_ns() - t0, std::memory_order_relaxed);
    ch.progress.store(Channel::opened, std::memory_order_release);
    std::mt19937_64 rng(seed);
    std::uint64_t n = 0;
    auto publish = [&](const Message& m) {
      if (n == Channel::kMessages) {
        for (;;) ::pause();  // full: wait for the kill (the parent counts these)
      }
      ch.messages[n] = m;
      ch.count.store(++n, std::memory_order_release);
    };
    for (std::uint64_t seq = first_seq;; ++seq) {
      Message m{};
      const std::uint64_t r = rng() % 1000;
      m.op = r < 550 ? put : r < 800 ? remove : r < 880 ? put_if_absent : r < 990 ? replace
             : r < 999 ? sync : clear;
      m.key = static_cast<std::uint32_t>(rng() % kKeys);
      m.seq = seq;
      m.phase = before;
      // Made before the operation's "before": the time between the messages
      // is the store's.
      const std::string k = key_of(m.key);
      const std::uint64_t deadline = deadline_of(!std::is_same_v<S, Store>, seq, clock.now_ms());
      const std::string v = value_of(m.key, seq, deadline);
      const offheap::Ttl ttl = deadline != 0 ? offheap::Ttl::at_ms(deadline) : offheap::Ttl{};
      publish(m);
      switch (m.op) {
        case put: s.put(k, v, ttl); break;
        case remove: m.result = s.remove(k); break;
        case put_if_absent: m.result = s.put_if_absent(k, v, ttl); break;
        case replace: m.result = s.replace(k, v, ttl); break;
        case clear: s.clear(); break;
        case sync: s.sync(); break;
      }
      m.phase = after;
      publish(m);
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
  bool cache = false;  // any key may also be absent: evicted (or expired)
  std::uint64_t clock = 0;  // the clock during the child being replayed (deadlines)

  State value(const Message& m) const { return value_of(m.key, m.seq, deadline_of(cache, m.seq, clock)); }

  void acknowledged(const Message& m) {
    acknowledged_store(m);
    if (cache) keys[m.key].insert(State{});
  }
  /// What the model allows after reading `got` from a reopened store.
  void narrow(std::uint32_t k, const State& got) {
    keys[k] = {got};
    if (cache) keys[k].insert(State{});
  }

 private:
  void acknowledged_store(const Message& m) {
    std::set<State>& s = keys[m.key];
    const State v = value(m);
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

 public:
  void in_flight(const Message& m) {
    std::set<State>& s = keys[m.key];
    const State v = value(m);
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

enum class Aim { recovery, writes, anywhere };
const char* aim_name(Aim a) {
  return a == Aim::recovery ? "recovery" : a == Aim::writes ? "writes" : "anywhere";
}

/// Where a kill landed, by what the child had published.
enum class Landed { before_open, in_recovery, in_clean_open, in_operation, between, idle };

}  // namespace

template <class S>
void torture() {
  constexpr bool kCache = !std::is_same_v<S, Store>;
  const int cycles = static_cast<int>(offheap_test::env_u64("OFFHEAP_CRASH_CYCLES", 100));
  const std::uint64_t seed = offheap_test::env_u64("OFFHEAP_CRASH_SEED", std::random_device{}());
  std::cout << "crash_test: seed " << seed << " (OFFHEAP_CRASH_SEED=" << seed
            << " replays the aims, modes and operations; where a kill lands depends on timing), "
            << cycles << " cycles\n"
            << std::flush;
  INFO("seed " << seed << " (set OFFHEAP_CRASH_SEED to replay)");
  std::mt19937_64 rng(seed);
  TempDir tmp;
  const std::filesystem::path dir = tmp / "store";
  const Durability modes[] = {Durability::none, Durability::on_close, Durability::periodic,
                              Durability::every_write};

  void* shared =
      ::mmap(nullptr, sizeof(Channel), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  REQUIRE(shared != MAP_FAILED);
  struct Unmap {
    void* p;
    ~Unmap() { ::munmap(p, sizeof(Channel)); }
  } unmap{shared};
  Channel& ch = *new (shared) Channel;
  ch.clock_ms.store(1'700'000'000'000);
  const ChannelClock clock(ch.clock_ms);
  std::uint64_t expired_reads = 0;  // values read back after their deadline (must stay 0)

  Model model;
  model.cache = kCache;
  std::uint64_t reports = 0;  // a cache's removal listener calls, over all children
  std::vector<std::string> history(kKeys);  // debugging aid: what happened to each key
  std::string clears;
  std::uint64_t seq = 1, acknowledged = 0, in_flight = 0, wrong = 0, failed_opens = 0, rebuilt = 0,
                checked = 0, child_errors = 0, verify_failures = 0;
  std::uint64_t landed[6] = {};
  std::uint64_t aimed[3] = {};
  std::uint64_t large_in_flight = 0;        // kills inside a 20-40 KiB write
  std::uint64_t unexpected_clean_open = 0;  // an open the parent knew unclean did not rebuild
  // Whether the store is known to need a rebuild at the next open: a child
  // opened it (and was killed), or the parent's check closed it with
  // Durability::none. (A child killed inside the open of a clean store may
  // or may not have marked it unclean: then it is not counted as known.)
  bool unclean = false;
  std::uint64_t child_ns = 0, check_ns = 0;  // time spent running children, checking
  std::vector<std::uint64_t> rebuild_ns;     // durations of the children's rebuilds
  // Every fourth cycle aims at recovery; of the others, three in four at
  // writes and one at a random moment.
  auto draw_aim = [&](int cycle) {
    const bool writes = rng() % 4 != 0;
    return cycle % 4 == 3 ? Aim::recovery : writes ? Aim::writes : Aim::anywhere;
  };
  // Reopens the store, checks every key against the model (then narrows
  // the model to what it read), verify(), closes (cleanly unless
  // Durability::none).
  auto check_store = [&](Durability mode, const std::string& when, bool after_clean_close,
                         const std::string& context) {
    try {
      Options o = store_options<S>(dir, mode);
      o.background_maintenance = false;
      if constexpr (kCache) o.clock = &clock;
      S s(o);
      if (after_clean_close && s.stats().rebuilt) {
        ++wrong;
        std::cerr << "crash_test: " << when << ": the open after a clean close rebuilt\n";
      }
      rebuilt += s.stats().rebuilt;
      clears += " open(" + when + ")";
      // Time passes after the open (which removed what had expired): the
      // reads below must turn away what expires now, with no maintenance.
      if constexpr (kCache) ch.clock_ms.fetch_add(40);
      std::string out;
      for (std::uint32_t k = 0; k < kKeys; ++k) {
        State got;
        if (s.get(key_of(k), out)) got = out;
        ++checked;
        // A value that names a deadline is never read at or after it.
        if (const std::size_t d = got ? got->find('@') : std::string::npos; d != std::string::npos) {
          if (std::stoull(got->substr(d + 1)) <= clock.now_ms()) {
            ++wrong;
            ++expired_reads;
            std::cerr << "crash_test: " << when << context << " key " << k << ": read "
                      << got->substr(0, 40) << " at " << clock.now_ms() << ", after its deadline\n";
          }
        }
        if (model.keys[k].count(got) == 0) {
          ++wrong;
          std::cerr << "crash_test: " << when << context << " key " << k << ": read "
                    << (got ? got->substr(0, 24) : std::string("(absent)")) << ", allowed:";
          for (const State& a : model.keys[k])
            std::cerr << " " << (a ? a->substr(0, 24) : "(absent)");
          std::cerr << "; history:" << history[k]
                    << "; clears:" << clears.substr(clears.size() > 200 ? clears.size() - 200 : 0)
                    << "\n";
        }
        model.narrow(k, got);
      }
      if (kCache && s.stats().live_bytes > kCacheCapacity + kCacheCapacity / 16 + 4 * 4096) {
        ++wrong;
        std::cerr << "crash_test: " << when << ": the cache holds " << s.stats().live_bytes
                  << " live bytes, past its capacity and slack\n";
      }
      const std::string problem = s.verify();
      if (!problem.empty()) {
        ++verify_failures;
        std::cerr << "crash_test: " << when << ": verify: " << problem << "\n";
      }
      s.close();
      unclean = mode == Durability::none;
      return true;
    } catch (const offheap::Error& e) {
      ++failed_opens;
      std::cerr << "crash_test: " << when << ": reopen failed: " << e.what() << "\n";
      return false;
    }
  };

  Aim aim = Aim::writes;  // the first open creates the store: nothing to recover
  for (int cycle = 0; cycle < cycles; ++cycle) {
    const Aim next_aim = draw_aim(cycle + 1);
    ++aimed[static_cast<int>(aim)];
    const Durability d = modes[rng() % 4];
    const std::uint64_t child_seed = rng();
    // The aim's parameters, drawn whatever happens so that the seed fixes
    // every later draw.
    const std::uint64_t recovery_part = rng() % 1000;  // of a typical rebuild, in 1/1000
    const std::uint64_t write_ops = rng() % 800;       // operations let through first
    const bool only_large = rng() % 2 == 0;
    const std::uint64_t anywhere_us = rng() % 3 == 0 ? rng() % 3000 : rng() % 25000;
    const bool was_unclean = unclean;
    ch.reset();
    const std::uint64_t cycle_start = now_ns();
    std::cout.flush();
    std::cerr.flush();
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) child<S>(dir, d, child_seed, seq, ch);

    // ---- aim and kill ----------------------------------------------------------------
    bool child_gone = false;
    std::uint64_t spins = 0;
    auto gone = [&] {  // the child died by itself (checked now and then while spinning)
      if (++spins % 4096 == 0 && !child_gone) {
        siginfo_t info{};
        child_gone =
            ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
            info.si_pid == pid;
      }
      return child_gone;
    };
    const std::uint64_t give_up = now_ns() + 10'000'000'000ull;  // 10 s: a hung child
    switch (aim) {
      case Aim::recovery: {
        while (ch.progress.load(std::memory_order_acquire) < Channel::opening && !gone() &&
               now_ns() < give_up) {
        }
        // A random part of a typical rebuild (the median of those seen; 1 ms
        // until one is seen).
        std::uint64_t typical = 1'000'000;
        if (!rebuild_ns.empty()) {
          std::vector<std::uint64_t> v = rebuild_ns;
          std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
          typical = v[v.size() / 2];
        }
        const std::uint64_t until = now_ns() + typical * recovery_part / 1000;
        while (now_ns() < until && ch.progress.load(std::memory_order_acquire) < Channel::opened &&
               !gone()) {
        }
        break;
      }
      case Aim::writes: {
        // After `write_ops` operations (or 30 ms), the next operation seen
        // in flight: half the time only a large write (any after 50 ms).
        const std::uint64_t start = now_ns();
        std::uint64_t seen = 0;
        for (;;) {
          if (gone() || now_ns() > give_up) break;
          const std::uint64_t n = ch.count.load(std::memory_order_acquire);
          if (n == seen) continue;
          seen = n;
          const std::uint64_t t = now_ns() - start;
          if (n < 2 * write_ops && t < 30'000'000) continue;
          const Message& m = ch.messages[n - 1];
          if (m.phase == before && (!only_large || large_write(m) || t > 50'000'000)) break;
        }
        break;
      }
      case Aim::anywhere: {
        const std::uint64_t until = now_ns() + anywhere_us * 1000;
        while (now_ns() < until && !gone()) ::usleep(200);
        break;
      }
    }
    ::kill(pid, SIGKILL);
    child_ns += now_ns() - cycle_start;
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)) {
      ++child_errors;
      std::cerr << "crash_test: cycle " << cycle << ": the child "
                << (WIFSIGNALED(status) ? "died of signal " + std::to_string(WTERMSIG(status))
                                        : "exited with " + std::to_string(WEXITSTATUS(status)))
                << "\n";
    }

    // ---- where the kill landed --------------------------------------------------------
    const std::uint32_t progress = ch.progress.load(std::memory_order_acquire);
    const std::vector<Message> messages(ch.messages,
                                        ch.messages + ch.count.load(std::memory_order_acquire));
    Landed where;
    if (progress == Channel::started) {
      where = Landed::before_open;
    } else if (progress == Channel::opening) {
      where = was_unclean ? Landed::in_recovery : Landed::in_clean_open;
    } else if (messages.size() == Channel::kMessages) {
      where = Landed::idle;
    } else if (!messages.empty() && messages.back().phase == before) {
      where = Landed::in_operation;
      if (large_write(messages.back())) ++large_in_flight;
    } else {
      where = Landed::between;
    }
    ++landed[static_cast<int>(where)];
    reports += ch.reported.load(std::memory_order_relaxed);
    if (progress == Channel::opened) {
      if (ch.rebuilt.load() != 0) rebuild_ns.push_back(ch.open_ns.load());
      if (was_unclean && ch.rebuilt.load() == 0) {
        ++unexpected_clean_open;
        std::cerr << "crash_test: cycle " << cycle
                  << ": the store was left unclean, yet the child's open did not rebuild it\n";
      }
      unclean = true;  // opened writable: unclean until a clean close
    }

    // ---- replay: a `before` followed by its `after` is acknowledged -----------------
    model.clock = ch.clock_ms.load();
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

    // ---- time passes: the deadlines of the cache's writes come --------------------------
    ch.clock_ms.fetch_add(rng() % 60);

    // ---- check, or leave the killed store to the next child ---------------------------
    // Two kills in three are followed by a check (reopen, check, close
    // cleanly); never before a cycle aimed at recovery, whose child must
    // find the store unclean, nor after the last (the final checks follow).
    const Durability check_mode = modes[rng() % 4];
    const bool check = rng() % 3 != 0;
    if (check && next_aim != Aim::recovery && cycle + 1 < cycles) {
      const std::uint64_t t = now_ns();
      check_store(check_mode, "cycle " + std::to_string(cycle), false,
                  std::string(" (child ") + offheap::to_string(d) + ", aim " + aim_name(aim) +
                      ", " + std::to_string(messages.size()) + " messages, last seq " +
                      std::to_string(messages.empty() ? 0 : messages.back().seq) + ")");
      check_ns += now_ns() - t;
    }
    aim = next_aim;
    if (aim == Aim::recovery && !unclean) aim = Aim::writes;  // (a child killed in a clean open)
  }

  // After the last kill: reopen and check every key, close cleanly, reopen
  // (no rebuild) and check again: the same values, exactly.
  const std::uint64_t wrong_in_cycles = wrong;
  const bool final_open =
      check_store(Durability::on_close, "the reopen after the last kill", false, "");
  const bool final_clean =
      check_store(Durability::on_close, "the reopen after a clean close", true, "");

  const std::uint64_t in_operation = landed[static_cast<int>(Landed::in_operation)];
  const std::uint64_t in_recovery = landed[static_cast<int>(Landed::in_recovery)];
  std::cout << "crash torture (" << (kCache ? "cache" : "store") << "): " << cycles << " kills (aimed at recovery "
            << aimed[static_cast<int>(Aim::recovery)] << ", writes "
            << aimed[static_cast<int>(Aim::writes)] << ", anywhere "
            << aimed[static_cast<int>(Aim::anywhere)] << "); landed inside operations "
            << in_operation << " (" << large_in_flight << " of them large writes), inside recovery "
            << in_recovery << ", inside clean opens "
            << landed[static_cast<int>(Landed::in_clean_open)] << ", before the open "
            << landed[static_cast<int>(Landed::before_open)] << ", between operations "
            << landed[static_cast<int>(Landed::between)] << ", idle "
            << landed[static_cast<int>(Landed::idle)] << "; " << acknowledged
            << " acknowledged operations, " << in_flight << " in flight, " << checked
            << " key checks, " << rebuilt << " rebuilds, " << failed_opens << " failed reopens, "
            << wrong << " wrong or lost values (" << wrong - wrong_in_cycles
            << " in the final checks), " << verify_failures << " verify failures, " << child_errors
            << " child errors, " << reports << " removals reported, " << expired_reads
            << " values read after their deadline (seed " << seed << "); "
            << child_ns / 1000000
            << " ms running children, " << check_ns / 1000000 << " ms checking\n";
  if (kCache) CHECK(reports > 0);  // the children evicted, and told the listener
  CHECK(failed_opens == 0);
  CHECK(final_open);
  CHECK(final_clean);
  CHECK(wrong == 0);
  CHECK(expired_reads == 0);
  CHECK(verify_failures == 0);
  CHECK(child_errors == 0);
  CHECK(unexpected_clean_open == 0);
  CHECK(acknowledged > static_cast<std::uint64_t>(cycles));  // the children got work done
  // The kills hit what they are for: writes in flight, and recovery.
  // (Runs of fewer than 8 cycles are too short for the recovery floor.)
  CHECK(in_operation * 5 >= static_cast<std::uint64_t>(cycles));
  if (cycles >= 8) {
    CHECK(in_recovery * 20 >= static_cast<std::uint64_t>(cycles));
    CHECK(in_recovery >= 1);
  }
}

TEST_CASE("SIGKILL at any moment loses no acknowledged write and resurrects no removal",
          "[files][crash]") {
  torture<Store>();
}

TEST_CASE("SIGKILL on a file-backed cache: no wrong value, no removal or eviction undone",
          "[files][crash][cache]") {
  torture<Cache>();
}
