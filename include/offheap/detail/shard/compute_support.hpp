// SPDX-License-Identifier: Apache-2.0
// What a shard and the store hand each other for compute(): the key's
// current value as the shard's writer sees it, the decision taken on it,
// and the guard that keeps the decision's function from calling the store
// whose shard lock it runs under.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace offheap::detail {

/// The key's record as compute() found it, under the shard's writer lock
/// (the bytes stay put until the lock is let go).
struct ComputeCurrent {
  bool present = false;    // a record whose deadline has not passed
  std::string_view value;  // its value (present only)
  std::uint8_t type = 0;   // its type tag (present only)
  std::uint64_t stamp = 0; // its stamp (present only): a retry knows the same record by it
};

/// What compute() does with the key.
struct ComputeDecision {
  enum class Action : std::uint8_t { keep, write, remove };
  Action action = Action::keep;
  std::string_view value;  // Action::write: the new value (outside the current record)
  std::uint8_t type = 0;   // Action::write: its type tag
};

/// A value written by the caller's function straight into its record
/// (reserve-then-fill puts, gather puts): fn(ctx, dst, n) writes all n
/// bytes at dst (n == size), under the shard's writer lock, before the
/// record is published.
struct ValueFill {
  void (*fn)(const void* ctx, std::byte* dst, std::size_t n);
  const void* ctx;
  std::size_t size;  // the value's bytes
};

/// The store whose compute() function runs on this thread (else null):
/// that store refuses every call that takes a shard's lock, which the
/// function's own shard holds (a clear error rather than a deadlock).
inline thread_local const void* t_in_compute = nullptr;

/// Marks the current thread as inside `store`'s compute() function for
/// its lifetime (nested computes on other stores restore the outer one).
class ComputeScope {
 public:
  explicit ComputeScope(const void* store) noexcept : outer_(t_in_compute) { t_in_compute = store; }
  ComputeScope(const ComputeScope&) = delete;
  ComputeScope& operator=(const ComputeScope&) = delete;
  ~ComputeScope() { t_in_compute = outer_; }

 private:
  const void* outer_;
};

}  // namespace offheap::detail
