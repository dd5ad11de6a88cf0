// SPDX-License-Identifier: Apache-2.0
// Two syncs at once (the maintenance thread's and a user's): each returns
// only when everything written before it is durable, whoever else is
// syncing, and an old record is freed only after the msync that made its
// successor durable. Durability is observed, not assumed: the test records
// the ranges the library msyncs and builds the image a power loss would
// leave at the moment the second sync returns (support/durable_image.hpp).
#include <offheap/offheap.hpp>

#include "support/durable_image.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

using namespace std::chrono_literals;
using offheap::Durability;
using offheap_test::FileImages;
using offheap_test::SyncRecorder;
using offheap_test::TempDir;

namespace {

offheap::Options periodic(const std::filesystem::path& dir) {
  offheap::Options o;
  o.path = dir;
  o.shards = 1;
  o.durability = Durability::periodic;
  o.background_maintenance = false;
  o.min_chunk_bytes = 16 * 1024;
  return o;
}

}  // namespace

TEST_CASE("a sync that starts while another is writing returns only once both are durable",
          "[files][sync]") {
  TempDir tmp;
  const std::filesystem::path dir = tmp / "store";
  const std::filesystem::path image_dir = tmp / "image";
  offheap::Store s(periodic(dir));
  for (int i = 0; i < 50; ++i) s.put("key-" + std::to_string(i), "old value " + std::to_string(i));
  s.sync();
  s.sync();  // the second frees the first one's deferred records: a quiet baseline
  const FileImages baseline = offheap_test::read_dir_files(dir);

  // Updates after the baseline: new records, the old ones deferred.
  for (int i = 0; i < 50; ++i) s.put("key-" + std::to_string(i), "new value " + std::to_string(i));
  s.put("fresh", "written before both syncs");

  SyncRecorder recorder;
  std::mutex m;
  std::condition_variable cv;
  bool first_in_msync = false, second_returned = false;
  // The first sync to reach an msync waits there until the second sync has
  // returned, or 300 ms (so that a sync that correctly waits for the first
  // one is not stuck forever).
  recorder.before_msync = [&](const void*, std::uint64_t) {
    std::unique_lock<std::mutex> g(m);
    if (first_in_msync) return;
    first_in_msync = true;
    cv.notify_all();
    cv.wait_for(g, 300ms, [&] { return second_returned; });
  };
  std::thread first([&] { s.sync(); });
  {
    std::unique_lock<std::mutex> g(m);
    REQUIRE(cv.wait_for(g, 10s, [&] { return first_in_msync; }));
  }
  s.sync();  // the second sync
  FileImages at_return;
  {
    std::lock_guard<std::mutex> g(m);
    second_returned = true;
    at_return = recorder.image(baseline, dir);
  }
  cv.notify_all();
  first.join();
  CHECK(recorder.count() > 0);

  // Power loss at the second sync's return: every write made before it
  // must be there.
  offheap_test::write_dir_files(image_dir, at_return);
  offheap::Options o = periodic(image_dir);
  o.read_only = true;
  offheap::Store recovered(o);
  std::size_t wrong = 0;
  for (int i = 0; i < 50; ++i) {
    const auto v = recovered.get("key-" + std::to_string(i));
    if (v != "new value " + std::to_string(i)) {
      ++wrong;
      UNSCOPED_INFO("key-" << i << " reads " << (v ? *v : std::string("(absent)")));
    }
  }
  CHECK(wrong == 0);
  CHECK(recovered.get("fresh") == "written before both syncs");
}

TEST_CASE("a sync() while another thread closes the store returns once the close made it durable",
          "[files][sync]") {
  TempDir tmp;
  const std::filesystem::path dir = tmp / "store";
  const std::filesystem::path image_dir = tmp / "image";
  auto* s = new offheap::Store(periodic(dir));
  s->put("base", "b");
  s->sync();
  const FileImages baseline = offheap_test::read_dir_files(dir);
  SyncRecorder recorder;
  std::atomic<int> phase{0};
  // close()'s first msync waits until the other thread's sync() returned,
  // or 300 ms (a sync() that rightly waits for close() is not stuck).
  recorder.before_msync = [&](const void*, std::uint64_t) {
    int one = 1;
    if (!phase.compare_exchange_strong(one, 2)) return;
    const auto until = std::chrono::steady_clock::now() + 300ms;
    while (phase.load() != 3 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  };
  s->put("k", "acknowledged");
  std::thread closer([&] {
    phase = 1;
    s->close();
  });
  while (phase.load() != 2) std::this_thread::yield();  // close() is inside its first msync
  s->sync();
  FileImages at_return = recorder.image(baseline, dir);
  phase = 3;
  closer.join();
  delete s;
  // A power loss when that sync() returned: what was written before it is there.
  offheap_test::write_dir_files(image_dir, at_return);
  offheap::Options o = periodic(image_dir);
  o.read_only = true;
  offheap::Store after(o);
  CHECK(after.get("base") == "b");
  CHECK(after.get("k") == "acknowledged");
}

TEST_CASE("a sync() after a close() whose writes failed says so", "[files][sync]") {
  // close() fails to write the records (msync fails); a later sync() (from
  // another thread, say) must not return as if they were durable. (On
  // dd87c23 and 700ce90 it returned normally.)
  TempDir tmp;
  offheap::Store s(periodic(tmp / "store"));
  s.put("k", "v");
  offheap::detail::testing_fail_syncs().store(EIO);
  CHECK_THROWS_AS(s.close(), offheap::Error);
  offheap::detail::testing_fail_syncs().store(0);
  try {
    s.sync();
    FAIL("sync() returned after close() failed to write the records");
  } catch (const offheap::Error& e) {
    CHECK(e.code() == offheap::Errc::io_error);
    CHECK(std::string(e.what()).find("close()") != std::string::npos);
  }
}
