// SPDX-License-Identifier: Apache-2.0
// StoreEngine's checks (engine.hpp): what every call verifies before it
// changes anything, and the errors it throws: sizes of keys, values and
// records; writes refused inside compute(), fill functions and the removal
// listener (they would wait for themselves), and by read-only, closed,
// failed stores. Each throw names the store and the figure at fault.
#pragma once

#include <offheap/detail/store/engine.hpp>

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

namespace offheap::detail {


template <Policy P>
inline void StoreEngine<P>::check_key(std::string_view key) const {
  if (key.size() > kMaxKeyBytes) [[unlikely]] throw_too_large(key, 0);
}

template <Policy P>
inline void StoreEngine<P>::check(std::string_view key, std::size_t value_size) const {
  const std::uint64_t record =
      record::kHeaderBytes + record::payload_for(key.size(), value_size);
  if (key.size() > kMaxKeyBytes || value_size > kMaxValueBytes ||
      record > options_.max_chunk_bytes) [[unlikely]] {
    throw_too_large(key, value_size);
  }
}

template <Policy P>
inline void StoreEngine<P>::check_deadline_word(std::string_view key, std::size_t value_size,
                                           std::uint64_t deadline) const {
  if (deadline != 0 &&
      record::kHeaderBytes + record::payload_for(key.size(), value_size, true) >
          options_.max_chunk_bytes) [[unlikely]] {
    throw_too_large(key, value_size, true);
  }
}

template <Policy P>
void StoreEngine<P>::throw_too_large(std::string_view key, std::size_t value_size, bool deadline) const {
  if (key.size() > kMaxKeyBytes) {
    throw Error(Errc::key_too_large, name() + ": a key of " + std::to_string(key.size()) +
                                         " bytes exceeds the limit of 65535 bytes");
  }
  if (value_size > kMaxValueBytes) {
    throw Error(Errc::value_too_large, name() + ": a value of " + std::to_string(value_size) +
                                           " bytes exceeds the limit of 4294967295 bytes");
  }
  const std::uint64_t bytes =
      record::kHeaderBytes + record::payload_for(key.size(), value_size, deadline);
  throw Error(Errc::value_too_large,
              name() + ": a value of " + std::to_string(value_size) + " bytes with a key of " +
                  std::to_string(key.size()) + " bytes" + (deadline ? " and a deadline" : "") +
                  " needs a record of " +
                  std::to_string(bytes) + " bytes; the largest chunk holds " +
                  std::to_string(options_.max_chunk_bytes) + " (Options::max_chunk_bytes)");
}

template <Policy P>
inline void StoreEngine<P>::check_writable(const MaintenanceThread* upkeep) const {
  if (t_in_compute == id()) [[unlikely]] throw_in_compute("a write");
  if (files_) [[unlikely]] check_files_writable();
  if (closed_.load(std::memory_order_relaxed)) [[unlikely]] throw_closed();
  if (upkeep != nullptr && upkeep->failed()) [[unlikely]] throw_maintenance_failed(*upkeep);
}

template <Policy P>
void StoreEngine<P>::throw_maintenance_failed(const MaintenanceThread& upkeep) const {
  throw Error(Errc::io_error, name() + ": the maintenance thread failed (" +
                                  upkeep.failure() +
                                  "); the store refuses writes from now on (reopen it)");
}

template <Policy P>
void StoreEngine<P>::check_files_writable() const {
  if (files_->read_only) {
    throw Error(Errc::read_only, name() + ": opened read-only (Options::read_only)");
  }
  if (files_->closed.load(std::memory_order_relaxed)) throw_closed();
  if (const int err = files_->sync_error.load(std::memory_order_relaxed)) throw_sync_failed(err);
}

template <Policy P>
void StoreEngine<P>::throw_closed() const {
  throw Error(Errc::closed, name() + ": a write after close() (the store refuses writes once "
                                     "closed; reads go on working)");
}

template <Policy P>
void StoreEngine<P>::throw_sync_failed(int err) const {
  throw Error(errc_of(err),
              name() + ": writing records to disk failed (" + errno_text(err) +
                  "); the store refuses writes from now on: what reached the disk is only "
                  "known after a reopen");
}

template <Policy P>
void StoreEngine<P>::throw_in_compute(const char* what) const {
  throw Error(Errc::invalid_argument,
              name() + ": " + what + " called from inside a compute() or fill function of the same store, "
                                     "which runs under its shard's writer lock");
}

template <Policy P>
void StoreEngine<P>::throw_in_listener(const char* what) const {
  throw Error(Errc::invalid_argument,
              name() + ": " + what + " called from inside the removal listener (Options::on_removal), "
                                     "which it would wait for");
}

template <Policy P>
void StoreEngine<P>::check_not_reentered(const char* what, bool in_listener) const {
  if (t_in_compute == id()) [[unlikely]] throw_in_compute(what);
  if (in_listener && t_in_removal_listener == id()) [[unlikely]] throw_in_listener(what);
}

}  // namespace offheap::detail
