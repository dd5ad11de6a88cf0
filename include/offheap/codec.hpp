// SPDX-License-Identifier: Apache-2.0
// Codecs: how put_as<T> / get_as<T> store a T that is not a plain run of
// bytes (std::string, a vector, a struct with a string in it, ...).
//
// A codec is a specialization of offheap::Codec<T> with:
//
//   static constexpr std::uint8_t tag;       // the records' type tag: 128-255
//                                            // for codecs of yours
//   static constexpr std::uint16_t version;  // the layout's version
//   static std::size_t size(const T& v);     // the bytes encode() writes
//   static void encode(const T& v, std::span<std::byte> out);  // out.size() == size(v)
//   static T decode(std::span<const std::byte> in);            // what encode() wrote
//
// put_as<T> stores the version (2 bytes, little-endian) and then what
// encode() writes, straight into the record (no intermediate copy), with
// the codec's tag. get_as<T> refuses, with Errc::type_mismatch and a
// message naming both, a record whose tag is not the codec's or whose
// version is not the codec's version: a program whose codec changed its
// layout gets an error for the values an older layout wrote (in a
// file-backed store, across restarts), never a wrong value. Change
// `version` whenever encode() writes something else; decode old layouts by
// hand (get(), then your own parsing) if you need them.
//
// get_as<T> copies the value out of the store first (on the stack up to
// 256 bytes, else into a string) and checks it is whole, then decodes the
// copy: decode() never sees torn bytes and may trust lengths it reads.
//
// Types without a codec that put_value<T> takes (PaddingFreeValue:
// integers, enums, floating point, padding-free structs) keep the fast
// path: put_as<T> / get_as<T> are put_value<T> / get_value<T> for them
// (the type tag and the size are their layout check).
//
// Codecs here: std::string (tag 65) and std::vector<T> of an arithmetic T
// (tag 80 + T's value type tag, 81-93), version 1: the bytes as they are
// in memory.
//
// Memory and threads: encode() writes into a span of the new record, under
// the key's shard's writer lock, valid only during the call; it must not
// call this store's writes, and if it throws nothing changes. decode()
// reads a span over a private copy, valid only during the call: copy what
// the T keeps. Codecs are called from whichever thread calls put_as /
// get_as, possibly from several at once: keep them free of shared state.
#pragma once

#include <offheap/error.hpp>
#include <offheap/value_type.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace offheap {

/// Specialize for your types (see above). Not defined for the others.
template <class T>
struct Codec;

/// Types with a Codec<T>.
template <class T>
concept HasCodec = requires(const T& v, std::span<std::byte> out, std::span<const std::byte> in) {
  { Codec<T>::tag } -> std::convertible_to<std::uint8_t>;
  { Codec<T>::version } -> std::convertible_to<std::uint16_t>;
  { Codec<T>::size(v) } -> std::convertible_to<std::size_t>;
  Codec<T>::encode(v, out);
  { Codec<T>::decode(in) } -> std::convertible_to<T>;
};

/// What put_as<T> / get_as<T> take: a type with a codec, or one that
/// put_value<T> stores as it is.
template <class T>
concept StorableAs = HasCodec<T> || PaddingFreeValue<T>;

namespace detail {
/// The codecs this header defines (tags below 128).
template <class T>
inline constexpr bool LibraryCodec = false;
template <>
inline constexpr bool LibraryCodec<std::string> = true;
template <class T>
inline constexpr bool LibraryCodec<std::vector<T>> = std::is_arithmetic_v<T>;
}  // namespace detail

namespace type_tag {
inline constexpr std::uint8_t string = 65;
inline constexpr std::uint8_t vector_base = 80;  // + the element's value type tag
}  // namespace type_tag

template <>
struct Codec<std::string> {
  static constexpr std::uint8_t tag = type_tag::string;
  static constexpr std::uint16_t version = 1;
  static std::size_t size(const std::string& v) noexcept { return v.size(); }
  static void encode(const std::string& v, std::span<std::byte> out) noexcept {
    if (!v.empty()) std::memcpy(out.data(), v.data(), v.size());
  }
  static std::string decode(std::span<const std::byte> in) {
    return std::string(reinterpret_cast<const char*>(in.data()), in.size());
  }
};

template <class T>
  requires(std::is_arithmetic_v<T> && !std::is_same_v<T, bool> && !std::is_same_v<T, long double>)
struct Codec<std::vector<T>> {
  static constexpr std::uint8_t tag =
      static_cast<std::uint8_t>(type_tag::vector_base + detail::value_type_tag<T>());
  static constexpr std::uint16_t version = 1;
  static std::size_t size(const std::vector<T>& v) noexcept { return v.size() * sizeof(T); }
  static void encode(const std::vector<T>& v, std::span<std::byte> out) noexcept {
    if (!v.empty()) std::memcpy(out.data(), v.data(), v.size() * sizeof(T));
  }
  static std::vector<T> decode(std::span<const std::byte> in) {
    if (in.size() % sizeof(T) != 0) {
      throw Error(Errc::type_mismatch, "a vector value of " + std::to_string(in.size()) +
                                           " bytes is no whole number of " +
                                           std::to_string(sizeof(T)) + "-byte elements");
    }
    std::vector<T> v(in.size() / sizeof(T));
    if (!v.empty()) std::memcpy(v.data(), in.data(), v.size() * sizeof(T));
    return v;
  }
};

}  // namespace offheap
