// SPDX-License-Identifier: Apache-2.0
// memcached's text protocol, the requests: one call of parse_text_request()
// reads the next request from the bytes a connection has received, and says
// what to do with them: wait for more, run a command, send an error line,
// discard a data block, hand a meta command over, or close the connection.
// No sockets, no store and no allocation: a parser over a byte buffer, so
// that it is unit-tested and fuzzed alone and an application can put the
// protocol in its own event loop.
//
// It reads what memcached 1.6.18 reads (proto_text.c: the framing, the
// tokenizer, the argument checks, in their order), so that every request,
// well-formed or not, gets the reply memcached would give; the replies a
// request gets at this stage are the errors. Its rules:
//
// Framing. A request line ends at '\n'; a '\r' just before it is dropped
// if the line has another byte. A line is cut at its first NUL byte (the C
// string memcached tokenizes ends there). Without a '\n', more than
// TextLimits::max_line_bytes buffered closes the connection unless the
// buffer starts (after at most 100 spaces) with "get " or "gets " (a long
// multi-get), which may grow to TextLimits::max_get_line_bytes first.
//
// Tokens. A line splits at spaces (only ' ': a tab belongs to its token);
// runs of spaces count as one. The first token names the command, case
// sensitive. A line with no token, or whose first token has one byte, is
// "ERROR"; so is an unknown command, or a known one with a wrong number of
// tokens (memcached counts at most 24, which only the gets reach). An
// unknown command whose last token starts with "HTTP/" closes the
// connection instead (an HTTP request: a web page must not be able to
// drive the cache), unless its first letter is one of memcached's
// dispatch letters (g, s, a, c, i, d, t), as there.
//
// noreply. For the commands that take it (storage, incr, decr, touch,
// delete, flush_all, verbosity) the last token "noreply" silences every
// reply of the command, errors included, but not a wrong token count's
// "ERROR", which comes first. A silenced error gives Step::reply with an
// empty reply (the bytes are consumed all the same).
//
// Retrieval commands (get, gets, gat, gats) come with their keys unchecked:
// memcached reads them in order and, at a key over 250 bytes, drops what it
// found and answers "CLIENT_ERROR bad command line format" (gat and gats
// have touched the keys before it): the session does the same.
//
// Storage commands (set, add, replace, append, prepend: key flags exptime
// bytes [noreply]; cas: key flags exptime bytes cas-unique [noreply]). Checked
// in this order, each failure "CLIENT_ERROR bad command line format" unless
// said: key longer than 250 bytes; flags (32-bit unsigned), exptime and
// bytes (32-bit signed) unreadable; cas unique (64-bit unsigned) unreadable;
// bytes negative. None of these reads the data block: its bytes come next
// as a line of their own, as in memcached. Then an item over the limit
// (TextLimits::too_large) gives Step::too_large: "SERVER_ERROR object too
// large for cache", its bytes + 2 discarded (TextRequest::discard, which may
// run past what is buffered), and for set the key's old value removed (the
// caller's part). Else the data block: bytes + 2 bytes, the last two
// "\r\n" (else "CLIENT_ERROR bad data chunk", the bytes + 2 consumed).
//
// Meta commands (two letters starting with 'm'): mg, ms, md, ma, mn and me
// give Step::meta with the whole line; the meta protocol's parser reads
// them (ms's data block included). Other two-letter 'm' commands: "ERROR".
//
// Not here: shutdown answers "ERROR: shutdown not enabled", as memcached
// does without -A; memcached's administrative commands (slabs, lru,
// lru_crawler, watch, cache_memlimit, extstore, refresh_certs, misbehave)
// belong to its slab allocator and crawler, which this server has not:
// "ERROR", as any unknown command. The binary protocol (deprecated
// upstream) is not spoken.
//
// Lifetimes: every string_view of a TextRequest points into the buffer
// given to parse_text_request(), valid while the caller keeps those bytes
// (until it drops the `consumed` bytes and reads more).
#pragma once

#include <offheap/memcache/numbers.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace offheap::memcache {

/// Longest key of the text protocol.
inline constexpr std::size_t kMaxKeyBytes = 250;

enum class Verb : std::uint8_t {
  get, gets, gat, gats,                       // retrieval: keys (gat, gats: and an exptime)
  set, add, replace, append, prepend, cas,    // storage: a key and a data block
  incr, decr,                                 // a key and a 64-bit delta
  touch,                                      // a key and an exptime
  delete_key,                                 // a key
  flush_all,                                  // an optional delay
  version, verbosity, quit, stats,            // the rest
};

/// What the parser needs of the server's limits.
struct TextLimits {
  /// memcached's -I (item size limit), and its accounting of an item: the
  /// key, the data, this many bytes of header (memcached 1.6.18 on a
  /// 64-bit build: 48 of item, 8 of cas, the key's NUL, the data's "\r\n")
  /// and 4 for flags other than 0. Measured against memcached 1.6.18 at
  /// -I 1m: 1,048,516 data bytes fit with a 1-byte key and flags 0.
  std::uint64_t max_item_bytes = std::uint64_t{1} << 20;
  std::uint64_t item_header_bytes = 59;
  /// A line without its '\n' past this many bytes closes the connection
  /// (memcached's 2048), unless it is a get or gets...
  std::size_t max_line_bytes = 2048;
  /// ...which may reach this many (memcached grows its buffer without a
  /// bound; a server must keep one: 16 MiB holds a multi-get of about
  /// 400,000 keys of 40 bytes, libmemcached's memslap mget of 50,000 keys
  /// a thread takes 1.9 MB).
  std::size_t max_get_line_bytes = std::size_t{16} << 20;

  /// Replies a session lets build up before it stops running requests
  /// (feed() returns; the caller sends them and feeds again); a multi-get
  /// stops between two keys once past it, and goes on when fed again.
  std::size_t pause_reply_bytes = std::size_t{1} << 20;

  constexpr bool too_large(std::string_view key, std::uint32_t flags, std::uint64_t bytes) const noexcept {
    return key.size() + bytes + item_header_bytes + (flags != 0 ? 4 : 0) > max_item_bytes;
  }
  /// memcached keeps an item larger than half of -I in chunks (its
  /// slab_chunk_max), and incr and decr refuse such an item as non-numeric.
  constexpr bool chunked(std::string_view key, std::uint32_t flags, std::uint64_t bytes) const noexcept {
    return key.size() + bytes + item_header_bytes + (flags != 0 ? 4 : 0) > max_item_bytes / 2;
  }
};

/// One request, as parse_text_request() read it (the fields its verb uses;
/// the others keep their defaults).
struct TextRequest {
  Verb verb = Verb::get;
  std::string_view key;        // storage, incr, decr, touch, delete: the key
  std::string_view keys;       // get, gets, gat, gats: the keys, as in the line (for_each_key()); unchecked
  std::uint32_t flags = 0;     // storage
  std::int32_t exptime = 0;    // storage, touch, gat, gats: as sent (0, relative, absolute, negative)
  std::uint64_t cas_unique = 0;  // cas
  std::uint64_t delta = 0;     // incr, decr
  std::uint32_t level = 0;     // verbosity
  bool has_delay = false;      // flush_all: a delay was given (delay: exptime)
  bool noreply = false;
  std::string_view data;       // storage: the data block, without its "\r\n"
  std::string_view args;       // stats: what follows the command (empty: the general counters)
  std::string_view line;       // Step::meta: the whole request line, without its end
  std::uint64_t discard = 0;   // Step::too_large: bytes after `consumed` to discard
};

enum class Step : std::uint8_t {
  need_more,  ///< nothing consumed: wait for more bytes (TextParse::wanted says how many, if known)
  command,    ///< run TextParse::request
  reply,      ///< send TextParse::reply (empty: silenced by noreply)
  too_large,  ///< send the reply unless request.noreply, discard request.discard bytes; set: remove request.key
  meta,       ///< a meta command: request.line
  close,      ///< close the connection (a line too long, an HTTP request)
};

struct TextParse {
  Step step = Step::need_more;
  std::size_t consumed = 0;     // bytes of the input this step used
  std::size_t wanted = 0;       // need_more: the bytes a storage command needs in all, if known
  std::string_view reply;       // Step::reply, too_large: the line to send, "\r\n" included (static storage)
  TextRequest request;
};

/// The key at or after byte `at` of a get's keys (TextRequest::keys);
/// empty: none left. `at` moves past it.
inline std::string_view next_key(std::string_view keys, std::size_t& at) noexcept {
  while (at < keys.size() && keys[at] == ' ') ++at;
  const std::size_t from = at;
  while (at < keys.size() && keys[at] != ' ') ++at;
  return keys.substr(from, at - from);
}

/// Calls fn(key) for each key of a get, gets, gat or gats (TextRequest::keys).
template <class F>
void for_each_key(std::string_view keys, F&& fn) {
  std::size_t at = 0;
  for (std::string_view key = next_key(keys, at); !key.empty(); key = next_key(keys, at)) fn(key);
}

namespace text_detail {

inline constexpr std::string_view kError = "ERROR\r\n";
inline constexpr std::string_view kBadFormat = "CLIENT_ERROR bad command line format\r\n";
inline constexpr std::string_view kBadChunk = "CLIENT_ERROR bad data chunk\r\n";
inline constexpr std::string_view kTooLarge = "SERVER_ERROR object too large for cache\r\n";
inline constexpr std::string_view kBadExptime = "CLIENT_ERROR invalid exptime argument\r\n";
inline constexpr std::string_view kBadDelta = "CLIENT_ERROR invalid numeric delta argument\r\n";
inline constexpr std::string_view kNoShutdown = "ERROR: shutdown not enabled\r\n";
inline constexpr std::string_view kDeleteUsage =
    "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n";

/// memcached's tokenizer counts at most this many tokens, its terminal
/// one included (MAX_TOKENS): a line with more has 23 and a remainder.
inline constexpr std::size_t kMaxTokens = 24;

/// A line's first tokens (up to kMaxTokens - 1) and how many memcached's
/// tokenize_command() would count (`count`: real tokens + 1, as its ntokens).
struct Tokens {
  std::string_view t[kMaxTokens];
  std::size_t real = 0;     // tokens in t
  std::size_t count = 0;    // memcached's ntokens
  std::string_view after_command;  // the line after the first token
};

inline Tokens tokenize(std::string_view line) noexcept {
  Tokens k;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    if (i == line.size()) break;
    std::size_t j = i;
    while (j < line.size() && line[j] != ' ') ++j;
    if (k.real == kMaxTokens - 1) {  // the remainder: memcached counts no more
      k.count = kMaxTokens;
      return k;
    }
    if (k.real == 0) k.after_command = line.substr(j);
    k.t[k.real++] = line.substr(i, j - i);
    i = j;
  }
  k.count = k.real + 1;
  return k;
}

inline TextParse reply(std::size_t consumed, std::string_view r) noexcept {
  TextParse p;
  p.step = Step::reply;
  p.consumed = consumed;
  p.reply = r;
  return p;
}
/// A reply silenced when the request said noreply.
inline TextParse reply(std::size_t consumed, std::string_view r, bool noreply) noexcept {
  return reply(consumed, noreply ? std::string_view{} : r);
}

inline bool last_is_noreply(const Tokens& k) noexcept { return k.real >= 2 && k.t[k.real - 1] == "noreply"; }

inline bool starts_a_get(std::string_view buffered) noexcept {
  std::size_t i = 0;
  while (i < buffered.size() && buffered[i] == ' ') ++i;
  if (i > 100) return false;
  const std::string_view rest = buffered.substr(i);
  return rest.substr(0, 4) == "get " || rest.substr(0, 5) == "gets ";
}

inline TextParse storage(std::string_view in, std::size_t line_end, const Tokens& k, Verb verb,
                         const TextLimits& limits) noexcept {
  const bool is_cas = verb == Verb::cas;
  const std::size_t want = is_cas ? 7 : 6;
  if (k.count != want && k.count != want + 1) return reply(line_end, kError);
  TextRequest r;
  r.verb = verb;
  r.noreply = last_is_noreply(k);
  if (k.t[1].size() > kMaxKeyBytes) return reply(line_end, kBadFormat, r.noreply);
  r.key = k.t[1];
  const auto flags = read_u32(k.t[2]);
  const auto exptime = read_i32(k.t[3]);
  const auto bytes = read_i32(k.t[4]);
  if (!flags || !exptime || !bytes) return reply(line_end, kBadFormat, r.noreply);
  r.flags = *flags;
  r.exptime = *exptime;
  if (is_cas) {
    const auto unique = read_u64(k.t[5]);
    if (!unique) return reply(line_end, kBadFormat, r.noreply);
    r.cas_unique = *unique;
  }
  if (*bytes < 0 || *bytes > 0x7FFFFFFD) return reply(line_end, kBadFormat, r.noreply);
  const auto n = static_cast<std::uint64_t>(*bytes);
  if (limits.too_large(r.key, r.flags, n)) {
    TextParse p;
    p.step = Step::too_large;
    p.consumed = line_end;
    p.reply = kTooLarge;
    r.discard = n + 2;
    p.request = r;
    return p;
  }
  if (in.size() - line_end < n + 2) {
    TextParse p;
    p.step = Step::need_more;
    p.wanted = line_end + n + 2;
    return p;
  }
  const std::string_view block = in.substr(line_end, n + 2);
  if (block.substr(n) != "\r\n") return reply(line_end + n + 2, kBadChunk, r.noreply);
  r.data = block.substr(0, n);
  TextParse p;
  p.step = Step::command;
  p.consumed = line_end + n + 2;
  p.request = r;
  return p;
}

inline TextParse command(std::size_t consumed, const TextRequest& r) noexcept {
  TextParse p;
  p.step = Step::command;
  p.consumed = consumed;
  p.request = r;
  return p;
}

inline TextParse retrieval(std::size_t line_end, const Tokens& k, Verb verb) noexcept {
  if (k.count < 3) return reply(line_end, kError);
  TextRequest r;
  r.verb = verb;
  std::string_view keys = k.after_command;
  if (verb == Verb::gat || verb == Verb::gats) {
    const auto exptime = read_i32(k.t[1]);
    if (!exptime) return reply(line_end, kBadExptime);
    r.exptime = *exptime;
    // The keys: what follows the exptime's token.
    const std::size_t at = static_cast<std::size_t>(k.t[1].data() - keys.data()) + k.t[1].size();
    keys = keys.substr(at);
  }
  // (A key over 250 bytes is the session's to answer: memcached reads the
  // keys before it, gat's touching them, and then answers the error alone.)
  r.keys = keys;
  return command(line_end, r);
}

/// The request line at the front of `in`, framed as memcached frames it
/// (ended by '\n', a '\r' before it dropped if the line has another byte,
/// cut at its first NUL), and the bytes it takes with its end; `end` 0:
/// no whole line yet.
struct Line {
  std::string_view text;
  std::size_t end = 0;
};
inline Line first_line(std::string_view in) noexcept {
  const std::size_t nl = in.find('\n');
  if (nl == std::string_view::npos) return {};
  std::string_view line = in.substr(0, nl > 1 && in[nl - 1] == '\r' ? nl - 1 : nl);
  if (const std::size_t nul = line.find('\0'); nul != std::string_view::npos) line = line.substr(0, nul);
  return {line, nl + 1};
}

/// The second letter of a meta command: mg, ms, md, ma, mn, me.
constexpr bool is_meta_letter(char c) noexcept {
  return c == 'g' || c == 's' || c == 'd' || c == 'a' || c == 'n' || c == 'e';
}

/// Step::meta for the line `line`, which takes `line_end` bytes with its end.
inline TextParse meta_line(std::size_t line_end, std::string_view line) noexcept {
  TextParse p;
  p.step = Step::meta;
  p.consumed = line_end;
  p.request.line = line;
  return p;
}

}  // namespace text_detail

/// Reads the next request from `in` (the bytes received and not yet
/// consumed). See the top of this file for the rules; `limits` are the
/// server's. Never reads past `in`; allocates nothing.
inline TextParse parse_text_request(std::string_view in, const TextLimits& limits = {}) noexcept {
  using namespace text_detail;
  const auto [line, line_end] = first_line(in);
  if (line_end == 0) {
    TextParse p;
    if (in.size() > limits.max_line_bytes &&
        (!starts_a_get(in) || in.size() > limits.max_get_line_bytes)) {
      p.step = Step::close;
    }
    return p;
  }
  // A meta line as clients send it ("mg key v", no leading space) goes to
  // the meta parser without this tokenizer (it tokenizes the line itself).
  if (line.size() >= 2 && line[0] == 'm' && (line.size() == 2 || line[2] == ' ') && is_meta_letter(line[1])) {
    return meta_line(line_end, line);
  }
  const Tokens k = tokenize(line);
  if (k.count < 2 || k.t[0].size() < 2) return reply(line_end, kError);
  const std::string_view c = k.t[0];

  if (c.size() == 2 && c[0] == 'm') return is_meta_letter(c[1]) ? meta_line(line_end, line) : reply(line_end, kError);
  if (c == "get" || c == "bget") return retrieval(line_end, k, Verb::get);
  if (c == "gets") return retrieval(line_end, k, Verb::gets);
  if (c == "gat") return retrieval(line_end, k, Verb::gat);
  if (c == "gats") return retrieval(line_end, k, Verb::gats);
  if (c == "set") return storage(in, line_end, k, Verb::set, limits);
  if (c == "add") return storage(in, line_end, k, Verb::add, limits);
  if (c == "replace") return storage(in, line_end, k, Verb::replace, limits);
  if (c == "append") return storage(in, line_end, k, Verb::append, limits);
  if (c == "prepend") return storage(in, line_end, k, Verb::prepend, limits);
  if (c == "cas") return storage(in, line_end, k, Verb::cas, limits);

  TextRequest r;
  if (c == "incr" || c == "decr") {
    if (k.count != 4 && k.count != 5) return reply(line_end, kError);
    r.verb = c == "incr" ? Verb::incr : Verb::decr;
    r.noreply = last_is_noreply(k);
    if (k.t[1].size() > kMaxKeyBytes) return reply(line_end, kBadFormat, r.noreply);
    const auto delta = read_u64(k.t[2]);
    if (!delta) return reply(line_end, kBadDelta, r.noreply);
    r.key = k.t[1];
    r.delta = *delta;
    return command(line_end, r);
  }
  if (c == "touch") {
    if (k.count != 4 && k.count != 5) return reply(line_end, kError);
    r.verb = Verb::touch;
    r.noreply = last_is_noreply(k);
    if (k.t[1].size() > kMaxKeyBytes) return reply(line_end, kBadFormat, r.noreply);
    const auto exptime = read_i32(k.t[2]);
    if (!exptime) return reply(line_end, kBadExptime, r.noreply);
    r.key = k.t[1];
    r.exptime = *exptime;
    return command(line_end, r);
  }
  if (c == "delete") {
    if (k.count < 3 || k.count > 5) return reply(line_end, kError);
    r.verb = Verb::delete_key;
    if (k.count > 3) {
      // "delete <key> 0", "delete <key> noreply", "delete <key> 0 noreply".
      const bool hold_is_zero = k.t[2] == "0";
      r.noreply = last_is_noreply(k);
      const bool valid = (k.count == 4 && (hold_is_zero || r.noreply)) || (k.count == 5 && hold_is_zero && r.noreply);
      if (!valid) return reply(line_end, kDeleteUsage, r.noreply);
    }
    if (k.t[1].size() > kMaxKeyBytes) return reply(line_end, kBadFormat, r.noreply);
    r.key = k.t[1];
    return command(line_end, r);
  }
  if (c == "flush_all") {
    if (k.count < 2 || k.count > 4) return reply(line_end, kError);
    r.verb = Verb::flush_all;
    r.noreply = last_is_noreply(k);
    if (k.count != (r.noreply ? 3u : 2u)) {
      const auto delay = read_i32(k.t[1]);
      if (!delay) return reply(line_end, kBadExptime, r.noreply);
      r.exptime = *delay;
      r.has_delay = true;
    }
    return command(line_end, r);
  }
  if (c == "version") {
    r.verb = Verb::version;
    return command(line_end, r);
  }
  if (c == "quit") {
    r.verb = Verb::quit;
    return command(line_end, r);
  }
  if (c == "verbosity") {
    if (k.count != 3 && k.count != 4) return reply(line_end, kError);
    r.verb = Verb::verbosity;
    r.noreply = last_is_noreply(k);
    const auto level = read_u32(k.t[1]);
    if (!level) return reply(line_end, kBadFormat, r.noreply);
    r.level = *level;
    return command(line_end, r);
  }
  if (c == "shutdown") return reply(line_end, kNoShutdown);
  if (c == "stats") {
    r.verb = Verb::stats;
    std::string_view a = k.after_command;
    while (!a.empty() && a.front() == ' ') a.remove_prefix(1);
    r.args = a;
    return command(line_end, r);
  }
  // An unknown command whose line ends in an HTTP version (a browser made
  // to post to this port) closes the connection, as in memcached, which
  // checks it past its first-letter dispatch only (g, s, a, c, i, d, t).
  const std::string_view letters = "gsacidt";
  if (letters.find(c[0]) == std::string_view::npos && k.t[k.real - 1].substr(0, 5) == "HTTP/") {
    TextParse p;
    p.step = Step::close;
    return p;
  }
  return reply(line_end, kError);
}

}  // namespace offheap::memcache
