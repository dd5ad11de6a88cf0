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

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

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

// ---- a reader that has checked everything and is about to read the value ----

namespace {

/// Runs `attack(stamp of the record)` once, the first time a reader is about
/// to read the value of a record of `key` (after its header, slot and
/// generation checks): the value it then reads may be anyone's.
class BeforeHitOnce {
 public:
  BeforeHitOnce(std::string_view key, std::function<void(std::uint64_t)> attack) {
    key_ = std::string(key);
    attack_ = std::move(attack);
    fired_ = false;
    offheap::detail::testing_before_hit = [](const std::byte* rec) {
      namespace r = offheap::detail::record;
      const r::Meta m = r::read_meta(rec);
      if (fired_ || m.key_len != key_.size() ||
          std::string_view(reinterpret_cast<const char*>(rec + r::kHeaderBytes), m.key_len) != key_) {
        return;
      }
      fired_ = true;
      offheap::detail::testing_before_hit = nullptr;
      attack_(r::read_stamp(rec));
    };
  }
  ~BeforeHitOnce() { offheap::detail::testing_before_hit = nullptr; }
  BeforeHitOnce(const BeforeHitOnce&) = delete;
  BeforeHitOnce& operator=(const BeforeHitOnce&) = delete;
  static bool fired() { return fired_; }

 private:
  static inline std::string key_;
  static inline std::function<void(std::uint64_t)> attack_;
  static inline bool fired_ = false;
};

/// Like MergeScenario, but B's record goes away without any merge: B is the
/// last record, so removing it and then A (now last) moves the tail back
/// twice, and C, appended at A's start, covers B's old start.
struct RetractScenario {
  template <class Store>
  static void build(Store& s) {
    s.put(MergeScenario::Y, MergeScenario::y_value);
    s.put(MergeScenario::X, MergeScenario::x_value());  // "A" of the scenario: before B
    s.put(MergeScenario::B, MergeScenario::b_value());  // the last record
  }
  template <class Store>
  static void attack(Store& s, std::string_view forged) {
    s.remove(MergeScenario::B);  // the tail moves back to B's start
    s.remove(MergeScenario::X);  // and back to X's start: no merge
    s.put(MergeScenario::C, MergeScenario::cover_value(forged));
  }
};

}  // namespace

namespace {

/// How B's record goes away before the forged cover is written.
enum class Away { merge, retract, grow_then_merge, clear };

const char* to_string(Away a) {
  switch (a) {
    case Away::merge: return "B merges into its free neighbour";
    case Away::retract: return "the tail moves back over B";
    case Away::grow_then_merge:
      return "the index grows (the reader's table is frozen), then B merges into its neighbour";
    case Away::clear: return "clear() (the table is emptied in place), then C is written at B's place";
  }
  return "?";
}

template <class Store>
void remove_b_and_cover(Away how, Store& s, std::string_view forged) {
  namespace r = offheap::detail::record;
  switch (how) {
    case Away::merge:
      MergeScenario::attack(s, forged);
      return;
    case Away::retract:
      RetractScenario::attack(s, forged);
      return;
    case Away::grow_then_merge: {
      const std::uint64_t before = s.stats().index_capacity;
      // Values too long for X's free record: appended after Y.
      for (int i = 0; i < 16; ++i) s.put("grow-" + std::to_string(i), std::string(100, 'g'));
      REQUIRE(s.stats().index_capacity > before);
      MergeScenario::attack(s, forged);
      return;
    }
    case Away::clear: {
      s.clear();
      // The tail is back at the chunk's start: C's record starts at 0, and
      // B's record started after A's and X's.
      const std::size_t b_at = 2 * r::kHeaderBytes + r::payload_for(MergeScenario::A.size(), 8) +
                               r::payload_for(MergeScenario::X.size(), 32);
      const std::size_t in_value = b_at - r::kHeaderBytes - MergeScenario::C.size();
      s.put(MergeScenario::C, offheap_test::value_with(in_value + forged.size(), in_value, forged));
      return;
    }
  }
}

}  // namespace

TEMPLATE_TEST_CASE("a reader about to read a removed key's value never returns bytes forged with "
                   "its record's own stamp",
                   "[hooks][forgery]", offheap::StorePolicy, offheap::SingleWriterPolicy) {
  using Store = offheap::OffHeapStore<TestType>;
  const Away how = GENERATE(Away::merge, Away::retract, Away::grow_then_merge, Away::clear);
  {
    INFO(to_string(how));
    Store s(one_shard());
    if (how == Away::retract) {
      RetractScenario::build(s);
    } else {
      MergeScenario::build(s);
    }
    const auto attack = [&](std::uint64_t stamp) {
      remove_b_and_cover(how, s, offheap_test::forged_record(MergeScenario::B, "EVIL!", stamp, 5));
    };
    std::string out = "untouched";
    std::size_t forged_visits = 0;
    SECTION("get(key, out)") {
      BeforeHitOnce hook(MergeScenario::B, attack);
      const bool hit = s.get(MergeScenario::B, out);
      REQUIRE(BeforeHitOnce::fired());
      CHECK_FALSE(hit);
    }
    SECTION("read(key, fn)") {
      BeforeHitOnce hook(MergeScenario::B, attack);
      const bool hit = s.read(MergeScenario::B, [&](std::string_view v) { out.assign(v); });
      REQUIRE(BeforeHitOnce::fired());
      CHECK_FALSE(hit);
    }
    SECTION("view(key).read(fn)") {
      const auto v = s.view(MergeScenario::B);
      REQUIRE(v);
      BeforeHitOnce hook(MergeScenario::B, attack);
      CHECK_THROWS_AS(v.read([&](std::string_view b) { out.assign(b); }), offheap::StaleView);
      REQUIRE(BeforeHitOnce::fired());
    }
    SECTION("view(key)") {
      // The lookup behind view() throws its read away: the view is empty.
      BeforeHitOnce hook(MergeScenario::B, attack);
      const auto v = s.view(MergeScenario::B);
      REQUIRE(BeforeHitOnce::fired());
      CHECK_FALSE(v);
      CHECK(v.size() == 0);
    }
    SECTION("get_value<T>(key)") {
      s.put_value(MergeScenario::B, std::uint64_t{42});
      BeforeHitOnce hook(MergeScenario::B, [&](std::uint64_t stamp) {
        const std::uint64_t evil = 0xE7117;
        remove_b_and_cover(how, s,
                           offheap_test::forged_record(
                               MergeScenario::B,
                               std::string_view(reinterpret_cast<const char*>(&evil), 8), stamp, 8,
                               offheap::detail::value_type_tag<std::uint64_t>()));
      });
      const auto v = s.template get_value<std::uint64_t>(MergeScenario::B);
      REQUIRE(BeforeHitOnce::fired());
      CHECK(v == std::nullopt);
    }
    SECTION("for_each") {
      BeforeHitOnce hook(MergeScenario::B, attack);
      s.for_each([&](std::string_view, std::string_view v) {
        if (v.rfind("EVIL!", 0) == 0) ++forged_visits;
      });
      REQUIRE(BeforeHitOnce::fired());
      CHECK(forged_visits == 0);
    }
    // (`out` may hold what a discarded call read: get's out is unspecified
    // on a miss, read()'s fn result is to be discarded when it says false.)
    CHECK(out.size() <= MergeScenario::b_value().size());
    CHECK_FALSE(s.contains(MergeScenario::B));
    CHECK(s.verify().empty());
  }
}

namespace {
offheap::Store* churn_store = nullptr;
int churn_left = 0;
/// Each time the walk loads a slot: a removal next to a free record in the
/// same shard (a merge: the generation moves), for a bounded number of times.
void churn() {
  if (churn_left-- <= 0) return;
  offheap::detail::testing_after_slot_load = nullptr;  // its own reads do not churn
  offheap::Store& s = *churn_store;
  s.put("c1", std::string(32, 'x'));
  s.put("c2", std::string(32, 'y'));
  s.put("c3", std::string(32, 'z'));
  s.remove("c1");
  s.remove("c2");  // merges into c1's free record
  s.remove("c3");
  offheap::detail::testing_after_slot_load = churn;
}
}  // namespace

TEST_CASE("for_each visits a key left alone even while merges elsewhere keep moving the generation",
          "[hooks][forgery]") {
  // Each time the walk loads a slot, merges elsewhere move the generation
  // before the walk checks it: the walk reads the record again (at once,
  // as it has nothing to wait for) until the churn runs out, and then
  // copies it. It may not take the header read under a moved generation
  // even when the record is still current afterwards: see the test below.
  offheap::Store s(one_shard());
  s.put("stable", "its value");
  churn_store = &s;
  // More than the rounds a walk starts again at once (1,024) and its
  // patience after them (256): the walk then confirms the key through a
  // lookup, which the churn meets too (its slot loads), until it runs out.
  churn_left = 1400;
  offheap::detail::testing_after_slot_load = churn;
  std::size_t visits = 0;
  s.for_each([&](std::string_view k, std::string_view v) {
    if (k == "stable") {
      ++visits;
      CHECK(v == "its value");
    }
  });
  offheap::detail::testing_after_slot_load = nullptr;
  CHECK(churn_left <= 0);  // the churn ran out while the walk kept trying
  CHECK(visits == 1);
  // The same through scan's steps (300 moves: rounds started again at once).
  churn_left = 300;
  offheap::detail::testing_after_slot_load = churn;
  visits = 0;
  offheap::Cursor cursor;
  while (!cursor.done()) {
    s.scan(cursor, 16, [&](std::string_view k, std::string_view v) {
      if (k == "stable") {
        ++visits;
        CHECK(v == "its value");
      }
    });
  }
  offheap::detail::testing_after_slot_load = nullptr;
  CHECK(churn_left <= 0);
  CHECK(visits == 1);
}

namespace {
offheap::Store* exhaust_store = nullptr;
int exhaust_rewrites = 0;
bool exhaust_fired = false;
}  // namespace

TEST_CASE("for_each, after rewrites exhausted its patience, never returns bytes forged with the "
          "record's stamp",
          "[hooks][forgery]") {
  // Right before the walk copies B, B is rewritten in place with the same
  // value (a new stamp at the same place): the copy does not validate, and
  // after a reader's patience (256 rounds) the walk confirms B through a
  // lookup. Right before that lookup copies B's value, B is removed and its
  // start covered with bytes forged with its stamp.
  offheap::Store s(one_shard());
  exhaust_store = &s;
  exhaust_rewrites = 0;
  exhaust_fired = false;
  MergeScenario::build(s);
  std::size_t forged = 0;
  s.for_each([&](std::string_view, std::string_view v) {
    offheap::detail::testing_before_hit = [](const std::byte* rec) {
      namespace r = offheap::detail::record;
      const r::Meta m = r::read_meta(rec);
      if (exhaust_fired ||
          std::string_view(reinterpret_cast<const char*>(rec + r::kHeaderBytes), m.key_len) != MergeScenario::B) {
        return;
      }
      const auto hook = offheap::detail::testing_before_hit;
      offheap::detail::testing_before_hit = nullptr;
      if (exhaust_rewrites < 256) {
        ++exhaust_rewrites;
        exhaust_store->put(MergeScenario::B, MergeScenario::b_value());  // in place: same size
        offheap::detail::testing_before_hit = hook;
        return;
      }
      exhaust_fired = true;
      MergeScenario::attack(*exhaust_store,
                            offheap_test::forged_record(MergeScenario::B, "EVIL!", r::read_stamp(rec), 5));
    };
    if (v.rfind("EVIL!", 0) == 0) ++forged;
  });
  offheap::detail::testing_before_hit = nullptr;
  CHECK(exhaust_rewrites == 256);
  CHECK(exhaust_fired);
  CHECK(forged == 0);
  CHECK_FALSE(s.contains(MergeScenario::B));
  CHECK(s.verify().empty());
}

namespace {
offheap::Store* frozen_store = nullptr;
int frozen_slot_loads = 0;
}  // namespace

TEST_CASE("for_each does not wait on a replaced table's slot that leads to bytes that are no stamp",
          "[hooks][forgery]") {
  // After A is visited, the index grows (a small table is rebuilt at once:
  // the walk's table is replaced and frozen), then B is removed and its
  // old start covered with an odd "stamp". B's slot in the frozen table
  // still leads there. Bytes that are no stamp never turn even: the walk
  // must pass over the slot at once. A walk that waited them out as a
  // record being written read the slot a reader's patience long (256
  // rounds, 192 of them yields: on a busy core each costs a scheduler
  // quantum, and walks beside a writer that keeps removing keys took
  // minutes).
  offheap::Store s(one_shard());
  frozen_store = &s;
  frozen_slot_loads = 0;
  MergeScenario::build(s);
  const std::uint64_t capacity = s.stats().index_capacity;
  bool armed = false;
  std::size_t forged = 0, a = 0, y = 0;
  s.for_each([&](std::string_view k, std::string_view v) {
    a += k == MergeScenario::A;
    y += k == MergeScenario::Y;
    if (v.rfind("EVIL!", 0) == 0) ++forged;
    if (armed) return;
    armed = true;
    // Grown by records too large for X's free one, which the attack needs.
    for (int i = 0; s.stats().index_capacity == capacity; ++i) {
      s.put("grow-" + std::to_string(i), std::string(64, 'g'));
    }
    MergeScenario::attack(s, offheap_test::forged_record(MergeScenario::B, "EVIL!", 0x1001, 5));
    CHECK(s.stats().free_records == 0);  // C took the merged record: the odd bytes lie at B's start
    offheap::detail::testing_after_slot_load = [] { ++frozen_slot_loads; };
  });
  offheap::detail::testing_after_slot_load = nullptr;
  CHECK(a == 1);
  CHECK(y == 1);  // left alone: confirmed through the current table
  CHECK(forged == 0);
  // B's slot and Y's once each, and Y's lookup (a handful of slot loads);
  // waiting on B's odd bytes took 256.
  CHECK(frozen_slot_loads > 0);
  CHECK(frozen_slot_loads < 16);
  CHECK_FALSE(s.contains(MergeScenario::B));
  CHECK(s.verify().empty());
}

namespace {
offheap::OffHeapStore<offheap::SingleWriterPolicy>* starve_store = nullptr;
int starve_churns = 0;
}  // namespace

TEST_CASE("a read is not thrown away for every merge elsewhere in the shard", "[hooks][forgery]") {
  // Each time the reader is about to copy the value, another key is put and
  // removed at the tail (the tail moves back: the generation moves). The
  // read must still complete, with the key's value, at once: the record it
  // read is still the key's current one. (SingleWriterPolicy: no lock to
  // fall back on.)
  offheap::OffHeapStore<offheap::SingleWriterPolicy> s(one_shard());
  starve_store = &s;
  starve_churns = 0;
  s.put("stable", std::string(4096, 's'));
  offheap::detail::testing_before_hit = [](const std::byte*) {
    if (starve_churns >= 1000) return;  // bounds the test if reads do restart
    ++starve_churns;
    const auto hook = offheap::detail::testing_before_hit;
    offheap::detail::testing_before_hit = nullptr;
    starve_store->put("churn", std::string(100, 'c'));
    starve_store->remove("churn");
    offheap::detail::testing_before_hit = hook;
  };
  std::size_t calls = 0;
  std::string seen;
  const bool hit = s.read("stable", [&](std::string_view v) {
    ++calls;
    seen.assign(v);
  });
  std::string out;
  const bool got = s.get("stable", out);
  offheap::detail::testing_before_hit = nullptr;
  CHECK(hit);
  CHECK(calls == 1);
  CHECK(seen == std::string(4096, 's'));
  CHECK(got);
  CHECK(out == std::string(4096, 's'));
  CHECK(starve_churns == 2);  // one churn per read, none repeated
}

// ---- a reader that loads the generation while clear() runs ---------------------

namespace {
std::atomic<int> clear_phase{0};
void wait_for_phase(int p) {
  while (clear_phase.load() < p) std::this_thread::yield();
}
}  // namespace

TEST_CASE("a reader that loads the generation while clear() empties the table never returns "
          "bytes forged where the cleared records were",
          "[hooks][forgery]") {
  // clear() empties the table in place (as it does when no fresh table can
  // be mapped) and is held right after its first move of the generation; a
  // reader of B then loads that generation and finds B's slot still full.
  // It is held there while clear() finishes and C is written over B's place
  // with a forged record of B. Found by the third review (failed on dd87c23).
  namespace r = offheap::detail::record;
  offheap::detail::testing_clear_in_place = true;
  offheap::Store s(one_shard());
  MergeScenario::build(s);  // A | X (free) | B | Y
  const std::string forged = offheap_test::forged_record(MergeScenario::B, "EVIL!", 0x2000, 5);
  clear_phase = 0;
  offheap::detail::testing_clear_after_bump = [] {
    clear_phase = 1;
    wait_for_phase(2);
  };
  std::thread writer([&] {
    s.clear();
    offheap::detail::testing_clear_after_bump = nullptr;
    const std::size_t b_at = 2 * r::kHeaderBytes + r::payload_for(MergeScenario::A.size(), 8) +
                             r::payload_for(MergeScenario::X.size(), 32);
    const std::size_t in_value = b_at - r::kHeaderBytes - MergeScenario::C.size();
    s.put(MergeScenario::C, offheap_test::value_with(in_value + forged.size(), in_value, forged));
    clear_phase = 3;
  });
  wait_for_phase(1);
  offheap::detail::testing_after_slot_load = [] {
    offheap::detail::testing_after_slot_load = nullptr;
    clear_phase = 2;  // clear() finishes, C is written
    wait_for_phase(3);
  };
  std::string out;
  const bool hit = s.get(MergeScenario::B, out);
  writer.join();
  offheap::detail::testing_after_slot_load = nullptr;
  offheap::detail::testing_clear_in_place = false;
  CHECK(clear_phase.load() == 3);  // the reader was held inside clear() and the put
  CHECK_FALSE(hit);
  CHECK_FALSE(s.contains(MergeScenario::B));
  std::string c;
  REQUIRE(s.get(MergeScenario::C, c));
  CHECK(c.find("EVIL!") != std::string::npos);  // the forged bytes do lie there
  CHECK(s.verify().empty());
}

// ---- a header read while the generation moved, the record current after ----

namespace {
namespace rec = offheap::detail::record;

/// A clock that runs `armed` once, at the next reading: a walk reads the
/// clock for a record with a deadline between its first validation of the
/// header and its generation check, the moment a preempted walk would meet
/// the writes made here.
struct ArmedClock : offheap::Clock {
  static inline std::function<void()> armed;
  static inline bool fired = false;
  std::uint64_t now_ms() const noexcept override {
    if (armed) {
      const auto f = std::move(armed);
      armed = nullptr;
      fired = true;
      f();
    }
    return 1'000'000;
  }
};

/// Bytes shaped like a live record of a 4-byte key "key-" claiming
/// `claim` value bytes and a deadline far off, stamp `stamp`.
std::string forged_header(std::uint64_t stamp, std::uint32_t claim, std::uint8_t slack) {
  const rec::Meta m{claim, 4, rec::Meta::make_flags(rec::State::live, slack, false, 0), 0};
  const std::uint64_t words[5] = {stamp, m.encode(), rec::kDeadlineFlag, 0x2d2d2d2d2d2d2d2dULL,
                                  std::uint64_t{1} << 50};
  return std::string(reinterpret_cast<const char*>(words), sizeof words);
}

/// B's stamp and place, as a reader sees them (0 and null: B not found).
std::uint64_t stamp_of_b(offheap::Store& s, const std::byte** at) {
  static std::uint64_t stamp;
  static const std::byte* place;
  stamp = 0;
  place = nullptr;
  offheap::detail::testing_before_hit = [](const std::byte* r) {
    const rec::Meta m = rec::read_meta(r);
    if (std::string_view(reinterpret_cast<const char*>(r + rec::kHeaderBytes), m.key_len) == MergeScenario::B) {
      stamp = rec::read_stamp(r);
      place = r;
    }
  };
  (void)s.get(MergeScenario::B);
  offheap::detail::testing_before_hit = nullptr;
  *at = place;
  return stamp;
}

/// After the forged cover: C goes, X and B are written again, so that B's
/// record is back at its old place with the stamp the forgery claimed.
void rewrite_b(offheap::Store& s) {
  s.remove(MergeScenario::C);
  s.put(MergeScenario::X, MergeScenario::x_value());
  s.put(MergeScenario::B, MergeScenario::b_value());
}

offheap::Store* armed_store = nullptr;
std::uint64_t predicted_stamp = 0;
std::uint32_t forged_claim = 0;
std::uint8_t forged_slack = 0;
}  // namespace

TEST_CASE("for_each never sizes a copy from a header read while the generation moved, "
          "though the record there is current afterwards",
          "[hooks][forgery]") {
  // Stamps come from a counter: a writer can cover B's old place with a
  // value forged with the stamp B's next record will get there (a merge:
  // the generation moves), let a walk read that header, then write B there
  // again with that very stamp. The record is then current (the slot
  // leads to it, the stamp is the one read), but the header the walk read
  // was the value's: a walk that trusted it handed fn a key "key-" that
  // was never written, with B's bytes cut to the forged length (4 bytes,
  // or 512 KiB past B's record).
  ArmedClock clock;
  const bool large = GENERATE(false, true);
  const std::uint32_t claim = large ? 512u << 10 : 4;
  const std::uint8_t slack = large ? 1 : 0;
  forged_claim = claim;
  forged_slack = slack;
  const auto options = [&] {
    offheap::Options o = one_shard(large ? 4u << 20 : 64 * 1024);
    o.clock = &clock;
    return o;
  };
  const auto build = [&](offheap::Store& st) {
    st.put(MergeScenario::A, MergeScenario::a_value);
    st.put(MergeScenario::X, MergeScenario::x_value());
    st.put(MergeScenario::B, MergeScenario::b_value());
    st.put(MergeScenario::Y, MergeScenario::y_value);
    if (large) st.put("pad", std::string(1u << 20, '\x7f'));  // where the forged deadline is read
    st.remove(MergeScenario::X);
  };
  // A dry run on a twin store: the stamp B's record gets at the end, at
  // its old place.
  {
    offheap::Store twin(options());
    build(twin);
    const std::byte* before = nullptr;
    const std::byte* after = nullptr;
    (void)stamp_of_b(twin, &before);
    MergeScenario::attack(twin, forged_header(2, claim, slack));
    rewrite_b(twin);
    predicted_stamp = stamp_of_b(twin, &after);
    REQUIRE(before == after);
  }
  offheap::Store s(options());
  armed_store = &s;
  build(s);
  const std::byte* b_before = nullptr;
  REQUIRE(stamp_of_b(s, &b_before) != 0);
  ArmedClock::fired = false;
  std::vector<std::pair<std::string, std::string>> seen;
  bool armed = false;
  s.for_each([&](std::string_view k, std::string_view v) {
    seen.emplace_back(k, v);
    if (armed) return;
    armed = true;
    offheap::detail::testing_after_slot_load = [] {
      offheap::detail::testing_after_slot_load = nullptr;
      MergeScenario::attack(*armed_store, forged_header(predicted_stamp, forged_claim, forged_slack));
      ArmedClock::armed = [] { rewrite_b(*armed_store); };
    };
  });
  offheap::detail::testing_after_slot_load = nullptr;
  ArmedClock::armed = nullptr;
  // The attack landed as planned: the clock ran the rewrite inside the
  // walk's read, and B is back at its old place with the forged stamp.
  REQUIRE(ArmedClock::fired);
  const std::byte* at = nullptr;
  CHECK(stamp_of_b(s, &at) == predicted_stamp);
  CHECK(at == b_before);
  for (const auto& [k, v] : seen) {
    INFO("visited key '" << k << "' with a value of " << v.size() << " bytes");
    CHECK(s.get(k) == std::optional<std::string>(v));
  }
  CHECK(s.verify().empty());
}
