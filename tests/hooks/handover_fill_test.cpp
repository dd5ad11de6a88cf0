// SPDX-License-Identifier: Apache-2.0
// A cache write that takes over the record it evicted (detail/journal/
// space.hpp, Handover) and fills it (put with a fill function: the bytes go
// in before the record's own stamp) while a reader of the evicted key is
// parked between its slot check and its copy (testing_before_hit): the
// reader must get the old value whole or a miss, never the fill's bytes.
// The record is taken whole (values of one size) or split (a smaller
// value into a larger record).
//
// Binary offheap_broken_handover_tests builds the same test with
// OFFHEAP_TESTING_HANDOVER_STAMP_LATE (the handed-over record keeps its
// stamp until the write's own): there the reader returns the fill's bytes
// as the evicted key's value, which proves the test can fail.
#include <offheap/offheap.hpp>

#include <catch2/catch.hpp>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <thread>

namespace {

std::atomic<int> g_phase{0};

std::string key_of(int i) {
  char b[16];
  std::snprintf(b, sizeof b, "k%06d", i);
  return b;
}

}  // namespace

TEST_CASE("a reader of an evicted key never sees the fill of the write that took its record over",
          "[handover][hooks]") {
  const bool split = GENERATE(false, true);
  CAPTURE(split);
  offheap::Options o;
  o.capacity_bytes = 16 << 10;
  o.shards = 1;
  o.background_maintenance = false;
  offheap::LruCache c(o);
  const std::string old_value(split ? 300 : 100, 'v');
  const std::size_t new_size = 100;  // split: 300 bytes' record for 100
  int next = 0;
  while (c.stats().evictions < 5) c.put(key_of(next++), old_value);
  // LRU with no reads: the oldest key left is the next victim.
  // (Not read here: a read would make it the most recent.)
  const std::string victim = key_of(static_cast<int>(c.stats().evictions));

  g_phase = 0;
  offheap::detail::testing_before_hit = [](const std::byte*) {
    if (g_phase.load() != 0) return;
    g_phase.store(1);  // past the slot check, before the copy
    while (g_phase.load() != 2) std::this_thread::yield();
  };
  std::string out;
  bool hit = false;
  std::thread reader([&] {
    hit = c.get(victim, out);
    g_phase.store(3);
  });
  while (g_phase.load() != 1) std::this_thread::yield();
  offheap::detail::testing_before_hit = nullptr;
  const auto before = c.stats();
  c.put(key_of(next), new_size, [&](std::span<std::byte> dst) {
    std::memset(dst.data(), 'X', dst.size());
    g_phase.store(2);  // the reader copies now, the fill's bytes in place
    while (g_phase.load() != 3) std::this_thread::yield();
  });
  reader.join();
  CHECK(c.stats().evictions > before.evictions);
  CHECK_FALSE(c.contains(victim));
#if defined(OFFHEAP_TESTING_HANDOVER_STAMP_LATE)
  CHECK((hit && out != old_value));
#else
  CHECK_FALSE((hit && out != old_value));
#endif
  CHECK(c.verify() == "");
}
