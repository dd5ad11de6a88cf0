// SPDX-License-Identifier: Apache-2.0
// The store's reads that take more than a copy: read(key, fn) on the value
// in place, get_value<T>(key), get_as<T>(key) (a codec's value: its layout
// version, 2 bytes little-endian, then what encode() wrote). Each is one lock-free lookup
// (Shard::lookup, shard/probe.hpp) whose callback reads what it needs and
// validates it against the record's stamp.
#pragma once

#include <offheap/codec.hpp>
#include <offheap/detail/store/batch.hpp>
#include <offheap/detail/store/engine.hpp>
#include <offheap/error.hpp>
#include <offheap/value_type.hpp>

#include <array>
#include <bit>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <span>
#include <type_traits>

namespace offheap::detail {

/// The store's reads beyond a plain copy, built per call on its engine
/// (engine.hpp), which outlives it: each is one lock-free lookup whose
/// callback runs on the record in place and is validated by the record's
/// stamp afterwards (it may run more than once; only a validated run
/// counts). The string_view a read's fn gets is valid only during that
/// call.
template <Policy P>
class Reads {
 public:
  using Engine = StoreEngine<P>;
  explicit Reads(const Engine& e) noexcept : e_(e) {}

  /// OffHeapStore::get_all: keys in slices of 64, hashed and their index
  /// lines prefetched, then the records those lines lead to prefetched,
  /// then the lookups.
  std::size_t get_all(std::span<const std::string_view> keys, std::span<std::optional<std::string>> values) const;
  /// OffHeapStore::read: fn(value) on the value in place.
  template <class F>
  auto read(std::string_view key, F&& fn) const;
  /// OffHeapStore::get_value<T>.
  template <class T>
  std::optional<T> get_value(std::string_view key) const;
  /// OffHeapStore::get_as<T>: a codec's value (its version, then what
  /// encode() wrote).
  template <StorableAs T>
  std::optional<T> get_as(std::string_view key) const;

 private:
  const Engine& e_;
};

template <Policy P>
template <class F>
auto Reads<P>::read(std::string_view key, F&& fn) const {
  using R = std::invoke_result_t<F&, std::string_view>;
  if constexpr (std::is_void_v<R>) {
    return e_.find(key, true, [&](Location, const std::byte* rec, const record::Meta& m,
                               std::uint64_t stamp) {
      Engine::call_in_place(fn, rec, m);
      return record::validate(rec, stamp);
    });
  } else {
    std::optional<R> out;
    e_.find(key, true, [&](Location, const std::byte* rec, const record::Meta& m,
                        std::uint64_t stamp) {
      R r = Engine::call_in_place(fn, rec, m);
      if (!record::validate(rec, stamp)) return false;
      out.emplace(std::move(r));
      return true;
    });
    return out;
  }
}

template <Policy P>
template <class T>
std::optional<T> Reads<P>::get_value(std::string_view key) const {
  constexpr std::uint8_t tag = value_type_tag<T>();
  std::array<char, sizeof(T)> bytes{};
  std::uint8_t found_tag = 0;
  std::uint32_t found_len = 0;
  const bool hit = e_.find(key, true, [&](Location, const std::byte* rec,
                                       const record::Meta& m, std::uint64_t stamp) {
    found_tag = m.type;
    found_len = m.value_len;
    if (m.type == tag && m.value_len == sizeof(T)) {
      record::copy_out(bytes.data(), rec, m.key_len, sizeof(T));
    }
    return record::validate(rec, stamp);
  });
  if (!hit) return std::nullopt;
  if (found_tag != tag || found_len != sizeof(T)) {
    throw Error(Errc::type_mismatch,
                e_.name() + ": get_value on a key of " + std::to_string(key.size()) +
                    " bytes asked for type tag " + std::to_string(tag) + " of " +
                    std::to_string(sizeof(T)) + " bytes; the record holds type tag " +
                    std::to_string(found_tag) + " of " + std::to_string(found_len) + " bytes");
  }
  return std::bit_cast<T>(bytes);
}

template <Policy P>
template <StorableAs T>
std::optional<T> Reads<P>::get_as(std::string_view key) const {
  if constexpr (!HasCodec<T>) {
    return get_value<T>(key);
  } else {
    using C = Codec<T>;
    static_assert(C::tag >= type_tag::first_user || LibraryCodec<T>,
                  "a codec of yours takes a type tag of 128-255 (lower tags are the library's)");
    // The copy: on the stack when small, else in a string (its length comes
    // from a header the lookup checked, as get()'s does).
    std::array<char, 256> small;
    std::string large;
    char* bytes = nullptr;
    std::uint8_t found_tag = 0;
    std::uint32_t found_len = 0;
    const bool hit = e_.find(key, true, [&](Location, const std::byte* rec,
                                         const record::Meta& m, std::uint64_t stamp) {
      found_tag = m.type;
      found_len = m.value_len;
      bytes = nullptr;
      if (m.type == C::tag) {
        if (m.value_len <= small.size()) {
          bytes = small.data();
        } else {
          large.resize(m.value_len);
          bytes = large.data();
        }
        record::copy_out(bytes, rec, m.key_len, m.value_len);
      }
      return record::validate(rec, stamp);
    });
    if (!hit) return std::nullopt;
    if (found_tag != C::tag) {
      throw Error(Errc::type_mismatch,
                  e_.name() + ": get_as on a key of " + std::to_string(key.size()) +
                      " bytes asked for codec type tag " + std::to_string(C::tag) +
                      "; the record holds type tag " + std::to_string(found_tag) + " (" +
                      std::to_string(found_len) + " bytes)");
    }
    const std::uint16_t version =
        found_len < 2 ? 0
                      : static_cast<std::uint16_t>(static_cast<unsigned char>(bytes[0]) |
                                                   static_cast<unsigned char>(bytes[1]) << 8);
    if (found_len < 2 || version != C::version) {
      throw Error(Errc::type_mismatch,
                  e_.name() + ": get_as on a key of " + std::to_string(key.size()) +
                      " bytes: the record was written by layout version " +
                      (found_len < 2 ? std::string("(none: shorter than a version)")
                                     : std::to_string(version)) +
                      " of codec type tag " + std::to_string(C::tag) + "; this program's codec reads version " +
                      std::to_string(C::version) + " (refused rather than decoded wrongly)");
    }
    return C::decode(std::span<const std::byte>(reinterpret_cast<const std::byte*>(bytes) + 2, found_len - 2));
  }
}

template <Policy P>
std::size_t Reads<P>::get_all(std::span<const std::string_view> keys,
                                     std::span<std::optional<std::string>> values) const {
  if (values.size() < keys.size()) [[unlikely]] {
    throw Error(Errc::invalid_argument, e_.name() + ": get_all() of " + std::to_string(keys.size()) +
                                            " keys into " + std::to_string(values.size()) + " values");
  }
  std::size_t found = 0;
  std::array<std::uint64_t, BatchSlice::kKeys> hash;
  for (std::size_t base = 0; base < keys.size(); base += hash.size()) {
    const std::size_t n = std::min(hash.size(), keys.size() - base);
    for (std::size_t i = 0; i < n; ++i) {
      const std::string_view k = keys[base + i];
      hash[i] = k.size() <= Engine::kMaxKeyBytes ? e_.hash_(k) : 0;
      e_.shards_.for_hash(hash[i]).prefetch(hash[i]);
    }
    // The index lines have had a slice's hashing to come; the records
    // they lead to get the slice's first lookups' time. (A slice of a few
    // keys gives the lines no time: it goes straight to the lookups.)
    if (n >= 8) {
      for (std::size_t i = 0; i < n; ++i) e_.shards_.for_hash(hash[i]).prefetch_record(hash[i]);
    }
    for (std::size_t i = 0; i < n; ++i) {
      std::optional<std::string>& out = values[base + i];
      if (!out) out.emplace();
      std::string& v = *out;
      const bool hit = e_.find(keys[base + i], hash[i], true,
                            [&](Location, const std::byte* rec, const record::Meta& m,
                                std::uint64_t stamp) {
                              Engine::copy_value(v, rec, m);
                              return record::validate(rec, stamp);
                            });
      if (hit) {
        ++found;
      } else {
        out.reset();
      }
    }
  }
  return found;
}

}  // namespace offheap::detail
