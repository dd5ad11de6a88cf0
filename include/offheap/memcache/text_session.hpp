// SPDX-License-Identifier: Apache-2.0
// memcached's text protocol over an offheap store: one TextSession per
// connection runs the requests parse_text_request() reads (text_request.hpp)
// against a shared OffHeapStore and appends memcached's replies to the
// connection's output; the meta commands among them go to its
// MetaCommands (meta_request.hpp, meta_commands.hpp). No sockets: the
// caller reads and writes them.
//
//   TextSession<CachePolicy> s(cache, state);
//   std::string out;
//   const auto fed = s.feed(received, out);   // runs every whole request
//   send(out); received.erase(0, fed.consumed);
//   if (fed.close) close the connection;
//
// Each item is the store's value: a header (cas unique, client flags,
// deadline, access time, state bits) and the data (item.hpp). Every
// command does what memcached 1.6.18 does, with its replies byte for byte:
//   get, gets           VALUE <key> <flags> <bytes>[ <cas>] lines, then END;
//                       a key absent, expired or holding a value this
//                       protocol did not write is a miss; a hit marks the
//                       item fetched (item_access.hpp); a key over 250
//                       bytes: CLIENT_ERROR bad command line format alone
//                       (the keys before it were read, and touched by gat)
//   gat, gats           as get and gets, each hit's deadline set anew (its
//                       cas kept, as memcached's touch keeps it)
//   set                 STORED (a new cas unique)
//   add, replace        STORED or NOT_STORED
//   append, prepend     STORED or NOT_STORED; the old flags and deadline stay
//   cas                 STORED, EXISTS (another unique) or NOT_FOUND
//   incr, decr          the new value, NOT_FOUND, or CLIENT_ERROR cannot
//                       increment or decrement non-numeric value; a decimal
//                       up to 2^64 - 1 (leading white space allowed), incr
//                       wraps, decr stops at 0; a result shorter than the
//                       old data is padded with spaces to its length (as
//                       memcached's in-place update); flags and deadline stay
//   touch               TOUCHED or NOT_FOUND; the cas stays
//   delete              DELETED or NOT_FOUND
//   flush_all [delay]   OK; every item written before it (or before the
//                       delay's end, memcached's timing: flush_all() below)
//                       counts as absent from then on; nothing is removed
//                       (the cache's eviction reclaims the room, as
//                       memcached's LRU does)
//   version, verbosity  VERSION <ServerSettings::version>; OK (no logging
//                       level to set)
//   quit                closes the connection (Fed::close)
//   stats               the general counters (memcached's names, those this
//                       server has), "stats reset" (RESET), "stats
//                       settings"; other groups belong to memcached's slab
//                       allocator and crawler: ERROR
// A write that the store refuses for room (Error out_of_space, a memory
// limit) answers "SERVER_ERROR out of memory storing object"; another
// Error (a read-only or closed store) "SERVER_ERROR <its Errc's name>"
// (not its message, which names the store's path). A multi-get whose
// replies pass TextLimits::pause_reply_bytes stops between two keys for
// them to go out (Fed::paused), and goes on when its line is fed again:
// any number of keys, one item's reply past the pause at most.
// noreply silences every reply of its command.
//
// Expired writes. An exptime already past (negative, or an absolute time
// not after now) still runs the command, as in memcached, and leaves an
// item no read finds.
//
// Thread safety: a session belongs to one connection (one thread at a
// time); any number of sessions share a store and a ServerState. Memory:
// the session keeps one scratch buffer for the items it assembles and
// reuses it; `out` grows by the replies (its capacity is the caller's).
#pragma once

#include <offheap/memcache/item.hpp>
#include <offheap/memcache/item_access.hpp>
#include <offheap/memcache/meta_commands.hpp>
#include <offheap/memcache/meta_request.hpp>
#include <offheap/memcache/server_state.hpp>
#include <offheap/memcache/text_request.hpp>
#include <offheap/store.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

namespace offheap::memcache {

template <Policy P>
class TextSession {
 public:
  using Store = OffHeapStore<P>;

  /// What feed() did.
  struct Fed {
    std::size_t consumed = 0;     ///< bytes of the input used (drop them)
    bool close = false;           ///< close the connection once `out` is sent (quit, a line too long, HTTP)
    bool paused = false;          ///< stopped with whole requests left: `out` reached TextLimits::pause_reply_bytes
  };

  /// `store` and `state` must outlive the session.
  TextSession(Store& store, ServerState& state, TextLimits limits = {}) : a_(store, state, limits) {}

  /// Runs every whole request at the front of `in` (meta commands
  /// included), appending the replies to `out`; stops at a request not yet
  /// whole (more bytes are needed), at one that closes the connection, and
  /// before the next request once `out` holds TextLimits::pause_reply_bytes
  /// (Fed::paused: send, then feed the rest again, also with no new
  /// bytes). Bytes of a refused data block are discarded as they arrive,
  /// also across calls. `in`'s views are used only during the call.
  Fed feed(std::string_view in, std::string& out) {
    Fed fed;
    for (;;) {
      if (discard_ != 0) {
        const std::uint64_t n = std::min<std::uint64_t>(discard_, in.size() - fed.consumed);
        fed.consumed += static_cast<std::size_t>(n);
        discard_ -= n;
        if (discard_ != 0) return fed;
      }
      if (fed.consumed == in.size()) return fed;
      if (out.size() >= a_.limits().pause_reply_bytes) {
        fed.paused = true;
        return fed;
      }
      if (get_resume_ != 0) {
        // The paused get's line is at the front, read before: its request
        // again from where its keys lie (not parsed again: a line of up to
        // 16 MiB would be scanned once a pause).
        TextRequest r = paused_get_;
        r.keys = in.substr(fed.consumed + paused_keys_at_, paused_keys_bytes_);
        if (run(r, out) == Ran::paused) {
          fed.paused = true;
          return fed;
        }
        fed.consumed += paused_line_bytes_;
        continue;
      }
      const TextParse p = parse_text_request(in.substr(fed.consumed), a_.limits());
      switch (p.step) {
        case Step::need_more: return fed;
        case Step::close: fed.close = true; return fed;
        case Step::reply: out += p.reply; break;
        case Step::meta: {
          // (The line as the text parser framed it: not framed again.)
          const MetaParse m = parse_meta_request(in.substr(fed.consumed), p.request.line, p.consumed, a_.limits());
          if (m.step == MetaStep::need_more) return fed;
          fed.consumed += m.consumed;
          if (m.step == MetaStep::command) {
            run_meta(m.request, out);
            continue;
          }
          out += m.reply;
          discard_ = m.discard;
          if (m.remove_key) {
            // memcached drops the key's old value on an ms too large, as on a set.
            a_.counters().store_too_large.fetch_add(1, std::memory_order_relaxed);
            a_.remove_quietly(m.request.key());
          }
          continue;
        }
        case Step::too_large:
          a_.counters().store_too_large.fetch_add(1, std::memory_order_relaxed);
          if (!p.request.noreply) out += p.reply;
          // memcached drops the key's old value on a set it refuses: no
          // stale value is served in place of the refused one.
          if (p.request.verb == Verb::set) a_.remove_quietly(p.request.key);
          discard_ = p.request.discard;
          break;
        case Step::command: {
          const Ran ran = run(p.request, out);
          if (ran == Ran::close) {
            fed.consumed += p.consumed;
            fed.close = true;
            return fed;
          }
          if (ran == Ran::paused) {  // (a get with keys left: its line stays, fed again it goes on)
            paused_get_ = p.request;
            paused_get_.keys = {};
            paused_keys_at_ = static_cast<std::size_t>(p.request.keys.data() - (in.data() + fed.consumed));
            paused_keys_bytes_ = p.request.keys.size();
            paused_line_bytes_ = p.consumed;
            fed.paused = true;
            return fed;
          }
          break;
        }
      }
      fed.consumed += p.consumed;
    }
  }

  /// Bytes of a refused data block still to discard.
  std::uint64_t discarding() const noexcept { return discard_; }

 private:
  using Access = ItemAccess<P>;
  using Held = typename Access::Held;

  std::uint64_t now_s() const noexcept { return a_.now_s(); }
  static std::string_view decimal(std::array<char, 24>& b, std::uint64_t v) noexcept { return Access::decimal(b, v); }
  static void add_number(std::string& out, std::uint64_t v) { Access::add_number(out, v); }
  static void add_line(std::string& out, bool noreply, std::string_view line) {
    if (!noreply) out += line;
  }
  /// "VALUE <key> <flags> <bytes>[ <cas>]\r\n<data>\r\n".
  static void add_value(std::string& out, std::string_view key, const ItemView& item, bool with_cas) {
    out += "VALUE ";
    out += key;
    out += ' ';
    add_number(out, item.header.flags);
    out += ' ';
    add_number(out, item.data.size());
    if (with_cas) {
      out += ' ';
      add_number(out, item.header.cas);
    }
    out += "\r\n";
    out += item.data;
    out += "\r\n";
  }
  Held held(std::string_view value) const noexcept { return a_.held(value); }
  static std::optional<std::string_view> unlink_or_keep(const Held& h, std::string_view old) noexcept {
    return Access::unlink_or_keep(h, old);
  }

  /// A meta command; its store errors are answered (always: memcached
  /// sends meta errors also under q).
  void run_meta(const MetaRequest& r, std::string& out) {
    a_.begin_command();
    try {
      meta_.run(r, out);
    } catch (const Error& e) {
      a_.count_error(e);
      a_.add_error(e, out);
    }
  }

  /// What run() did: the command is done; it closes the connection
  /// (quit); it stopped for its replies to go out first (a get: its line
  /// is fed again, and it goes on).
  enum class Ran : std::uint8_t { done, close, paused };

  Ran run(const TextRequest& r, std::string& out) {
    a_.begin_command();
    try {
      return run_unguarded(r, out);
    } catch (const Error& e) {
      get_resume_ = 0;
      a_.count_error(e);
      if (!r.noreply) a_.add_error(e, out);
      return Ran::done;
    }
  }

  Ran run_unguarded(const TextRequest& r, std::string& out) {
    Counters& n = a_.counters();
    switch (r.verb) {
      case Verb::get: case Verb::gets: return retrieve(r, out, false) ? Ran::done : Ran::paused;
      case Verb::gat: case Verb::gats: return retrieve(r, out, true) ? Ran::done : Ran::paused;
      case Verb::set: case Verb::add: case Verb::replace: store(r, out); return Ran::done;
      case Verb::append: case Verb::prepend: concatenate(r, out); return Ran::done;
      case Verb::cas: compare_and_swap(r, out); return Ran::done;
      case Verb::incr: case Verb::decr: arithmetic(r, out); return Ran::done;
      case Verb::touch: {
        n.cmd_touch.fetch_add(1, std::memory_order_relaxed);
        const bool found = touch(r.key, deadline_of(r.exptime, now_s()), nullptr);
        (found ? n.touch_hits : n.touch_misses).fetch_add(1, std::memory_order_relaxed);
        add_line(out, r.noreply, found ? "TOUCHED\r\n" : "NOT_FOUND\r\n");
        return Ran::done;
      }
      case Verb::delete_key: {
        // (A flushed item is absent: NOT_FOUND, and it goes too.)
        bool removed = false;
        a_.store().compute_if_present(r.key, [&](std::string_view old) -> std::optional<std::string_view> {
          removed = held(old).item.has_value();
          return std::nullopt;
        });
        (removed ? n.delete_hits : n.delete_misses).fetch_add(1, std::memory_order_relaxed);
        add_line(out, r.noreply, removed ? "DELETED\r\n" : "NOT_FOUND\r\n");
        return Ran::done;
      }
      case Verb::flush_all: {
        n.cmd_flush.fetch_add(1, std::memory_order_relaxed);
        flush_all(r.has_delay ? r.exptime : 0);
        add_line(out, r.noreply, "OK\r\n");
        return Ran::done;
      }
      case Verb::version:
        out += "VERSION ";
        out += a_.state().settings().version;
        out += "\r\n";
        return Ran::done;
      case Verb::verbosity: add_line(out, r.noreply, "OK\r\n"); return Ran::done;
      case Verb::quit: return Ran::close;
      case Verb::stats: stats(r.args, out); return Ran::done;
    }
    return Ran::done;
  }

  /// flush_all [delay], with memcached's times (ServerState::flush()).
  void flush_all(std::int32_t delay) {
    const std::uint64_t now = now_s();
    a_.state().flush(delay, now);
    a_.flushed_at(now);
  }

  /// get, gets (touch: gat, gats), from the key at byte get_resume_ of
  /// the keys; returns false when it stopped for the replies to go out
  /// first (TextLimits::pause_reply_bytes, with keys left: the caller feeds
  /// the line again and it goes on from there), true once done.
  bool retrieve(const TextRequest& r, std::string& out, bool touching) {
    const bool with_cas = r.verb == Verb::gets || r.verb == Verb::gats;
    if (get_resume_ == 0) get_deadline_ = touching ? deadline_of(r.exptime, now_s()) : Deadline{};
    std::size_t pos = get_resume_;
    get_resume_ = 0;
    if (pos == 0) {
      // memcached reads the keys in order and, at one over 250 bytes, drops
      // what the keys before it found (gat has touched them): the error alone.
      std::size_t too_long = std::string_view::npos;
      for (std::size_t at = 0; too_long == std::string_view::npos;) {
        const std::string_view key = next_key(r.keys, at);
        if (key.empty()) break;
        if (key.size() > kMaxKeyBytes) too_long = static_cast<std::size_t>(key.data() - r.keys.data());
      }
      if (too_long != std::string_view::npos) {
        const std::size_t mark = out.size();
        for (std::size_t at = 0; at < too_long;) {
          const std::string_view key = next_key(r.keys, at);
          if (key.empty() || key.size() > kMaxKeyBytes) break;
          retrieve_one(key, out, touching, with_cas);
          out.resize(mark);
        }
        out += "CLIENT_ERROR bad command line format\r\n";
        return true;
      }
    }
    for (;;) {
      const std::string_view key = next_key(r.keys, pos);
      if (key.empty()) break;
      retrieve_one(key, out, touching, with_cas);
      if (out.size() >= a_.limits().pause_reply_bytes) {
        std::size_t rest = pos;
        if (!next_key(r.keys, rest).empty()) {
          get_resume_ = pos;
          return false;
        }
      }
    }
    out += "END\r\n";
    return true;
  }
  /// One key of a get: its VALUE lines appended to `out` on a hit.
  void retrieve_one(std::string_view key, std::string& out, bool touching, bool with_cas) {
    Counters& n = a_.counters();
    const std::size_t mark = out.size();
    bool hit = false;
    if (touching) {
      n.cmd_touch.fetch_add(1, std::memory_order_relaxed);
      hit = touch(key, get_deadline_, [&](const ItemView& item) {
        out.resize(mark);
        add_value(out, key, item, with_cas);
      });
      (hit ? n.touch_hits : n.touch_misses).fetch_add(1, std::memory_order_relaxed);
    } else {
      n.cmd_get.fetch_add(1, std::memory_order_relaxed);
      ItemHeader seen;
      hit = a_.read_held(key, [&](const ItemView& item) {
        out.resize(mark);
        seen = item.header;
        add_value(out, key, item, with_cas);
      });
      if (hit) a_.mark_fetched(key, seen, a_.now32());
      (hit ? n.get_hits : n.get_misses).fetch_add(1, std::memory_order_relaxed);
    }
    if (!hit) out.resize(mark);
  }

  /// Sets key's deadline to `d`, keeping its cas, flags and data; calls
  /// seen(old item) under the key's lock (it may run again: see compute()).
  /// Returns whether the key held an item.
  template <class Seen>
  bool touch(std::string_view key, const Deadline& d, Seen&& seen) {
    bool found = false;
    const std::uint32_t now = a_.now32();
    a_.store().compute_if_present(
        key,
        [&](std::string_view old) -> std::optional<std::string_view> {
          const Held h = held(old);
          found = h.item.has_value();
          if (!found) return unlink_or_keep(h, old);
          if constexpr (!std::is_same_v<std::decay_t<Seen>, std::nullptr_t>) seen(*h.item);
          ItemHeader header = h.item->header;
          header.deadline_s = d.seconds;
          Access::touch_header(header, now);  // (memcached's touch fetches the item)
          return a_.assemble(header, h.item->data);
        },
        ttl_of(d));
    return found;
  }

  /// set, add, replace.
  void store(const TextRequest& r, std::string& out) {
    a_.counters().cmd_set.fetch_add(1, std::memory_order_relaxed);
    const std::uint64_t now = now_s();
    const Deadline d = deadline_of(r.exptime, now);
    ItemHeader h;
    h.cas = a_.state().next_cas();
    h.flags = r.flags;
    h.deadline_s = d.seconds;
    h.atime_s = static_cast<std::uint32_t>(now);
    bool stored = true;
    if (r.verb == Verb::set) {
      a_.put_item(r.key, h, r.data);
    } else {
      // add stores over a flushed item, replace does not replace one: both
      // decide under the key's lock what it holds.
      const std::string_view item = a_.assemble(h, r.data);
      const bool add = r.verb == Verb::add;
      stored = false;
      a_.store().compute(
          r.key,
          [&](std::optional<std::string_view> old) -> std::optional<std::string_view> {
            const Held h = old ? held(*old) : Held{};
            stored = add != h.item.has_value();
            if (stored) return item;
            return old ? unlink_or_keep(h, *old) : std::nullopt;  // (replace met a flushed item: it goes)
          },
          ttl_of(d));
    }
    if (stored) a_.counters().total_items.fetch_add(1, std::memory_order_relaxed);
    add_line(out, r.noreply, stored ? "STORED\r\n" : "NOT_STORED\r\n");
  }

  /// append, prepend.
  void concatenate(const TextRequest& r, std::string& out) {
    a_.counters().cmd_set.fetch_add(1, std::memory_order_relaxed);
    // (The item keeps its deadline: compute_item() writes under it.)
    bool stored = false;
    a_.compute_item(r.key, std::nullopt, [&](std::optional<std::string_view> old) -> std::optional<std::string_view> {
      const Held h = old ? held(*old) : Held{};
      stored = false;
      if (!h.item) return old ? unlink_or_keep(h, *old) : std::nullopt;
      const auto item = a_.joined(r.key, *h.item, r.data, r.verb == Verb::append,
                                  [&] { return a_.state().next_cas(); }, a_.now32());
      stored = item.has_value();
      return item ? *item : *old;
    });
    if (stored) a_.counters().total_items.fetch_add(1, std::memory_order_relaxed);
    add_line(out, r.noreply, stored ? "STORED\r\n" : "NOT_STORED\r\n");
  }

  void compare_and_swap(const TextRequest& r, std::string& out) {
    Counters& n = a_.counters();
    n.cmd_set.fetch_add(1, std::memory_order_relaxed);
    const Deadline d = deadline_of(r.exptime, now_s());
    bool found = false, exists = false;
    a_.store().compute_if_present(
        r.key,
        [&](std::string_view old) -> std::optional<std::string_view> {
          const Held h = held(old);
          found = h.item.has_value();
          exists = found && h.item->header.cas != r.cas_unique;
          if (!found) return unlink_or_keep(h, old);
          if (exists) return old;
          ItemHeader next;
          next.cas = a_.state().next_cas();
          next.flags = r.flags;
          next.deadline_s = d.seconds;
          next.atime_s = a_.now32();
          return a_.assemble(next, r.data);
        },
        ttl_of(d));
    if (!found) {
      n.cas_misses.fetch_add(1, std::memory_order_relaxed);
      add_line(out, r.noreply, "NOT_FOUND\r\n");
    } else if (exists) {
      n.cas_badval.fetch_add(1, std::memory_order_relaxed);
      add_line(out, r.noreply, "EXISTS\r\n");
    } else {
      n.cas_hits.fetch_add(1, std::memory_order_relaxed);
      n.total_items.fetch_add(1, std::memory_order_relaxed);
      add_line(out, r.noreply, "STORED\r\n");
    }
  }

  void arithmetic(const TextRequest& r, std::string& out) {
    Counters& n = a_.counters();
    const bool incr = r.verb == Verb::incr;
    bool found = false, numeric = true;
    std::uint64_t result = 0;
    // (The item keeps its deadline: compute_item() writes under it.)
    a_.compute_item(r.key, std::nullopt, [&](std::optional<std::string_view> old) -> std::optional<std::string_view> {
      const Held h = old ? held(*old) : Held{};
      found = h.item.has_value();
      if (!found) return old ? unlink_or_keep(h, *old) : std::nullopt;
      const std::optional<std::uint64_t> v = Access::counter_of(h.item->data);
      numeric = a_.countable(r.key, *h.item) && v.has_value();
      if (!numeric) return old;
      result = Access::counted(*v, incr, r.delta);
      std::array<char, 24> b;
      const std::string_view text = decimal(b, result);
      return a_.counter_item(Access::counter_header(*h.item, text.size(), a_.state().next_cas(), a_.now32()), text,
                             h.item->data.size());
    });
    if (!found) {
      (incr ? n.incr_misses : n.decr_misses).fetch_add(1, std::memory_order_relaxed);
      add_line(out, r.noreply, "NOT_FOUND\r\n");
    } else if (!numeric) {
      add_line(out, r.noreply, "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n");
    } else {
      (incr ? n.incr_hits : n.decr_hits).fetch_add(1, std::memory_order_relaxed);
      if (!r.noreply) {
        add_number(out, result);
        out += "\r\n";
      }
    }
  }

  void stats(std::string_view args, std::string& out) {
    Counters& n = a_.counters();
    const ServerSettings& s = a_.state().settings();
    const auto line = [&out](std::string_view name, std::uint64_t v) {
      out += "STAT ";
      out += name;
      out += ' ';
      add_number(out, v);
      out += "\r\n";
    };
    const auto load = [](const std::atomic<std::uint64_t>& a) { return a.load(std::memory_order_relaxed); };
    const std::string_view first = args.substr(0, args.find(' '));  // (memcached compares the first token)
    if (first == "reset") {
      n.reset();
      out += "RESET\r\n";
      return;
    }
    if (first == "settings") {
      line("maxbytes", s.limit_maxbytes);
      line("maxconns", s.max_connections);
      line("num_threads", s.threads);
      line("item_size_max", s.item_size_max);
      out += "STAT cas_enabled yes\r\nSTAT evictions on\r\nEND\r\n";
      return;
    }
    if (!args.empty()) {
      out += "ERROR\r\n";
      return;
    }
    const Stats st = a_.store().stats();
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    line("pid", static_cast<std::uint64_t>(getpid()));
    line("uptime", a_.state().uptime_seconds());
    line("time", now_s());
    out += "STAT version " + s.version + "\r\n";
    line("pointer_size", 8 * sizeof(void*));
    const auto seconds = [&out](std::string_view name, const timeval& t) {
      out += "STAT ";
      out += name;
      out += ' ';
      add_number(out, static_cast<std::uint64_t>(t.tv_sec));
      char frac[8];
      const int len = std::snprintf(frac, sizeof frac, ".%06ld", static_cast<long>(t.tv_usec));
      out.append(frac, static_cast<std::size_t>(len));
      out += "\r\n";
    };
    seconds("rusage_user", ru.ru_utime);
    seconds("rusage_system", ru.ru_stime);
    line("max_connections", s.max_connections);
    line("curr_connections", load(n.curr_connections));
    line("total_connections", load(n.total_connections));
    line("rejected_connections", load(n.rejected_connections));
    line("cmd_get", load(n.cmd_get));
    line("cmd_set", load(n.cmd_set));
    line("cmd_flush", load(n.cmd_flush));
    line("cmd_touch", load(n.cmd_touch));
    line("get_hits", load(n.get_hits));
    line("get_misses", load(n.get_misses));
    line("delete_misses", load(n.delete_misses));
    line("delete_hits", load(n.delete_hits));
    line("incr_misses", load(n.incr_misses));
    line("incr_hits", load(n.incr_hits));
    line("decr_misses", load(n.decr_misses));
    line("decr_hits", load(n.decr_hits));
    line("cas_misses", load(n.cas_misses));
    line("cas_hits", load(n.cas_hits));
    line("cas_badval", load(n.cas_badval));
    line("touch_hits", load(n.touch_hits));
    line("touch_misses", load(n.touch_misses));
    line("store_too_large", load(n.store_too_large));
    line("store_no_memory", load(n.store_no_memory));
    line("bytes_read", load(n.bytes_read));
    line("bytes_written", load(n.bytes_written));
    line("limit_maxbytes", s.limit_maxbytes);
    line("threads", s.threads);
    line("bytes", st.live_bytes);
    line("curr_items", st.records);
    line("total_items", load(n.total_items));
    line("evictions", st.evictions);
    out += "END\r\n";
  }

  Access a_;
  MetaCommands<P> meta_{a_};
  std::uint64_t discard_ = 0;
  std::size_t get_resume_ = 0;  // a get paused: the byte of its keys where it goes on (0: none)
  Deadline get_deadline_;       // the gat under way's deadline
  TextRequest paused_get_;      // the paused get, but its keys, which lie...
  std::size_t paused_keys_at_ = 0, paused_keys_bytes_ = 0;  // ...here in its line
  std::size_t paused_line_bytes_ = 0;                       // the line's bytes, its end included
};

}  // namespace offheap::memcache
