// SPDX-License-Identifier: Apache-2.0
// Document: an owning, ordered set of named fields, each a Value, and its
// binary encoding (the layout is drawn in format.hpp).
//
// A Document keeps its fields in insertion order: set() on a new name
// appends, set() on an existing name replaces the value in place, erase()
// closes the gap. That order is what iteration, to_text() and the encoding
// follow, and decode() gives it back; equality ignores it (two documents
// are equal when they hold the same names with equal values).
//
// Lookups are linear scans of a vector: documents are meant to hold tens
// of fields, where a scan beats a hash table. A document of thousands of
// fields works, at O(n) per get() and set().
//
// The limits of format.hpp (names 1 to 65,535 bytes, lists nested at most
// 32 deep, at most 2^32-1 fields) are checked when encoding, not by set():
// encoded_size(), encode_to() and encode() throw Error(invalid_argument)
// for a document that breaks one.
//
// Thread safety: as a std::vector: concurrent const calls are safe; a call
// that modifies needs exclusive access.
#pragma once

#include <offheap/document/format.hpp>
#include <offheap/document/text.hpp>
#include <offheap/document/value.hpp>
#include <offheap/document/value_view.hpp>
#include <offheap/error.hpp>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace offheap {

namespace detail::doc {

/// The encoded size of a value (type byte and payload) inside `depth`
/// lists, after checking the depth limit. Recursion stops at depth 33.
inline std::size_t value_size(const Value& v, std::size_t depth, std::string_view field) {
  switch (v.type()) {
    case FieldType::null: return 1;
    case FieldType::boolean: return 2;
    case FieldType::integer: return 1 + varint_size(zigzag(v.as_int()));
    case FieldType::real: return 9;
    case FieldType::string: return 1 + varint_size(v.as_string().size()) + v.as_string().size();
    case FieldType::bytes: return 1 + varint_size(v.as_bytes().size()) + v.as_bytes().size();
    case FieldType::list: {
      if (depth >= kMaxDepth) {
        throw Error(Errc::invalid_argument, "document: field " + name_text(field) +
                                                " holds lists nested deeper than " +
                                                std::to_string(kMaxDepth) + ", the format's limit");
      }
      const Value::List& list = v.as_list();
      std::size_t size = 1 + varint_size(list.size());
      for (const Value& element : list) size += value_size(element, depth + 1, field);
      return size;
    }
  }
  return 1;
}

/// Writes a value whose size value_size() has checked.
inline unsigned char* store_value(unsigned char* p, const Value& v) noexcept {
  *p++ = static_cast<unsigned char>(v.type());
  switch (v.type()) {
    case FieldType::null: return p;
    case FieldType::boolean: *p++ = v.as_bool() ? 1 : 0; return p;
    case FieldType::integer: return store_varint(p, zigzag(v.as_int()));
    case FieldType::real:
      store_le64(p, std::bit_cast<std::uint64_t>(v.as_double()));
      return p + 8;
    case FieldType::string:
    case FieldType::bytes: {
      const std::string& s = v.type() == FieldType::string ? v.as_string() : v.as_bytes();
      p = store_varint(p, s.size());
      if (!s.empty()) std::memcpy(p, s.data(), s.size());
      return p + s.size();
    }
    case FieldType::list: {
      const Value::List& list = v.as_list();
      p = store_varint(p, list.size());
      for (const Value& element : list) p = store_value(p, element);
      return p;
    }
  }
  return p;
}

}  // namespace detail::doc

/// Named fields in insertion order. See the top of this file.
class Document {
 public:
  /// A field as iteration shows it: .first the name, .second the value.
  using Field = std::pair<std::string, Value>;
  using const_iterator = std::vector<Field>::const_iterator;
  using iterator = const_iterator;

  /// An empty document.
  Document() = default;
  /// set() of each field in turn: `Document{{"name", "Alice"}, {"age", 42}}`.
  /// A name given twice keeps its first position and its last value.
  Document(std::initializer_list<Field> fields) {
    fields_.reserve(fields.size());
    for (const Field& f : fields) set(f.first, f.second);
  }

  /// Effects: replaces the value of the field `name` where it stands, or
  /// appends the field if there is none. Returns: *this, to chain calls.
  /// Names are not checked here: the limits apply when encoding.
  Document& set(std::string_view name, Value v) {
    for (Field& f : fields_) {
      if (f.first == name) {
        f.second = std::move(v);
        return *this;
      }
    }
    fields_.emplace_back(std::string(name), std::move(v));
    return *this;
  }

  /// Returns: the field's value, or nullptr if there is none. The pointer
  /// is valid until the next set() or erase() on this document.
  const Value* get(std::string_view name) const noexcept {
    for (const Field& f : fields_) {
      if (f.first == name) return &f.second;
    }
    return nullptr;
  }

  /// Effects: removes the field, keeping the others' order.
  /// Returns: true if there was one.
  bool erase(std::string_view name) {
    const auto it = std::find_if(fields_.begin(), fields_.end(),
                                 [&](const Field& f) { return f.first == name; });
    if (it == fields_.end()) return false;
    fields_.erase(it);
    return true;
  }

  bool contains(std::string_view name) const noexcept { return get(name) != nullptr; }
  std::size_t size() const noexcept { return fields_.size(); }
  bool empty() const noexcept { return fields_.empty(); }

  /// The fields in insertion order, each a const Field& (.first the name,
  /// .second the value). Invalidated by set() of a new name and erase().
  const_iterator begin() const noexcept { return fields_.begin(); }
  const_iterator end() const noexcept { return fields_.end(); }

  /// The same names with equal values (value.hpp's equality), in any order.
  friend bool operator==(const Document& a, const Document& b) {
    if (a.size() != b.size()) return false;
    if (a.size() <= kScanCompare) {
      for (const Field& f : a.fields_) {
        const Value* other = b.get(f.first);
        if (other == nullptr || *other != f.second) return false;
      }
      return true;
    }
    // Large documents: sort both by name (names are unique within each),
    // then compare in step, so that equality stays O(n log n).
    const auto sorted = [](const Document& d) {
      std::vector<const Field*> out;
      out.reserve(d.size());
      for (const Field& f : d.fields_) out.push_back(&f);
      std::sort(out.begin(), out.end(),
                [](const Field* x, const Field* y) { return x->first < y->first; });
      return out;
    };
    const std::vector<const Field*> x = sorted(a);
    const std::vector<const Field*> y = sorted(b);
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (x[i]->first != y[i]->first || x[i]->second != y[i]->second) return false;
    }
    return true;
  }

  /// Returns: the size of the encoding (format.hpp), in bytes.
  /// Throws: Error(invalid_argument) if the document breaks a limit: a name
  /// of 0 or more than 65,535 bytes, lists nested more than 32 deep, more
  /// than 2^32-1 fields.
  std::size_t encoded_size() const {
    if (fields_.size() > detail::doc::kMaxFields) {
      throw Error(Errc::invalid_argument, "document: " + std::to_string(fields_.size()) +
                                              " fields; a document has at most " +
                                              std::to_string(detail::doc::kMaxFields));
    }
    std::size_t size = 1 + detail::doc::varint_size(fields_.size());
    for (const Field& f : fields_) {
      if (f.first.empty() || f.first.size() > detail::doc::kMaxNameBytes) {
        throw Error(Errc::invalid_argument,
                    "document: the field name " + detail::doc::name_text(f.first) + " is " +
                        std::to_string(f.first.size()) + " bytes; names are 1 to " +
                        std::to_string(detail::doc::kMaxNameBytes) + " bytes");
      }
      size += detail::doc::varint_size(f.first.size()) + f.first.size() +
              detail::doc::value_size(f.second, 0, f.first);
    }
    return size;
  }

  /// Effects: writes the encoding into out, allocating nothing.
  /// Requires: out.size() == encoded_size().
  /// Throws: Error(invalid_argument) for another size (nothing written) or
  /// for a broken limit (as encoded_size()).
  void encode_to(std::span<std::byte> out) const {
    const std::size_t need = encoded_size();
    if (out.size() != need) {
      throw Error(Errc::invalid_argument, "document: encode_to given " +
                                              std::to_string(out.size()) +
                                              " bytes for an encoding of " + std::to_string(need));
    }
    auto* p = reinterpret_cast<unsigned char*>(out.data());
    *p++ = detail::doc::kFormatTag;
    p = detail::doc::store_varint(p, fields_.size());
    for (const Field& f : fields_) {
      p = detail::doc::store_varint(p, f.first.size());
      std::memcpy(p, f.first.data(), f.first.size());
      p += f.first.size();
      p = detail::doc::store_value(p, f.second);
    }
  }

  /// Returns: the encoding as a string of bytes. Throws: as encode_to().
  std::string encode() const {
    std::string out(encoded_size(), '\0');
    encode_to(std::as_writable_bytes(std::span<char>(out)));
    return out;
  }

  /// Returns: the document bytes encode() wrote, fields in their order.
  /// Throws: Error(format_version) for bytes of another document format;
  /// Error(corrupt_file) for anything else that is not exactly one whole
  /// document (truncated, trailing bytes, a length past the end, an
  /// unknown type, a bad varint, a broken limit, a duplicate name), with a
  /// message saying what and at which offset.
  static Document decode(std::string_view bytes) {
    detail::doc::Validator check(bytes);
    std::uint64_t count = 0;
    if (!check.run(count)) {
      throw Error(detail::doc::errc_of(check.problem()),
                  detail::doc::describe(check.problem(), bytes.size()));
    }
    return from_validated(bytes, count);
  }

  /// Returns: the text form (text.hpp): {"name": "Alice", "age": 42}.
  std::string to_text() const {
    std::string out = "{";
    bool first = true;
    for (const Field& f : fields_) {
      detail::doc::append_field_text(f.first, f.second, first, out);
      first = false;
    }
    out += '}';
    return out;
  }

 private:
  friend class DocumentView;
  static constexpr std::size_t kScanCompare = 32;

  // The document in bytes the validator accepted, with `count` fields.
  static Document from_validated(std::string_view bytes, std::uint64_t count) {
    Document doc;
    doc.fields_.reserve(static_cast<std::size_t>(count));
    const unsigned char* p = detail::doc::as_uchars(bytes.data()) + 1;
    (void)detail::doc::load_varint(p);
    for (std::uint64_t i = 0; i < count; ++i) {
      const auto length = static_cast<std::size_t>(detail::doc::load_varint(p));
      std::string name(reinterpret_cast<const char*>(p), length);
      p += length;
      doc.fields_.emplace_back(std::move(name), detail::doc::ViewAccess::view(p).to_value());
      p = detail::doc::skip_value(p);
    }
    return doc;
  }

  std::vector<Field> fields_;
};

}  // namespace offheap
