// SPDX-License-Identifier: Apache-2.0
// What a connection's commands share, whichever protocol names them (the
// classic text commands in text_session.hpp, the meta commands in
// meta_commands.hpp): the store, the server's state, the limits, the
// flush marks as the command under way read them, one scratch buffer, and
// the readings of an item every command makes alike.
//
// A flushed item. memcached unlinks an item a flush_all came after when a
// command meets it, so that a later flush_all that brings flushed items
// back (one naming a time before the server started) does not bring it:
// the commands here do the same (held(), unlink_or_keep()).
//
// Fetches. A read that finds an item marks it fetched (the meta
// protocol's h flag) and, when its access time is kAccessUpdateSeconds
// old, moves that time (mg's l): a write under the key's lock the first
// time an item is read, and then at most once a minute (mark_fetched()).
//
// Thread safety: one per connection (one thread at a time), as the
// session that holds it.
#pragma once

#include <offheap/memcache/item.hpp>
#include <offheap/memcache/numbers.hpp>
#include <offheap/memcache/server_state.hpp>
#include <offheap/memcache/text_request.hpp>
#include <offheap/store.hpp>

#include <array>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace offheap::memcache {

template <Policy P>
class ItemAccess {
 public:
  using Store = OffHeapStore<P>;

  /// `store` and `state` must outlive this.
  ItemAccess(Store& store, ServerState& state, TextLimits limits)
      : store_(store), state_(state), limits_(limits) {
    if (state_.started_s() == 0) state_.set_started_s(now_s());  // (the first session's: a benign race)
  }

  Store& store() noexcept { return store_; }
  ServerState& state() noexcept { return state_; }
  Counters& counters() noexcept { return state_.counters(); }
  const TextLimits& limits() const noexcept { return limits_; }

  /// Seconds since the Unix epoch on the store's clock.
  std::uint64_t now_s() const noexcept {
    const Clock* c = store_.options().clock;
    return (c != nullptr ? c->now_ms() : detail::default_now_ms()) / 1000;
  }
  /// now_s() as an item's 32-bit time.
  std::uint32_t now32() const noexcept { return static_cast<std::uint32_t>(now_s()); }

  /// A deadline as the meta commands report it: an expired one (kept as
  /// 1) as memcached's, which keeps it as the first second of its clock,
  /// 62 s before the server started (so that mg's t and me's exp give the
  /// same numbers there).
  std::uint32_t reported_deadline(std::uint32_t deadline_s) const noexcept {
    if (deadline_s != 1) return deadline_s;
    return static_cast<std::uint32_t>(state_.started_s() - 62 + 1);
  }

  /// Reads the flush marks for the command about to run (the clock is read
  /// only while a flush's second has not passed). Once per command.
  void begin_command() noexcept {
    marks_ = state_.flush_marks();
    now_for_flush_ = 0;
    if (marks_.needs_clock()) {
      now_for_flush_ = now_s();
      state_.note_time(marks_, now_for_flush_);
      marks_ = state_.flush_marks();
    }
  }
  /// After this command's own flush_all at `now`.
  void flushed_at(std::uint64_t now) noexcept {
    marks_ = state_.flush_marks();
    now_for_flush_ = now;
  }

  /// What a value holds for the commands: `item`, an item no flush_all
  /// came after; else none, `flushed` if it is an item a flush_all came
  /// after, not if it is no item at all.
  struct Held {
    std::optional<ItemView> item;
    bool flushed = false;
  };
  Held held(std::string_view value) const noexcept {
    Held h{read_item(value)};
    if (h.item && !marks_.live(h.item->header.cas, now_for_flush_)) {
      h.item.reset();
      h.flushed = true;
    }
    return h;
  }
  /// A compute function's answer for a value it leaves: a flushed item
  /// goes, any other value stays.
  static std::optional<std::string_view> unlink_or_keep(const Held& h, std::string_view old) noexcept {
    if (h.flushed) return std::nullopt;
    return old;
  }
  /// Reads key's item without a lock: fn(const ItemView&) runs on an item
  /// no flush_all came after. read() may run its function more than once
  /// (a writer raced it), so fn may run more than once, each run starting
  /// afresh (what it appends to a reply it truncates first); and a run
  /// whose bytes read() then disowns (the key went meanwhile: they were
  /// torn, or another key's record) does not count: the caller drops what
  /// it made when this returns false. Returns whether the key held an
  /// item, as read() confirms it. A flushed item it meets goes
  /// (unlink_flushed()).
  template <class F>
  bool read_held(std::string_view key, F&& fn) {
    bool hit = false, flushed = false;
    const bool present = store_.read(key, [&](std::string_view v) {
      const Held h = held(v);
      hit = h.item.has_value();
      flushed = h.flushed;
      if (hit) fn(*h.item);
    });
    if (present && flushed) unlink_flushed(key);
    return present && hit;
  }
  /// Removes key's item if it is flushed (after a read met it; a store
  /// that refuses, read-only, keeps it: the read stands).
  void unlink_flushed(std::string_view key) {
    try {
      store_.compute_if_present(key, [&](std::string_view old) { return unlink_or_keep(held(old), old); });
    } catch (const Error&) {
    }
  }
  /// Removes key's value, if the store lets it (a read-only one keeps it:
  /// nothing was written either).
  void remove_quietly(std::string_view key) {
    try {
      (void)store_.remove(key);
    } catch (const Error&) {
    }
  }

  /// Whether a fetch of `item` at `now` changes it (mark_fetched()).
  static bool fetch_changes(const ItemHeader& h, std::uint32_t now) noexcept {
    return !h.fetched || now - h.atime_s >= kAccessUpdateSeconds;
  }
  /// A fetch of `seen` (key's item as a read found it) at `now`: marks it
  /// fetched and moves its access time if fetch_changes(); nothing if the
  /// key holds another item by then (a write came between), or this one
  /// with another deadline (a touch).
  void mark_fetched(std::string_view key, const ItemHeader& seen, std::uint32_t now) {
    if (!fetch_changes(seen, now)) return;
    try {
      mark_fetched_unguarded(key, seen, now);
    } catch (const Error&) {
      // (A mark the store has no room for, or a read-only store: the read
      // stands, the mark is dropped.)
    }
  }
  void mark_fetched_unguarded(std::string_view key, const ItemHeader& seen, std::uint32_t now) {
    store_.compute_if_present(
        key,
        [&](std::string_view old) -> std::optional<std::string_view> {
          const Held h = held(old);
          // (Another item, or this one touched since: its deadline is not
          // the Ttl this write carries.)
          if (!h.item || h.item->header.cas != seen.cas || h.item->header.deadline_s != seen.deadline_s) {
            return unlink_or_keep(h, old);
          }
          ItemHeader header = h.item->header;
          if (!fetch_changes(header, now)) return old;
          touch_header(header, now);
          return assemble(header, h.item->data);
        },
        ttl_of_seconds(seen.deadline_s));
  }
  /// A fetch's changes to a header (under the key's lock).
  static void touch_header(ItemHeader& h, std::uint32_t now) noexcept {
    if (now - h.atime_s >= kAccessUpdateSeconds) h.atime_s = now;
    h.fetched = true;
  }

  /// compute() on key's value whose write expires as the item it writes:
  /// fn(std::optional<std::string_view> old) returns the new value (an
  /// item, the old value itself to keep it, or nullopt to remove it or
  /// leave the key absent), and may run more than once (each run starts
  /// afresh: what it appends to a reply it truncates first). The store's
  /// Ttl goes with the write, so it is guessed (`guess_s`, a deadline as
  /// items keep it; none: the deadline of the key's item as a lock-free
  /// read finds it) and, when the item fn returns expires otherwise,
  /// nothing is written and fn runs again under the right one.
  template <class F>
  Computed compute_item(std::string_view key, std::optional<std::uint32_t> guess_s, F&& fn) {
    if (!guess_s) {
      guess_s = 0;
      (void)store_.read(key, [&](std::string_view v) {
        const std::optional<ItemView> item = read_item(v);
        guess_s = item ? item->header.deadline_s : 0;
      });
    }
    std::uint32_t ttl_s = *guess_s;
    for (;;) {
      bool again = false;
      std::uint32_t wanted = 0;
      const Computed c = store_.compute(
          key,
          [&](std::optional<std::string_view> old) -> std::optional<std::string_view> {
            const std::optional<std::string_view> next = fn(old);
            if (!next) return next;
            if (old && next->data() == old->data() && next->size() == old->size()) return next;  // kept
            const std::optional<ItemView> item = read_item(*next);
            wanted = item ? item->header.deadline_s : 0;
            if (wanted == ttl_s) return next;
            again = true;
            return old;  // (nothing written: the key stays as it was)
          },
          ttl_of_seconds(ttl_s));
      if (!again) return c;
      ttl_s = wanted;
    }
  }

  /// Stores key's item `h` + `data` (set), gathered by the store: no copy
  /// through the scratch buffer.
  void put_item(std::string_view key, const ItemHeader& h, std::string_view data) {
    char header[kMaxItemHeaderBytes];
    const std::string_view parts[] = {std::string_view(header, write_header(header, h)), data};
    store_.put(key, std::span<const std::string_view>(parts), ttl_of_seconds(h.deadline_s));
  }

  /// append and prepend: `old` with `more` after it (or before it), a new
  /// item (memcached's state bits start again) with old's flags and
  /// deadline, the cas unique take_cas() gives (called only for an item
  /// that is made), written at `now`; nullopt if it would pass the item
  /// limit.
  template <class TakeCas>
  std::optional<std::string_view> joined(std::string_view key, const ItemView& old, std::string_view more, bool append,
                                         TakeCas&& take_cas, std::uint32_t now) {
    if (limits_.too_large(key, old.header.flags, old.data.size() + more.size())) return std::nullopt;
    ItemHeader h;
    h.cas = take_cas();
    h.flags = old.header.flags;
    h.deadline_s = old.header.deadline_s;
    h.atime_s = now;
    return append ? assemble(h, old.data, more) : assemble(h, more, old.data);
  }

  // Counters (incr, decr, ma), as memcached's do_add_delta.
  /// Whether incr and decr may read a number in key's `item`: not empty,
  /// and not kept in chunks by memcached (TextLimits::chunked()).
  bool countable(std::string_view key, const ItemView& item) const noexcept {
    return !item.data.empty() && !limits_.chunked(key, item.header.flags, item.data.size());
  }
  /// The number in an item's data as memcached's strtoull reads it: to a
  /// NUL, digits then white space or the end; nullopt if none.
  static std::optional<std::uint64_t> counter_of(std::string_view data) noexcept {
    return read_u64(data.substr(0, data.find('\0')));
  }
  /// `v` incremented by `delta` (wrapping), or decremented (stopping at 0).
  static std::uint64_t counted(std::uint64_t v, bool incr, std::uint64_t delta) noexcept {
    return incr ? v + delta : (delta > v ? 0 : v - delta);
  }
  /// The header of the item `old` becomes when a count writes `text_bytes`
  /// of number there: in place (a result no longer than the old data) it
  /// keeps its state bits, as memcached's in-place update; else a new item
  /// starts again (old's flags and deadline). Unique `cas`, written at `now`.
  static ItemHeader counter_header(const ItemView& old, std::size_t text_bytes, std::uint64_t cas,
                                   std::uint32_t now) noexcept {
    ItemHeader h = old.header;
    if (text_bytes > old.data.size()) h = ItemHeader{0, old.header.flags, old.header.deadline_s};
    h.cas = cas;
    h.atime_s = now;
    return h;
  }
  /// The item `h` + `text` padded with spaces to `length` (the old data's,
  /// as memcached's in-place update), in the scratch buffer.
  std::string_view counter_item(const ItemHeader& h, std::string_view text, std::size_t length) {
    assemble(h, text);
    if (text.size() < length) scratch_.append(length - text.size(), ' ');
    return scratch_;
  }

  /// The item `header` + `data` + `more` in the scratch buffer (valid until
  /// the next assemble()).
  std::string_view assemble(const ItemHeader& header, std::string_view data, std::string_view more = {}) {
    const std::size_t hb = header_bytes(header);
    scratch_.resize(hb + data.size() + more.size());
    write_header(scratch_.data(), header);
    if (!data.empty()) std::memcpy(scratch_.data() + hb, data.data(), data.size());
    if (!more.empty()) std::memcpy(scratch_.data() + hb + data.size(), more.data(), more.size());
    return scratch_;
  }

  /// v in decimal, in `b`.
  static std::string_view decimal(std::array<char, 24>& b, std::uint64_t v) noexcept {
    const auto r = std::to_chars(b.data(), b.data() + b.size(), v);
    return std::string_view(b.data(), static_cast<std::size_t>(r.ptr - b.data()));
  }
  static void add_number(std::string& out, std::uint64_t v) {
    std::array<char, 24> b;
    out += decimal(b, v);
  }

  /// The reply to an Error a command's write met: "SERVER_ERROR out of
  /// memory storing object" for room, else "SERVER_ERROR <its Errc's name>"
  /// (not its message, which names the store's path).
  void add_error(const Error& e, std::string& out) {
    if (e.code() == Errc::out_of_space) {
      out += "SERVER_ERROR out of memory storing object\r\n";
    } else {
      out += "SERVER_ERROR ";
      out += to_string(e.code());
      out += "\r\n";
    }
  }
  /// Counts an Error a command's write met.
  void count_error(const Error& e) noexcept {
    if (e.code() == Errc::out_of_space) counters().store_no_memory.fetch_add(1, std::memory_order_relaxed);
  }

 private:
  Store& store_;
  ServerState& state_;
  TextLimits limits_;
  ServerState::FlushMarks marks_;     // as the command under way read them
  std::uint64_t now_for_flush_ = 0;  // the command's time while a delayed flush is pending, else 0
  std::string scratch_;
};

}  // namespace offheap::memcache
