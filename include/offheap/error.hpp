// SPDX-License-Identifier: Apache-2.0
// What a store throws: offheap::Error with an Errc that says which rule was
// broken, and a message that names the store and the sizes involved.
//
// Every public operation either completes or throws before it has changed
// anything: an Error never leaves a store with fewer records than it had.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace offheap {

/// The kinds of failure a store reports.
enum class Errc : std::uint8_t {
  key_too_large = 1,    ///< a key longer than 65,535 bytes
  value_too_large,      ///< a value that no chunk can hold (see Options::max_chunk_bytes)
  out_of_space,         ///< the OS refused memory, or a shard ran out of chunk numbers
  io_error,             ///< an operating-system call failed
  corrupt_file,         ///< a file whose contents fail validation
  format_version,       ///< a file written in another on-disk format
  type_mismatch,        ///< get_value<T> on a record stored with another type or size
  read_only,            ///< a write to a store opened read-only
  invalid_argument,     ///< an Options value out of its documented range
  stale_view,           ///< a RecordView whose record changed or went away
  locked,               ///< a store directory another store object or process has open
};

/// A short, stable name for an Errc ("key_too_large", ...).
constexpr std::string_view to_string(Errc e) noexcept {
  switch (e) {
    case Errc::key_too_large: return "key_too_large";
    case Errc::value_too_large: return "value_too_large";
    case Errc::out_of_space: return "out_of_space";
    case Errc::io_error: return "io_error";
    case Errc::corrupt_file: return "corrupt_file";
    case Errc::format_version: return "format_version";
    case Errc::type_mismatch: return "type_mismatch";
    case Errc::read_only: return "read_only";
    case Errc::invalid_argument: return "invalid_argument";
    case Errc::stale_view: return "stale_view";
    case Errc::locked: return "locked";
  }
  return "unknown";
}

/// The exception every store operation throws for a broken rule.
/// what() reads "offheap: <store>: <what was wrong>".
class Error : public std::runtime_error {
 public:
  Error(Errc code, const std::string& message)
      : std::runtime_error("offheap: " + message), code_(code) {}
  /// Which rule was broken.
  Errc code() const noexcept { return code_; }

 private:
  Errc code_;
};

/// Thrown by RecordView::read when the record the view was taken of has been
/// rewritten, removed, or its slot reused, before or while the callback ran.
class StaleView : public Error {
 public:
  explicit StaleView(const std::string& message) : Error(Errc::stale_view, message) {}
};

}  // namespace offheap
