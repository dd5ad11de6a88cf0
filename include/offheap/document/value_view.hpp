// SPDX-License-Identifier: Apache-2.0
// ValueView and ListView: a field value read in place from an encoded
// document (format.hpp), without copying or allocating.
//
// A ValueView is one pointer, to the value's type byte. It exists only
// over bytes the validator accepted (DocumentView::parse hands them out),
// so its accessors trust the lengths they read and do no bounds checks.
// Lifetime: a ValueView, a ListView, and every string_view they return
// are valid only as long as the bytes the document was parsed from stay
// alive and unchanged; parse a private copy of anything that may change
// (a store record, a mapped file). A default ValueView is null and points
// at static bytes.
//
// ValueView compares with ValueView and with Value in the one value order
// of value.hpp (the same template computes all three), so an index can
// compare a stored field with a query value without decoding either.
//
// Cost: scalar accessors are O(1). Stepping a ListView iterator passes
// over the element's bytes, so walking a list is linear in its bytes, and
// walking nested lists costs up to once per level (at most 32).
//
// Thread safety: read-only, as DocumentView.
#pragma once

#include <offheap/document/format.hpp>
#include <offheap/document/text.hpp>
#include <offheap/document/value.hpp>

#include <bit>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>

namespace offheap {

class ListView;
class DocumentView;
class Document;

namespace detail::doc {
struct ViewAccess;
}

/// One value inside an encoded document.
class ValueView {
 public:
  /// A null value.
  ValueView() noexcept : p_(&kNull) {}

  FieldType type() const noexcept { return static_cast<FieldType>(*p_); }
  bool is_null() const noexcept { return type() == FieldType::null; }

  /// The value as the type it holds; string_views point into the parsed
  /// bytes (see Lifetime above).
  /// Throws: Error(type_mismatch), naming both types, for another type.
  bool as_bool() const { return payload(FieldType::boolean)[0] != 0; }
  std::int64_t as_int() const {
    const unsigned char* p = payload(FieldType::integer);
    return detail::doc::unzigzag(detail::doc::load_varint(p));
  }
  double as_double() const {
    return std::bit_cast<double>(detail::doc::load_le64(payload(FieldType::real)));
  }
  std::string_view as_string() const { return sized(FieldType::string); }
  std::string_view as_bytes() const { return sized(FieldType::bytes); }
  inline ListView as_list() const;

  /// An owning copy. Throws: std::bad_alloc.
  inline Value to_value() const;

  /// The value's encoded bytes (type byte and payload, format.hpp).
  std::string_view encoded() const noexcept {
    const unsigned char* end = detail::doc::skip_value(p_);
    return {reinterpret_cast<const char*>(p_), static_cast<std::size_t>(end - p_)};
  }

  /// The value order of value.hpp, with views and with Values.
  friend bool operator==(const ValueView& a, const ValueView& b) {
    return detail::doc::compare_values(a, b) == 0;
  }
  friend std::weak_ordering operator<=>(const ValueView& a, const ValueView& b) {
    return detail::doc::compare_values(a, b);
  }
  friend bool operator==(const ValueView& a, const Value& b) {
    return detail::doc::compare_values(a, b) == 0;
  }
  friend std::weak_ordering operator<=>(const ValueView& a, const Value& b) {
    return detail::doc::compare_values(a, b);
  }

 private:
  friend struct detail::doc::ViewAccess;
  explicit ValueView(const unsigned char* p) noexcept : p_(p) {}

  const unsigned char* payload(FieldType asked) const {
    if (type() != asked) detail::doc::throw_type_mismatch(type(), asked);
    return p_ + 1;
  }

  std::string_view sized(FieldType asked) const {
    const unsigned char* p = payload(asked);
    const std::uint64_t n = detail::doc::load_varint(p);
    return {reinterpret_cast<const char*>(p), static_cast<std::size_t>(n)};
  }

  static constexpr unsigned char kNull = static_cast<unsigned char>(FieldType::null);
  const unsigned char* p_;  // the type byte, in validated bytes
};

namespace detail::doc {
/// Lets the document layer make views over bytes it has validated.
struct ViewAccess {
  static ValueView view(const unsigned char* p) noexcept { return ValueView(p); }
};
}  // namespace detail::doc

/// The elements of a list value, in order: a forward range of ValueView.
class ListView {
 public:
  class iterator {
   public:
    using value_type = ValueView;
    using reference = ValueView;
    using difference_type = std::ptrdiff_t;
    using iterator_concept = std::forward_iterator_tag;
    using iterator_category = std::input_iterator_tag;

    iterator() noexcept = default;
    ValueView operator*() const noexcept { return detail::doc::ViewAccess::view(p_); }
    iterator& operator++() noexcept {
      p_ = detail::doc::skip_value(p_);
      --left_;
      return *this;
    }
    iterator operator++(int) noexcept {
      iterator before = *this;
      ++*this;
      return before;
    }
    /// Iterators of one list are equal when as many elements are left.
    friend bool operator==(const iterator& a, const iterator& b) noexcept {
      return a.left_ == b.left_;
    }

   private:
    friend class ListView;
    iterator(const unsigned char* p, std::uint64_t left) noexcept : p_(p), left_(left) {}
    const unsigned char* p_ = nullptr;
    std::uint64_t left_ = 0;
  };
  using const_iterator = iterator;

  /// An empty list.
  ListView() noexcept = default;

  std::size_t size() const noexcept { return static_cast<std::size_t>(count_); }
  bool empty() const noexcept { return count_ == 0; }
  iterator begin() const noexcept { return {first_, count_}; }
  iterator end() const noexcept { return {nullptr, 0}; }

 private:
  friend class ValueView;
  ListView(const unsigned char* first, std::uint64_t count) noexcept
      : first_(first), count_(count) {}
  const unsigned char* first_ = nullptr;  // the first element's type byte
  std::uint64_t count_ = 0;
};

inline ListView ValueView::as_list() const {
  const unsigned char* p = payload(FieldType::list);
  const std::uint64_t count = detail::doc::load_varint(p);
  return ListView(p, count);
}

inline Value ValueView::to_value() const {
  switch (type()) {
    case FieldType::null: return Value();
    case FieldType::boolean: return Value(as_bool());
    case FieldType::integer: return Value(as_int());
    case FieldType::real: return Value(as_double());
    case FieldType::string: return Value(as_string());
    case FieldType::bytes: return Value(Bytes{std::string(as_bytes())});
    case FieldType::list: {
      const ListView list = as_list();
      Value::List out;
      out.reserve(list.size());
      for (const ValueView element : list) out.push_back(element.to_value());
      return Value(std::move(out));
    }
  }
  return Value();
}

/// The text form of one value (text.hpp).
inline std::string to_text(const ValueView& v) {
  std::string out;
  detail::doc::append_text(v, out);
  return out;
}

}  // namespace offheap
