// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the memcache protocols' engine (include/offheap/memcache/:
// the classic text commands and the meta commands), the bytes a hostile
// client may send.
//
// An input is one byte of setup, then the bytes of a connection. The setup
// picks the limits (the item size, the line limits, the reply limits: small
// ones reach every limit's path in a few bytes) and how the bytes arrive:
// whole, or cut into pieces at points drawn from a seed. Two sessions, each
// over its own Cache on a fixed clock and with the same first cas unique,
// get the same bytes: one whole, one in pieces, each piece fed as a
// connection would (the unused bytes kept, the new ones appended).
//
// The oracle:
//   - the two transcripts (the replies, and where each stopped: closed or
//     waiting) are byte-identical: how the bytes
//     are cut never changes what the server says (but a line over the limit
//     closes the connection when a piece ends inside it, where the whole
//     input had its end of line: then the replies before the close are
//     the whole's first ones);
//   - a session never consumes more than it was given, and what a
//     connection keeps buffered stays under the limits' bound (a line, a get
//     line, or a data block of the item limit, plus one piece);
//   - a paused session always makes progress when fed again, and one feed's
//     replies stay within the pause and one request's reply (an item's,
//     or stats': a multi-get stops between two keys);
//   - no crash, no sanitizer report, no hang (libFuzzer's -timeout).
// A finding prints "memcache_fuzz: FINDING [tag]: ..." and traps.
#include <offheap/memcache/text_session.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>
#include <algorithm>

namespace {

struct FixedClock : offheap::Clock {
  std::uint64_t now_ms() const noexcept override { return 1'800'000'000'000; }
};

[[noreturn]] void finding(const char* tag, const std::string& what) {
  std::fprintf(stderr, "memcache_fuzz: FINDING [%s]: %s\n", tag, what.c_str());
  __builtin_trap();
}

struct Transcript {
  std::string out;
  bool closed = false;
};

/// Feeds `input` to a fresh session in pieces ending at `cuts` (sorted,
/// the last = input.size()), as a connection does.
Transcript run(std::string_view input, const std::vector<std::size_t>& cuts,
               const offheap::memcache::TextLimits& limits) {
  static const FixedClock clock;
  offheap::Options o;
  o.capacity_bytes = 8 << 20;
  o.clock = &clock;
  o.background_maintenance = false;
  o.shards = 2;
  offheap::Cache cache(o);
  offheap::memcache::ServerState state(1);
  offheap::memcache::TextSession<offheap::CachePolicy> session(cache, state, limits);
  Transcript t;
  std::string buffered;
  std::size_t given = 0;
  const std::size_t bound = std::max<std::size_t>(limits.max_get_line_bytes, limits.max_item_bytes + 64) + 1;
  for (const std::size_t cut : cuts) {
    buffered.append(input.substr(given, cut - given));
    const std::size_t piece = cut - given;
    given = cut;
    for (int rounds = 0;; ++rounds) {
      if (rounds > 1'000'000) finding("progress", "a session fed again a million times without finishing");
      const std::size_t before = buffered.size();
      std::string out;  // (sent at once: the transcript keeps it)
      const auto fed = session.feed(buffered, out);
      t.out += out;
      if (fed.consumed > buffered.size()) finding("consumed", "a session consumed more than it was given");
      if (fed.paused && fed.consumed == 0 && out.empty()) finding("progress", "a paused session did nothing when fed again");
      // (One request's reply past the pause: an item's, or stats' 1 KB.)
      if (out.size() > limits.pause_reply_bytes + limits.max_item_bytes + 4096) {
        finding("replies", std::to_string(out.size()) + " bytes of replies from one feed, past the pause and one reply");
      }
      buffered.erase(0, fed.consumed);
      if (fed.close) {
        t.closed = true;
        t.out += "<close>";
        return t;
      }
      if (fed.paused) {
        (void)before;
        t.out += "<sent>";
        continue;  // the replies went out; the rest runs now
      }
      break;
    }
    if (buffered.size() > bound + piece) {
      finding("buffered", std::to_string(buffered.size()) + " bytes kept, past the bound " + std::to_string(bound));
    }
  }
  t.out += "<waiting " + std::to_string(buffered.size()) + ">";
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t setup = data[0];
  const std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);
  offheap::memcache::TextLimits limits;
  if (setup & 1) {
    limits.max_item_bytes = 128;
    limits.max_line_bytes = 64;
    limits.max_get_line_bytes = 256;
    limits.pause_reply_bytes = 64;
  }
  // The pieces: whole, or cut every 1-16 bytes (drawn from the setup byte).
  std::vector<std::size_t> whole{input.size()};
  std::vector<std::size_t> pieces;
  std::uint64_t x = 0x9E3779B97F4A7C15ull * (setup | 1);
  for (std::size_t at = 0; at < input.size();) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    at = std::min(input.size(), at + 1 + static_cast<std::size_t>(x % 16));
    pieces.push_back(at);
  }
  if (pieces.empty()) pieces.push_back(0);
  const Transcript a = run(input, whole, limits);
  const Transcript b = run(input, pieces, limits);
  // The pauses may fall at other points with other cuts: compare without them.
  // (And without the values of stats lines: rusage and uptime move.)
  const auto without_pauses = [](std::string s) {
    for (std::size_t at; (at = s.find("<sent>")) != std::string::npos;) s.erase(at, 6);
    for (std::size_t at = 0; (at = s.find("STAT ", at)) != std::string::npos;) {
      const std::size_t value = s.find(' ', at + 5);
      const std::size_t end = s.find("\r\n", at);
      if (value != std::string::npos && end != std::string::npos && value < end) s.erase(value, end - value);
      at += 5;
    }
    return s;
  };
  const std::string wa = without_pauses(a.out), wb = without_pauses(b.out);
  if (b.closed && wa != wb) {
    // A line longer than the limit closes when a piece ends inside it (as
    // memcached's reads decide), where the whole input had its '\n': the
    // pieces' replies are then the start of the whole's.
    const std::string head = wb.substr(0, wb.size() - 7);  // (without "<close>")
    if (wa.compare(0, head.size(), head) != 0) {
      finding("cuts", "the replies before a close in pieces are not the whole's:\n--- whole\n" + a.out +
                          "\n--- in pieces\n" + b.out);
    }
    return 0;
  }
  if (wa != wb) {
    finding("cuts", "the replies differ when the bytes arrive in pieces:\n--- whole\n" + a.out + "\n--- in pieces\n" +
                        b.out);
  }
  return 0;
}
