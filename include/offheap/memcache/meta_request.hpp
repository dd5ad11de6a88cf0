// SPDX-License-Identifier: Apache-2.0
// memcached's meta protocol, the requests: parse_meta_request() reads a
// meta command (a line whose first token is mg, ms, md, ma, mn or me: the
// text parser hands it over as Step::meta) and its flags, and for ms its
// data block; the session runs it (meta_commands.hpp). No sockets, no
// store and no allocation.
//
// It reads what memcached 1.6.18 reads (proto_text.c: process_m*_command
// and _meta_flag_preparse), in its order, so that every request gets the
// reply memcached would give:
//
//   mg <key> <flags>*            get (hit: HD, or VA <bytes> then the data)
//   ms <key> <datalen> <flags>*  set, with a data block of datalen + 2 bytes
//   md <key> <flags>*            delete
//   ma <key> <flags>*            arithmetic
//   mn                           no-op: MN
//   me <key> [b]                 the item's metadata
//
// Checks, each failing command answering one line (memcached sends these
// also under q): fewer than a key: "ERROR" (me: "CLIENT_ERROR bad command
// line format"); a key over 250 bytes as sent: "CLIENT_ERROR bad command
// line format"; more than 18 flags: "CLIENT_ERROR options flags are too
// long" (mg) or "...flags too long"; then the flags, one token each, named
// by their first byte, each at most once ("CLIENT_ERROR duplicate flag"),
// known ("CLIENT_ERROR invalid flag"), their numbers read as memcached's
// strtol family does (numbers.hpp):
//   b     the key is base64 (base64.hpp; "CLIENT_ERROR error decoding key")
//   T<s>  TTL; N<s> vivify on a miss with this TTL; R<s> win a recache
//         token below this TTL; F<u32> client flags; C<u64> compare cas;
//         M<c> mode (ms: E A P R S; ma: I + D -); J<u64> initial, D<u64>
//         delta (ma); I invalidate (md: mark stale; ms: set stale below
//         the cas); q quiet; u no LRU bump; v return the value;
//         O<opaque> (at most 32 bytes) and k return themselves; s t c f h l
//         return the size, TTL, cas, flags, hit-before, last access; P, L
//         (proxy hints) are ignored.
// A number that does not read: "CLIENT_ERROR bad token in command line
// format" (F: "CLIENT_ERROR bad command line format"; J, D: "invalid
// numeric initial/delta value"); md and ma answer every flag error
// "CLIENT_ERROR invalid or duplicate flag". An ms that fails past its
// datalen swallows its data block (MetaParse::discard), as memcached does;
// one whose item is over TextLimits::too_large answers "SERVER_ERROR
// object too large for cache" and removes the key's old value
// (MetaParse::remove_key).
//
// Lifetimes: the views of a MetaRequest point into the buffer given to
// parse_meta_request() (the decoded key into the request itself: key()).
#pragma once

#include <offheap/memcache/base64.hpp>
#include <offheap/memcache/numbers.hpp>
#include <offheap/memcache/text_request.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace offheap::memcache {

enum class MetaVerb : std::uint8_t { get, set, remove, arithmetic, noop, debug };

/// memcached's MFLAG_MAX_OPAQUE_LENGTH: an O token's most bytes, its O included.
inline constexpr std::size_t kMaxOpaqueBytes = 32;
/// memcached's MFLAG_MAX_OPT_LENGTH: a meta line counts fewer tokens (its
/// terminal one included), so at most 18 flags after the key.
inline constexpr std::size_t kMaxMetaTokens = 20;

/// One meta command, as parse_meta_request() read it.
struct MetaRequest {
  MetaVerb verb = MetaVerb::noop;
  std::string_view sent_key;              ///< the key as sent (base64 when key_binary)
  bool key_binary = false;                ///< the b flag: key() is sent_key decoded
  /// (Neither array is cleared: only decoded_size and flag_count of them
  /// are read, and a request is built on every meta line.)
  std::array<char, kMaxKeyBytes> decoded;
  std::size_t decoded_size = 0;
  /// The flag tokens in the line's order (ms: after its datalen).
  std::array<std::string_view, kMaxMetaTokens> flags;
  std::size_t flag_count = 0;

  bool quiet = false;       ///< q
  bool no_update = false;   ///< u
  bool value = false;       ///< v
  bool vivify = false;      ///< N
  bool has_cas = false;     ///< C
  bool new_ttl = false;     ///< T
  bool set_stale = false;   ///< I
  bool locked = false;      ///< h, l, T, N or R (memcached reads the item's state before its bump)
  std::int32_t ttl = 0;           ///< T, as sent
  std::int32_t vivify_ttl = 0;    ///< N
  std::int32_t recache_ttl = 0;   ///< R
  std::uint32_t client_flags = 0;  ///< F
  std::uint64_t cas = 0;           ///< C
  std::uint64_t delta = 1;         ///< D (ma)
  std::uint64_t initial = 0;       ///< J (ma)
  char mode = 0;                   ///< M's letter, 0 without
  std::string_view data;           ///< ms: the data block, without its "\r\n"

  /// The key the store holds (decoded from base64 with b).
  std::string_view key() const noexcept {
    return key_binary ? std::string_view(decoded.data(), decoded_size) : sent_key;
  }
  /// The index in flags of the first O token over kMaxOpaqueBytes, or flag_count.
  std::size_t long_opaque() const noexcept {
    for (std::size_t i = 0; i < flag_count; ++i) {
      if (flags[i][0] == 'O' && flags[i].size() > kMaxOpaqueBytes) return i;
    }
    return flag_count;
  }
};

enum class MetaStep : std::uint8_t {
  need_more,  ///< nothing consumed: an ms whose data block has not all arrived
  command,    ///< run MetaParse::request
  reply,      ///< send MetaParse::reply; then discard MetaParse::discard more bytes (and remove the key if remove_key)
};

struct MetaParse {
  MetaStep step = MetaStep::need_more;
  std::size_t consumed = 0;     ///< bytes of the input this step used
  std::size_t wanted = 0;       ///< need_more: the bytes the ms needs in all
  std::string_view reply;       ///< MetaStep::reply: the line to send, "\r\n" included (static storage)
  std::uint64_t discard = 0;    ///< bytes after `consumed` to swallow (an ms's data block)
  bool remove_key = false;      ///< an ms too large: the key's old value goes (request.key())
  MetaRequest request;
};

namespace meta_detail {

using text_detail::kBadFormat;
inline constexpr std::string_view kBadToken = "CLIENT_ERROR bad token in command line format\r\n";
inline constexpr std::string_view kDuplicate = "CLIENT_ERROR duplicate flag\r\n";
inline constexpr std::string_view kInvalidFlag = "CLIENT_ERROR invalid flag\r\n";
inline constexpr std::string_view kBadKey = "CLIENT_ERROR error decoding key\r\n";
inline constexpr std::string_view kBadInitial = "CLIENT_ERROR invalid numeric initial value\r\n";
inline constexpr std::string_view kBadDelta = "CLIENT_ERROR invalid numeric delta value\r\n";
inline constexpr std::string_view kBadMLength = "CLIENT_ERROR incorrect length for M token\r\n";
inline constexpr std::string_view kInvalidOrDuplicate = "CLIENT_ERROR invalid or duplicate flag\r\n";
inline constexpr std::string_view kTooManyMg = "CLIENT_ERROR options flags are too long\r\n";
inline constexpr std::string_view kTooMany = "CLIENT_ERROR options flags too long\r\n";
inline constexpr std::string_view kLongOpaque = "CLIENT_ERROR opaque token too long\r\n";
inline constexpr std::string_view kBadMsMode = "CLIENT_ERROR invalid mode for ms M token\r\n";
inline constexpr std::string_view kBadMaMode = "CLIENT_ERROR invalid mode for ma M token\r\n";

/// Makes `p` a refusal: the line `r` to send, `consumed` bytes used and
/// `discard` more to swallow. (In place: parse_meta_request returns one
/// named MetaParse, so that it is built in the caller's object, not copied:
/// a MetaRequest is some 700 bytes.)
inline void refuse(MetaParse& p, std::size_t consumed, std::string_view r, std::uint64_t discard = 0) noexcept {
  p.step = MetaStep::reply;
  p.consumed = consumed;
  p.reply = r;
  p.discard = discard;
}

/// Decodes r.sent_key into r.decoded; false if refused.
inline bool decode_key(MetaRequest& r) noexcept {
  const auto n = base64_decode(r.sent_key, r.decoded.data(), r.decoded.size());
  if (!n) return false;
  r.decoded_size = *n;
  r.key_binary = true;
  return true;
}

/// memcached's _meta_flag_preparse over r.flags: the flags' values into
/// `r`; on a refusal, the error line (empty: none).
inline std::string_view preparse(MetaRequest& r) noexcept {
  std::uint64_t seen[2] = {};  // a bit per flag letter (0-126)
  std::string_view error;  // a refusal noted; the flags after it are read still
  for (std::size_t i = 0; i < r.flag_count; ++i) {
    const std::string_view t = r.flags[i];
    const auto o = static_cast<unsigned char>(t[0]);
    const std::uint64_t bit = std::uint64_t{1} << (o & 63);
    if (o >= 127 || (seen[o >> 6] & bit) != 0) return kDuplicate;
    seen[o >> 6] |= bit;
    const std::string_view arg = t.substr(1);
    // A 64-bit number into `field`; refused: `refusal` noted. Whether read.
    const auto u64 = [&](std::uint64_t& field, std::string_view refusal) {
      const auto v = read_u64(arg);
      if (v) {
        field = *v;
      } else {
        error = refusal;
      }
      return v.has_value();
    };
    switch (o) {
      case 'b':
        if (!decode_key(r)) error = kBadKey;
        break;
      case 'N': case 'T': case 'R': {
        r.locked = true;
        const auto v = read_i32(arg);
        if (!v) {
          error = kBadToken;
          break;
        }
        if (o == 'N') {
          r.vivify = true;
          r.vivify_ttl = *v;
        } else if (o == 'T') {
          r.ttl = *v;
          r.new_ttl = true;
        } else {
          r.recache_ttl = *v;
        }
        break;
      }
      case 'l': case 'h': r.locked = true; break;
      case 'O': case 'P': case 'L': case 'k': case 's': case 't': case 'c': case 'f': break;
      case 'v': r.value = true; break;
      case 'u': r.no_update = true; break;
      case 'q': r.quiet = true; break;
      case 'F': {
        const auto v = read_u32(arg);
        if (!v) {
          if (error.empty()) error = kBadFormat;  // (memcached names no error of its own here)
        } else {
          r.client_flags = *v;
        }
        break;
      }
      case 'C': r.has_cas = u64(r.cas, kBadToken); break;
      case 'M':
        if (t.size() != 2) {
          error = kBadMLength;
        } else {
          r.mode = t[1];
        }
        break;
      case 'J': u64(r.initial, kBadInitial); break;
      case 'D': u64(r.delta, kBadDelta); break;
      case 'I': r.set_stale = true; break;
      default: return kInvalidFlag;
    }
  }
  return error;
}

}  // namespace meta_detail

/// Reads the meta command at the front of `in`, whose first line the text
/// parser framed as `line` (TextParse::request.line) taking `line_end`
/// bytes with its end (TextParse::consumed) when it said Step::meta for
/// it. See the top of this file; `limits` are the server's.
inline MetaParse parse_meta_request(std::string_view in, std::string_view line, std::size_t line_end,
                                    const TextLimits& limits = {}) noexcept {
  using namespace meta_detail;
  MetaParse p;
  const text_detail::Tokens k = text_detail::tokenize(line);
  MetaRequest& r = p.request;
  switch (k.t[0][1]) {
    case 'g': r.verb = MetaVerb::get; break;
    case 's': r.verb = MetaVerb::set; break;
    case 'd': r.verb = MetaVerb::remove; break;
    case 'a': r.verb = MetaVerb::arithmetic; break;
    case 'n': r.verb = MetaVerb::noop; break;
    default: r.verb = MetaVerb::debug; break;
  }
  p.step = MetaStep::command;
  p.consumed = line_end;
  if (r.verb == MetaVerb::noop) return p;
  if (r.verb == MetaVerb::debug) {
    if (k.count < 3 || k.t[1].size() > kMaxKeyBytes) { refuse(p, line_end, kBadFormat); return p; }
    r.sent_key = k.t[1];
    if (k.count >= 4 && k.t[2] == "b" && !decode_key(r)) { refuse(p, line_end, kBadFormat); return p; }
    return p;
  }
  if (k.count < 3) { refuse(p, line_end, text_detail::kError); return p; }
  if (k.t[1].size() > kMaxKeyBytes) { refuse(p, line_end, kBadFormat); return p; }
  r.sent_key = k.t[1];
  const bool set = r.verb == MetaVerb::set;
  if (set && k.count == 3) { refuse(p, line_end, kBadFormat); return p; }
  if (k.count > kMaxMetaTokens) { refuse(p, line_end, r.verb == MetaVerb::get ? kTooManyMg : kTooMany); return p; }
  std::uint64_t block = 0;  // ms: the data block's bytes, its "\r\n" included
  if (set) {
    const auto n = read_i32(k.t[2]);
    if (!n || *n < 0 || *n > 0x7FFFFFFD) { refuse(p, line_end, kBadFormat); return p; }
    block = static_cast<std::uint64_t>(*n) + 2;
  }
  const std::size_t first = set ? 3 : 2;
  for (std::size_t i = first; i < k.real; ++i) r.flags[r.flag_count++] = k.t[i];
  const std::string_view error = preparse(r);
  if (!error.empty()) {
    if (r.verb == MetaVerb::remove || r.verb == MetaVerb::arithmetic) {
      refuse(p, line_end, kInvalidOrDuplicate);
    } else {
      refuse(p, line_end, error, block);  // (ms: its block swallowed)
    }
    return p;
  }
  switch (r.verb) {
    case MetaVerb::remove:
      if (r.long_opaque() != r.flag_count) { refuse(p, line_end, kLongOpaque); return p; }
      return p;
    case MetaVerb::arithmetic:
      switch (r.mode) {
        case 0: case 'I': case '+': case 'D': case '-': return p;
        default: { refuse(p, line_end, kBadMaMode); return p; }
      }
    case MetaVerb::get: return p;
    default: break;
  }
  // ms: its mode, its opaque, its size, then its block.
  switch (r.mode) {
    case 0: case 'E': case 'A': case 'P': case 'R': case 'S': break;
    default: { refuse(p, line_end, kBadMsMode, block); return p; }
  }
  if (r.long_opaque() != r.flag_count) { refuse(p, line_end, kLongOpaque, block); return p; }
  if (limits.too_large(r.key(), r.client_flags, block - 2)) {
    refuse(p, line_end, text_detail::kTooLarge, block);
    p.remove_key = true;  // (request.key() says which)
    return p;
  }
  if (in.size() - line_end < block) {
    p.step = MetaStep::need_more;
    p.consumed = 0;
    p.wanted = line_end + block;
    return p;
  }
  const std::string_view data = in.substr(line_end, block);
  p.consumed = line_end + block;
  if (data.substr(block - 2) != "\r\n") { refuse(p, p.consumed, text_detail::kBadChunk); return p; }
  r.data = data.substr(0, block - 2);
  return p;
}

/// parse_meta_request() of the meta command at the front of `in`, its
/// line framed here (need_more until `in` holds a whole line).
inline MetaParse parse_meta_request(std::string_view in, const TextLimits& limits = {}) noexcept {
  const auto [line, line_end] = text_detail::first_line(in);
  if (line_end == 0) return MetaParse{};
  return parse_meta_request(in, line, line_end, limits);
}

}  // namespace offheap::memcache
