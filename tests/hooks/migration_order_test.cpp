// SPDX-License-Identifier: Apache-2.0
// The order of a migration's two stores (index.hpp, Index::migrate): a moved
// entry is stored in the new table before its old slot is emptied, so that
// a lock-free reader finds every key at every instant of a step. The hook
// (OFFHEAP_TESTING_MIGRATION_HOOK) runs between the two stores of each
// move, on the writer's thread under the shard's lock, and reads every key
// there, as a reader on another core could at that instant.
//
// Binary offheap_broken_migration_tests builds the same test with
// OFFHEAP_TESTING_MIGRATION_ERASE_FIRST (the old slot emptied first): there
// the moved key is in neither table at the hook, and reads miss it, which
// proves the test can fail.
#include <offheap/offheap.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

namespace {

offheap::Store* g_store = nullptr;
std::uint64_t g_keys = 0;
std::uint64_t g_calls = 0;
std::uint64_t g_misses = 0;

std::string key_of(std::uint64_t i) { return "key-" + std::to_string(i); }

void read_every_key() {
  // Every move of the first migration (a few hundred): each reads all keys.
  if (++g_calls > 400) return;
  std::string out;
  for (std::uint64_t i = 0; i < g_keys; ++i) {
    if (!g_store->get(key_of(i), out) || out != "v" + std::to_string(i)) ++g_misses;
  }
}

}  // namespace

TEST_CASE("a key being moved by a migration is found by a reader at every step of the move",
          "[hooks][migration]") {
  offheap::Options o;
  o.shards = 1;
  o.background_maintenance = false;
  offheap::Store s(o);
  g_store = &s;
  // Up to a migration's start (the first begins past 448 slots: 128 groups).
  std::uint64_t n = 0;
  while (s.stats().index_migrations == 0) {
    s.put(key_of(n), "v" + std::to_string(n));
    ++n;
  }
  g_keys = n;
  offheap::detail::testing_between_move_stores = &read_every_key;
  // Writes of keys already there (updates) drive the steps without adding.
  for (std::uint64_t i = 0; s.stats().index_migrating != 0; ++i) s.put(key_of(i % n), "v" + std::to_string(i % n));
  offheap::detail::testing_between_move_stores = nullptr;
  CHECK(g_calls > 100);
#if defined(OFFHEAP_TESTING_MIGRATION_ERASE_FIRST)
  CHECK(g_misses > 0);
#else
  CHECK(g_misses == 0);
#endif
  for (std::uint64_t i = 0; i < n; ++i) REQUIRE(s.get(key_of(i)) == "v" + std::to_string(i));
}
