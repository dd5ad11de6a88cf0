// SPDX-License-Identifier: Apache-2.0
// memcached's meta protocol, the commands: MetaCommands runs what
// parse_meta_request() read (meta_request.hpp) against the store, with the
// replies memcached 1.6.18 gives, byte for byte. The text session holds one
// and hands it each meta command (text_session.hpp).
//
// Replies. A reply is a status code and then, in the order of the request's
// flags, what each asks back (O<opaque>, k<key>, c<cas>, ...), then "\r\n":
//   mg  hit: HD, or "VA <bytes>" with v and the data after the line; with
//       s t c f l h O k: " s<bytes>", " t<seconds left, -1: never>",
//       " c<cas>", " f<flags>", " l<seconds since its access time>",
//       " h<0|1: fetched before>", the opaque, " k<key>" (" k<base64> b"
//       for a key ms wrote with b); then " W" when this client won the
//       token to recompute the value (N vivified it; R and its TTL is
//       below R's; X: it is stale and no token went out yet), " Z" when a
//       token went out before, " X" when stale (the order: Z, X, W).
//       Miss: EN with O and k. T sets a new TTL, N<ttl> creates an empty
//       item on a miss (flags 0), u leaves the fetch marks (h, l) as they
//       were. q: a miss sends nothing.
//   ms  HD stored, NS not stored, EX cas mismatch, NF nothing to compare
//       the cas with; with O k c (c: the stored item's cas, else 0). Modes
//       (M): S set, E add, A append, P prepend, R replace; C<cas> turns
//       set and replace into cas, and makes append and prepend compare;
//       with I a cas below the item's stores the value marked stale (its
//       TTL and token kept). F flags, T TTL. q: HD sends nothing.
//   md  HD deleted (or, with I, marked stale: a new cas, the token taken
//       back, T a new TTL), NF, EX (C mismatch); with O k. q: HD sends
//       nothing.
//   ma  HD, or "VA <bytes>" with v and the number after the line; NF; EX
//       (C mismatch); with O k c t. M I/+ incr (default), D/- decr; D<n>
//       delta (default 1); N<ttl> creates the key with J<n> (default 0) on
//       a miss; T sets the TTL (as memcached: only when the result fits
//       where the old number was, or on a created item). q: HD (and VA)
//       send nothing, except for a created item. Errors as incr and decr.
//   mn  MN
//   me  "ME <key> exp=<-seconds left, -1: never> la=<seconds since its
//       access time> cas=<cas> fetch=<yes|no> cls=0 size=<bytes>": cls is
//       memcached's slab class, which this server has not (0); size counts
//       as memcached's item limit does (TextLimits::item_header_bytes).
//       EN on a miss.
// Every error line is sent, also under q (as memcached's out_errstring).
//
// Where this differs from memcached: the access time l and la report
// moves on writes and on a fetch at least a minute after it (item.hpp),
// where memcached's segmented LRU moves it when an item turns active; a
// refused add leaves it where it was (memcached moves it).
//
// Thread safety: one per connection, as the session that holds it.
#pragma once

#include <offheap/memcache/base64.hpp>
#include <offheap/memcache/item_access.hpp>
#include <offheap/memcache/meta_request.hpp>

#include <charconv>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace offheap::memcache {

template <Policy P>
class MetaCommands {
 public:
  /// `items` must outlive this.
  explicit MetaCommands(ItemAccess<P>& items) : a_(items) {}

  /// Runs `r`, appending its reply to `out`. Throws the store's Error (the
  /// session answers it); `out` then holds no part of this reply.
  void run(const MetaRequest& r, std::string& out) {
    const std::size_t mark = out.size();
    try {
      switch (r.verb) {
        case MetaVerb::get: get(r, out); break;
        case MetaVerb::set: set(r, out); break;
        case MetaVerb::remove: remove(r, out); break;
        case MetaVerb::arithmetic: arithmetic(r, out); break;
        case MetaVerb::noop: out += "MN\r\n"; break;
        case MetaVerb::debug: debug(r, out); break;
      }
    } catch (...) {
      out.resize(mark);
      throw;
    }
  }

 private:
  /// A command's new cas unique, taken once however often its compute
  /// function runs (compute_item() may run it again).
  struct LazyCas {
    ServerState& state;
    std::uint64_t value = 0;
    std::uint64_t take() {
      if (value == 0) value = state.next_cas();
      return value;
    }
  };

  static void add_char(std::string& out, char c) {
    out += ' ';
    out += c;
  }
  static void add_key(std::string& out, std::string_view key, bool binary) {
    add_char(out, 'k');
    if (!binary) {
      out += key;
      return;
    }
    base64_encode(key, out);
    out += " b";
  }
  /// memcached's seconds left of a deadline: -1 for none, else unsigned
  /// 32-bit (a past one wraps, as there).
  void add_ttl(std::string& out, std::uint32_t deadline_s, std::uint32_t now) const {
    if (deadline_s == 0) {
      out += "-1";
    } else {
      ItemAccess<P>::add_number(out, static_cast<std::uint32_t>(a_.reported_deadline(deadline_s) - now));
    }
  }
  /// The opaque and key flags only (miss and status lines), and with
  /// `cas` (ms) the c flag.
  static void add_opaque_and_key(const MetaRequest& r, std::string& out, const std::uint64_t* cas = nullptr) {
    for (std::size_t i = 0; i < r.flag_count; ++i) {
      const std::string_view t = r.flags[i];
      if (t[0] == 'O') {
        out += ' ';
        out += t;
      } else if (t[0] == 'k') {
        add_key(out, r.key(), r.key_binary);
      } else if (t[0] == 'c' && cas != nullptr) {
        add_char(out, 'c');
        ItemAccess<P>::add_number(out, *cas);
      }
    }
  }
  std::uint32_t deadline(std::int32_t exptime, std::uint64_t now) const noexcept {
    return deadline_of(exptime, now).seconds;
  }

  /// mg's reply for an item (`h`: its header, changed by T, N, R, and the
  /// token marks; `created`: N made it now), appended to `out`. Returns
  /// false at an opaque too long (the header keeps the TTL changes before
  /// it, as memcached's; no token is marked).
  bool describe(const MetaRequest& r, ItemHeader& h, std::string_view data, bool created, std::uint32_t now,
                std::string& out) const {
    if (r.value) {
      out += "VA ";
      ItemAccess<P>::add_number(out, data.size());
    } else {
      out += "HD";
    }
    bool won = false;
    for (std::size_t i = 0; i < r.flag_count; ++i) {
      const std::string_view t = r.flags[i];
      switch (t[0]) {
        case 'T': h.deadline_s = deadline(r.ttl, now); break;
        case 'N':
          if (created) {
            h.deadline_s = deadline(r.vivify_ttl, now);
            won = true;
          }
          break;
        case 'R':
          if (!h.won && !created && h.deadline_s != 0 && h.deadline_s < deadline(r.recache_ttl, now)) won = true;
          break;
        case 's': add_char(out, 's'); ItemAccess<P>::add_number(out, data.size()); break;
        case 't': add_char(out, 't'); add_ttl(out, h.deadline_s, now); break;
        case 'c': add_char(out, 'c'); ItemAccess<P>::add_number(out, h.cas); break;
        case 'f': add_char(out, 'f'); ItemAccess<P>::add_number(out, h.flags); break;
        case 'l': add_char(out, 'l'); ItemAccess<P>::add_number(out, static_cast<std::uint32_t>(now - h.atime_s)); break;
        case 'h': add_char(out, 'h'); out += h.fetched ? '1' : '0'; break;
        case 'O':
          if (t.size() > kMaxOpaqueBytes) return false;
          out += ' ';
          out += t;
          break;
        case 'k': add_key(out, r.key(), h.key_binary); break;
        default: break;
      }
    }
    if (h.won) add_char(out, 'Z');
    if (h.stale) {
      add_char(out, 'X');
      if (!h.won) won = true;
    }
    if (won) {
      add_char(out, 'W');
      h.won = true;
    }
    out += "\r\n";
    if (r.value) {
      out += data;
      out += "\r\n";
    }
    return true;
  }
  void count_get(bool hit, bool touched) noexcept {
    Counters& n = a_.counters();
    if (touched) {
      n.cmd_touch.fetch_add(1, std::memory_order_relaxed);
      (hit ? n.touch_hits : n.touch_misses).fetch_add(1, std::memory_order_relaxed);
    } else {
      n.cmd_get.fetch_add(1, std::memory_order_relaxed);
      (hit ? n.get_hits : n.get_misses).fetch_add(1, std::memory_order_relaxed);
    }
  }

  void get(const MetaRequest& r, std::string& out) {
    const std::string_view key = r.key();
    LazyCas cas{a_.state()};
    const std::uint64_t now64 = a_.now_s();
    const auto now = static_cast<std::uint32_t>(now64);
    const std::size_t mark = out.size();
    bool hit = false, ok = true;
    ItemHeader seen;
    const auto read_unlocked = [&] {
      hit = a_.read_held(key, [&](const ItemView& item) {
        out.resize(mark);
        seen = item.header;
        ItemHeader copy = seen;
        ok = describe(r, copy, item.data, false, now, out);
      });
      ok = ok || !hit;
    };
    // T, N and R may change the item: under the key's lock. Without them
    // the read takes none; the fetch marks follow it (mark_fetched()).
    const bool writes = r.new_ttl || r.vivify || has_flag(r, 'R');
    bool locked = writes;
    if (!locked) {
      read_unlocked();
      // Under the lock instead: a stale item no client won yet (the token
      // goes to one), and h or l on an item not yet fetched (one client
      // sees h0, as under memcached's item lock).
      locked = hit && ok && ((seen.stale && !seen.won) || (r.locked && !seen.fetched && !r.no_update));
      // (Without h and l memcached marks the fetch as it finds the item,
      // before an opaque too long fails the command; with them, after.)
      if (hit && (ok || !r.locked) && !locked && !r.no_update) a_.mark_fetched(key, seen, now);
    }
    if (locked) try {
      out.resize(mark);
      a_.compute_item(key, guess(r, now64), [&](std::optional<std::string_view> old) -> std::optional<std::string_view> {
        out.resize(mark);
        hit = false;
        ok = true;
        const auto h = old ? a_.held(*old) : typename ItemAccess<P>::Held{};
        if (!h.item && !r.vivify) return old ? ItemAccess<P>::unlink_or_keep(h, *old) : std::nullopt;
        hit = true;
        const bool created = !h.item;
        ItemHeader next;
        std::string_view data;
        if (created) {
          next.cas = cas.take();
          next.atime_s = now;
        } else {
          next = h.item->header;
          data = h.item->data;
        }
        ok = describe(r, next, data, created, now, out);
        if (ok && !r.no_update) ItemAccess<P>::touch_header(next, now);
        if (!created && next == h.item->header) return old;
        return a_.assemble(next, data);
      });
    } catch (const Error&) {
      if (writes) throw;  // (T, N, R: the command writes, and answers the error)
      // The lock only kept a token or a first fetch to one client: a store
      // that refuses the write (room, read-only) still answers the read.
      out.resize(mark);
      hit = false;
      ok = true;
      read_unlocked();
    }
    if (!ok) {
      out.resize(mark);
      out += meta_detail::kLongOpaque;
      return;
    }
    if (hit) {
      count_get(true, r.new_ttl);
      return;
    }
    out.resize(mark);
    if (r.long_opaque() != r.flag_count) {
      out += meta_detail::kLongOpaque;
      return;
    }
    count_get(false, r.new_ttl);
    if (r.quiet) return;
    out += "EN";
    add_opaque_and_key(r, out);
    out += "\r\n";
  }
  /// The deadline an item written by `r` likely has (compute_item()): T's,
  /// else N's for an item it may create, else the item's own.
  std::optional<std::uint32_t> guess(const MetaRequest& r, std::uint64_t now) const noexcept {
    if (r.new_ttl) return deadline(r.ttl, now);
    if (r.vivify) return deadline(r.vivify_ttl, now);
    return std::nullopt;
  }
  static bool has_flag(const MetaRequest& r, char c) noexcept {
    for (std::size_t i = 0; i < r.flag_count; ++i) {
      if (r.flags[i][0] == c) return true;
    }
    return false;
  }

  enum class Stored : std::uint8_t { stored, not_stored, exists, not_found };

  void set(const MetaRequest& r, std::string& out) {
    Counters& n = a_.counters();
    n.cmd_set.fetch_add(1, std::memory_order_relaxed);
    const std::string_view key = r.key();
    const std::uint64_t now64 = a_.now_s();
    const auto now = static_cast<std::uint32_t>(now64);
    const Deadline d = r.new_ttl ? deadline_of(r.ttl, now64) : Deadline{};
    enum class Mode : std::uint8_t { set, add, append, prepend, replace, cas } mode = Mode::set;
    switch (r.mode) {
      case 'E': mode = Mode::add; break;
      case 'A': mode = Mode::append; break;
      case 'P': mode = Mode::prepend; break;
      case 'R': mode = Mode::replace; break;
      default: break;
    }
    if (r.has_cas && (mode == Mode::set || mode == Mode::replace)) mode = Mode::cas;
    ItemHeader fresh;
    fresh.flags = r.client_flags;
    fresh.deadline_s = d.seconds;
    fresh.atime_s = now;
    fresh.key_binary = r.key_binary;
    Stored result = Stored::stored;
    std::uint64_t stored_cas = 0;
    LazyCas cas{a_.state()};
    if (mode == Mode::set) {
      fresh.cas = a_.state().next_cas();
      a_.put_item(key, fresh, r.data);
      stored_cas = fresh.cas;
    } else {
      const bool keeps_deadline = mode == Mode::append || mode == Mode::prepend;
      a_.compute_item(key, keeps_deadline ? std::nullopt : std::optional<std::uint32_t>(d.seconds), [&](std::optional<std::string_view> old) -> std::optional<std::string_view> {
        const auto h = old ? a_.held(*old) : typename ItemAccess<P>::Held{};
        const auto keep = [&]() -> std::optional<std::string_view> {
          return old ? ItemAccess<P>::unlink_or_keep(h, *old) : std::nullopt;
        };
        stored_cas = 0;
        if (!h.item) {
          switch (mode) {
            case Mode::add: break;
            case Mode::cas: result = Stored::not_found; return keep();
            default: result = Stored::not_stored; return keep();
          }
          result = Stored::stored;
          fresh.cas = stored_cas = cas.take();
          return a_.assemble(fresh, r.data);
        }
        const ItemHeader& was = h.item->header;
        const bool match = r.cas == was.cas, none = r.cas == 0;
        switch (mode) {
          case Mode::add: result = Stored::not_stored; return old;
          case Mode::replace: break;
          case Mode::cas:
            if (!none && match) break;
            if (!none && r.set_stale && r.cas < was.cas) {
              ItemHeader stale = fresh;
              stale.deadline_s = was.deadline_s;
              stale.stale = true;
              stale.won = was.won;
              result = Stored::stored;
              stale.cas = stored_cas = cas.take();
              return a_.assemble(stale, r.data);
            }
            result = Stored::exists;
            return old;
          default: {  // append, prepend
            if (!none && !match) {
              result = Stored::exists;
              return old;
            }
            const auto item = a_.joined(key, *h.item, r.data, mode == Mode::append,
                                        [&] { return stored_cas = cas.take(); }, now);
            result = item ? Stored::stored : Stored::not_stored;
            return item ? *item : *old;
          }
        }
        result = Stored::stored;
        fresh.cas = stored_cas = cas.take();
        return a_.assemble(fresh, r.data);
      });
    }
    if (result == Stored::stored) n.total_items.fetch_add(1, std::memory_order_relaxed);
    if (mode == Mode::cas) {
      switch (result) {
        case Stored::stored: n.cas_hits.fetch_add(1, std::memory_order_relaxed); break;
        case Stored::exists: n.cas_badval.fetch_add(1, std::memory_order_relaxed); break;
        case Stored::not_found: n.cas_misses.fetch_add(1, std::memory_order_relaxed); break;
        default: break;
      }
    }
    if (result == Stored::stored && r.quiet) return;
    static constexpr std::string_view kCodes[] = {"HD", "NS", "EX", "NF"};
    out += kCodes[static_cast<int>(result)];
    add_opaque_and_key(r, out, &stored_cas);
    out += "\r\n";
  }

  void remove(const MetaRequest& r, std::string& out) {
    Counters& n = a_.counters();
    const std::string_view key = r.key();
    const std::uint64_t now64 = a_.now_s();
    const std::uint32_t new_deadline = r.new_ttl ? deadline(r.ttl, now64) : 0;
    Stored result = Stored::not_found;
    LazyCas cas{a_.state()};
    // (A removal's Ttl goes unused; marking stale keeps the deadline, or T's.)
    const std::optional<std::uint32_t> ttl_guess = r.new_ttl ? std::optional<std::uint32_t>(new_deadline) : std::nullopt;
    a_.compute_item(key, ttl_guess, [&](std::optional<std::string_view> old) -> std::optional<std::string_view> {
      const auto h = old ? a_.held(*old) : typename ItemAccess<P>::Held{};
      if (!h.item) {
        result = Stored::not_found;
        return old ? ItemAccess<P>::unlink_or_keep(h, *old) : std::nullopt;
      }
      if (r.has_cas && h.item->header.cas != r.cas) {
        result = Stored::exists;
        return old;
      }
      result = Stored::stored;
      if (!r.set_stale) return std::nullopt;
      ItemHeader next = h.item->header;
      if (r.new_ttl) next.deadline_s = new_deadline;
      next.stale = true;
      next.won = false;
      next.cas = cas.take();
      return a_.assemble(next, h.item->data);
    });
    if (result != Stored::stored) {
      n.delete_misses.fetch_add(1, std::memory_order_relaxed);
    } else if (!r.set_stale) {
      n.delete_hits.fetch_add(1, std::memory_order_relaxed);
    }
    if (result == Stored::stored && r.quiet) return;
    out += result == Stored::stored ? "HD" : result == Stored::exists ? "EX" : "NF";
    add_opaque_and_key(r, out);
    out += "\r\n";
  }

  void arithmetic(const MetaRequest& r, std::string& out) {
    Counters& n = a_.counters();
    const std::string_view key = r.key();
    const std::uint64_t now64 = a_.now_s();
    const auto now = static_cast<std::uint32_t>(now64);
    const bool incr = r.mode == 0 || r.mode == 'I' || r.mode == '+';
    const std::size_t mark = out.size();
    enum class Outcome : std::uint8_t { done, created, not_found, exists, non_numeric, long_opaque } outcome{};
    std::array<char, 24> number;
    LazyCas cas{a_.state()};
    a_.compute_item(key, guess(r, now64), [&](std::optional<std::string_view> old) -> std::optional<std::string_view> {
      out.resize(mark);
      const auto h = old ? a_.held(*old) : typename ItemAccess<P>::Held{};
      ItemHeader next;
      std::string_view text;
      bool in_place = true;  // memcached's in-place update: the item keeps its state and takes T
      if (!h.item) {
        if (!r.vivify) {
          outcome = Outcome::not_found;
          return old ? ItemAccess<P>::unlink_or_keep(h, *old) : std::nullopt;
        }
        outcome = Outcome::created;
        text = ItemAccess<P>::decimal(number, r.initial);
        next.cas = cas.take();
        next.atime_s = now;
      } else {
        const ItemView& item = *h.item;
        // memcached's order: an item not countable, then the cas, then the number.
        if (!a_.countable(key, item)) {
          outcome = Outcome::non_numeric;
          return old;
        }
        if (r.cas != 0 && item.header.cas != r.cas) {
          outcome = Outcome::exists;
          return old;
        }
        const std::optional<std::uint64_t> v = ItemAccess<P>::counter_of(item.data);
        if (!v) {
          outcome = Outcome::non_numeric;
          return old;
        }
        outcome = Outcome::done;
        text = ItemAccess<P>::decimal(number, ItemAccess<P>::counted(*v, incr, r.delta));
        in_place = text.size() <= item.data.size();
        next = ItemAccess<P>::counter_header(item, text.size(), cas.take(), now);
      }
      const bool changes_ttl = in_place;  // (memcached's T and N reach a new item only when in place or created)
      if (r.value) {
        out += "VA ";
        ItemAccess<P>::add_number(out, text.size());
      } else {
        out += "HD";
      }
      ItemHeader reported = next;  // what t and c read: for an item not updated in place, the old one's
      for (std::size_t i = 0; i < r.flag_count; ++i) {
        const std::string_view t = r.flags[i];
        switch (t[0]) {
          case 'c': add_char(out, 'c'); ItemAccess<P>::add_number(out, next.cas); break;
          case 't': add_char(out, 't'); add_ttl(out, reported.deadline_s, now); break;
          case 'T':  // (on an item not updated in place, memcached sets the old one's: t reads it)
            reported.deadline_s = deadline(r.ttl, now64);
            if (changes_ttl) next.deadline_s = reported.deadline_s;
            break;
          case 'N':
            if (outcome == Outcome::created) reported.deadline_s = next.deadline_s = deadline(r.vivify_ttl, now64);
            break;
          case 'O':
            if (t.size() > kMaxOpaqueBytes) {
              outcome = Outcome::long_opaque;
              i = r.flag_count;  // (the update stands, as memcached's)
              break;
            }
            out += ' ';
            out += t;
            break;
          case 'k': add_key(out, key, r.key_binary); break;
          default: break;
        }
      }
      if (r.value) {
        out += "\r\n";
        out += text;
      }
      out += "\r\n";
      return a_.counter_item(next, text, h.item ? h.item->data.size() : 0);
    });
    switch (outcome) {
      case Outcome::done:
        (incr ? n.incr_hits : n.decr_hits).fetch_add(1, std::memory_order_relaxed);
        if (r.quiet) out.resize(mark);
        return;
      case Outcome::created: return;
      case Outcome::long_opaque:
        out.resize(mark);
        out += meta_detail::kLongOpaque;
        return;
      case Outcome::non_numeric:
        out += "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n";
        return;
      case Outcome::not_found:
        (incr ? n.incr_misses : n.decr_misses).fetch_add(1, std::memory_order_relaxed);
        [[fallthrough]];
      case Outcome::exists:
        out.resize(mark);
        if (r.long_opaque() != r.flag_count) {
          out += meta_detail::kLongOpaque;
          return;
        }
        out += outcome == Outcome::exists ? "EX" : "NF";
        add_opaque_and_key(r, out);
        out += "\r\n";
        return;
    }
  }

  void debug(const MetaRequest& r, std::string& out) {
    const std::string_view key = r.key();
    const auto now = static_cast<std::uint32_t>(a_.now_s());
    const std::size_t mark = out.size();
    const bool hit = a_.read_held(key, [&](const ItemView& item) {
      out.resize(mark);
      const ItemHeader& x = item.header;
      out += "ME ";
      if (x.key_binary) {
        base64_encode(key, out);
      } else {
        out += key;
      }
      out += " exp=";
      if (x.deadline_s == 0) {
        out += "-1";
      } else {
        char exp[16];
        const auto end = std::to_chars(exp, exp + sizeof exp, static_cast<std::int32_t>(now - a_.reported_deadline(x.deadline_s)));
        out.append(exp, static_cast<std::size_t>(end.ptr - exp));
      }
      out += " la=";
      ItemAccess<P>::add_number(out, static_cast<std::uint32_t>(now - x.atime_s));
      out += " cas=";
      ItemAccess<P>::add_number(out, x.cas);
      out += x.fetched ? " fetch=yes" : " fetch=no";
      out += " cls=0 size=";
      const TextLimits& l = a_.limits();
      ItemAccess<P>::add_number(out, key.size() + item.data.size() + l.item_header_bytes + (x.flags != 0 ? 4 : 0));
      out += "\r\n";
    });
    if (hit) return;
    out.resize(mark);
    out += "EN\r\n";
  }

  ItemAccess<P>& a_;
};

}  // namespace offheap::memcache
