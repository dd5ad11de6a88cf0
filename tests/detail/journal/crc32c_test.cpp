// SPDX-License-Identifier: Apache-2.0
#include <offheap/detail/journal/crc32c.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

using offheap::detail::crc32c;
using offheap::detail::crc32c_extend;
using offheap::detail::crc32c_software;

TEST_CASE("crc32c matches the published check values", "[crc32c]") {
  CHECK(crc32c("", 0) == 0u);
  CHECK(crc32c("123456789", 9) == 0xE3069283u);  // the standard check value
  const std::vector<unsigned char> zeros(32, 0x00), ones(32, 0xFF);
  CHECK(crc32c(zeros.data(), zeros.size()) == 0x8A9136AAu);  // RFC 3720, B.4
  CHECK(crc32c(ones.data(), ones.size()) == 0x62A8AB43u);
  std::vector<unsigned char> up(32), down(32);
  for (unsigned i = 0; i < 32; ++i) {
    up[i] = static_cast<unsigned char>(i);
    down[i] = static_cast<unsigned char>(31 - i);
  }
  CHECK(crc32c(up.data(), up.size()) == 0x46DD794Eu);
  CHECK(crc32c(down.data(), down.size()) == 0x113FDB5Cu);
}

TEST_CASE("crc32c: hardware and tables agree at every length and alignment", "[crc32c]") {
  std::mt19937_64 rng(3);
  std::vector<unsigned char> buf(600);
  for (auto& b : buf) b = static_cast<unsigned char>(rng());
  for (std::size_t off = 0; off < 8; ++off) {
    for (std::size_t n = 0; n + off <= buf.size(); n += (n < 40 ? 1 : 37)) {
      REQUIRE(crc32c(buf.data() + off, n) == crc32c_software(buf.data() + off, n));
    }
  }
  INFO("hardware: " << offheap::detail::crc32c_in_hardware());
}

TEST_CASE("crc32c extends in pieces to the checksum of the whole", "[crc32c]") {
  const std::string text = "the quick brown fox jumps over the lazy dog, twice over";
  const std::uint32_t whole = crc32c(text.data(), text.size());
  for (std::size_t cut = 0; cut <= text.size(); ++cut) {
    const std::uint32_t first = crc32c(text.data(), cut);
    CHECK(crc32c_extend(first, text.data() + cut, text.size() - cut) == whole);
  }
  std::string flipped = text;
  flipped[10] = static_cast<char>(flipped[10] ^ 0x04);
  CHECK(crc32c(flipped.data(), flipped.size()) != whole);
}
