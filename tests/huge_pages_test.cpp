// SPDX-License-Identifier: Apache-2.0
// Options::huge_pages: journal chunks and index tables of 4 MiB or more ask
// for transparent huge pages (madvise MADV_HUGEPAGE, which the kernel shows
// as the "hg" flag of the mapping in /proc/self/smaps) only when it is set.
#include <offheap/offheap.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

namespace {

/// Bytes of this process's mappings that carry the "hg" (MADV_HUGEPAGE) flag.
std::uint64_t hugepage_advised_bytes() {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  std::uint64_t size_kb = 0, total = 0;
  while (std::getline(smaps, line)) {
    if (line.rfind("Size:", 0) == 0) {
      std::istringstream(line.substr(5)) >> size_kb;
    } else if (line.rfind("VmFlags:", 0) == 0) {
      std::istringstream flags(line.substr(8));
      std::string f;
      while (flags >> f) {
        if (f == "hg") total += size_kb * 1024;
      }
    }
  }
  return total;
}

std::uint64_t advised_with(bool huge) {
  offheap::Options o;
  o.shards = 1;
  o.huge_pages = huge;
  o.min_chunk_bytes = std::uint64_t{8} << 20;  // the first chunk is past 4 MiB
  o.expected_entries = 1000000;                // and so is the index table
  offheap::Store s(o);
  s.put("k", "v");
  REQUIRE(s.get("k") == "v");
  return hugepage_advised_bytes();
}

}  // namespace

TEST_CASE("huge pages are asked for only with Options::huge_pages", "[store][memory]") {
  const std::uint64_t before = hugepage_advised_bytes();
  const std::uint64_t off = advised_with(false);
  const std::uint64_t on = advised_with(true);
  CHECK(off == before);
  // The 8 MiB chunk and the index table for a million entries (16 MiB),
  // where the kernel has transparent huge pages at all.
  if (std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled")) {
    CHECK(on >= before + (std::uint64_t{24} << 20));
  }
}
