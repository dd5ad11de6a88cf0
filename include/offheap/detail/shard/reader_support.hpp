// SPDX-License-Identifier: Apache-2.0
// What a shard's readers use beside the record and the index: the backoff
// with which a reader waits out a writer, and the test-only hooks that
// stop a reader at the moments tests/hooks/ aim at.
//
// A reader that loses Backoff::kPatience (256) races in a row to writers
// of its record reads it once under the shard's writer lock, so even a key
// under continuous rewrite is read in bounded time; with NullLock
// (SingleWriterPolicy) there is no lock to take, and the reader keeps
// yielding. (Also stated at the top of store.hpp.)
#pragma once

#include <chrono>
#include <cstddef>
#include <thread>

namespace offheap::detail {

#if defined(OFFHEAP_TESTING_READ_HOOK)
/// Test-only builds (tests/hooks/): a reader calls this after it loads a
/// slot's location and before it reads the record the location leads to,
/// so that a test can make writes at the moment a preempted reader would
/// meet them. Never defined in a real build.
inline void (*testing_after_slot_load)() = nullptr;
inline void testing_reader_step() {
  if (testing_after_slot_load != nullptr) testing_after_slot_load();
}
/// And this after the reader has checked the record's header, the slot and
/// the generation, right before it reads the value (`rec`: the record).
inline void (*testing_before_hit)(const std::byte* rec) = nullptr;
inline void testing_reader_before_hit(const std::byte* rec) {
  if (testing_before_hit != nullptr) testing_before_hit(rec);
}
#endif

#if defined(OFFHEAP_TESTING_POLICY_HOOK)
/// Test-only builds (tests/hooks/policy_audit_test.cpp): a cache asks this
/// before it tells its policy of an insert ("admit") or a removal
/// ("forget"); true plants an inconsistency by skipping the call, which
/// verify() must then report. Never defined in a real build.
inline bool (*testing_policy_skips)(const char* call) = nullptr;
inline bool testing_skip_policy(const char* call) {
  return testing_policy_skips != nullptr && testing_policy_skips(call);
}
#endif

/// Spins briefly, then yields, while a reader waits out a writer.
class Backoff {
 public:
  /// Rounds after which a reader takes the writer lock for one read.
  static constexpr unsigned kPatience = 256;

  void pause() noexcept {
    if (++rounds_ < 64) {
      relax();
    } else {
      std::this_thread::yield();
    }
  }
  bool exhausted() const noexcept { return rounds_ >= kPatience; }
  /// The spin hint alone, not counted as a round: for a reader that starts
  /// again at once because something moved elsewhere (nothing to wait for).
  static void relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  /// Far past any writer's time inside a record (200 ms, or a million
  /// rounds): only a damaged file shows a record that stays odd this long.
  /// Reads the clock only past the first rounds.
  bool hopeless() noexcept {
    if (rounds_ < 1024) return false;
    const auto now = std::chrono::steady_clock::now();
    if (since_ == std::chrono::steady_clock::time_point{}) since_ = now;
    return rounds_ >= (1u << 20) || now - since_ >= std::chrono::milliseconds(200);
  }

 private:
  unsigned rounds_ = 0;
  std::chrono::steady_clock::time_point since_{};
};

}  // namespace offheap::detail
