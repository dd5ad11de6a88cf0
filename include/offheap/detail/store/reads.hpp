// SPDX-License-Identifier: Apache-2.0
// The store's reads that take more than a copy: read(key, fn) on the value
// in place, view(key), get_value<T>(key). Each is one lock-free lookup
// (Shard::lookup, shard/probe.hpp) whose callback reads what it needs and
// validates it against the record's stamp.
#pragma once

#include <offheap/store.hpp>

#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

namespace offheap {

template <Policy P>
template <class F>
auto OffHeapStore<P>::read(std::string_view key, F&& fn) const {
  using R = std::invoke_result_t<F&, std::string_view>;
  if constexpr (std::is_void_v<R>) {
    return e_.find(key, true, [&](detail::Location, const std::byte* rec, const detail::record::Meta& m,
                               std::uint64_t stamp) {
      Engine::call_in_place(fn, rec, m);
      return detail::record::validate(rec, stamp);
    });
  } else {
    std::optional<R> out;
    e_.find(key, true, [&](detail::Location, const std::byte* rec, const detail::record::Meta& m,
                        std::uint64_t stamp) {
      R r = Engine::call_in_place(fn, rec, m);
      if (!detail::record::validate(rec, stamp)) return false;
      out.emplace(std::move(r));
      return true;
    });
    return out;
  }
}

template <Policy P>
typename OffHeapStore<P>::View OffHeapStore<P>::view(std::string_view key) const {
  View v;
  const bool found = e_.find(key, true,
                          [&](detail::Location loc, const std::byte*,
                              const detail::record::Meta& m, std::uint64_t stamp) {
                            v = View(this, loc, stamp, key, m.value_len, m.type);
                            return true;
                          });
  // (on_hit may have run for a read that the lookup then threw away.)
  return found ? v : View();
}

template <Policy P>
template <class T>
std::optional<T> OffHeapStore<P>::get_value(std::string_view key) const {
  constexpr std::uint8_t tag = detail::value_type_tag<T>();
  // Whole words of room: copy_out stores 8 bytes at a time.
  std::array<char, (sizeof(T) + 7) / 8 * 8> bytes{};
  std::uint8_t found_tag = 0;
  std::uint32_t found_len = 0;
  const bool hit = e_.find(key, true, [&](detail::Location, const std::byte* rec,
                                       const detail::record::Meta& m, std::uint64_t stamp) {
    found_tag = m.type;
    found_len = m.value_len;
    if (m.type == tag && m.value_len == sizeof(T)) {
      detail::record::copy_out(bytes.data(), rec, m.key_len, sizeof(T));
    }
    return detail::record::validate(rec, stamp);
  });
  if (!hit) return std::nullopt;
  if (found_tag != tag || found_len != sizeof(T)) {
    throw Error(Errc::type_mismatch,
                name() + ": get_value on a key of " + std::to_string(key.size()) +
                    " bytes asked for type tag " + std::to_string(tag) + " of " +
                    std::to_string(sizeof(T)) + " bytes; the record holds type tag " +
                    std::to_string(found_tag) + " of " + std::to_string(found_len) + " bytes");
  }
  std::array<char, sizeof(T)> exact;
  std::memcpy(exact.data(), bytes.data(), sizeof(T));
  return std::bit_cast<T>(exact);
}

template <Policy P>
template <class F>
ViewStatus OffHeapStore<P>::visit_version(std::string_view key, detail::Location loc, std::uint64_t stamp,
                                          F&& fn) const {
  ViewStatus status = ViewStatus::removed;
  // The callback below may run more than once; only the run that ends the
  // lookup counts, and none does if the key went away meanwhile.
  const bool found = e_.find(key, false, [&](detail::Location l, const std::byte* rec,
                                          const detail::record::Meta& m, std::uint64_t s) {
    if (l != loc || s != stamp) {
      status = ViewStatus::updated;
      return true;
    }
    status = ViewStatus::live;
    Engine::call_in_place(fn, rec, m);
    return detail::record::validate(rec, s);
  });
  return found ? status : ViewStatus::removed;
}

}  // namespace offheap
