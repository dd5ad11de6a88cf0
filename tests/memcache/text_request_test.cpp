// SPDX-License-Identifier: Apache-2.0
// The text protocol's request parser (memcache/text_request.hpp) and its
// number readers (memcache/numbers.hpp): the readers against the C
// library's strtol family as memcached 1.6.18 calls it (util.c), and the
// parser against the replies memcached 1.6.18 gave to the same bytes
// (recorded from Debian's memcached, each case's comment quoting it).
#include <offheap/memcache/numbers.hpp>
#include <offheap/memcache/text_request.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

using offheap::memcache::parse_text_request;
using offheap::memcache::read_i32;
using offheap::memcache::read_u32;
using offheap::memcache::read_u64;
using offheap::memcache::Step;
using offheap::memcache::TextLimits;
using offheap::memcache::TextParse;
using offheap::memcache::Verb;

namespace {

// memcached's util.c readers, restated on the C library for the
// comparison (the token NUL-terminated, as memcached's tokenizer leaves it).
bool is_c_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }
std::optional<std::uint64_t> c_strtoull(const std::string& s) {
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (errno == ERANGE || end == s.c_str()) return std::nullopt;
  if (!(is_c_space(*end) || *end == '\0')) return std::nullopt;
  if (static_cast<long long>(v) < 0 && std::strchr(s.c_str(), '-') != nullptr) return std::nullopt;
  return v;
}
std::optional<std::int32_t> c_strtol32(const std::string& s) {
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (errno == ERANGE || end == s.c_str()) return std::nullopt;
  if (!(is_c_space(*end) || *end == '\0')) return std::nullopt;
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(static_cast<unsigned long>(v)));
}

std::string random_token(std::mt19937_64& rng) {
  static const std::string alphabet = "0123456789+- \t\rx";
  static const char* const seeds[] = {"18446744073709551615", "18446744073709551616", "9223372036854775807",
                                      "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
                                      "4294967295", "4294967296", "2147483647", "2147483648", "-2147483649"};
  std::string s;
  if (rng() % 3 == 0) s = seeds[rng() % std::size(seeds)];
  const std::size_t n = rng() % 6;
  for (std::size_t i = 0; i < n; ++i) {
    const char c = alphabet[rng() % alphabet.size()];
    if (rng() % 2 == 0) s.insert(s.begin(), c); else s.push_back(c);
  }
  s.erase(std::remove(s.begin(), s.end(), ' '), s.end());  // a token holds no space
  return s;
}

TextParse parse(std::string_view in, const TextLimits& limits = {}) { return parse_text_request(in, limits); }

/// The replies a pipeline of requests gets at the parser's stage: each
/// reply, "<cmd>" for a command, "<too_large>"'s reply, "<meta>", and
/// "<need_more>" / "<close>" where the parse stops.
std::string replies(std::string_view in, const TextLimits& limits = {}) {
  std::string out;
  for (;;) {
    const TextParse p = parse(in, limits);
    switch (p.step) {
      case Step::need_more: return out + "<need_more>";
      case Step::close: return out + "<close>";
      case Step::reply: out += p.reply; break;
      case Step::command: out += "<cmd>"; break;
      case Step::meta: out += "<meta>"; break;
      case Step::too_large:
        if (!p.request.noreply) out += p.reply;
        if (p.consumed + p.request.discard > in.size()) return out + "<discarding>";
        in.remove_prefix(static_cast<std::size_t>(p.request.discard));
        break;
    }
    REQUIRE(p.consumed > 0);
    in.remove_prefix(p.consumed);
    if (in.empty()) return out;
  }
}

}  // namespace

TEST_CASE("memcache numbers read as memcached's strtol and strtoul calls do", "[memcache]") {
  CHECK(read_u32("0") == 0u);
  CHECK(read_u32("4294967295") == 4294967295u);
  CHECK(read_u32("4294967296") == 0u);   // the low 32 bits (memcached stores flags 0)
  CHECK(read_u32("-1") == std::nullopt);
  CHECK(read_u32("-0") == 0u);
  CHECK(read_u32("+7") == 7u);
  CHECK(read_u32("7x") == std::nullopt);
  CHECK(read_u32("7\tx") == 7u);          // ends at white space, the rest ignored
  CHECK(read_u32("\t7") == 7u);
  CHECK(read_u32("") == std::nullopt);
  CHECK(read_u32("+") == std::nullopt);
  CHECK(read_i32("-1") == -1);
  CHECK(read_i32("2592000") == 2592000);
  CHECK(read_i32("4294967295") == -1);    // strtol's long, truncated to int32
  CHECK(read_i32("4294967297") == 1);
  CHECK(read_i32("9223372036854775807") == -1);
  CHECK(read_i32("9223372036854775808") == std::nullopt);  // ERANGE
  CHECK(read_i32("-9223372036854775808") == 0);
  CHECK(read_u64("18446744073709551615") == 18446744073709551615ull);
  CHECK(read_u64("18446744073709551616") == std::nullopt);
  CHECK(read_u64("-9223372036854775807") == std::nullopt);  // 2^63 + 1 once negated: C refuses it
  CHECK(read_u64("-18446744073709551615") == 1u);

  std::mt19937_64 rng(20261207);
  for (int i = 0; i < 200000; ++i) {
    const std::string t = random_token(rng);
    INFO("token [" << t << "]");
    REQUIRE(read_u64(t) == c_strtoull(t));
    const std::optional<std::uint64_t> u = c_strtoull(t);
    REQUIRE(read_u32(t) == (u ? std::optional<std::uint32_t>(static_cast<std::uint32_t>(*u)) : std::nullopt));
    REQUIRE(read_i32(t) == c_strtol32(t));
  }
}

TEST_CASE("memcache text requests: framing, tokens and unknown commands as memcached answers them", "[memcache]") {
  CHECK(replies("bogus\r\n") == "ERROR\r\n");
  CHECK(replies("\r\n") == "ERROR\r\n");
  CHECK(replies("\n") == "ERROR\r\n");
  CHECK(replies("g\r\n") == "ERROR\r\n");            // a one-byte command
  CHECK(replies("GET a\r\n") == "ERROR\r\n");        // case sensitive
  CHECK(replies("get\r\n") == "ERROR\r\n");
  CHECK(replies("get a\n") == "<cmd>");               // '\n' alone ends a line
  CHECK(replies("get a b c d\r\nget  a\r\n") == "<cmd><cmd>");
  CHECK(replies("mn\r\nme a\r\nmx\r\n") == "<meta><meta>ERROR\r\n");
  CHECK(replies("shutdown\r\nslabs\r\nlru\r\ncache_memlimit\r\n") ==
        "ERROR: shutdown not enabled\r\nERROR\r\nERROR\r\nERROR\r\n");
  CHECK(replies("verbosity 1\r\nverbosity\r\nflush_all\r\nflush_all 0\r\nflush_all noreply\r\nflush_all -1\r\n") ==
        "<cmd>ERROR\r\n<cmd><cmd><cmd><cmd>");
  CHECK(replies("flush_all abc\r\nflush_all noreply 5\r\nflush_all 1 2 3\r\n") ==
        "CLIENT_ERROR invalid exptime argument\r\nCLIENT_ERROR invalid exptime argument\r\nERROR\r\n");
  CHECK(replies("version\r\nquit\r\nstats\r\nstats items\r\n") == "<cmd><cmd><cmd><cmd>");
  // An HTTP request closes the connection (memcached: a web page must not
  // drive the cache), past memcached's first-letter dispatch only.
  CHECK(replies("GET / HTTP/1.1\r\nHost: x\r\n") == "<close>");
  CHECK(replies("POST /x HTTP/1.0\r\n") == "<close>");
  CHECK(replies("get / HTTP/1.1\r\n") == "<cmd>");
  CHECK(replies("gxt / HTTP/1.1\r\nsomething HTTP/2\r\nxyz HTTP/2\r\n") == "ERROR\r\nERROR\r\n<close>");
  CHECK(replies("bogus HTTP\r\n") == "ERROR\r\n");

  SECTION("a line is cut at a NUL byte") {
    const TextParse p = parse(std::string_view("get a\0b\r\n", 9));
    REQUIRE(p.step == Step::command);
    CHECK(p.consumed == 9);
    CHECK(p.request.keys == " a");
  }
  SECTION("without its newline a line waits, then closes past 2048 bytes unless a get") {
    CHECK(parse("get a").step == Step::need_more);
    CHECK(parse(std::string(2048, 'x')).step == Step::need_more);
    CHECK(parse(std::string(2049, 'x')).step == Step::close);
    CHECK(parse("get " + std::string(5000, 'k')).step == Step::need_more);
    CHECK(parse(std::string(100, ' ') + "gets " + std::string(5000, 'k')).step == Step::need_more);
    CHECK(parse(std::string(101, ' ') + "get " + std::string(5000, 'k')).step == Step::close);
    TextLimits small;
    small.max_get_line_bytes = 4096;
    CHECK(parse("get " + std::string(5000, 'k'), small).step == Step::close);
  }
  SECTION("the stats arguments and the quit and version commands") {
    const TextParse p = parse("stats  slabs  x\r\n");
    REQUIRE(p.step == Step::command);
    CHECK(p.request.verb == Verb::stats);
    CHECK(p.request.args == "slabs  x");
    CHECK(parse("quit\r\n").request.verb == Verb::quit);
    CHECK(parse("version extra\r\n").request.verb == Verb::version);
  }
  SECTION("the meta commands are handed over with their line") {
    const TextParse p = parse("mg foo v t\r\nrest");
    REQUIRE(p.step == Step::meta);
    CHECK(p.request.line == "mg foo v t");
    CHECK(p.consumed == 12);
  }
}

TEST_CASE("memcache text requests: retrieval commands", "[memcache]") {
  const TextParse g = parse("get a bb  ccc\r\n");
  REQUIRE(g.step == Step::command);
  CHECK(g.request.verb == Verb::get);
  std::vector<std::string> keys;
  offheap::memcache::for_each_key(g.request.keys, [&](std::string_view k) { keys.emplace_back(k); });
  CHECK(keys == std::vector<std::string>{"a", "bb", "ccc"});

  // Past memcached's 24 tokens the keys go on.
  std::string many = "gets";
  for (int i = 0; i < 40; ++i) many += " k" + std::to_string(i);
  many += "\r\n";
  const TextParse m = parse(many);  // (views into `many`)
  REQUIRE(m.step == Step::command);
  CHECK(m.request.verb == Verb::gets);
  int n = 0;
  offheap::memcache::for_each_key(m.request.keys, [&](std::string_view k) { CHECK(k == "k" + std::to_string(n++)); });
  CHECK(n == 40);

  // Keys come unchecked (a key over 250 bytes is the session's to answer).
  CHECK(parse("get " + std::string(250, 'k') + "\r\n").step == Step::command);
  CHECK(replies("get a " + std::string(251, 'k') + " b\r\n") == "<cmd>");

  // gat and gats: an exptime, then the keys (none is allowed: "END").
  const TextParse t = parse("gat 10 a b\r\n");
  REQUIRE(t.step == Step::command);
  CHECK(t.request.verb == Verb::gat);
  CHECK(t.request.exptime == 10);
  keys.clear();
  offheap::memcache::for_each_key(t.request.keys, [&](std::string_view k) { keys.emplace_back(k); });
  CHECK(keys == std::vector<std::string>{"a", "b"});
  const TextParse none = parse("gats -1\r\n");
  REQUIRE(none.step == Step::command);
  CHECK(none.request.exptime == -1);
  CHECK(none.request.keys.empty());
  // memcached: "gats" -> ERROR, "gat a" -> CLIENT_ERROR invalid exptime argument.
  CHECK(replies("gats\r\ngat a\r\n") == "ERROR\r\nCLIENT_ERROR invalid exptime argument\r\n");
}

TEST_CASE("memcache text requests: storage commands and their data blocks", "[memcache]") {
  const TextParse s = parse("set a 5 -1 3\r\nxyz\r\nget a\r\n");
  REQUIRE(s.step == Step::command);
  CHECK(s.request.verb == Verb::set);
  CHECK(s.request.key == "a");
  CHECK(s.request.flags == 5);
  CHECK(s.request.exptime == -1);
  CHECK(s.request.data == "xyz");
  CHECK_FALSE(s.request.noreply);
  CHECK(s.consumed == 19);

  const TextParse c = parse("cas k 0 0 1 18446744073709551615 noreply\r\nx\r\n");
  REQUIRE(c.step == Step::command);
  CHECK(c.request.verb == Verb::cas);
  CHECK(c.request.cas_unique == 18446744073709551615ull);
  CHECK(c.request.noreply);
  CHECK(c.request.data == "x");

  for (const char* verb : {"add", "replace", "append", "prepend"}) {
    const TextParse p = parse(std::string(verb) + " k 0 0 0\r\n\r\n");
    REQUIRE(p.step == Step::command);
    CHECK(p.request.data.empty());
  }

  SECTION("the data block waits for all its bytes") {
    const std::string whole = "set a 0 0 10\r\n0123456789\r\n";
    for (std::size_t cut = 0; cut < whole.size(); ++cut) {
      const TextParse p = parse(std::string_view(whole).substr(0, cut));
      REQUIRE(p.step == Step::need_more);
      CHECK(p.consumed == 0);
      if (cut >= 14) CHECK(p.wanted == whole.size());
    }
    CHECK(parse(whole).step == Step::command);
  }
  // memcached: "CLIENT_ERROR bad data chunk", then the rest of the block's
  // line as a request of its own ("\n": ERROR).
  CHECK(replies("set b 0 0 2\r\nxyz\r\nget b\r\n") == "CLIENT_ERROR bad data chunk\r\nERROR\r\n<cmd>");
  CHECK(replies("set d 0 0 1\nx\nget d\n") == "CLIENT_ERROR bad data chunk\r\nERROR\r\n");
  // A bad line reads no block: its bytes come next as a line.
  CHECK(replies("set " + std::string(251, 'k') + " 0 0 1\r\nx\r\n") ==
        "CLIENT_ERROR bad command line format\r\nERROR\r\n");
  CHECK(replies("set b 0 0 -1\r\n") == "CLIENT_ERROR bad command line format\r\n");
  CHECK(replies("set b 0 0 abc\r\n") == "CLIENT_ERROR bad command line format\r\n");
  CHECK(replies("set b -1 0 1\r\nx\r\n") == "CLIENT_ERROR bad command line format\r\nERROR\r\n");
  CHECK(replies("cas a 0 0 1\r\nx\r\ncas a 0 0 1 abc\r\nx\r\n") ==
        "ERROR\r\nERROR\r\nCLIENT_ERROR bad command line format\r\nERROR\r\n");
  CHECK(replies("set c 0 0\r\n") == "ERROR\r\n");
  // The last token decides noreply; another one there is ignored.
  CHECK(parse("set c 0 0 1 junk\r\nx\r\n").step == Step::command);
  CHECK_FALSE(parse("set c 0 0 1 junk\r\nx\r\n").request.noreply);
  // noreply silences the errors after the token count's.
  CHECK(replies("set b 0 0 abc noreply\r\nset b 0 0 2 noreply\r\nxyz\r\n") == "ERROR\r\n");
  CHECK(replies("set b 0 0 noreply\r\n").empty());  // the count is right, "noreply" is the length: a silenced error
  // More than memcached's 23 tokens: the count is wrong.
  std::string long_set = "set k 0 0 1";
  for (int i = 0; i < 30; ++i) long_set += " x";
  CHECK(replies(long_set + "\r\n") == "ERROR\r\n");

  SECTION("an item over the limit is refused and its block discarded") {
    TextLimits limits;  // 1 MiB: 1,048,516 bytes fit with a 1-byte key and flags 0 (memcached 1.6.18)
    CHECK_FALSE(limits.too_large("k", 0, 1048516));
    CHECK(limits.too_large("k", 0, 1048517));
    CHECK_FALSE(limits.too_large("k", 5, 1048512));
    CHECK(limits.too_large("k", 5, 1048513));
    CHECK_FALSE(limits.too_large(std::string(250, 'k'), 0, 1048267));
    CHECK(limits.too_large(std::string(250, 'k'), 0, 1048268));
    const TextParse p = parse("set k 0 0 1048517\r\nxx", limits);
    REQUIRE(p.step == Step::too_large);
    CHECK(p.reply == "SERVER_ERROR object too large for cache\r\n");
    CHECK(p.consumed == 19);
    CHECK(p.request.discard == 1048519);
    CHECK(p.request.key == "k");
    CHECK(p.request.verb == Verb::set);
    TextLimits tiny;
    tiny.max_item_bytes = 100;
    CHECK(replies("set k 0 0 50\r\n" + std::string(50, 'v') + "\r\nget k\r\n", tiny) ==
          "SERVER_ERROR object too large for cache\r\n<cmd>");
    CHECK(replies("add k 0 0 50 noreply\r\n" + std::string(50, 'v') + "\r\nget k\r\n", tiny) == "<cmd>");
  }
}

TEST_CASE("memcache text requests: incr, decr, touch, delete and verbosity", "[memcache]") {
  const TextParse i = parse("incr n 18446744073709551615\r\n");
  REQUIRE(i.step == Step::command);
  CHECK(i.request.verb == Verb::incr);
  CHECK(i.request.delta == 18446744073709551615ull);
  const TextParse d = parse("decr n 100 noreply\r\n");
  REQUIRE(d.step == Step::command);
  CHECK(d.request.verb == Verb::decr);
  CHECK(d.request.noreply);
  // memcached: both "CLIENT_ERROR invalid numeric delta argument".
  CHECK(replies("incr n -1\r\nincr n abc\r\n") ==
        "CLIENT_ERROR invalid numeric delta argument\r\nCLIENT_ERROR invalid numeric delta argument\r\n");
  CHECK(replies("incr n\r\nincr n 1 2 3\r\n") == "ERROR\r\nERROR\r\n");
  CHECK(replies("incr " + std::string(251, 'k') + " 1\r\n") == "CLIENT_ERROR bad command line format\r\n");

  const TextParse t = parse("touch a 10\r\n");
  REQUIRE(t.step == Step::command);
  CHECK(t.request.verb == Verb::touch);
  CHECK(t.request.exptime == 10);
  CHECK(replies("touch a x\r\ntouch a x noreply\r\n") == "CLIENT_ERROR invalid exptime argument\r\n");

  // memcached: DELETED, NOT_FOUND, then the usage error for "delete a 5";
  // "delete a noreply" silent.
  CHECK(replies("delete a 0\r\ndelete a\r\ndelete a 5\r\ndelete a noreply\r\n") ==
        "<cmd><cmd>CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n<cmd>");
  CHECK(parse("delete a 0 noreply\r\n").request.noreply);
  CHECK(replies("delete a 5 noreply\r\ndelete a 0 x\r\ndelete\r\ndelete a 0 noreply x\r\n") ==
        "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\nERROR\r\nERROR\r\n");
  CHECK(parse("delete a\r\n").request.key == "a");

  const TextParse v = parse("verbosity 7 noreply\r\n");
  REQUIRE(v.step == Step::command);
  CHECK(v.request.level == 7);
  CHECK(v.request.noreply);
  CHECK(replies("verbosity x\r\nverbosity noreply\r\n") == "CLIENT_ERROR bad command line format\r\n");
}

TEST_CASE("memcache text requests: any bytes give a step that consumes or waits, never past the input", "[memcache]") {
  std::mt19937_64 rng(7);
  static const char* const words[] = {"get", "gets", "gat", "set", "cas", "add", "incr", "delete", "touch",
                                      "flush_all", "mg", "ms", "noreply", "0", "-1", "1", "10", "k", "\r", "\n",
                                      "\r\n", " ", "  ", "\0", "4294967296", "verbosity", "stats"};
  TextLimits limits;
  limits.max_item_bytes = 300;
  limits.max_line_bytes = 64;
  limits.max_get_line_bytes = 128;
  for (int round = 0; round < 20000; ++round) {
    std::string in;
    const int n = static_cast<int>(rng() % 24);
    for (int i = 0; i < n; ++i) {
      if (rng() % 8 == 0) {
        in.push_back(static_cast<char>(rng()));
      } else {
        const char* w = words[rng() % std::size(words)];
        in.append(w, std::strlen(w) == 0 ? 1 : std::strlen(w));
        if (rng() % 2 == 0) in.push_back(' ');
      }
    }
    std::string_view rest = in;
    for (int steps = 0; steps < 100 && !rest.empty(); ++steps) {
      const TextParse p = parse_text_request(rest, limits);
      INFO("input [" << in << "]");
      if (p.step == Step::need_more || p.step == Step::close) {
        REQUIRE(p.consumed == 0);
        break;
      }
      REQUIRE(p.consumed > 0);
      REQUIRE(p.consumed <= rest.size());
      if (p.step == Step::command) {
        const TextParse again = parse_text_request(rest.substr(0, p.consumed), limits);
        REQUIRE(again.step == Step::command);  // a request needs nothing past what it consumed
        REQUIRE(again.consumed == p.consumed);
      }
      if (p.step == Step::too_large) REQUIRE(p.request.discard > 0);
      rest.remove_prefix(p.step == Step::too_large ? rest.size() : p.consumed);
    }
  }
}
