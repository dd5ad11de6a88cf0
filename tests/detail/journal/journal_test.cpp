// SPDX-License-Identifier: Apache-2.0
#include <offheap/detail/journal/journal.hpp>
#include <offheap/detail/journal/record.hpp>

#include "support/store_name.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

using offheap::Errc;
using offheap::Error;
using offheap::detail::Journal;
using offheap::detail::JournalConfig;
using offheap::detail::Location;
namespace record = offheap::detail::record;

namespace {
struct Leftovers {
  std::vector<std::pair<Location, std::uint64_t>> seen;
  auto fn() {
    return [this](Location l, std::byte*, std::uint64_t bytes) { seen.emplace_back(l, bytes); };
  }
};
const offheap::detail::StoreName& kName = offheap_test::store_name("journal test");
}  // namespace

TEST_CASE("a small journal maps one small chunk", "[journal]") {
  Journal j(JournalConfig{}, kName);
  CHECK(j.chunks() == 0);
  CHECK(j.mapped_bytes() == 0);
  Leftovers left;
  const Location l = j.append(64, left.fn());
  CHECK(l == Location::make(0, 0));
  CHECK(j.chunks() == 1);
  CHECK(j.chunk_size(0) == 64 * 1024);
  CHECK(j.mapped_bytes() == 64 * 1024);
  CHECK(j.append(64, left.fn()) == Location::make(0, 64));
  CHECK(j.used_bytes() == 128);
  CHECK(left.seen.empty());
}

TEST_CASE("the first chunk fits the first record, later chunks double", "[journal]") {
  JournalConfig c;
  c.max_chunk_bytes = std::uint64_t{1} << 22;  // 4 MiB
  Journal j(c, kName);
  Leftovers left;
  j.append(200 * 1024, left.fn());  // larger than min_chunk_bytes
  CHECK(j.chunk_size(0) == 200 * 1024);
  j.append(100 * 1024, left.fn());  // does not fit the rest: a new chunk
  CHECK(j.chunks() == 2);
  CHECK(j.chunk_size(1) == 400 * 1024);
  // The end of chunk 0 went to the leftover callback.
  REQUIRE(left.seen.size() == 0);  // 200 KiB chunk was exactly full
  j.append(1000, left.fn());
  j.append(400 * 1024, left.fn());  // chunk 1 has 300 KiB - 1000 left
  CHECK(j.chunks() == 3);
  CHECK(j.chunk_size(2) == 800 * 1024);
  REQUIRE(left.seen.size() == 1);
  CHECK(left.seen[0].first == Location::make(1, 100 * 1024 + 1000));
  CHECK(left.seen[0].second == 300 * 1024 - 1000);
  for (int i = 0; i < 6; ++i) j.append(3 << 20, left.fn());
  CHECK(j.chunk_size(j.chunks() - 1) == std::uint64_t{1} << 22);  // clamped at the maximum
}

TEST_CASE("a record larger than the largest chunk is refused, nothing changes", "[journal]") {
  JournalConfig c;
  c.max_chunk_bytes = 1 << 20;
  Journal j(c, kName);
  Leftovers left;
  j.append(64, left.fn());
  const std::uint64_t used = j.used_bytes();
  try {
    j.append((1 << 20) + 8, left.fn());
    FAIL("no exception");
  } catch (const Error& e) {
    CHECK(e.code() == Errc::value_too_large);
    CHECK(std::string(e.what()).find("1048584") != std::string::npos);
  }
  CHECK(j.used_bytes() == used);
  CHECK(j.chunks() == 1);
  CHECK(j.append(1 << 20, left.fn()) == Location::make(1, 0));  // exactly the maximum fits
}

TEST_CASE("resolve bounds-checks chunk and offset", "[journal]") {
  Journal j(JournalConfig{}, kName);
  Leftovers left;
  std::uint64_t avail = 0;
  CHECK(j.resolve(Location::make(0, 0), 32, avail) == nullptr);  // no chunk yet
  j.append(64, left.fn());
  CHECK(j.resolve(Location::make(0, 0), 32, avail) != nullptr);
  CHECK(avail == 64 * 1024);
  CHECK(j.resolve(Location::make(0, 64 * 1024 - 32), 32, avail) != nullptr);
  CHECK(j.resolve(Location::make(0, 64 * 1024 - 24), 32, avail) == nullptr);
  CHECK(j.resolve(Location::make(0, 64 * 1024), 32, avail) == nullptr);
  CHECK(j.resolve(Location::make(1, 0), 32, avail) == nullptr);
  CHECK(j.resolve(Location::make(65535, Location::kMaxOffset), 32, avail) == nullptr);
}

TEST_CASE("records past the 4 GiB mark of one sparse chunk", "[journal]") {
  // One 8 GiB chunk, mapped without reservation: pages cost memory only when
  // touched. Reserve past 4 GiB without writing, then write and read records
  // there through packed locations.
  JournalConfig c;
  c.min_chunk_bytes = std::uint64_t{8} << 30;
  c.max_chunk_bytes = std::uint64_t{8} << 30;
  Journal j(c, kName);
  Leftovers left;
  const Location first = j.append(64, left.fn());
  j.append((std::uint64_t{4} << 30) - 64 - 4096, left.fn());  // skip to 4 GiB - 4 KiB
  std::vector<Location> locs;
  std::vector<std::string> values;
  for (int i = 0; i < 300; ++i) {
    const std::string key = "key-" + std::to_string(i);
    const std::string value(static_cast<std::size_t>(i) * 7 % 300, static_cast<char>('a' + i % 26));
    const std::uint64_t need = record::payload_for(key.size(), value.size());
    const Location loc = j.append(record::kHeaderBytes + need, left.fn());
    record::write_live(j.at(loc), 2 * static_cast<std::uint64_t>(i + 1), key, value, 0, need, false);
    locs.push_back(loc);
    values.push_back(value);
  }
  CHECK(j.chunks() == 1);
  CHECK(locs.front().offset() < (std::uint64_t{1} << 32));
  CHECK(locs.back().offset() > (std::uint64_t{1} << 32));
  int past = 0;
  for (int i = 0; i < 300; ++i) {
    std::uint64_t avail = 0;
    const std::byte* rec = j.resolve(locs[static_cast<std::size_t>(i)], 32, avail);
    REQUIRE(rec != nullptr);
    const std::uint64_t s = record::read_stamp(rec);
    const record::Meta m = record::read_meta(rec);
    std::string out(m.value_len, '\0');
    record::copy_out(out.data(), rec, m.key_len, m.value_len);
    CHECK(record::validate(rec, s));
    CHECK(record::key_equals(rec, "key-" + std::to_string(i)));
    CHECK(out == values[static_cast<std::size_t>(i)]);
    past += locs[static_cast<std::size_t>(i)].offset() > (std::uint64_t{1} << 32);
  }
  CHECK(past > 250);
  CHECK(first == Location::make(0, 0));
}

TEST_CASE("reset keeps the chunks and starts over from chunk 0", "[journal]") {
  Journal j(JournalConfig{}, kName);
  Leftovers left;
  for (int i = 0; i < 100; ++i) j.append(4096, left.fn());
  const std::uint32_t chunks = j.chunks();
  CHECK(chunks >= 2);
  std::byte* p = j.at(Location::make(0, 0));
  p[0] = std::byte{0x5A};
  j.reset(false);
  CHECK(j.used_bytes() == 0);
  CHECK(p[0] == std::byte{0});  // pages handed back read as zeros
  CHECK(j.append(64, left.fn()) == Location::make(0, 0));
  for (int i = 0; i < 100; ++i) j.append(4096, left.fn());
  CHECK(j.chunks() == chunks);  // reused, not added
}
