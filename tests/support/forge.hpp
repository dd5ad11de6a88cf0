// SPDX-License-Identifier: Apache-2.0
// Values that carry a forged record: what a writer who controls values would
// store so that a removed key's old location, once it lies inside such a
// value, reads like a live record of that key (detail/journal/record.hpp's layout).
// Used by the tests that prove a removed or moved key's slot can never
// validate a record.
#pragma once

#include <offheap/detail/journal/record.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace offheap_test {

/// The bytes a reader would parse at a record start: stamp, header (live,
/// `key`, a value length of `claimed_len`, `type`), zero checksum/expiry,
/// then the key and `value`, padded to 8.
inline std::string forged_record(std::string_view key, std::string_view value, std::uint64_t stamp,
                                 std::uint32_t claimed_len, std::uint8_t type = 0) {
  namespace rec = offheap::detail::record;
  const rec::Meta m{claimed_len, static_cast<std::uint16_t>(key.size()),
                    rec::Meta::make_flags(rec::State::live, 0, false, 0), type};
  const std::uint64_t words[3] = {stamp, m.encode(), 0};
  std::string out(reinterpret_cast<const char*>(words), sizeof words);
  out.append(key);
  out.append(value);
  out.resize(rec::kHeaderBytes + rec::payload_for(key.size(), value.size()), '\0');
  return out;
}

inline std::string forged_record(std::string_view key, std::string_view value,
                                 std::uint64_t stamp = 0x1000) {
  return forged_record(key, value, stamp, static_cast<std::uint32_t>(value.size()));
}

/// A value of `length` bytes filled with `fill`, with `inner` at `offset`.
inline std::string value_with(std::size_t length, std::size_t offset, std::string_view inner,
                              char fill = '.') {
  std::string v(length, fill);
  std::memcpy(v.data() + offset, inner.data(), inner.size());
  return v;
}

}  // namespace offheap_test

namespace offheap_test {

/// A store of one shard laid out so that a removal merges a record into the
/// free record before it, and the next put takes the merged space with a
/// value that covers the removed record's old location:
///
///   chunk 0:  A | X (removed before the attack: free) | B | Y
///   attack:   remove(B)  -> B merges into X's free record
///             put(C, v)  -> C's record starts where X's did; v holds, at
///                           forge_offset(), bytes that B's old location
///                           now shows (forged_record(B, ...))
///
/// The index has one group of 8 slots (no expected_entries), so A, X, B and
/// Y take slots 0-3 in that order and for_each visits A before B.
struct MergeScenario {
  static constexpr std::string_view A = "key-AAAA", X = "key-XXXX", B = "key-BBBB",
                                    Y = "key-YYYY", C = "key-CCCC";
  static constexpr std::string_view a_value = "value-A.", y_value = "value-Y.";
  static std::string x_value() { return std::string(32, 'x'); }
  static std::string b_value() { return std::string(24, 'b'); }

  template <class Store>
  static void build(Store& s) {
    s.put(A, a_value);
    s.put(X, x_value());
    s.put(B, b_value());
    s.put(Y, y_value);
    s.remove(X);
  }
  /// Where, in C's value, B's old record starts.
  static std::size_t forge_offset() {
    return offheap::detail::record::payload_for(X.size(), 32) - C.size();
  }
  static std::string cover_value(std::string_view forged) {
    return value_with(forge_offset() + forged.size(), forge_offset(), forged);
  }
  template <class Store>
  static void attack(Store& s, std::string_view forged) {
    s.remove(B);
    s.put(C, cover_value(forged));
  }
};

}  // namespace offheap_test
