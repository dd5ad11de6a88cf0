// SPDX-License-Identifier: Apache-2.0
#include <offheap/detail/epoch.hpp>
#include <offheap/offheap.hpp>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cerrno>
#include <string>
#include <thread>

using offheap::detail::EpochDomain;
using offheap::detail::EpochGuard;
using offheap::detail::FenceMode;

namespace {
void check_grace(EpochDomain& d) {
  // Something retired while a reader is inside may not be freed before the
  // reader leaves; afterwards it may.
  std::uint64_t retired = 0;
  {
    const EpochGuard g(d);
    retired = d.advance();
    CHECK(d.safe_epoch() < retired);
    {
      const EpochGuard nested(d);  // nesting keeps the outer epoch
      CHECK(d.safe_epoch() < retired);
    }
    CHECK(d.safe_epoch() < retired);  // still inside the outer guard
  }
  CHECK(d.safe_epoch() >= retired);

  // A reader on another thread holds it back the same way.
  std::atomic<int> state{0};
  std::thread reader([&] {
    const EpochGuard g(d);
    state.store(1);
    while (state.load() != 2) std::this_thread::yield();
  });
  while (state.load() != 1) std::this_thread::yield();
  const std::uint64_t later = d.advance();
  CHECK(d.safe_epoch() < later);
  CHECK(d.active_readers() >= 1);
  state.store(2);
  reader.join();
  CHECK(d.safe_epoch() >= later);
  // A reader that entered after the retirement does not hold it back.
  const std::uint64_t third = d.advance();
  const EpochGuard g(d);
  CHECK(d.safe_epoch() >= third);
}
}  // namespace

TEST_CASE("epochs: a retirement waits for the readers inside, in both fence modes", "[epoch]") {
  EpochDomain& d = EpochDomain::instance();
  const FenceMode before = d.mode();
  d.set_mode(FenceMode::symmetric);
  CHECK(d.mode() == FenceMode::symmetric);
  check_grace(d);
  d.set_mode(FenceMode::asymmetric);
  CHECK(d.mode() == (d.asymmetric_available() ? FenceMode::asymmetric : FenceMode::symmetric));
  check_grace(d);
  d.set_mode(before);
}

TEST_CASE("epochs: readers that come and go never block reclamation for long", "[epoch]") {
  EpochDomain& d = EpochDomain::instance();
  std::atomic<bool> stop{false};
  std::thread reader([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      const EpochGuard g(d);
    }
  });
  // Each retirement must become free within a bound (the reader keeps
  // leaving); a wait that runs past it counts as stuck instead of hanging.
  int freed = 0, stuck = 0;
  for (int i = 0; i < 200; ++i) {
    const std::uint64_t e = d.advance();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (d.safe_epoch() < e && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    if (d.safe_epoch() >= e) {
      ++freed;
    } else if (++stuck == 3) {
      break;
    }
  }
  stop.store(true);
  reader.join();
  CHECK(stuck == 0);
  CHECK(freed == 200);
}

namespace {
/// While alive, every membarrier the domain makes fails with `err`.
struct FailMembarrier {
  explicit FailMembarrier(int err) { offheap::detail::testing_fail_membarrier().store(err); }
  ~FailMembarrier() { offheap::detail::testing_fail_membarrier().store(0); }
  FailMembarrier(const FailMembarrier&) = delete;
  FailMembarrier& operator=(const FailMembarrier&) = delete;
};
}  // namespace

TEST_CASE("epochs: nothing is freed while membarrier fails", "[epoch]") {
  EpochDomain& d = EpochDomain::instance();
  if (!d.asymmetric_available()) {
    // ThreadSanitizer builds, or a kernel without membarrier: the symmetric
    // scheme makes no membarrier call, so there is nothing to fail.
    WARN("membarrier unavailable here: the asymmetric scheme is not in use");
    return;
  }
  const FenceMode before = d.mode();
  d.set_mode(FenceMode::asymmetric);
  const std::uint64_t retired = d.advance();
  CHECK(d.safe_epoch() >= retired);  // no reader: free at once
  const std::uint64_t second = d.advance();
  offheap::Options o;
  o.shards = 1;
  offheap::Store s(o);
  {
    const FailMembarrier fail(EPERM);
    CHECK(d.safe_epoch() == 0);  // the scan proved nothing: free nothing
    // A store's index tables replaced by growth stay mapped meanwhile.
    for (int i = 0; i < 1000; ++i) s.put("key-" + std::to_string(i), "v");
    s.maintain();
    const offheap::Stats st = s.stats();
    CHECK(st.retired_tables > 0);
    CHECK(st.retired_bytes > 0);
    CHECK(d.safe_epoch() == 0);
  }
  // Once membarrier works again, the retirements go through.
  CHECK(d.safe_epoch() >= second);
  s.maintain();
  CHECK(s.stats().retired_tables == 0);
  int wrong = 0;
  for (int i = 0; i < 1000; ++i) wrong += s.get("key-" + std::to_string(i)) != std::optional<std::string>("v");
  CHECK(wrong == 0);
  d.set_mode(before);
}
