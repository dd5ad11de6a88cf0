// SPDX-License-Identifier: Apache-2.0
// What a store throws: offheap::Error with an Errc that says which rule was
// broken, and a message that names the store and the sizes involved.
//
// Every public operation either completes or throws before it has changed
// anything: an Error never leaves a store with fewer records than it had.
//
// Errc is registered as an error-code enum (category "offheap"): compare an
// std::error_code with it (ec == offheap::Errc::locked) or with portable
// conditions (ec == std::errc::invalid_argument); Error::code() and
// Error::error_code() give it from an exception. Calls that do not throw
// (OffHeapStore::open(options, ec), the std::error_code twins of the
// writes, sync and close) report the same codes. RecordView::read throws
// StaleView for a record that changed or went (try_read reports it
// without throwing).
//
// Thread safety and memory: Error is an ordinary exception object, which
// owns its message; the category is a process-wide constant.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>

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
  closed,               ///< a write to a store after its close()
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
    case Errc::closed: return "closed";
  }
  return "unknown";
}

/// The std::error_category of offheap::Errc: name() "offheap", message()
/// the Errc's to_string() name, and equivalence to the generic std::errc
/// a portable caller would test (out_of_space ~ not_enough_memory,
/// io_error ~ io_error, invalid_argument ~ invalid_argument, read_only ~
/// read_only_file_system, locked ~ resource_unavailable_try_again,
/// key_too_large and value_too_large ~ value_too_large).
class ErrorCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "offheap"; }
  std::string message(int code) const override {
    return std::string(to_string(static_cast<Errc>(code)));
  }
  std::error_condition default_error_condition(int code) const noexcept override {
    switch (static_cast<Errc>(code)) {
      case Errc::key_too_large:
      case Errc::value_too_large: return std::errc::value_too_large;
      case Errc::out_of_space: return std::errc::not_enough_memory;
      case Errc::io_error: return std::errc::io_error;
      case Errc::invalid_argument: return std::errc::invalid_argument;
      case Errc::read_only: return std::errc::read_only_file_system;
      case Errc::locked: return std::errc::resource_unavailable_try_again;
      default: return {code, *this};
    }
  }
};

/// The one ErrorCategory object (error codes compare categories by address).
inline const std::error_category& error_category() noexcept {
  static const ErrorCategory category;
  return category;
}

/// std::error_code{e} and `ec == Errc::...` work through this (found by
/// argument-dependent lookup; Errc is registered as an error code enum).
inline std::error_code make_error_code(Errc e) noexcept {
  return {static_cast<int>(e), error_category()};
}

/// The exception every store operation throws for a broken rule.
/// what() reads "offheap: <store>: <what was wrong>".
class Error : public std::runtime_error {
 public:
  Error(Errc code, const std::string& message)
      : std::runtime_error("offheap: " + message), code_(code) {}
  /// Which rule was broken.
  Errc code() const noexcept { return code_; }
  /// The same, as a std::error_code of error_category().
  std::error_code error_code() const noexcept { return make_error_code(code_); }

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

template <>
struct std::is_error_code_enum<offheap::Errc> : std::true_type {};
