// SPDX-License-Identifier: Apache-2.0
// The checks the store's calls make before they change anything, and the
// errors they throw: sizes of keys, values and records; writes refused
// inside a compute() function or the removal listener, and by read-only,
// closed and failed stores. The throws are cold and out of line: the
// checks inline into the calls' fast paths. Then the path every write but
// compute's takes (write()), and its retry at the memory limit (at_limit()).
#pragma once

#include <offheap/store.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace offheap {

template <Policy P>
inline void OffHeapStore<P>::check_key(std::string_view key) const {
  if (key.size() > kMaxKeyBytes) [[unlikely]] throw_too_large(key, 0);
}

template <Policy P>
inline void OffHeapStore<P>::check(std::string_view key, std::size_t value_size) const {
  const std::uint64_t record =
      detail::record::kHeaderBytes + detail::record::payload_for(key.size(), value_size);
  if (key.size() > kMaxKeyBytes || value_size > kMaxValueBytes ||
      record > options_.max_chunk_bytes) [[unlikely]] {
    throw_too_large(key, value_size);
  }
}

template <Policy P>
inline void OffHeapStore<P>::check_deadline_word(std::string_view key, std::size_t value_size,
                                           std::uint64_t deadline) const {
  if (deadline != 0 &&
      detail::record::kHeaderBytes + detail::record::payload_for(key.size(), value_size, true) >
          options_.max_chunk_bytes) [[unlikely]] {
    throw_too_large(key, value_size, true);
  }
}

template <Policy P>
void OffHeapStore<P>::throw_too_large(std::string_view key, std::size_t value_size, bool deadline) const {
  if (key.size() > kMaxKeyBytes) {
    throw Error(Errc::key_too_large, name() + ": a key of " + std::to_string(key.size()) +
                                         " bytes exceeds the limit of 65535 bytes");
  }
  if (value_size > kMaxValueBytes) {
    throw Error(Errc::value_too_large, name() + ": a value of " + std::to_string(value_size) +
                                           " bytes exceeds the limit of 4294967295 bytes");
  }
  const std::uint64_t bytes =
      detail::record::kHeaderBytes + detail::record::payload_for(key.size(), value_size, deadline);
  throw Error(Errc::value_too_large,
              name() + ": a value of " + std::to_string(value_size) + " bytes with a key of " +
                  std::to_string(key.size()) + " bytes" + (deadline ? " and a deadline" : "") +
                  " needs a record of " +
                  std::to_string(bytes) + " bytes; the largest chunk holds " +
                  std::to_string(options_.max_chunk_bytes) + " (Options::max_chunk_bytes)");
}

template <Policy P>
inline void OffHeapStore<P>::check_writable() const {
  if (detail::t_in_compute == this) [[unlikely]] throw_in_compute("a write");
  if (files_) [[unlikely]] check_files_writable();
  if (closed_.load(std::memory_order_relaxed)) [[unlikely]] throw_closed();
  if (maintenance_ && maintenance_->failed()) [[unlikely]] throw_maintenance_failed();
}

template <Policy P>
void OffHeapStore<P>::throw_maintenance_failed() const {
  throw Error(Errc::io_error, name() + ": the maintenance thread failed (" +
                                  maintenance_->failure() +
                                  "); the store refuses writes from now on (reopen it)");
}

template <Policy P>
void OffHeapStore<P>::check_files_writable() const {
  if (files_->read_only) {
    throw Error(Errc::read_only, name() + ": opened read-only (Options::read_only)");
  }
  if (files_->closed.load(std::memory_order_relaxed)) throw_closed();
  if (const int err = files_->sync_error.load(std::memory_order_relaxed)) throw_sync_failed(err);
}

template <Policy P>
void OffHeapStore<P>::throw_closed() const {
  throw Error(Errc::closed, name() + ": a write after close() (the store refuses writes once "
                                     "closed; reads go on working)");
}

template <Policy P>
void OffHeapStore<P>::throw_sync_failed(int err) const {
  throw Error(detail::errc_of(err),
              name() + ": writing records to disk failed (" + detail::errno_text(err) +
                  "); the store refuses writes from now on: what reached the disk is only "
                  "known after a reopen");
}

template <Policy P>
void OffHeapStore<P>::throw_in_compute(const char* what) const {
  throw Error(Errc::invalid_argument,
              name() + ": " + what + " called from inside a compute() or fill function of the same store, "
                                     "which runs under its shard's writer lock");
}

template <Policy P>
void OffHeapStore<P>::throw_in_listener(const char* what) const {
  throw Error(Errc::invalid_argument,
              name() + ": " + what + " called from inside the removal listener (Options::on_removal), "
                                     "which it would wait for");
}

template <Policy P>
Computed OffHeapStore<P>::write(std::string_view key, std::string_view value, std::uint8_t type,
                                typename Shard::Mode mode, std::string_view expected, Ttl ttl,
                                const detail::ValueFill* fill) {
  const std::uint64_t h = hash_(key);
  const std::uint64_t deadline = deadline_for(ttl);
  check_deadline_word(key, fill != nullptr ? fill->size : value.size(), deadline);
  Shard& s = shards_.for_hash(h);
  const Computed wrote = at_limit(s, [&] { return s.write(key, h, value, type, mode, expected, deadline, fill); });
  nudge(s);
  return wrote;
}

template <Policy P>
template <class Op>
auto OffHeapStore<P>::at_limit(Shard& s, Op&& op) {
  // Rounds go on while they free something (each frees records for good:
  // the shard's records bound them), until two in a row free nothing, or
  // (after 16) the write's wait budget (ReportWait::last, 30 s) is spent.
  bool idle_round = false;
  ReportWait wait;
  for (int round = 0;; ++round) {
    try {
      return op();
    } catch (const detail::LimitReached& e) {
      if (!e.evicting_helps || !removals_wait()) throw;
      const auto now = std::chrono::steady_clock::now();
      wait.start(now);
      if (round >= 16 && now >= wait.last) throw;
      if (free_waiting_removals(s, wait) == 0) {
        if (idle_round) throw;
        idle_round = true;
      } else {
        idle_round = false;
      }
      check_writable();  // a sync that failed refuses the write (io_error)
    }
  }
}

}  // namespace offheap
