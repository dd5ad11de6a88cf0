// SPDX-License-Identifier: Apache-2.0
// What a Collection's queries take (collection.hpp): document ids, the
// kinds of secondary index, and ranges over an ordered index.
//
// Thread safety and memory: plain values.
#pragma once

#include <offheap/document/value.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace offheap {

/// A document's id in its collection.
using DocId = std::uint64_t;

/// A hash index answers equality (find); an ordered index answers
/// equality, ranges and prefixes (find, find_range, find_prefix).
enum class IndexKind : std::uint8_t { hash = 1, ordered = 2 };

constexpr std::string_view to_string(IndexKind k) noexcept {
  return k == IndexKind::hash ? "hash" : k == IndexKind::ordered ? "ordered" : "unknown";
}

struct IndexInfo {
  std::string field;
  IndexKind kind = IndexKind::hash;
  friend bool operator==(const IndexInfo&, const IndexInfo&) = default;
};

/// A range of values of an ordered index, in the order of their ordered
/// keys (type first: see collection.hpp). A missing bound is open: with
/// one bound given, the range stays within that bound's type; with none,
/// it is the whole index.
struct Range {
  std::optional<Value> low, high;
  bool low_inclusive = true, high_inclusive = true;
  bool descending = false;
  std::size_t limit = SIZE_MAX;  ///< documents returned at most
};

}  // namespace offheap
