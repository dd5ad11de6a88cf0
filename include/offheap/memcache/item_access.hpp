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
#include <offheap/memcache/server_state.hpp>
#include <offheap/memcache/text_request.hpp>
#include <offheap/store.hpp>

#include <array>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <optional>
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
  /// The scratch buffer (assemble()'s item), to extend in place.
  std::string& scratch() noexcept { return scratch_; }

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
