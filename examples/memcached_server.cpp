// SPDX-License-Identifier: Apache-2.0
// offheap-memcached: a memcached-protocol server over an offheap::Cache
// (S3-FIFO), in memory or persisted in a directory that a restart, also
// after kill -9, finds warm.
//
//   offheap-memcached [-p port] [-l address] [-m MiB] [-I size] [-c conns]
//                     [-t threads] [--dir path] [--durability mode]
//
// The protocol is include/offheap/memcache/'s (text_session.hpp: the
// classic text commands, replies as memcached 1.6.18's). Networking: one
// epoll loop per thread (-t), each with its own connections; the listening
// socket is in every loop (EPOLLEXCLUSIVE: one wakes per connection); the
// store is shared (its readers take no lock).
//
// Per connection: the bytes received and not yet used (at most a request
// line of 2,048 bytes, or a get line of 16 MiB, or a data block of -I), and
// the replies not yet sent. The session stops running requests once 1 MiB
// of replies waits (TextLimits::pause_reply_bytes), and the connection
// reads nothing more until they are sent (a client that does not read
// costs no CPU and at most about 1 MiB plus one item's reply: a multi-get
// stops between two keys, and goes on once they are sent). Buffers grown past
// 64 KiB are given back once empty. Past -c connections a new one is told
// "ERROR Too many open connections" and closed, as memcached does; the
// server raises its open-file limit to -c plus 64 at start (or refuses to
// start), and a loop out of descriptors stops accepting for 100 ms.
//
// Cas uniques after a restart (--dir): the directory keeps an epoch
// counter (cas-epoch), raised and synced at every start; uniques are the
// epoch times 2^40 plus a count, so none repeats across restarts. The same
// file names the items' layout (offheap/memcache/item.hpp): a directory
// written with another is refused.
//
// Exit status: 0 after SIGINT or SIGTERM (the store closed cleanly); 64
// for a bad option; 69 for a port it cannot bind, a directory it cannot
// use, a damaged or missing cas-epoch beside an existing store, or an
// open-file limit below -c (the reason on stderr; the port is bound before
// anything on disk changes); 1 if the close at the end fails.
//
// The protocols: memcached's text commands and its meta commands (mg, ms,
// md, ma, mn, me), as the session runs them (offheap/memcache/
// text_session.hpp, meta_commands.hpp); not the binary protocol, which
// memcached deprecated.
#include <offheap/memcache/text_session.hpp>
#include <offheap/offheap.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

namespace {

using offheap::memcache::ServerState;
using offheap::memcache::TextLimits;
using Session = offheap::memcache::TextSession<offheap::CachePolicy>;

constexpr int kBadOption = 64;
constexpr int kCannotServe = 69;
constexpr std::size_t kKeptBuffer = 64u << 10;   // a buffer's capacity an idle connection keeps

struct Config {
  int port = 11211;
  std::string address = "127.0.0.1";
  std::uint64_t memory_mib = 64;
  std::uint64_t item_size = 1 << 20;
  std::uint64_t max_connections = 1024;
  unsigned threads = 4;
  std::filesystem::path dir;
  offheap::Durability durability = offheap::Durability::periodic;
};

[[noreturn]] void usage_error(const std::string& what) {
  std::fprintf(stderr,
               "offheap-memcached: %s\n"
               "usage: offheap-memcached [-p port] [-l address] [-m MiB] [-I item size (k, m suffix)]\n"
               "                         [-c max connections] [-t threads] [--dir path]\n"
               "                         [--durability none|on_close|periodic|every_write]\n",
               what.c_str());
  std::exit(kBadOption);
}

std::uint64_t number(std::string_view name, std::string_view s, std::uint64_t least, std::uint64_t most) {
  std::uint64_t v = 0;
  std::uint64_t scale = 1;
  if (name == "-I" && !s.empty() && (s.back() == 'k' || s.back() == 'K' || s.back() == 'm' || s.back() == 'M')) {
    scale = (s.back() == 'k' || s.back() == 'K') ? 1024 : 1024 * 1024;
    s.remove_suffix(1);
  }
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc{} || r.ptr != s.data() + s.size() || v > most / scale || v * scale < least) {
    usage_error(std::string(name) + " takes a number from " + std::to_string(least) + " to " + std::to_string(most) +
                ", not '" + std::string(s) + "'");
  }
  return v * scale;
}

Config parse_options(int argc, char** argv) {
  Config c;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    const auto value = [&]() -> std::string_view {
      if (i + 1 >= argc) usage_error(std::string(a) + " needs a value");
      return argv[++i];
    };
    if (a == "-p") {
      c.port = static_cast<int>(number(a, value(), 1, 65535));
    } else if (a == "-l") {
      c.address = value();
    } else if (a == "-m") {
      c.memory_mib = number(a, value(), 1, std::uint64_t{1} << 30);
    } else if (a == "-I") {
      c.item_size = number(a, value(), 1024, std::uint64_t{1} << 30);
    } else if (a == "-c") {
      c.max_connections = number(a, value(), 1, 1 << 20);
    } else if (a == "-t") {
      c.threads = static_cast<unsigned>(number(a, value(), 1, 256));
    } else if (a == "--dir") {
      c.dir = std::string(value());
      if (c.dir.empty()) usage_error("--dir needs a path");
    } else if (a == "--durability") {
      const std::string_view d = value();
      if (d == "none") c.durability = offheap::Durability::none;
      else if (d == "on_close") c.durability = offheap::Durability::on_close;
      else if (d == "periodic") c.durability = offheap::Durability::periodic;
      else if (d == "every_write") c.durability = offheap::Durability::every_write;
      else usage_error("--durability takes none, on_close, periodic or every_write, not '" + std::string(d) + "'");
    } else if (a == "-h" || a == "--help") {
      usage_error("the options");
    } else {
      usage_error("unknown option '" + std::string(a) + "'");
    }
  }
  if (c.item_size > c.memory_mib * 1024 * 1024 / 2) usage_error("-I must be at most half of -m");
  return c;
}

[[noreturn]] void cannot_serve(const std::string& what) {
  std::fprintf(stderr, "offheap-memcached: %s\n", what.c_str());
  std::exit(kCannotServe);
}

/// The first cas unique of this run: --dir keeps an epoch, raised and
/// synced before any unique is handed out; a unique is the epoch times
/// 2^40 plus a count (a run of more than 2^40 writes, 12 days at a million
/// a second, would reach the next epoch's: README Limits). The file also
/// names the layout of the items in the store ("<epoch> item-layout 2"):
/// a store written with another (the first, 16-byte headers, wrote the
/// epoch alone) is refused, not misread.
std::uint64_t first_cas(const std::filesystem::path& dir, bool store_existed) {
  if (dir.empty()) return 1;
  const std::filesystem::path file = dir / "cas-epoch";
  constexpr std::string_view kLayout = " item-layout 2";
  std::uint64_t epoch = 0;
  if (FILE* f = std::fopen(file.c_str(), "r")) {
    char text[64] = {};
    const std::size_t n = std::fread(text, 1, sizeof text - 1, f);
    std::fclose(f);
    const char* end = text + n;
    if (end > text && end[-1] == '\n') --end;
    const auto r = std::from_chars(text, end, epoch);
    if (r.ec != std::errc{} || r.ptr == text) {
      cannot_serve(file.string() + " holds no epoch number (damaged): uniques could repeat; restore it, or remove "
                   "the store with it");
    }
    const std::string_view rest(r.ptr, static_cast<std::size_t>(end - r.ptr));
    if (rest.empty()) {
      cannot_serve(dir.string() + " holds items of the first layout (an earlier offheap-memcached), which this one "
                   "does not read: serve it with that build, or remove the directory");
    }
    if (rest != kLayout) {
      cannot_serve(file.string() + " names an item layout this offheap-memcached does not know (\"" +
                   std::string(rest) + "\"): remove the directory, or serve it with the build that wrote it");
    }
  } else if (store_existed) {
    cannot_serve(file.string() + " is missing beside an existing store: uniques could repeat; restore it, or "
                 "remove the store");
  }
  ++epoch;
  if (epoch >= (std::uint64_t{1} << 23)) cannot_serve(file.string() + ": the epochs are used up");
  const std::filesystem::path tmp = dir / "cas-epoch.tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const std::string text = std::to_string(epoch) + std::string(kLayout) + "\n";
  if (fd < 0 || write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size()) || fsync(fd) != 0 ||
      close(fd) != 0 || std::rename(tmp.c_str(), file.c_str()) != 0) {
    cannot_serve("cannot write " + file.string() + ": " + std::strerror(errno));
  }
  if (const int d = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); d >= 0) {
    fsync(d);
    close(d);
  }
  return (epoch << 40) | 1;
}

int listen_on(const Config& c) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) cannot_serve(std::string("socket: ") + std::strerror(errno));
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(c.port));
  if (inet_pton(AF_INET, c.address.c_str(), &a.sin_addr) != 1) {
    usage_error("-l takes an IPv4 address, not '" + c.address + "'");
  }
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    cannot_serve("cannot listen on " + c.address + ":" + std::to_string(c.port) + ": " + std::strerror(errno));
  }
  if (listen(fd, 1024) != 0) cannot_serve(std::string("listen: ") + std::strerror(errno));
  return fd;
}

struct Connection {
  int fd;
  Session session;
  std::string in, out;
  std::size_t sent = 0;  // bytes of `out` already sent
  bool closing = false;      // close once `out` is sent
  bool peer_closed = false;  // the peer shut its side: send what is pending, then close
  bool paused = false;       // the session stopped for its replies to go out: requests wait in `in`
  std::uint32_t watched = EPOLLIN | EPOLLRDHUP;  // what its epoll entry waits for
  Connection(int f, offheap::Cache& cache, ServerState& state, const TextLimits& limits)
      : fd(f), session(cache, state, limits) {}
};

std::atomic<bool> g_stop{false};
int g_wake = -1;  // an eventfd every loop watches: written at SIGINT/SIGTERM

void on_signal(int) {
  g_stop.store(true);
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = write(g_wake, &one, sizeof one);
}

/// One thread's loop: its epoll, the listener, its connections.
class Loop {
 public:
  Loop(int listener, offheap::Cache& cache, ServerState& state, const TextLimits& limits, std::uint64_t max_connections)
      : listener_(listener), cache_(cache), state_(state), limits_(limits), max_connections_(max_connections) {
    epoll_ = epoll_create1(EPOLL_CLOEXEC);
    if (epoll_ < 0) cannot_serve(std::string("epoll_create1: ") + std::strerror(errno));
    watch(listener_, EPOLLIN | EPOLLEXCLUSIVE);
    watch(g_wake, EPOLLIN);
  }
  ~Loop() {
    for (auto& [fd, c] : connections_) close(fd);
    close(epoll_);
  }

  void run() {
    epoll_event events[64];
    while (!g_stop.load(std::memory_order_relaxed)) {
      const int n = epoll_wait(epoll_, events, 64, accepting_ ? -1 : 100);
      if (!accepting_ && std::chrono::steady_clock::now() - paused_at_ >= std::chrono::milliseconds(100)) {
        watch(listener_, EPOLLIN | EPOLLEXCLUSIVE);
        accepting_ = true;
      }
      if (n < 0) {
        if (errno == EINTR) continue;
        cannot_serve(std::string("epoll_wait: ") + std::strerror(errno));
      }
      for (int i = 0; i < n; ++i) {
        const int fd = events[i].data.fd;
        if (fd == g_wake) return;
        if (fd == listener_) {
          accept_all();
          continue;
        }
        const auto it = connections_.find(fd);
        if (it == connections_.end()) continue;
        Connection& c = *it->second;
        if ((events[i].events & (EPOLLHUP | EPOLLERR)) != 0 && (events[i].events & EPOLLIN) == 0) {
          drop(c);
          continue;
        }
        if (!serve(c)) drop(c);
      }
    }
  }

 private:
  void watch(int fd, std::uint32_t what) {
    epoll_event e{};
    e.events = what;
    e.data.fd = fd;
    epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &e);
  }
  /// Changes what c's entry waits for (a system call: only when it changes).
  void rewatch(Connection& c, std::uint32_t what) {
    if (c.watched == what) return;
    c.watched = what;
    epoll_event e{};
    e.events = what;
    e.data.fd = c.fd;
    epoll_ctl(epoll_, EPOLL_CTL_MOD, c.fd, &e);
  }

  void accept_all() {
    for (;;) {
      const int fd = accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          // Out of descriptors: this loop stops accepting for 100 ms (the
          // level-triggered listener would wake it at once, for nothing).
          epoll_ctl(epoll_, EPOLL_CTL_DEL, listener_, nullptr);
          accepting_ = false;
          paused_at_ = std::chrono::steady_clock::now();
        }
        return;  // (EAGAIN: another loop took it, or none left)
      }
      auto& counters = state_.counters();
      if (counters.curr_connections.load(std::memory_order_relaxed) >= max_connections_) {
        static constexpr std::string_view kFull = "ERROR Too many open connections\r\n";
        [[maybe_unused]] const ssize_t n = send(fd, kFull.data(), kFull.size(), MSG_NOSIGNAL);
        close(fd);
        counters.rejected_connections.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      const int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      counters.curr_connections.fetch_add(1, std::memory_order_relaxed);
      counters.total_connections.fetch_add(1, std::memory_order_relaxed);
      connections_.emplace(fd, std::make_unique<Connection>(fd, cache_, state_, limits_));
      watch(fd, EPOLLIN | EPOLLRDHUP);
    }
  }

  void drop(Connection& c) {
    epoll_ctl(epoll_, EPOLL_CTL_DEL, c.fd, nullptr);
    close(c.fd);
    state_.counters().curr_connections.fetch_sub(1, std::memory_order_relaxed);
    connections_.erase(c.fd);  // (c is gone)
  }

  /// Reads what is there, runs it, sends what it can. False: close now.
  bool serve(Connection& c) {
    if (!flush(c)) return false;
    // Requests left by a session that paused for its replies to go out.
    if (c.paused && c.out.size() == c.sent && !run(c)) return false;
    // (Reading stops while replies wait, past the session's own pause.)
    while (!c.closing && !c.peer_closed && !c.paused && c.out.size() - c.sent < limits_.pause_reply_bytes) {
      char buf[16384];
      const ssize_t n = recv(c.fd, buf, sizeof buf, 0);
      if (n == 0) {
        c.peer_closed = true;  // (a half-close: what it asked for is still sent)
        break;
      }
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        if (errno == EINTR) continue;
        return false;
      }
      state_.counters().bytes_read.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
      c.in.append(buf, static_cast<std::size_t>(n));
      if (!run(c)) return false;
      if (static_cast<std::size_t>(n) < sizeof buf) break;
    }
    if (!flush(c)) return false;
    const bool pending = c.out.size() != c.sent;
    if (!pending && c.paused && !run(c)) return false;  // (sent at once: go on)
    if ((c.peer_closed || c.closing) && c.out.size() == c.sent && !c.paused) return false;
    // Buffers grown by a large request or reply go back once empty (an
    // idle connection holds no more than a small one).
    if (c.in.empty() && c.in.capacity() > kKeptBuffer) std::string().swap(c.in);
    if (c.out.empty() && c.out.capacity() > kKeptBuffer) std::string().swap(c.out);
    // Wait for room to send while replies wait, and for nothing else (a
    // peer that shut its side would keep a level-triggered EPOLLRDHUP
    // firing; a reset still comes as EPOLLHUP or EPOLLERR); else for
    // requests.
    rewatch(c, (c.out.size() != c.sent || c.paused) ? EPOLLOUT : (EPOLLIN | EPOLLRDHUP));
    return true;
  }

  /// Runs the whole requests of c.in. False: close now (replies past the
  /// limit, or memory for them refused: std::bad_alloc).
  bool run(Connection& c) {
    Session::Fed fed;
    try {
      fed = c.session.feed(c.in, c.out);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "offheap-memcached: a connection closed: %s\n", e.what());
      return false;
    }
    c.in.erase(0, fed.consumed);
    c.paused = fed.paused;
    if (fed.close) {
      c.closing = true;
      c.in.clear();
    }
    // Past what a session may leave (its pause, and one get's most) plus a
    // margin: the connection closes.
    return c.out.size() - c.sent <= limits_.pause_reply_bytes + limits_.max_item_bytes + (64u << 10);
  }

  /// Sends what it can of c.out. False: the connection failed.
  bool flush(Connection& c) {
    while (c.sent < c.out.size()) {
      const ssize_t n = send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
        if (errno == EINTR) continue;
        return false;
      }
      c.sent += static_cast<std::size_t>(n);
      state_.counters().bytes_written.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
    }
    c.out.clear();  // (its capacity stays)
    c.sent = 0;
    return true;
  }

  int epoll_ = -1;
  int listener_;
  bool accepting_ = true;  // the listener is in this loop's epoll
  std::chrono::steady_clock::time_point paused_at_;  // when it left it (out of descriptors)
  offheap::Cache& cache_;
  ServerState& state_;
  TextLimits limits_;
  std::uint64_t max_connections_;
  std::unordered_map<int, std::unique_ptr<Connection>> connections_;
};

}  // namespace

int main(int argc, char** argv) {
  const Config config = parse_options(argc, argv);

  // Descriptors for -c connections and a few more (as memcached raises its
  // limit); refused: a clear error rather than connections that hang.
  const rlim_t wanted = static_cast<rlim_t>(config.max_connections + 64);
  rlimit files{};
  getrlimit(RLIMIT_NOFILE, &files);
  if (files.rlim_cur < wanted) {
    rlimit raised = files;
    raised.rlim_cur = wanted;
    if (raised.rlim_max < wanted) raised.rlim_max = wanted;
    if (setrlimit(RLIMIT_NOFILE, &raised) != 0) {
      raised.rlim_max = files.rlim_max;
      raised.rlim_cur = std::min(wanted, files.rlim_max);
      setrlimit(RLIMIT_NOFILE, &raised);
      getrlimit(RLIMIT_NOFILE, &files);
      if (files.rlim_cur < wanted) {
        cannot_serve("-c " + std::to_string(config.max_connections) + " needs " + std::to_string(wanted) +
                     " open files; the limit is " + std::to_string(files.rlim_cur) + " (ulimit -n)");
      }
    }
  }
  // The port first: a taken port changes nothing on disk.
  const int listener = listen_on(config);

  offheap::Options o;
  o.capacity_bytes = config.memory_mib * 1024 * 1024;
  // Each shard holds an even share of -m: enough shards for the writers,
  // few enough that a share holds two items of -I.
  std::uint32_t shards = 1;
  while (shards < 4 * std::max(1u, std::thread::hardware_concurrency()) && shards < 64 &&
         o.capacity_bytes / (shards * 2) >= 2 * (config.item_size + 64)) {
    shards *= 2;
  }
  o.shards = shards;
  std::uint64_t cas = 1;
  if (!config.dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(config.dir, ec);
    if (ec) cannot_serve("cannot use --dir " + config.dir.string() + ": " + ec.message());
    o.path = config.dir / "store";
    o.durability = config.durability;
    cas = first_cas(config.dir, std::filesystem::exists(o.path));
  }
  std::unique_ptr<offheap::Cache> cache;
  try {
    cache = std::make_unique<offheap::Cache>(o);
  } catch (const offheap::Error& e) {
    cannot_serve(std::string("cannot open the cache: ") + e.what());
  }
  offheap::memcache::ServerSettings settings;
  settings.max_connections = config.max_connections;
  settings.limit_maxbytes = o.capacity_bytes;
  settings.threads = config.threads;
  settings.item_size_max = config.item_size;
  ServerState state(cas, settings);
  // memcached ignores flush_all times before its start: this server's start.
  const offheap::Clock* clock = o.clock;
  state.set_started_s((clock != nullptr ? clock->now_ms() : offheap::detail::default_now_ms()) / 1000);
  TextLimits limits;
  limits.max_item_bytes = config.item_size;

  g_wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);

  std::vector<std::unique_ptr<Loop>> loops;
  for (unsigned t = 0; t < config.threads; ++t) {
    loops.push_back(std::make_unique<Loop>(listener, *cache, state, limits, config.max_connections));
  }
  std::vector<std::thread> threads;
  for (auto& loop : loops) threads.emplace_back([&loop] { loop->run(); });
  for (auto& t : threads) t.join();
  loops.clear();
  close(listener);
  try {
    cache->close();
  } catch (const offheap::Error& e) {
    std::fprintf(stderr, "offheap-memcached: closing the cache: %s\n", e.what());
    return 1;
  }
  return 0;
}
