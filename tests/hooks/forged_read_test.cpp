// SPDX-License-Identifier: Apache-2.0
// A reader preempted between loading a slot and reading its record, made
// deterministic: this binary is built with OFFHEAP_TESTING_READ_HOOK, so the
// engine calls a hook right after a reader loads a slot's location. The hook
// removes key B and puts key C whose value holds, exactly where B's record
// was (merged into its free neighbour and reused), bytes shaped like a live
// record of B (support/forge.hpp). Every read path must then answer as if B
// is absent: a slot whose key was removed never validates a record, and no
// length from such bytes sizes a buffer.
#include <offheap/offheap.hpp>

#include "support/forge.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <functional>
#include <string>

namespace {

using offheap_test::MergeScenario;

/// Runs `attack` once, the first time a reader loads a slot.
class HookOnce {
 public:
  explicit HookOnce(std::function<void()> attack) {
    attack_ = std::move(attack);
    fired_ = false;
    offheap::detail::testing_after_slot_load = [] {
      if (fired_) return;
      fired_ = true;
      offheap::detail::testing_after_slot_load = nullptr;
      attack_();
    };
  }
  ~HookOnce() { offheap::detail::testing_after_slot_load = nullptr; }
  HookOnce(const HookOnce&) = delete;
  HookOnce& operator=(const HookOnce&) = delete;
  static bool fired() { return fired_; }

 private:
  static inline std::function<void()> attack_;
  static inline bool fired_ = false;
};

offheap::Options one_shard(std::uint64_t chunk = 64 * 1024) {
  offheap::Options o;
  o.shards = 1;
  o.hash_seed = 42;
  o.min_chunk_bytes = chunk;
  return o;
}

template <class Store>
void check_attack_landed(const Store& s) {
  // The merged record (X's 40 payload bytes, B's header and 32) was taken
  // whole by C: the forged bytes lie where B's record started.
  CHECK(s.stats().free_records == 0);
  CHECK(s.size() == 3);  // A, Y, C
  CHECK(s.verify().empty());
}

}  // namespace

TEMPLATE_TEST_CASE("a reader that loaded a removed key's slot never returns forged bytes",
                   "[hooks][forgery]", offheap::StorePolicy, offheap::SingleWriterPolicy) {
  using Store = offheap::OffHeapStore<TestType>;
  Store s(one_shard());
  MergeScenario::build(s);
  REQUIRE(s.stats().free_records == 1);
  const std::string forged = offheap_test::forged_record(MergeScenario::B, "EVIL!");
  const auto attack = [&] { MergeScenario::attack(s, forged); };

  SECTION("get(key, out)") {
    HookOnce hook(attack);
    std::string out = "untouched";
    const bool hit = s.get(MergeScenario::B, out);
    REQUIRE(HookOnce::fired());
    CHECK_FALSE(hit);
    if (hit) CHECK(out != "EVIL!");
  }
  SECTION("get(key)") {
    HookOnce hook(attack);
    const auto v = s.get(MergeScenario::B);
    REQUIRE(HookOnce::fired());
    CHECK(v == std::nullopt);
  }
  SECTION("read(key, fn)") {
    HookOnce hook(attack);
    std::string seen;
    const bool hit = s.read(MergeScenario::B, [&](std::string_view v) { seen.assign(v); });
    REQUIRE(HookOnce::fired());
    CHECK_FALSE(hit);
    CHECK(seen != "EVIL!");
  }
  SECTION("view(key)") {
    HookOnce hook(attack);
    const auto v = s.view(MergeScenario::B);
    REQUIRE(HookOnce::fired());
    CHECK_FALSE(v);
  }
  SECTION("contains(key)") {
    HookOnce hook(attack);
    const bool there = s.contains(MergeScenario::B);
    REQUIRE(HookOnce::fired());
    CHECK_FALSE(there);
  }
  SECTION("get_value<T>(key)") {
    HookOnce hook([&] {
      const std::uint64_t evil = 0xE7117;
      const std::string typed = offheap_test::forged_record(
          MergeScenario::B, std::string_view(reinterpret_cast<const char*>(&evil), 8), 0x1000, 8,
          offheap::detail::value_type_tag<std::uint64_t>());
      MergeScenario::attack(s, typed);
    });
    const auto v = s.template get_value<std::uint64_t>(MergeScenario::B);
    REQUIRE(HookOnce::fired());
    CHECK(v == std::nullopt);
  }
  SECTION("for_each") {
    HookOnce hook(attack);
    std::size_t forged_visits = 0, visits = 0;
    s.for_each([&](std::string_view k, std::string_view v) {
      ++visits;
      if (k == MergeScenario::B) CHECK(v == MergeScenario::b_value());
      if (v == "EVIL!") ++forged_visits;
    });
    REQUIRE(HookOnce::fired());
    CHECK(forged_visits == 0);
    CHECK(visits >= 2);  // A and Y at least
  }
  check_attack_landed(s);
  CHECK_FALSE(s.contains(MergeScenario::B));
}

TEST_CASE("a forged length never sizes the caller's buffer", "[hooks][forgery]") {
  // A chunk large enough that a forged header may claim 30 MiB inside it.
  offheap::Store s(one_shard(std::uint64_t{32} << 20));
  MergeScenario::build(s);
  const std::string forged =
      offheap_test::forged_record(MergeScenario::B, "EVIL!", 0x1000, std::uint32_t{30} << 20);
  HookOnce hook([&] { MergeScenario::attack(s, forged); });
  std::string out;
  out.reserve(64);
  const bool hit = s.get(MergeScenario::B, out);
  REQUIRE(HookOnce::fired());
  CHECK_FALSE(hit);
  CHECK(out.capacity() < 4096);  // never grown to the forged length
  check_attack_landed(s);
}
