// SPDX-License-Identifier: Apache-2.0
// put_as<T> / get_as<T>: values through their codec (codec.hpp). A codec's
// value is its layout version (2 bytes, little-endian) followed by what
// encode() wrote, in a record of the codec's type tag.
#pragma once

#include <offheap/store.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace offheap {

template <Policy P>
template <StorableAs T>
Computed OffHeapStore<P>::put_as(std::string_view key, const T& value, Ttl ttl) {
  if constexpr (!HasCodec<T>) {
    return put_value(key, value, ttl);
  } else {
    using C = Codec<T>;
    static_assert(C::tag >= type_tag::first_user || detail::LibraryCodec<T>,
                  "a codec of yours takes a type tag of 128-255 (lower tags are the library's)");
    const std::size_t encoded = C::size(value);
    // Past the largest value: e_.check() refuses it (value_too_large).
    const std::size_t size = encoded > kMaxValueBytes - 2 ? kMaxValueBytes + std::size_t{1} : encoded + 2;
    const auto fill = [&](std::span<std::byte> out) {
      out[0] = static_cast<std::byte>(C::version & 0xFF);
      out[1] = static_cast<std::byte>(C::version >> 8);
      C::encode(value, out.subspan(2));
    };
    return write_filled(key, size, fill, ttl, Shard::Mode::upsert, C::tag);
  }
}

template <Policy P>
template <StorableAs T>
std::optional<T> OffHeapStore<P>::get_as(std::string_view key) const {
  if constexpr (!HasCodec<T>) {
    return get_value<T>(key);
  } else {
    using C = Codec<T>;
    static_assert(C::tag >= type_tag::first_user || detail::LibraryCodec<T>,
                  "a codec of yours takes a type tag of 128-255 (lower tags are the library's)");
    // The copy: on the stack when small, else in a string (its length comes
    // from a header the lookup checked, as get()'s does).
    std::array<char, 256> small;
    std::string large;
    char* bytes = nullptr;
    std::uint8_t found_tag = 0;
    std::uint32_t found_len = 0;
    const bool hit = e_.find(key, true, [&](detail::Location, const std::byte* rec,
                                         const detail::record::Meta& m, std::uint64_t stamp) {
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
        detail::record::copy_out(bytes, rec, m.key_len, m.value_len);
      }
      return detail::record::validate(rec, stamp);
    });
    if (!hit) return std::nullopt;
    if (found_tag != C::tag) {
      throw Error(Errc::type_mismatch,
                  name() + ": get_as on a key of " + std::to_string(key.size()) +
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
                  name() + ": get_as on a key of " + std::to_string(key.size()) +
                      " bytes: the record was written by layout version " +
                      (found_len < 2 ? std::string("(none: shorter than a version)")
                                     : std::to_string(version)) +
                      " of codec type tag " + std::to_string(C::tag) + "; this program's codec reads version " +
                      std::to_string(C::version) + " (refused rather than decoded wrongly)");
    }
    return C::decode(std::span<const std::byte>(reinterpret_cast<const std::byte*>(bytes) + 2, found_len - 2));
  }
}

}  // namespace offheap
