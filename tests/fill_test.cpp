// SPDX-License-Identifier: Apache-2.0
// Values written in place: reserve-then-fill put() and put_if_absent(), and
// the gather put() over parts. The bytes go straight into the record (the
// record a read then finds is where fill wrote), in every kind of store.
#include <offheap/offheap.hpp>

#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstring>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace {

/// fill writes the pattern of `seed` over n bytes; the record read back
/// must hold it, at the address fill wrote to.
template <class S>
void fills_in_place(S& s, bool evicts = false) {
  for (std::size_t i = 0; i < 2000; ++i) {
    const std::string key = "k" + std::to_string(i % 700);
    const std::size_t n = (i * 7919) % 3000;
    const std::byte* wrote_at = nullptr;
    const offheap::Computed c = s.put(key, n, [&](std::span<std::byte> dst) {
      REQUIRE(dst.size() == n);
      wrote_at = dst.data();
      for (std::size_t b = 0; b < n; ++b) dst[b] = static_cast<std::byte>((i + b) & 0xFF);
    });
    if (!evicts) REQUIRE(c == (i < 700 ? offheap::Computed::inserted : offheap::Computed::updated));
    REQUIRE(offheap::wrote(c));
    REQUIRE(wrote_at != nullptr);
    const std::optional<bool> same = s.read(key, [&](std::string_view v) {
      REQUIRE(v.size() == n);
      // No copy between: the record holds the bytes where fill put them.
      CHECK(static_cast<const void*>(v.data()) == static_cast<const void*>(wrote_at));
      for (std::size_t b = 0; b < n; ++b) {
        if (static_cast<unsigned char>(v[b]) != ((i + b) & 0xFF)) return false;
      }
      return true;
    });
    REQUIRE(same == true);
  }
  REQUIRE(s.verify().empty());
}

}  // namespace

TEST_CASE("put(key, size, fill) writes the value in place, in every kind of store", "[fill]") {
  offheap_test::TempDir dir;
  SECTION("in memory") {
    offheap::Store s{offheap::Options{}};
    fills_in_place(s);
  }
  SECTION("a cache") {
    offheap::Options o;
    o.capacity_bytes = 1 << 20;  // evicts as it goes
    offheap::Cache c(o);
    fills_in_place(c, true);
    REQUIRE(c.stats().evictions > 0);
  }
  SECTION("files, periodic (checksummed), reopened") {
    offheap::Options o;
    o.path = (dir / "s").string();
    o.durability = offheap::Durability::periodic;
    {
      offheap::Store s(o);
      fills_in_place(s);
    }
    offheap::Store s(o);  // a clean open: every record's checksum holds
    REQUIRE(s.size() == 700);
    std::string v;
    REQUIRE(s.get("k5", v));
    REQUIRE(s.verify().empty());
  }
}

TEST_CASE("put_if_absent(key, size, fill) fills only an absent key, a throwing fill changes nothing",
          "[fill]") {
  offheap::Store s{offheap::Options{}};
  int fills = 0;
  auto fill = [&](std::span<std::byte> d) {
    ++fills;
    std::memset(d.data(), 'f', d.size());
  };
  REQUIRE(s.put_if_absent("k", 3, fill));
  REQUIRE_FALSE(s.put_if_absent("k", 5, fill));
  REQUIRE(fills == 1);
  REQUIRE(s.get("k") == "fff");
  // A fill that throws: the key keeps its value, the slot taken for the new
  // one is free again (on a free record, and at the journal's tail).
  s.put("gap", std::string(500, 'g'));
  s.put("gap", "small");  // leaves a free record of about 500 bytes
  for (const std::size_t n : {std::size_t{400}, std::size_t{100000}}) {
    REQUIRE_THROWS_AS(s.put("k", n, [](std::span<std::byte>) { throw std::runtime_error("fill failed"); }),
                      std::runtime_error);
    REQUIRE(s.get("k") == "fff");
    REQUIRE_THROWS_AS(s.put("new", n, [](std::span<std::byte>) { throw std::runtime_error("fill failed"); }),
                      std::runtime_error);
    REQUIRE_FALSE(s.contains("new"));
    REQUIRE(s.verify().empty());
  }
  // What fill may not call: the same store's writes.
  try {
    s.put("k", 2, [&](std::span<std::byte> d) {
      s.remove("gap");
      std::memset(d.data(), 'x', d.size());
    });
    FAIL("a write from inside fill was not refused");
  } catch (const offheap::Error& e) {
    REQUIRE(e.code() == offheap::Errc::invalid_argument);
  }
  REQUIRE(s.get("gap") == "small");
  REQUIRE(s.get("k") == "fff");
  // Sizes are checked before fill runs.
  offheap::Options small;
  small.max_chunk_bytes = 1 << 20;
  offheap::Store t(small);
  REQUIRE_THROWS_AS(t.put("big", std::size_t{2} << 20, fill), offheap::Error);
  REQUIRE(fills == 1);
}

TEST_CASE("put(key, parts) writes the parts one after the other", "[fill]") {
  offheap::Store s{offheap::Options{}};
  const std::string head(100, 'h'), body(5000, 'b');
  const std::vector<std::string_view> parts{head, "", body, "tail"};
  REQUIRE(s.put("k", parts) == offheap::Computed::inserted);
  REQUIRE(s.get("k") == head + body + "tail");
  REQUIRE(s.put("k", std::span<const std::string_view>()) == offheap::Computed::updated);
  REQUIRE(s.get("k") == "");
  const std::string_view one[] = {"only"};
  s.put("k", one, offheap::Ttl(std::chrono::hours(1)));
  REQUIRE(s.get("k") == "only");
}

TEST_CASE("put_if_absent(key, value, existing) hands back the value that was there", "[store]") {
  offheap::Store s{offheap::Options{}};
  std::string existing = "untouched";
  REQUIRE(s.put_if_absent("k", "first", existing));
  REQUIRE(existing == "untouched");
  REQUIRE_FALSE(s.put_if_absent("k", "second", existing));
  REQUIRE(existing == "first");
  REQUIRE(s.get("k") == "first");
  s.put_value("typed", std::uint64_t{7});
  REQUIRE_FALSE(s.put_if_absent("typed", "x", existing));
  REQUIRE(existing.size() == 8);  // the bytes, whatever their type
}
