// SPDX-License-Identifier: Apache-2.0
#include <offheap/detail/index/location.hpp>

#include <catch2/catch.hpp>

#include <cstdint>

using offheap::detail::Location;

TEST_CASE("location packs chunk and offset independently at the edges", "[location]") {
  const std::uint32_t chunks[] = {0, 1, 255, 256, 32767, 65534, 65535};
  const std::uint64_t offsets[] = {0, 8, 0xFFFFFFF8ull, std::uint64_t{1} << 32,
                                   (std::uint64_t{1} << 32) + 8, (std::uint64_t{1} << 47),
                                   (std::uint64_t{1} << 48) - 8};
  for (std::uint32_t c : chunks) {
    for (std::uint64_t o : offsets) {
      const Location l = Location::make(c, o);
      CHECK(l.chunk() == c);
      CHECK(l.offset() == o);
      CHECK(Location::from_raw(l.raw()) == l);
      CHECK_FALSE(l.is_none());
    }
  }
}

TEST_CASE("location of chunk 65535 at the last offset is not none", "[location]") {
  const Location last = Location::make(65535, Location::kMaxOffset);
  CHECK(last.raw() == 0xFFFFFFFFFFFFFFF8ull);
  CHECK_FALSE(last.is_none());
  CHECK(Location::none().is_none());
  CHECK(Location().is_none());
}

TEST_CASE("the chunk never leaks into the offset or the reverse", "[location]") {
  // All offset bits set, chunk zero; all chunk bits set, offset zero.
  const Location a = Location::make(0, Location::kMaxOffset);
  const Location b = Location::make(65535, 0);
  CHECK(a.chunk() == 0);
  CHECK(a.offset() == Location::kMaxOffset);
  CHECK(b.chunk() == 65535);
  CHECK(b.offset() == 0);
  CHECK(a.raw() == Location::kMaxOffset);
  CHECK(b.raw() == 0xFFFF000000000000ull);
  // Packing is a plain bit layout: chunk in the top 16 bits.
  CHECK(Location::make(0x1234, 0x5678).raw() == 0x1234000000005678ull);
}
