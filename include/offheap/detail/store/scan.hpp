// SPDX-License-Identifier: Apache-2.0
// The store's walks: for_each and for_each_key (the whole store in one
// call), scan and scan_keys (resumable steps, a Cursor between them). Each
// call is a walk of the shards' index tables (Shard::for_each, Shard::scan
// in walk.hpp) inside the store's WalkGate, so that a table replaced
// during the call stays readable until the call ends. Walks<P> holds no
// state: it is made per call on the store's engine.
#pragma once

#include <offheap/cursor.hpp>
#include <offheap/detail/store/engine.hpp>
#include <offheap/error.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

namespace offheap::detail {

/// Calls a walk's callback with what it takes: (key, value, type) or
/// (key, value) for values, (key, type) or (key) for keys; returns false
/// only when the callback returned false (stop).
template <class F>
bool call_walker(F& fn, const WalkCopy& c) {
  const std::string_view key(c.key);
  const std::string_view value(c.value);
  if (c.values) {
    if constexpr (std::is_invocable_v<F&, std::string_view, std::string_view, std::uint8_t>) {
      using R = std::invoke_result_t<F&, std::string_view, std::string_view, std::uint8_t>;
      if constexpr (std::is_void_v<R>) {
        fn(key, value, c.type);
      } else {
        return static_cast<bool>(fn(key, value, c.type));
      }
    } else if constexpr (std::is_invocable_v<F&, std::string_view, std::string_view>) {
      using R = std::invoke_result_t<F&, std::string_view, std::string_view>;
      if constexpr (std::is_void_v<R>) {
        fn(key, value);
      } else {
        return static_cast<bool>(fn(key, value));
      }
    }
  } else {
    if constexpr (std::is_invocable_v<F&, std::string_view, std::uint8_t>) {
      using R = std::invoke_result_t<F&, std::string_view, std::uint8_t>;
      if constexpr (std::is_void_v<R>) {
        fn(key, c.type);
      } else {
        return static_cast<bool>(fn(key, c.type));
      }
    } else if constexpr (std::is_invocable_v<F&, std::string_view>) {
      using R = std::invoke_result_t<F&, std::string_view>;
      if constexpr (std::is_void_v<R>) {
        fn(key);
      } else {
        return static_cast<bool>(fn(key));
      }
    }
  }
  return true;
}

/// A walk's copy buffers: the thread's own, kept from walk to walk so that
/// steps of a scan allocate nothing once warm (a walk inside a walk's
/// callback takes fresh ones); given back when a value over 64 KiB grew
/// them, so that a thread keeps no large buffer.
class WalkBuffers {
 public:
  explicit WalkBuffers(bool values) noexcept {
    if (!busy_) {
      busy_ = true;
      copy_ = &kept_;
    } else {
      copy_ = &own_;
    }
    copy_->values = values;
  }
  ~WalkBuffers() {
    if (copy_ != &kept_) return;
    busy_ = false;
    constexpr std::size_t kKeep = 64 << 10;
    if (kept_.value.capacity() > kKeep) std::string().swap(kept_.value);
    if (kept_.key.capacity() > kKeep) std::string().swap(kept_.key);
  }
  WalkBuffers(const WalkBuffers&) = delete;
  WalkBuffers& operator=(const WalkBuffers&) = delete;
  WalkCopy& copy() noexcept { return *copy_; }

 private:
  static inline thread_local WalkCopy kept_;
  static inline thread_local bool busy_ = false;
  WalkCopy own_;
  WalkCopy* copy_;
};

/// A walk's stay in the store's WalkGate (one call of for_each or scan).
struct WalkStay {
  explicit WalkStay(WalkGate& g) noexcept : gate(g), ticket(g.enter()) {}
  ~WalkStay() { gate.leave(ticket); }
  WalkStay(const WalkStay&) = delete;
  WalkStay& operator=(const WalkStay&) = delete;
  WalkGate& gate;
  unsigned ticket;
};

/// The store's walks, built per call on its engine (engine.hpp), which
/// outlives it. What each promises is stated at OffHeapStore::for_each and
/// OffHeapStore::scan; the string_views handed to fn are valid only during
/// each call (they point into the walk's copy buffers).
template <Policy P>
class Walks {
 public:
  using Engine = StoreEngine<P>;
  using Shard = typename Engine::Shard;
  explicit Walks(const Engine& e) noexcept : e_(e) {}

  template <class F>
  void for_each(F&& fn) const;
  template <class F>
  void for_each_key(F&& fn) const;
  template <class F>
  std::size_t scan(Cursor& cursor, std::size_t max_records, F&& fn) const;
  template <class F>
  std::size_t scan_keys(Cursor& cursor, std::size_t max_records, F&& fn) const;

 private:
  /// Every shard's records to call(WalkCopy), in one walk inside the gate.
  template <class F>
  void walk_all(bool values, F& call) const;
  /// Up to max_records from where `cursor` stands; written back at the end.
  template <class F>
  std::size_t walk_steps(Cursor& cursor, std::size_t max_records, bool values, F& call) const;

  const Engine& e_;
};


template <Policy P>
template <class F>
void Walks<P>::for_each(F&& fn) const {
  static_assert(std::is_invocable_v<F&, std::string_view, std::string_view, std::uint8_t> ||
                    std::is_invocable_v<F&, std::string_view, std::string_view>,
                "for_each's fn takes (std::string_view key, std::string_view value"
                "[, std::uint8_t type])");
  const auto call = [&](const WalkCopy& c) { (void)call_walker(fn, c); };
  walk_all(true, call);
}

template <Policy P>
template <class F>
void Walks<P>::for_each_key(F&& fn) const {
  static_assert(std::is_invocable_v<F&, std::string_view, std::uint8_t> ||
                    std::is_invocable_v<F&, std::string_view>,
                "for_each_key's fn takes (std::string_view key[, std::uint8_t type])");
  const auto call = [&](const WalkCopy& c) { (void)call_walker(fn, c); };
  walk_all(false, call);
}

template <Policy P>
template <class F>
std::size_t Walks<P>::scan(Cursor& cursor, std::size_t max_records, F&& fn) const {
  static_assert(std::is_invocable_v<F&, std::string_view, std::string_view, std::uint8_t> ||
                    std::is_invocable_v<F&, std::string_view, std::string_view>,
                "scan's fn takes (std::string_view key, std::string_view value"
                "[, std::uint8_t type]) and returns void or bool (false: stop)");
  const auto call = [&](const WalkCopy& c) { return call_walker(fn, c); };
  return walk_steps(cursor, max_records, true, call);
}

template <Policy P>
template <class F>
std::size_t Walks<P>::scan_keys(Cursor& cursor, std::size_t max_records, F&& fn) const {
  static_assert(std::is_invocable_v<F&, std::string_view, std::uint8_t> ||
                    std::is_invocable_v<F&, std::string_view>,
                "scan_keys's fn takes (std::string_view key[, std::uint8_t type]) and returns "
                "void or bool (false: stop)");
  const auto call = [&](const WalkCopy& c) { return call_walker(fn, c); };
  return walk_steps(cursor, max_records, false, call);
}

template <Policy P>
template <class F>
void Walks<P>::walk_all(bool values, F& call) const {
  WalkBuffers buffers(values);
  const WalkStay stay(e_.walks_);
  for (const Shard& s : e_.shards_) s.for_each(call, buffers.copy());
}

template <Policy P>
template <class F>
std::size_t Walks<P>::walk_steps(Cursor& cursor, std::size_t max_records, bool values,
                                        F& call) const {
  if (cursor.done_ || max_records == 0) return 0;
  // The step works on a copy of the cursor, written back when it ends (an
  // exception from fn included): a scan with the same cursor from inside
  // fn then only makes keys come again, never skips them.
  Cursor c = cursor;
  struct WriteBack {
    Cursor& to;
    const Cursor& from;
    ~WriteBack() { to = from; }
  } write_back{cursor, c};
  if (c.store_ != e_.instance_) {
    // Another store object's cursor (the same files reopened): its
    // positions are of tables this object may have rebuilt; its shard is
    // taken again from the start.
    if (c.shard_ >= e_.shards_.size()) {
      throw Error(Errc::invalid_argument,
                  e_.name() + ": scan() with a cursor in shard " + std::to_string(c.shard_) +
                      " of a store with " + std::to_string(e_.shards_.size()) + " shards");
    }
    if (c.store_ != 0 && c.position_ != 0) ++c.restarts_;
    c.store_ = e_.instance_;
    c.position_ = 0;
    c.serial_ = ~std::uint64_t{0};
  }
  WalkBuffers buffers(values);
  std::uint64_t budget = max_records;
  const WalkStay stay(e_.walks_);
  while (c.shard_ < e_.shards_.size()) {
    if (!e_.shards_.begin()[c.shard_].scan(c.position_, c.serial_, c.moves_, c.restarts_, budget,
                                           call, buffers.copy())) {
      break;
    }
    ++c.shard_;  // this shard walked to its end
    c.position_ = 0;
    c.serial_ = ~std::uint64_t{0};
  }
  if (c.shard_ == e_.shards_.size()) c.done_ = true;
  return static_cast<std::size_t>(max_records - budget);
}

}  // namespace offheap::detail
