// SPDX-License-Identifier: Apache-2.0
// RecordView: a zero-copy handle on one version of one record.
//
// A view remembers the key, where its record was and the stamp it had. read(fn)
// looks the key up, and runs fn on the value's bytes where they lie in the
// store's memory only if the key still leads to that record with that stamp,
// checking the stamp again afterwards: if the record was rewritten, removed
// or its slot reused, read throws StaleView instead of returning, and
// try_read returns an empty result (a status, for code that does not throw
// on ordinary races). (Checking
// through the index, not the remembered location alone, is what makes a view
// safe after its slot was merged into a neighbour or the store cleared: the
// bytes at an old location may then be any newer record's.) status() tells
// an update of the key from its removal; refresh() views the current value.
//
// Lifetime: a view refers to its store and must not outlive it. The
// string_view handed to read()'s callback is valid only during that call;
// copy what you need to keep. A view itself never goes bad in a way that
// returns wrong bytes: at worst, read throws StaleView.
//
// Thread safety: a view may be used from any thread, and several threads
// may read through one view at once (its calls are const and lock-free, as
// the store's reads); refresh() returns a new view. try_read(fn) returns
// std::optional of fn's result (bool for a void fn), empty when the view
// went stale, for code that does not throw on ordinary races. A view of a
// record that compaction moved turns stale (ViewStatus::updated; refresh()
// views the same value).
#pragma once

#include <offheap/detail/index/location.hpp>
#include <offheap/detail/journal/record.hpp>
#include <offheap/error.hpp>
#include <offheap/policy.hpp>

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace offheap {

template <Policy P>
class OffHeapStore;

/// What became of the record a view was taken of.
enum class ViewStatus : std::uint8_t {
  live,     ///< the record is unchanged
  updated,  ///< the key now holds another record (a newer value, or the
            ///< same record moved by compaction: refresh() views it)
  removed,  ///< the key is gone (or the view is empty)
};

template <Policy P>
class RecordView {
 public:
  /// An empty view: what view() returns for a missing key.
  RecordView() noexcept = default;

  RecordView(const RecordView& other) : of_(other.of_) { set_key(other.key()); }
  RecordView& operator=(const RecordView& other) {
    if (this != &other) {
      of_ = other.of_;
      set_key(other.key());
    }
    return *this;
  }
  /// Effects: takes other's record and key; other is left empty (as
  /// RecordView()): falsy, status() removed, key() empty, read() throws
  /// StaleView. Moving a view onto itself leaves it as it was.
  RecordView(RecordView&& other) noexcept { take(other); }
  RecordView& operator=(RecordView&& other) noexcept {
    if (this != &other) take(other);
    return *this;
  }

  /// True when the view was taken of a record (the key existed).
  explicit operator bool() const noexcept { return of_.store != nullptr; }

  /// The key the view was taken for.
  std::string_view key() const noexcept {
    return {heap_key_ ? heap_key_.get() : inline_key_, key_len_};
  }
  /// The value's length and type tag, as they were when the view was taken.
  std::uint32_t size() const noexcept { return of_.value_len; }
  std::uint8_t type() const noexcept { return of_.type; }

  /// Effects: calls fn(std::string_view value) on the record's bytes in place.
  /// Returns: what fn returns.
  /// Throws: StaleView if the view is empty, or if the record changed before
  /// or while fn ran. In the second case fn may have seen bytes of a newer
  /// write: whatever it produced must be discarded (read throws after fn
  /// returns, so its result never reaches the caller). Exceptions from fn
  /// propagate.
  /// Requires: fn does not write to the view's store (it may run under the
  /// shard's writer lock, as read(key, fn) does).
  /// Thread safety: any number of threads may read views concurrently with
  /// each other and with writers.
  /// The string_view is valid only during the call.
  template <class F>
  std::invoke_result_t<F, std::string_view> read(F&& fn) const {
    using R = std::invoke_result_t<F, std::string_view>;
    if (of_.store == nullptr) throw_stale();
    if constexpr (std::is_void_v<R>) {
      if (of_.store->visit_version(key(), of_.loc, of_.stamp, fn) != ViewStatus::live) throw_stale();
    } else {
      std::optional<R> result;
      const auto keep = [&](std::string_view bytes) { result.emplace(fn(bytes)); };
      if (of_.store->visit_version(key(), of_.loc, of_.stamp, keep) != ViewStatus::live) throw_stale();
      return std::move(*result);
    }
  }

  /// Effects: as read(fn), without throwing on a stale view: the ordinary
  /// race (a writer replaced or removed the record) is a status here, not
  /// an exception.
  /// Returns: if fn returns void, whether the view was live (fn's call was
  /// on the record's bytes; if false, discard what fn produced); else
  /// std::optional<R> holding what fn returned, or nullopt if the view is
  /// empty or stale (then fn's result, if it ran, is dropped).
  /// Throws: only what fn throws (and Error(corrupt_file) for a record
  /// damaged on disk, as every read). fn runs on the bytes in place and may
  /// see a newer write's bytes mixed in before the stamps say so: for
  /// try_read to stay free of exceptions on races, fn must not throw on
  /// bytes it finds malformed (return a value saying so instead).
  template <class F>
  auto try_read(F&& fn) const {
    using R = std::invoke_result_t<F, std::string_view>;
    if constexpr (std::is_void_v<R>) {
      if (of_.store == nullptr) return false;
      return of_.store->visit_version(key(), of_.loc, of_.stamp, fn) == ViewStatus::live;
    } else {
      std::optional<R> result;
      if (of_.store == nullptr) return result;
      const auto keep = [&](std::string_view bytes) { result.emplace(fn(bytes)); };
      if (of_.store->visit_version(key(), of_.loc, of_.stamp, keep) != ViewStatus::live) result.reset();
      return result;
    }
  }

  /// Returns: live if the record is unchanged; updated if the key now holds
  /// another record; removed if the key is gone or the view is empty.
  /// Does not count in the store's hit/miss statistics.
  ViewStatus status() const {
    if (of_.store == nullptr) return ViewStatus::removed;
    return of_.store->visit_version(key(), of_.loc, of_.stamp, [](std::string_view) {});
  }

  /// Returns: a view of the key's current record (empty if it is gone).
  RecordView refresh() const {
    if (of_.store == nullptr) return RecordView();
    return of_.store->view(key());
  }

 private:
  friend class OffHeapStore<P>;
  static constexpr std::size_t kInlineKey = 64;

  RecordView(const OffHeapStore<P>* store, detail::Location loc, std::uint64_t stamp,
             std::string_view key, std::uint32_t value_len, std::uint8_t type)
      : of_{store, loc, stamp, value_len, type} {
    set_key(key);
  }

  void set_key(std::string_view key) {
    key_len_ = static_cast<std::uint16_t>(key.size());
    if (key.size() <= kInlineKey) {
      heap_key_.reset();
      if (!key.empty()) std::memcpy(inline_key_, key.data(), key.size());
    } else {
      heap_key_ = std::make_unique<char[]>(key.size());
      std::memcpy(heap_key_.get(), key.data(), key.size());
    }
  }

  /// Moves other's state here and empties other: its key length must go
  /// with its heap key, or key() would read past the inline buffer.
  void take(RecordView& other) noexcept {
    of_ = std::exchange(other.of_, Of{});
    key_len_ = std::exchange(other.key_len_, std::uint16_t{0});
    heap_key_ = std::move(other.heap_key_);
    if (!heap_key_) std::memcpy(inline_key_, other.inline_key_, key_len_);
  }

  [[noreturn]] void throw_stale() const {
    throw StaleView((of_.store ? of_.store->name() : std::string("store")) + ": a view of a key of " +
                    std::to_string(key_len_) + " bytes is stale: " +
                    (of_.store == nullptr ? "the key was missing when the view was taken"
                                       : "its record was rewritten or removed"));
  }

  // Which version of which record the view was taken of.
  struct Of {
    const OffHeapStore<P>* store = nullptr;
    detail::Location loc;
    std::uint64_t stamp = 0;
    std::uint32_t value_len = 0;
    std::uint8_t type = 0;
  } of_;
  std::uint16_t key_len_ = 0;
  char inline_key_[kInlineKey] = {};
  std::unique_ptr<char[]> heap_key_;
};

}  // namespace offheap
