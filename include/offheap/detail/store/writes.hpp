// SPDX-License-Identifier: Apache-2.0
// Writes<P>: every write of a store, built per call on its engine
// (engine.hpp) and Upkeep (upkeep.hpp), which outlive it; it holds no
// state of its own. Its promise: a write is checked (key, value, record and
// deadline sizes; the store writable) before anything changes, runs under
// the key's shard's writer lock, waits at the memory limit as Upkeep's
// at_limit() says, and nudges the maintenance thread when it scheduled an
// earlier deadline.
//
// The store's atomic read-modify-write: compute(), compute_if_absent(),
// compute_if_present(), merge() and their typed forms; and the writes whose
// value the caller writes in place (reserve-then-fill, gather), which run
// the caller's code under the shard's lock the same way. The function runs
// inside Shard::compute (shard/writes.hpp), under the key's shard's
// writer lock; this file turns what it returns into a ComputeDecision, and
// keeps it across the memory limit's retries (Upkeep::at_limit), which
// let the lock go. Also write(), which every other write goes through: the
// key hashed, its deadline checked, the shard's write under at_limit(),
// then a nudge to the maintenance thread (Upkeep::nudge).
#pragma once

#include <offheap/codec.hpp>
#include <offheap/compute.hpp>
#include <offheap/detail/store/engine.hpp>
#include <offheap/detail/store/upkeep.hpp>
#include <offheap/error.hpp>
#include <offheap/expiry.hpp>
#include <offheap/value_type.hpp>

#include <array>
#include <concepts>
#include <cstddef>
#include <span>
#include <bit>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace offheap::detail {

/// What compute()'s function may return: std::optional<V>, V convertible
/// to std::string_view.
template <class R>
concept ComputeResult = requires(const R& r) {
  static_cast<bool>(r);
  std::string_view(*r);
};

/// Whether `inner` lies (in part) inside `outer`'s bytes.
inline bool overlaps(std::string_view inner, std::string_view outer) noexcept {
  const auto lo = reinterpret_cast<std::uintptr_t>(outer.data());
  const auto p = reinterpret_cast<std::uintptr_t>(inner.data());
  return !inner.empty() && !outer.empty() && p < lo + outer.size() && lo < p + inner.size();
}

[[noreturn, gnu::cold]] inline void throw_type_mismatch(const std::string& store, const char* op,
                                                        std::uint8_t tag, std::size_t size,
                                                        const ComputeCurrent& cur) {
  throw Error(Errc::type_mismatch, store + ": " + op + " for type tag " + std::to_string(tag) + " of " +
                                       std::to_string(size) + " bytes; the record holds type tag " +
                                       std::to_string(cur.type) + " of " + std::to_string(cur.value.size()) +
                                       " bytes");
}

/// The key's current value as a T, checked against T's tag and size.
template <class T>
T typed_current(const std::string& store, const char* op, const ComputeCurrent& cur) {
  constexpr std::uint8_t tag = value_type_tag<T>();
  if (cur.type != tag || cur.value.size() != sizeof(T)) throw_type_mismatch(store, op, tag, sizeof(T), cur);
  std::array<char, sizeof(T)> exact;
  std::memcpy(exact.data(), cur.value.data(), sizeof(T));
  return std::bit_cast<T>(exact);
}

template <Policy P>
class Writes {
 public:
  using Engine = StoreEngine<P>;
  using Shard = typename Engine::Shard;
  Writes(Engine& e, Upkeep<P>& u) noexcept : e_(e), u_(u) {}

  /// Refused inside compute() and fill, and by read-only, closed and failed
  /// stores (checks.hpp).
  [[gnu::always_inline]] void check_writable() const { e_.check_writable(u_.thread()); }

  /// Every write but compute's: `value`, or (with `fill`) fill->size bytes
  /// that fill writes in place. Sizes are checked by the caller, all but
  /// the deadline's word. Inlined into each caller, so that the engine and
  /// Upkeep are reached as the store's own members, not through this
  /// object's references (measured: W1 mixed 62.2 ns an op out of line
  /// against 57.5 inlined, where the store before this split took 58).
  [[gnu::always_inline]] Computed write(std::string_view key, std::string_view value, std::uint8_t type,
                                        typename Shard::Mode mode, std::string_view expected = {}, Ttl ttl = {},
                                        const ValueFill* fill = nullptr);
  /// OffHeapStore::put_value.
  template <class T>
  Computed put_value(std::string_view key, const T& value, Ttl ttl);
  /// OffHeapStore::put(key, size, fill) and put_if_absent(key, size, fill).
  template <class Fill>
  Computed put_fill(std::string_view key, std::size_t size, Fill&& fill, Ttl ttl);
  template <class Fill>
  bool put_if_absent_fill(std::string_view key, std::size_t size, Fill&& fill, Ttl ttl);
  /// OffHeapStore::put(key, parts): a gather write.
  Computed put_parts(std::string_view key, std::span<const std::string_view> parts, Ttl ttl);
  /// OffHeapStore::put_if_absent(key, value, existing).
  bool put_if_absent_copy(std::string_view key, std::string_view value, std::string& existing, Ttl ttl);
  /// OffHeapStore::put_as: through T's codec, or put_value without one.
  template <StorableAs T>
  Computed put_as(std::string_view key, const T& value, Ttl ttl);

  /// OffHeapStore::compute and its kin (store.hpp states their rules).
  template <class F>
  Computed compute(std::string_view key, F&& fn, Ttl ttl);
  template <class F>
  Computed compute_if_absent(std::string_view key, F&& make, Ttl ttl);
  template <class F>
  Computed compute_if_present(std::string_view key, F&& fn, Ttl ttl);
  template <class F>
  Computed merge(std::string_view key, std::string_view value, F&& combine, Ttl ttl);
  template <class T, class F>
    requires PaddingFreeValue<T>
  Computed compute_value(std::string_view key, F&& fn, Ttl ttl);
  template <class T>
    requires PaddingFreeValue<T>
  bool replace_value(std::string_view key, const T& value, Ttl ttl);
  template <class T>
    requires PaddingFreeValue<T>
  bool put_value_if_absent(std::string_view key, const T& value, Ttl ttl);

 private:
  /// The key's shard applies decide()'s decision under its writer lock.
  template <class Decide>
  Computed compute_with(std::string_view key, Ttl ttl, Decide& decide);
  /// compute_with() for a result of call(const ComputeCurrent&): nullopt
  /// keeps the key as it is; else an empty R removes it, a value writes it
  /// with type tag `type`.
  template <class Call>
  Computed compute_bytes(std::string_view key, Ttl ttl, std::uint8_t type, Call&& call);
  /// replace_value (`present`) and put_value_if_absent (not): stores
  /// `value` if the key is present (or absent), checking its type if present.
  template <class T>
  bool put_typed_if(std::string_view key, const T& value, Ttl ttl, bool present, const char* op);
  /// put() and put_if_absent() (`mode`) of a value that fill writes in place.
  template <class Fill>
  Computed write_filled(std::string_view key, std::size_t size, Fill& fill, Ttl ttl, typename Shard::Mode mode,
                        std::uint8_t type = type_tag::bytes);

  Engine& e_;
  Upkeep<P>& u_;
};

template <Policy P>
template <class T>
Computed Writes<P>::put_value(std::string_view key, const T& value, Ttl ttl) {
  constexpr std::uint8_t tag = value_type_tag<T>();
  std::byte bytes[sizeof(T)];
  value_bytes(value, bytes);
  const std::string_view v(reinterpret_cast<const char*>(bytes), sizeof(T));
  check_writable();
  e_.check(key, v.size());
  return write(key, v, tag, Shard::Mode::upsert, {}, ttl);
}

template <Policy P>
template <class Decide>
Computed Writes<P>::compute_with(std::string_view key, Ttl ttl, Decide& decide) {
  check_writable();
  e_.check_key(key);
  const std::uint64_t h = e_.hash_(key);
  const std::uint64_t deadline = e_.deadline_for(ttl);
  Shard& s = e_.shards_.for_hash(h);
  const Computed c = u_.at_limit(s, [&] { return s.compute(key, h, deadline, decide); });
  u_.nudge(s);
  return c;
}

template <Policy P>
template <class Call>
Computed Writes<P>::compute_bytes(std::string_view key, Ttl ttl, std::uint8_t type, Call&& call) {
  using Outcome = std::invoke_result_t<Call&, const ComputeCurrent&>;  // std::optional<R>
  Outcome result;            // call()'s, kept across the memory limit's retries
  bool called = false;       // and on what it was taken:
  bool seen_present = false;
  std::uint64_t seen_stamp = 0;
  std::string copy;  // the new value, when it lay inside the old record (which may go first)
  bool copied = false;
  const std::uint64_t deadline = e_.deadline_for(ttl);  // (compute_with() reads the clock again)
  auto decide = [&](const ComputeCurrent& cur) -> ComputeDecision {
    if (!called || cur.present != seen_present || cur.stamp != seen_stamp) {
      {
        const ComputeScope inside(e_.id());
        result = call(cur);  // may throw: nothing has changed
      }
      called = true;
      seen_present = cur.present;
      seen_stamp = cur.stamp;
      copied = false;
      if (result && *result) {
        const std::string_view v(**result);
        if (cur.present && overlaps(v, cur.value) && !(cur.type == type && v == cur.value)) {
          copy.assign(v);  // (allocates: only for a new value taken from part of the old one)
          copied = true;
        }
      }
    }
    ComputeDecision d;
    if (!result) return d;  // keep
    if (!*result) {
      d.action = ComputeDecision::Action::remove;
      return d;
    }
    const std::string_view v = copied ? std::string_view(copy) : std::string_view(**result);
    if (cur.present && cur.type == type && v == cur.value) return d;  // the same: nothing to write
    e_.check(key, v.size());  // may throw: nothing has changed
    e_.check_deadline_word(key, v.size(), deadline);
    d.action = ComputeDecision::Action::write;
    d.value = v;
    d.type = type;
    return d;
  };
  return compute_with(key, ttl, decide);
}

template <Policy P>
template <class F>
Computed Writes<P>::compute(std::string_view key, F&& fn, Ttl ttl) {
  using R = std::invoke_result_t<F&, std::optional<std::string_view>>;
  static_assert(ComputeResult<R>,
                "compute(): fn must return std::optional<V>, V convertible to std::string_view");
  return compute_bytes(key, ttl, type_tag::bytes, [&](const ComputeCurrent& cur) -> std::optional<R> {
    return fn(cur.present ? std::optional<std::string_view>(cur.value) : std::nullopt);
  });
}

template <Policy P>
template <class F>
Computed Writes<P>::compute_if_absent(std::string_view key, F&& make, Ttl ttl) {
  using V = std::invoke_result_t<F&>;
  static_assert(std::is_convertible_v<const V&, std::string_view>,
                "compute_if_absent(): make must return a value convertible to std::string_view");
  return compute_bytes(key, ttl, type_tag::bytes,
                       [&](const ComputeCurrent& cur) -> std::optional<std::optional<V>> {
                         if (cur.present) return std::nullopt;
                         return std::optional<V>(make());
                       });
}

template <Policy P>
template <class F>
Computed Writes<P>::compute_if_present(std::string_view key, F&& fn, Ttl ttl) {
  using R = std::invoke_result_t<F&, std::string_view>;
  static_assert(ComputeResult<R>,
                "compute_if_present(): fn must return std::optional<V>, V convertible to std::string_view");
  return compute_bytes(key, ttl, type_tag::bytes, [&](const ComputeCurrent& cur) -> std::optional<R> {
    if (!cur.present) return std::nullopt;
    return fn(cur.value);
  });
}

template <Policy P>
template <class F>
Computed Writes<P>::merge(std::string_view key, std::string_view value, F&& combine, Ttl ttl) {
  using R = std::invoke_result_t<F&, std::string_view, std::string_view>;
  static_assert(ComputeResult<R>,
                "merge(): combine must return std::optional<V>, V convertible to std::string_view");
  return compute_bytes(key, ttl, type_tag::bytes, [&](const ComputeCurrent& cur) -> std::optional<R> {
    if (!cur.present) return R(std::in_place, value);
    return combine(cur.value, value);
  });
}

template <Policy P>
template <class T, class F>
  requires PaddingFreeValue<T>
Computed Writes<P>::compute_value(std::string_view key, F&& fn, Ttl ttl) {
  static_assert(std::is_same_v<std::invoke_result_t<F&, std::optional<T>>, std::optional<T>>,
                "compute_value<T>(): fn must take and return std::optional<T>");
  constexpr std::uint8_t tag = value_type_tag<T>();
  std::byte bytes[sizeof(T)];
  return compute_bytes(key, ttl, tag,
                       [&](const ComputeCurrent& cur) -> std::optional<std::optional<std::string_view>> {
                         std::optional<T> old;
                         if (cur.present) old = typed_current<T>(e_.name(), "compute_value", cur);
                         const std::optional<T> now = fn(std::move(old));
                         if (!now) return std::optional<std::string_view>();
                         value_bytes(*now, bytes);
                         return std::optional<std::string_view>(
                             std::string_view(reinterpret_cast<const char*>(bytes), sizeof(T)));
                       });
}

template <Policy P>
template <class T>
  requires PaddingFreeValue<T>
bool Writes<P>::replace_value(std::string_view key, const T& value, Ttl ttl) {
  return put_typed_if(key, value, ttl, true, "replace_value");
}

template <Policy P>
template <class T>
  requires PaddingFreeValue<T>
bool Writes<P>::put_value_if_absent(std::string_view key, const T& value, Ttl ttl) {
  return put_typed_if(key, value, ttl, false, "put_value_if_absent");
}

template <Policy P>
template <class T>
bool Writes<P>::put_typed_if(std::string_view key, const T& value, Ttl ttl, bool present, const char* op) {
  constexpr std::uint8_t tag = value_type_tag<T>();
  std::byte bytes[sizeof(T)];
  value_bytes(value, bytes);
  const std::string_view v(reinterpret_cast<const char*>(bytes), sizeof(T));
  bool applies = false;
  (void)compute_bytes(key, ttl, tag,
                      [&](const ComputeCurrent& cur) -> std::optional<std::optional<std::string_view>> {
                        if (cur.present) (void)typed_current<T>(e_.name(), op, cur);  // may throw
                        applies = cur.present == present;
                        if (!applies) return std::nullopt;
                        return std::optional<std::string_view>(v);
                      });
  return applies;
}

template <Policy P>
bool Writes<P>::put_if_absent_copy(std::string_view key, std::string_view value, std::string& existing, Ttl ttl) {
  return compute_bytes(key, ttl, type_tag::bytes,
                       [&](const ComputeCurrent& cur) -> std::optional<std::optional<std::string_view>> {
                         if (cur.present) {
                           existing.assign(cur.value);
                           return std::nullopt;
                         }
                         return std::optional<std::string_view>(value);
                       }) == Computed::inserted;
}

// ---- every write but compute's --------------------------------------------

template <Policy P>
inline Computed Writes<P>::write(std::string_view key, std::string_view value, std::uint8_t type,
                                 typename Shard::Mode mode, std::string_view expected, Ttl ttl,
                                 const ValueFill* fill) {
  const std::uint64_t h = e_.hash_(key);
  const std::uint64_t deadline = e_.deadline_for(ttl);
  e_.check_deadline_word(key, fill != nullptr ? fill->size : value.size(), deadline);
  Shard& s = e_.shards_.for_hash(h);
  const Computed wrote = u_.at_limit(s, [&] { return s.write(key, h, value, type, mode, expected, deadline, fill); });
  u_.nudge(s);
  return wrote;
}

// ---- values written in place ------------------------------------------------

template <Policy P>
template <class Fill>
Computed Writes<P>::put_fill(std::string_view key, std::size_t size, Fill&& fill, Ttl ttl) {
  return write_filled(key, size, fill, ttl, Shard::Mode::upsert);
}

template <Policy P>
template <class Fill>
bool Writes<P>::put_if_absent_fill(std::string_view key, std::size_t size, Fill&& fill, Ttl ttl) {
  return write_filled(key, size, fill, ttl, Shard::Mode::insert) == Computed::inserted;
}

template <Policy P>
template <class Fill>
Computed Writes<P>::write_filled(std::string_view key, std::size_t size, Fill& fill, Ttl ttl,
                                       typename Shard::Mode mode, std::uint8_t type) {
  check_writable();
  e_.check(key, size);
  struct Ctx {
    const void* store;  // its id(): writes of this store are refused inside fill
    Fill* fill;
  } ctx{e_.id(), &fill};
  const ValueFill f{[](const void* c, std::byte* dst, std::size_t n) {
                              const auto* x = static_cast<const Ctx*>(c);
                              const ComputeScope inside(x->store);  // no writes of this store
                              (*x->fill)(std::span<std::byte>(dst, n));
                            },
                            &ctx, size};
  return write(key, {}, type, mode, {}, ttl, &f);
}

template <Policy P>
Computed Writes<P>::put_parts(std::string_view key, std::span<const std::string_view> parts, Ttl ttl) {
  std::size_t size = 0;
  for (const std::string_view p : parts) {
    size += p.size();
    if (size < p.size() || size > Engine::kMaxValueBytes) [[unlikely]] size = Engine::kMaxValueBytes + std::size_t{1};
  }
  return put_fill(key, size, [parts](std::span<std::byte> dst) noexcept {
    std::size_t at = 0;
    for (const std::string_view p : parts) {
      if (!p.empty()) std::memcpy(dst.data() + at, p.data(), p.size());
      at += p.size();
    }
  }, ttl);
}

// ---- values through their codec (codec.hpp) ---------------------------------

template <Policy P>
template <StorableAs T>
Computed Writes<P>::put_as(std::string_view key, const T& value, Ttl ttl) {
  if constexpr (!HasCodec<T>) {
    return put_value(key, value, ttl);
  } else {
    using C = Codec<T>;
    static_assert(C::tag >= type_tag::first_user || LibraryCodec<T>,
                  "a codec of yours takes a type tag of 128-255 (lower tags are the library's)");
    const std::size_t encoded = C::size(value);
    // Past the largest value: e_.check() refuses it (value_too_large).
    const std::size_t size = encoded > Engine::kMaxValueBytes - 2 ? Engine::kMaxValueBytes + std::size_t{1} : encoded + 2;
    const auto fill = [&](std::span<std::byte> out) {
      out[0] = static_cast<std::byte>(C::version & 0xFF);
      out[1] = static_cast<std::byte>(C::version >> 8);
      C::encode(value, out.subspan(2));
    };
    return write_filled(key, size, fill, ttl, Shard::Mode::upsert, C::tag);
  }
}

}  // namespace offheap::detail
