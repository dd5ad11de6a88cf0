// SPDX-License-Identifier: Apache-2.0
// DocumentView: an encoded document (format.hpp) read in place.
//
// parse() runs the validator over the bytes once; after that every read
// trusts them, bounds-checks nothing and allocates nothing. parse() is
// safe on any bytes (damaged files, torn copies, hostile input): it reads
// only inside them, recurses at most 33 deep, and every loop is bounded by
// their length. It accepts exactly the bytes Document::decode accepts, and
// to_document() returns what decode would.
//
// Lifetime: a view holds a pointer into the bytes it parsed; it, and every
// ValueView and string_view it hands out, is valid only while those bytes
// stay alive and unchanged. To read a value that other threads or
// processes may rewrite (a record in a store), copy it, parse the copy,
// and keep the copy as long as the view.
//
// Cost: get() walks the fields in order (O(bytes) at worst); size() is
// O(1). parse() allocates one array only for a document of more than 64
// fields (to find duplicate names); it returns nullopt if that allocation
// fails.
//
// Thread safety: a view is read-only: any number of threads may read one
// at once, as long as its bytes stay unchanged.
#pragma once

#include <offheap/document/document.hpp>
#include <offheap/document/format.hpp>
#include <offheap/document/text.hpp>
#include <offheap/document/value_view.hpp>

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace offheap {

/// One field of a DocumentView: its name and value, both pointing into the
/// parsed bytes.
struct FieldView {
  std::string_view name;
  ValueView value;
};

/// A whole, well-formed encoded document, read in place.
class DocumentView {
 public:
  /// Fields in their encoded order: a forward range of FieldView.
  class iterator {
   public:
    using value_type = FieldView;
    using reference = FieldView;
    using difference_type = std::ptrdiff_t;
    using iterator_concept = std::forward_iterator_tag;
    using iterator_category = std::input_iterator_tag;

    iterator() noexcept = default;
    FieldView operator*() const noexcept {
      const unsigned char* p = p_;
      const auto length = static_cast<std::size_t>(detail::doc::load_varint(p));
      return {std::string_view(reinterpret_cast<const char*>(p), length),
              detail::doc::ViewAccess::view(p + length)};
    }
    iterator& operator++() noexcept {
      const auto length = static_cast<std::size_t>(detail::doc::load_varint(p_));
      p_ = detail::doc::skip_value(p_ + length);
      --left_;
      return *this;
    }
    iterator operator++(int) noexcept {
      iterator before = *this;
      ++*this;
      return before;
    }
    /// Iterators of one view are equal when as many fields are left.
    friend bool operator==(const iterator& a, const iterator& b) noexcept {
      return a.left_ == b.left_;
    }

   private:
    friend class DocumentView;
    iterator(const unsigned char* p, std::uint64_t left) noexcept : p_(p), left_(left) {}
    const unsigned char* p_ = nullptr;  // a field's name length
    std::uint64_t left_ = 0;
  };
  using const_iterator = iterator;

  /// A view of the empty document (static bytes).
  DocumentView() noexcept : DocumentView(std::string_view(kEmpty, 2), 0) {}

  /// Returns: a view if `bytes` are exactly one whole, well-formed document
  /// (what Document::decode accepts), nullopt otherwise. Never throws;
  /// safe on any bytes (see the top of this file).
  static std::optional<DocumentView> parse(std::string_view bytes) noexcept {
    try {
      detail::doc::Validator check(bytes);
      std::uint64_t count = 0;
      if (!check.run(count)) return std::nullopt;
      return DocumentView(bytes, count);
    } catch (...) {  // std::bad_alloc from the name array of a large document
      return std::nullopt;
    }
  }

  /// Returns: the field's value, or nullopt if there is none.
  std::optional<ValueView> get(std::string_view name) const noexcept {
    for (const FieldView f : *this) {
      if (f.name == name) return f.value;
    }
    return std::nullopt;
  }

  bool contains(std::string_view name) const noexcept { return get(name).has_value(); }
  std::size_t size() const noexcept { return static_cast<std::size_t>(count_); }
  bool empty() const noexcept { return count_ == 0; }

  iterator begin() const noexcept { return {first_, count_}; }
  iterator end() const noexcept { return {nullptr, 0}; }

  /// Effects: fn(std::string_view name, ValueView value) for each field, in
  /// the encoded order. Throws: what fn throws.
  template <class F>
  void for_each(F&& fn) const {
    for (const FieldView f : *this) fn(f.name, f.value);
  }

  /// Returns: an owning copy, equal to Document::decode(bytes()), fields in
  /// the same order. Throws: std::bad_alloc.
  Document to_document() const { return Document::from_validated(bytes_, count_); }

  /// Returns: the text form (text.hpp), as Document::to_text() would.
  std::string to_text() const {
    std::string out = "{";
    bool first = true;
    for (const FieldView f : *this) {
      detail::doc::append_field_text(f.name, f.value, first, out);
      first = false;
    }
    out += '}';
    return out;
  }

  /// The bytes this view was parsed from (the whole document).
  std::string_view bytes() const noexcept { return bytes_; }

 private:
  static constexpr char kEmpty[] = {static_cast<char>(detail::doc::kFormatTag), 0};

  DocumentView(std::string_view bytes, std::uint64_t count) noexcept
      : bytes_(bytes), first_(after_count(bytes)), count_(count) {}

  static const unsigned char* after_count(std::string_view bytes) noexcept {
    const unsigned char* p = detail::doc::as_uchars(bytes.data()) + 1;
    (void)detail::doc::load_varint(p);
    return p;
  }

  std::string_view bytes_;
  const unsigned char* first_;  // the first field's name length
  std::uint64_t count_;
};

}  // namespace offheap
