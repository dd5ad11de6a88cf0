// SPDX-License-Identifier: Apache-2.0
// The text protocol's sessions against memcached itself: random command
// streams (every text command but stats and quit, keys of 250 and 251
// bytes, flags and exptimes at their edges, data blocks of the wrong
// length, noreply anywhere, malformed lines, values at the item limit and
// one past it) go one command at a time to Debian's memcached 1.6, started
// here on a free port and stopped by its PID, and to a TextSession over an
// offheap::Cache; the replies must be byte-identical, the cas uniques in
// gets and gats replies masked (each server has its own). A cas command
// takes the unique its own server last returned for the key, so that both
// the match and the mismatch are compared.
//
// Two things memcached itself does not do the same way twice are left
// out: incr and decr on values of 2^63 or more (its strtoull check for a
// '-' reads past the item's end, into whatever memory follows), and the
// spaces a shorter incr or decr result is padded with (only in place, when
// no other reference holds the item): numbers followed by spaces are
// compared without them, and the values stay below 2^63 (the largest,
// 9223372036854000000, has room for 775 incr by 1000: a stream has 60
// commands). The session tests
// pin both behaviours against memcached's answers in isolation. And a
// flush_all with a delay: its effect turns at a second's boundary, and
// memcached's seconds tick on its own timer, not on the wall clock's
// (flush_all 1 flushes the writes of the rest of its second); and one
// naming a time before the server started brings flushed items back, but
// not those memcached's background crawler unlinked meanwhile. The session
// tests pin both on a clock they move.
//
// Requires the memcached program (Debian package memcached; the README's
// test command installs it): without it the test fails and says so.
#include <offheap/memcache/text_session.hpp>

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

extern char** environ;

namespace {

using offheap::memcache::TextSession;

/// A memcached process on a free loopback port, killed by its PID at the end.
class Memcached {
 public:
  Memcached() {
    port_ = free_port();
    const std::string port = std::to_string(port_);
    std::vector<std::string> args = {"memcached", "-p", port, "-l", "127.0.0.1", "-U", "0", "-t", "1", "-m", "64"};
    if (geteuid() == 0) {
      args.push_back("-u");
      args.push_back("root");
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawnp(&pid_, "memcached", nullptr, nullptr, argv.data(), environ) != 0) {
      pid_ = 0;
      FAIL("cannot start memcached (Debian package memcached; the README's test command installs it)");
    }
    // Up within 5 s.
    for (int i = 0; i < 500 && fd_ < 0; ++i) {
      fd_ = connect_to(port_);
      if (fd_ < 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (fd_ < 0) FAIL("memcached did not accept a connection on port " << port_ << " within 5 s");
  }
  ~Memcached() {
    if (fd_ >= 0) close(fd_);
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      int status = 0;
      waitpid(pid_, &status, 0);
    }
  }
  /// Sends `request` and then "mn\r\n"; returns the replies before "MN\r\n".
  std::string ask(std::string_view request) {
    std::string all(request);
    all += "mn\r\n";
    for (std::size_t sent = 0; sent < all.size();) {
      const ssize_t n = send(fd_, all.data() + sent, all.size() - sent, MSG_NOSIGNAL);
      REQUIRE(n > 0);
      sent += static_cast<std::size_t>(n);
    }
    std::string in;
    char buf[1 << 16];
    while (in.size() < 4 || in.compare(in.size() - 4, 4, "MN\r\n") != 0) {
      const ssize_t n = recv(fd_, buf, sizeof buf, 0);
      REQUIRE(n > 0);
      in.append(buf, static_cast<std::size_t>(n));
    }
    in.resize(in.size() - 4);
    return in;
  }

 private:
  static int free_port() {
    const int s = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    REQUIRE(bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    socklen_t len = sizeof a;
    REQUIRE(getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    close(s);
    return ntohs(a.sin_port);
  }
  static int connect_to(int port) {
    const int s = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    if (connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      close(s);
      return -1;
    }
    const int one = 1;
    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return s;
  }
  pid_t pid_ = 0;
  int port_ = 0;
  int fd_ = -1;
};

/// Our side: a session over a Cache of memcached's -m 64.
struct Ours {
  offheap::Cache cache{[] {
    offheap::Options o;
    o.capacity_bytes = 64ull << 20;
    return o;
  }()};
  offheap::memcache::ServerState state;
  TextSession<offheap::CachePolicy> session{cache, state};

  std::string ask(std::string_view request) {
    std::string out, in(request);
    const auto fed = session.feed(in, out);
    REQUIRE_FALSE(fed.close);
    REQUIRE(fed.consumed == in.size());
    return out;
  }
};

/// The request's key (its second token), for the uniques of meta replies.
std::string key_of(const std::string& request) {
  const std::size_t k0 = request.find(' ');
  if (k0 == std::string::npos) return {};
  const std::size_t end = request.find_first_of(" \r\n", k0 + 1);
  return request.substr(k0 + 1, end - k0 - 1);
}

/// Splits a line at spaces.
std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> t;
  for (std::size_t a = 0, b; a <= line.size(); a = b + 1) {
    b = line.find(' ', a);
    if (b == std::string::npos) b = line.size();
    t.push_back(line.substr(a, b - a));
  }
  return t;
}

/// A meta reply's line with its cas values ("c<n>", "cas=<n>") masked (the
/// last recorded in `uniques` under `key`), its times ("t<n>", "l<n>",
/// "exp=<n>", "la=<n>") masked and appended to `times` (compared apart,
/// within a second: each server reads its own clock), and me's slab class
/// masked (this server has none).
std::string mask_meta(const std::string& line, const std::string& key, std::map<std::string, std::string>& uniques,
                      std::vector<long long>& times) {
  std::vector<std::string> t = split(line);
  const bool me = t[0] == "ME";
  std::string out;
  for (std::size_t i = 0; i < t.size(); ++i) {
    std::string& w = t[i];
    const auto number = [&](std::size_t from) {
      return w.size() > from && w.find_first_not_of("-0123456789", from) == std::string::npos;
    };
    if (i > 0 && !me && w[0] == 'c' && number(1)) {
      uniques[key] = w.substr(1);
      w = "c<cas>";
    } else if (i > 0 && !me && (w[0] == 't' || w[0] == 'l') && number(1)) {
      times.push_back(std::stoll(w.substr(1)));
      w = w.substr(0, 1) + "<time>";
    } else if (me && w.rfind("cas=", 0) == 0) {
      w = "cas=<cas>";
    } else if (me && (w.rfind("exp=", 0) == 0 || w.rfind("la=", 0) == 0)) {
      const std::size_t eq = w.find('=');
      times.push_back(std::stoll(w.substr(eq + 1)));
      w = w.substr(0, eq + 1) + "<time>";
    } else if (me && w.rfind("cls=", 0) == 0) {
      w = "cls=<class>";
    }
    out += (i == 0 ? "" : " ") + w;
  }
  return out;
}

/// Replaces the cas unique of each "VALUE <key> <flags> <bytes> <cas>" line
/// with "<cas>", and records the last one seen per key in `uniques`; masks
/// the meta replies' cas values and times (mask_meta(); `key`: the meta
/// request's).
std::string mask_cas(const std::string& replies, std::map<std::string, std::string>& uniques,
                     const std::string& key = {}, std::vector<long long>* times = nullptr) {
  std::string out;
  std::size_t i = 0;
  while (i < replies.size()) {
    std::size_t eol = replies.find("\r\n", i);
    if (eol == std::string::npos) eol = replies.size();
    std::string line = replies.substr(i, eol - i);
    std::size_t data = 0;
    static const std::vector<std::string> meta_codes = {"HD", "VA", "EN", "NF", "NS", "EX", "ME"};
    const std::string code = line.substr(0, line.find(' '));
    if (times != nullptr && std::find(meta_codes.begin(), meta_codes.end(), code) != meta_codes.end()) {
      if (code == "VA") data = std::stoull(split(line)[1]) + 2;
      i = eol + 2;
      std::string value = replies.substr(std::min(i, replies.size()), data);
      i += data;
      // A number padded with spaces by an incr, decr or ma: compared
      // without them, its length too (see the VALUE lines below).
      const std::size_t digits = value.find_first_not_of("0123456789");
      if (data > 2 && digits != 0 && digits < data - 2 && value.find_first_not_of(' ', digits) == data - 2) {
        value = value.substr(0, digits) + "\r\n";
        const std::size_t sp = line.find(' ', 3);
        line = "VA " + std::to_string(digits) + (sp == std::string::npos ? "" : line.substr(sp));
      }
      out += mask_meta(line, key, uniques, *times) + "\r\n" + value;
      continue;
    }
    if (line.rfind("VALUE ", 0) == 0) {
      std::vector<std::string> t;
      for (std::size_t a = 0, b; a <= line.size(); a = b + 1) {
        b = line.find(' ', a);
        if (b == std::string::npos) b = line.size();
        t.push_back(line.substr(a, b - a));
      }
      if (t.size() == 5) {
        uniques[t[1]] = t[4];
        line = t[0] + ' ' + t[1] + ' ' + t[2] + ' ' + t[3] + " <cas>";
      }
      data = std::stoull(t[3]) + 2;
      // A number padded with spaces by an incr or decr: compared without them
      // (memcached pads in place only while no other reference holds the
      // item, which its own threads' timing decides).
      const std::string value = replies.substr(eol + 2, data - 2);
      const std::size_t digits = value.find_first_not_of("0123456789");
      if (digits != 0 && digits != std::string::npos && value.find_first_not_of(' ', digits) == std::string::npos) {
        line = t[0] + ' ' + t[1] + ' ' + t[2] + ' ' + std::to_string(digits) + (t.size() == 5 ? " <cas>" : "");
        out += line + "\r\n" + value.substr(0, digits) + "\r\n";
        i = eol + 2 + data;
        continue;
      }
    }
    out += line + "\r\n";
    i = eol + 2;
    out.append(replies, std::min(i, replies.size()), data);  // the value's data and its end, as they are
    i += data;
  }
  return out;
}

struct Generator {
  std::mt19937_64 rng;
  std::uint64_t now_s;
  explicit Generator(std::uint64_t seed)
      : rng(seed),
        now_s(static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                .count())) {}

  std::uint64_t below(std::uint64_t n) { return rng() % n; }
  template <class T>
  const T& pick(const std::vector<T>& v) { return v[below(v.size())]; }

  /// A key; "n" (the counter incr and decr work on) only when `counter`,
  /// which no other write touches (its padding must not spread: see the top).
  std::string key(bool counter = false) {
    static const std::vector<std::string> keys = {"k0", "k1", "k2", "k3", "a\tb", "n", std::string(250, 'L'),
                                                  std::string(251, 'X')};
    if (below(12) == 0) return keys[6 + below(2)];
    return counter ? (below(3) == 0 ? keys[below(5)] : "n") : keys[below(5)];
  }
  std::string exptime() {
    const std::vector<std::string> e = {"0", "0", "0", "-1", "1000", "2592000", "2592001",
                                        std::to_string(now_s + 5000), std::to_string(now_s - 5), "abc", "4294967296"};
    return pick(e);
  }
  std::string flags() { return pick(std::vector<std::string>{"0", "0", "1", "4294967295", "4294967296", "-1", "x"}); }
  std::string data() {
    switch (below(6)) {
      case 0: return std::to_string(below(1000));
      case 1: return pick(std::vector<std::string>{" 12", "9223372036854000000", "12ab", "", "-1", "007"});
      default: {
        std::string d(below(40), 'a');
        // (No 'm': a block read as a line must not make a meta command.)
        for (char& c : d) c = static_cast<char>('n' + below(13));
        return d;
      }
    }
  }
  std::string noreply() { return below(5) == 0 ? " noreply" : ""; }

  /// One request, with "<CAS>" where the server's last unique for the key goes.
  std::string request() {
    switch (below(14)) {
      case 0: case 1: case 2: {
        static const std::vector<std::string> verbs = {"set", "set", "add", "replace", "append", "prepend", "cas"};
        const std::string verb = pick(verbs);
        std::string d = data();
        std::string len = std::to_string(d.size());
        const std::uint64_t odd = below(20);
        if (odd == 0) len = "-1";
        std::string after;  // bytes that a block declared longer than its data takes in
        if (odd == 1) {     // a bad data chunk: the block takes "\r\nZ", then "\r\n" is a line
          len = std::to_string(d.size() + 1);
          after = "Z\r\n";
        }
        if (odd == 2 && !d.empty()) len = std::to_string(d.size() - 1);
        if (odd == 3) {  // at the item limit, or one past it (1-byte key, flags 0: 1,048,516)
          d.assign(1048516 - 2 + below(2), 'v');
          len = std::to_string(d.size());
          return "set k9 0 0 " + len + noreply() + "\r\n" + d + "\r\n";
        }
        std::string line = verb + ' ' + key() + ' ' + flags() + ' ' + exptime() + ' ' + len;
        if (verb == "cas") line += below(2) == 0 ? " <CAS>" : " 12345";
        return line + noreply() + "\r\n" + d + "\r\n" + after;
      }
      case 3: case 4: {
        static const std::vector<std::string> verbs = {"get", "gets", "gat", "gats"};
        const std::string verb = pick(verbs);
        std::string line = verb;
        if (verb[1] == 'a') line += ' ' + exptime();
        for (std::uint64_t i = 0, n = 1 + below(4); i < n; ++i) line += ' ' + key(verb[1] == 'e');  // (gat: not n)
        return line + "\r\n";
      }
      case 5: return std::string(below(2) == 0 ? "incr " : "decr ") + key(true) + ' ' +
                     pick(std::vector<std::string>{"1", "5", "1000", "-1", "abc", "0"}) + noreply() + "\r\n";
      case 6: return "touch " + key() + ' ' + exptime() + noreply() + "\r\n";
      case 7: return "delete " + key(true) + pick(std::vector<std::string>{"", "", " 0", " 5", " noreply", " 0 noreply"}) + "\r\n";
      case 8: return pick(std::vector<std::string>{"flush_all\r\n", "flush_all noreply\r\n", "flush_all 0\r\n",
                                                   "flush_all -1\r\n", "flush_all abc\r\n"});
      case 9: return pick(std::vector<std::string>{"version\r\n", "verbosity 1\r\n", "verbosity\r\n", "verbosity 1 noreply\r\n"});
      case 10: return pick(std::vector<std::string>{"bogus\r\n", "\r\n", "GET k0\r\n", "get\r\n", "set k0 0 0\r\n",
                                                    "incr\r\n", "shutdown\r\n", "g\r\n", "get k0\n", "gets  k0   k1 \r\n",
                                                    "set k0 0 0 1 noreply junk\r\nx\r\n"});
      default: {
        // A few numeric values for incr and decr to work on.
        const std::string d = pick(std::vector<std::string>{"10", "0", "99", "9223372036854000000", " 7"});
        return "set n 0 0 " + std::to_string(d.size()) + "\r\n" + d + "\r\n";
      }
    }
  }
};

/// Meta commands (mg, ms, md, ma, me, mn) with their flags, right and
/// wrong, beside the classic commands that share their items.
struct MetaGenerator : Generator {
  using Generator::Generator;

  /// A key as a meta command sends it: plain, or base64 with " b" after.
  std::string meta_key(bool counter = false) {
    static const std::vector<std::string> encoded = {"azA= b", "azE= b", "bg== b", "!!!! b", "azA b",
                                                     std::string(252, 'A') + " b"};
    if (below(6) == 0) return encoded[below(encoded.size())];
    return key(counter);
  }
  std::string ttl_flag(char f) {
    return std::string(1, f) + pick(std::vector<std::string>{"0", "30", "1000", "2592001", "x", ""});
  }
  /// Some of `flags`, each at most once in all but a few requests.
  std::string some(const std::vector<std::string>& flags, std::uint64_t most) {
    std::string out;
    const std::uint64_t n = below(most + 1);
    for (std::uint64_t i = 0; i < n; ++i) out += ' ' + pick(flags);
    return out;
  }
  std::string opaque() {
    return below(8) == 0 ? "O" + std::string(32 + below(2), '9') : "O" + std::to_string(below(1000));
  }
  std::string meta_request() {
    switch (below(12)) {
      case 0: case 1: case 2: {  // mg
        std::string line = "mg " + meta_key();
        std::vector<std::string> f = {"v", "s", "t", "c", "f", "h", "l", "k", "q", "u", opaque(), ttl_flag('T'),
                                      ttl_flag('N'), ttl_flag('R'), "E1", "zz", "Fx"};
        line += some(f, 5);
        if (below(20) == 0) line += " v v";
        return line + "\r\n";
      }
      case 3: case 4: case 5: {  // ms
        std::string d = data();
        std::string len = std::to_string(d.size());
        const std::uint64_t odd = below(16);
        if (odd == 0) len = "-1";
        if (odd == 1) len = "x";
        std::string after;
        if (odd == 2) {  // a bad data chunk
          len = std::to_string(d.size() + 1);
          after = "Z\r\n";
        }
        if (odd == 3) {  // at the item limit, or one past it
          d.assign(1048516 - 2 + below(2), 'v');
          len = std::to_string(d.size());
          return "ms k9 " + len + "\r\n" + d + "\r\n";
        }
        std::string line = "ms " + meta_key() + ' ' + len;
        std::vector<std::string> f = {"MS", "ME", "MA", "MP", "MR", "MX", "MSS", "C<CAS>", "C12345", "C0", "I",
                                      "F" + flags(), ttl_flag('T'), "q", "k", "c", opaque(), "v", "zz"};
        line += some(f, 4);
        return line + "\r\n" + d + "\r\n" + after;
      }
      case 6: case 7: {  // md
        std::string line = "md " + meta_key(true);
        std::vector<std::string> f = {"q", "C<CAS>", "C12345", "I", ttl_flag('T'), "k", opaque(), "zz"};
        return line + some(f, 3) + "\r\n";
      }
      case 8: case 9: {  // ma
        std::string line = "ma " + meta_key(true);
        std::vector<std::string> f = {"N0", ttl_flag('N'), "J" + pick(std::vector<std::string>{"0", "7", "x", "18446744073709551615"}),
                                      "D" + pick(std::vector<std::string>{"1", "5", "1000", "x", "-1"}), "MI", "M+", "MD", "M-", "MX",
                                      "q", "v", "t", "c", "k", "C<CAS>", "C12345", opaque()};
        return line + some(f, 4) + "\r\n";
      }
      case 10: return "me " + meta_key() + "\r\n";
      default:
        return pick(std::vector<std::string>{"mg\r\n", "ms\r\n", "ms k0\r\n", "mz k0\r\n", "md\r\n",
                                             "ma\r\n", "me\r\n", "mg k0 a b c d e f g h i j k l m n o p q r s t\r\n"});
    }
  }
  std::string any_request() { return below(5) < 3 ? meta_request() : request(); }
};

std::string with_cas(std::string request, const std::map<std::string, std::string>& uniques) {
  const std::size_t at = request.find("<CAS>");
  if (at == std::string::npos) return request;
  // The key is the second token of the line.
  const std::size_t k0 = request.find(' ') + 1;
  const std::string key = request.substr(k0, request.find(' ', k0) - k0);
  const auto it = uniques.find(key);
  return request.replace(at, 5, it == uniques.end() ? "999999999999" : it->second);  // (none seen: no server gave it)
}

/// Sends 40 streams of 60 requests from next() to both servers and
/// requires the same replies (masked by mask_cas(); `meta`: the meta
/// replies' cas values and times too, the times compared within a second).
template <class Next>
void compare_streams(Next&& next, bool meta) {
  Memcached theirs;
  Ours ours;
  REQUIRE(theirs.ask("version\r\n").rfind("VERSION 1.6.", 0) == 0);
  std::map<std::string, std::string> their_uniques, our_uniques;
  int compared = 0;
  for (int stream = 0; stream < 40; ++stream) {
    REQUIRE(theirs.ask("flush_all\r\n") == "OK\r\n");
    REQUIRE(ours.ask("flush_all\r\n") == "OK\r\n");
    their_uniques.clear();
    our_uniques.clear();
    std::string transcript;
    for (int i = 0; i < 60; ++i) {
      const std::string request = next();
      const std::string key = key_of(request);
      std::vector<long long> their_times, our_times;
      const std::string theirs_said =
          mask_cas(theirs.ask(with_cas(request, their_uniques)), their_uniques, key, meta ? &their_times : nullptr);
      const std::string ours_said =
          mask_cas(ours.ask(with_cas(request, our_uniques)), our_uniques, key, meta ? &our_times : nullptr);
      transcript += request.size() > 300 ? request.substr(0, 60) + "...(" + std::to_string(request.size()) + " bytes)\n"
                                         : request;
      INFO("stream " << stream << ", request " << i << "; the stream so far:\n" << transcript);
      REQUIRE(ours_said == theirs_said);
      REQUIRE(our_times.size() == their_times.size());
      for (std::size_t t = 0; t < our_times.size(); ++t) {
        INFO("time " << t << ": ours " << our_times[t] << ", memcached's " << their_times[t]);
        CHECK(std::llabs(our_times[t] - their_times[t]) <= 1);
      }
      ++compared;
    }
  }
  CHECK(compared == 40 * 60);
}

}  // namespace

TEST_CASE("memcache text session answers random command streams as memcached 1.6 does", "[memcache][memcached]") {
  Generator g(Catch::rngSeed() + 20261207);
  compare_streams([&] { return g.request(); }, false);
}

TEST_CASE("memcache meta commands answer random command streams as memcached 1.6 does", "[memcache][memcached]") {
  // Meta commands (every flag memcached 1.6.18 knows, right and wrong,
  // base64 keys, quiet mode, vivify, win and stale tokens) mixed with the
  // classic ones on the same keys; cas values masked, the times they
  // report (t, l, exp, la) compared within a second of each other.
  MetaGenerator g(Catch::rngSeed() + 20261208);
  compare_streams([&] { return g.any_request(); }, true);
}
