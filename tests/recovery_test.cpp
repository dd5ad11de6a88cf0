// SPDX-License-Identifier: Apache-2.0
// Recovery keeps removals removed. A removal in Durability::periodic leaves
// a dead marker (the key's last record, turned dead with a new stamp) that
// outranks the key's older records until they are freed for good; recovery
// must neither turn that marker live again nor free it before the older
// records' frees are on disk, whatever mode the store is reopened in.
// Durability is observed through the ranges the library msyncs
// (support/durable_image.hpp), not read back from the page cache.
#include <offheap/offheap.hpp>
#include <offheap/detail/journal/crc32c.hpp>
#include <offheap/detail/files/format.hpp>
#include <offheap/detail/journal/record.hpp>

#include "support/chunk_walk.hpp"
#include "support/durable_image.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <csignal>
#include <cstring>
#include <iterator>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

namespace fs = std::filesystem;
using offheap::Durability;
using offheap_test::FileImages;
using offheap_test::SyncRecorder;
using offheap_test::TempDir;

namespace {

namespace rec = offheap::detail::record;
namespace fmt = offheap::detail::format;

offheap::Options opts(const fs::path& dir, Durability d) {
  offheap::Options o;
  o.path = dir;
  o.shards = 1;
  o.durability = d;
  o.background_maintenance = false;
  o.min_chunk_bytes = 16 * 1024;
  return o;
}

void copy_dir(const fs::path& from, const fs::path& to) {
  offheap_test::write_dir_files(to, offheap_test::read_dir_files(from));
}

std::uint64_t u64_at(const std::string& bytes, std::size_t off) {
  std::uint64_t w;
  std::memcpy(&w, bytes.data() + off, 8);
  return w;
}

}  // namespace

TEST_CASE("recovery that gives a gap to a dead marker keeps it dead", "[files][recovery]") {
  TempDir tmp;
  const fs::path dir = tmp / "store", crash1 = tmp / "crash1", crash2 = tmp / "crash2";
  // 'w' = 0x77: odd, never read as a stamp where the marker is shortened.
  const std::string victim = "victim-whose-key-is-long-enough-to-shorten";
  const std::string victim_value(64, 'w');
  {
    offheap::Store s(opts(dir, Durability::periodic));
    s.put(victim, victim_value);
    s.put("next", std::string(64, 'n'));
    s.sync();
    REQUIRE(s.remove(victim));  // the removal's dead marker
    s.put("after", std::string(64, 'a'));  // a record after the marker
    s.sync();                               // the marker is on disk, not yet freed
    copy_dir(dir, crash1);                  // a crash now: what the page cache holds
  }
  // Damage (as a torn neighbour would) that leaves a 16-byte gap after the
  // marker: its value (or, if it holds none, its key) shortened by 16
  // bytes, its checksum made to match.
  FileImages files = offheap_test::read_dir_files(crash1);
  std::string& chunk = files.at(fmt::chunk_file_name(0, 0));
  const auto walked = offheap_test::chunk_walk::walk(chunk, fmt::chunk_file_name(0, 0));
  const offheap_test::chunk_walk::Record* marker = nullptr;
  for (const auto& r : walked.records) {
    if (r.state() == offheap_test::chunk_walk::State::dead) marker = &r;
  }
  REQUIRE(marker != nullptr);
  REQUIRE(marker->key_len == victim.size());
  const std::size_t at = marker->file_offset;
  const std::uint64_t stamp = u64_at(chunk, at);
  rec::Meta m = rec::Meta::decode(u64_at(chunk, at + 8));
  std::string key = victim;
  std::string value(chunk.data() + at + 24 + m.key_len, m.value_len);
  const std::uint64_t before = rec::payload_for(m.key_len, m.value_len);
  if (m.value_len >= 16) {
    value.resize(m.value_len - 16);
    m.value_len -= 16;
  } else {
    key.resize(key.size() - 16);
    m.key_len = static_cast<std::uint16_t>(key.size());
  }
  REQUIRE(before - rec::payload_for(m.key_len, m.value_len) == 16);
  std::memset(chunk.data() + at + 24 + rec::payload_for(m.key_len, m.value_len), 'w', 16);
  const std::uint64_t store_id = u64_at(files.at("meta"), offsetof(fmt::Meta, store_id));
  const std::uint64_t seed_words[2] = {store_id, 0};
  const std::uint32_t seed = offheap::detail::crc32c(seed_words, sizeof seed_words);
  const std::uint32_t crc = rec::checksum_of(
      seed, stamp, m.encode(), offheap::detail::Location::make(0, marker->offset), key, value);
  const std::uint64_t w1 = m.encode();
  std::memcpy(chunk.data() + at + 8, &w1, 8);
  std::memcpy(chunk.data() + at + 16, &crc, 4);
  offheap_test::write_dir_files(crash1, files);

  {
    offheap::Store s(opts(crash1, Durability::periodic));  // recovery takes the gap as slack
    CHECK(s.stats().rebuilt);
    CHECK_FALSE(s.contains(victim));
    CHECK_FALSE(s.contains(key));
    CHECK(s.get("next") == std::string(64, 'n'));
    CHECK(s.get("after") == std::string(64, 'a'));
    copy_dir(crash1, crash2);  // and crashes again before any sync
  }
  offheap::Options ro = opts(crash2, Durability::periodic);
  ro.read_only = true;
  offheap::Store again(ro);
  CHECK(again.get(victim) == std::nullopt);
  CHECK(again.get(key) == std::nullopt);  // the (shortened) marker's key: never written
  CHECK(again.get("next") == std::string(64, 'n'));
  CHECK(again.get("after") == std::string(64, 'a'));
}

TEST_CASE("a durable removal stays removed when a periodic store is reopened in another mode",
          "[files][recovery]") {
  for (const Durability reopen : {Durability::on_close, Durability::none, Durability::every_write}) {
    INFO("reopened in " << offheap::to_string(reopen));
    TempDir tmp;
    const fs::path dir = tmp / "store", crash = tmp / "crash";
    const std::string v1(3000, '1'), v2(3000, '2');
    {
      offheap::Store s(opts(dir, Durability::periodic));
      s.put("filler-0", "x");
      s.close();  // everything durable: the baseline
    }
    const FileImages baseline = offheap_test::read_dir_files(dir);
    FileImages durable;  // what the disk holds when the first life is killed
    {
      SyncRecorder recorder;
      offheap::Store s(opts(dir, Durability::periodic));
      s.put("victim", v1);                     // R1
      s.put("filler", std::string(5000, 'f'));  // R1 and R2 on other pages
      s.sync();                                 // R1 durable
      s.put("victim", v2);                     // R2; R1 waits for a sync to be freed
      REQUIRE(s.remove("victim"));              // R2 turns dead: the marker
      s.sync();  // marker durable; then R1 is freed, in memory only
      copy_dir(dir, crash);  // killed now: the page cache is what a reopen sees
      durable = recorder.image(baseline, dir);
      durable["meta"] = offheap_test::read_dir_files(dir).at("meta");  // replaced durably at open
      durable.erase(fmt::state_file_name(0));
    }
    // The older record's page as the disk has it: R1 still live there.
    const std::string chunk_name = fmt::chunk_file_name(0, 0);
    const std::size_t r1_page_lo = 0, r1_page_hi = 2 * 4096;  // header page + R1's first page
    REQUIRE(durable.at(chunk_name).find(v1.substr(0, 64)) != std::string::npos);

    // Reopen after the kill in another mode, then lose power before any sync:
    // the disk holds what was durable, what the reopen msynced, and any other
    // page the OS chose to write back, but not R1's page unless msynced.
    SyncRecorder recorder;
    {
      offheap::Store s(opts(crash, reopen));
      CHECK_FALSE(s.contains("victim"));
      FileImages image = recorder.image(durable, crash);
      const FileImages now = offheap_test::read_dir_files(crash);
      image["meta"] = now.at("meta");
      std::string& chunk = image.at(chunk_name);
      const std::string& cached = now.at(chunk_name);
      for (std::size_t page = r1_page_hi; page < cached.size(); page += 4096) {
        chunk.replace(page, std::min<std::size_t>(4096, cached.size() - page), cached, page,
                      std::min<std::size_t>(4096, cached.size() - page));
      }
      (void)r1_page_lo;
      offheap_test::write_dir_files(tmp / "power-cut", image);
    }
    offheap::Options ro = opts(tmp / "power-cut", reopen);
    ro.read_only = true;
    offheap::Store after(ro);
    CHECK(after.get("victim") == std::nullopt);
    CHECK(after.get("filler") == std::string(5000, 'f'));
  }
}

namespace {

std::string u64s(std::uint64_t w) { return std::string(reinterpret_cast<const char*>(&w), 8); }

/// The bytes of a free-record header of `capacity` with no links, as a
/// writer who controls a value would shape it.
std::string fake_free_header(std::uint64_t capacity) {
  const rec::Meta m{static_cast<std::uint32_t>(capacity), 0,
                    rec::Meta::make_flags(rec::State::free, 0, false, 0), 0};
  return u64s(2) + u64s(m.encode()) + u64s(0) + u64s(~0ull) + u64s(~0ull);
}

}  // namespace

TEST_CASE("recovery never lets a free header inside a value hide the records after it",
          "[files][recovery]") {
  // A crash inside remove(A) right after its stamp went odd: recovery steps
  // over A 8 bytes at a time. A's value carries a free-record header whose
  // footer lies in B's value, written after five victims.
  TempDir tmp;
  const fs::path dir = tmp / "store", crash = tmp / "crash";
  offheap::Options o = opts(dir, Durability::on_close);
  o.min_chunk_bytes = 64 * 1024;
  const std::uint64_t cover = 776;  // from inside A's value to inside B's
  {
    offheap::Store s(o);
    std::string va(64, 'q');  // A: chunk offset 0, value at 32
    va.replace(0, 40, fake_free_header(cover));
    s.put("attacker", va);
    for (int i = 0; i < 5; ++i) s.put("victim-" + std::to_string(i), std::string(100, 'v'));
    std::string vb(64, 'q');  // B: offset 776, value at 808; the fake footer at 824
    vb.replace(16, 8, u64s(cover << 1 | 1));
    s.put("attackeB", vb);
    s.sync();
    copy_dir(dir, crash);
  }
  FileImages files = offheap_test::read_dir_files(crash);
  std::string& chunk = files.at(fmt::chunk_file_name(0, 0));
  const std::uint64_t odd = u64_at(chunk, fmt::kChunkHeaderBytes) + 1;
  std::memcpy(chunk.data() + fmt::kChunkHeaderBytes, &odd, 8);
  offheap_test::write_dir_files(crash, files);
  o.path = crash;
  offheap::Store s(o);
  for (int i = 0; i < 5; ++i) CHECK(s.get("victim-" + std::to_string(i)) == std::string(100, 'v'));
  CHECK(s.contains("attackeB"));
  CHECK(s.verify().empty());
}

TEST_CASE("every_write: a power loss right after a removal keeps every other record",
          "[files][recovery]") {
  // remove(X) merges X into the free record before it and syncs X's pages;
  // on disk X's header keeps its own capacity while the merged footer ends
  // it: recovery steps through X's old value, which carries a free header
  // whose footer lies in B's value, beyond five durable victims.
  TempDir tmp;
  const fs::path dir = tmp / "store", img = tmp / "image";
  offheap::Options o = opts(dir, Durability::every_write);
  o.min_chunk_bytes = 64 * 1024;
  const std::uint64_t cover = 896;
  FileImages image;
  {
    offheap::Store s(o);
    s.put("pppppppp", std::string(5000, 'p'));  // [0, 5032)
    std::string vx(200, 'x');                   // X: [5032, 5264), value at 5064
    vx.replace(16, 40, fake_free_header(cover));  // at 5080
    s.put("xxxxxxxx", vx);
    for (int i = 0; i < 5; ++i) s.put("victim-" + std::to_string(i), std::string(100, 'v'));
    std::string vb(64, 'q');  // B: [5944, 6040), value at 5976: the footer at 5992
    vb.replace(16, 8, u64s(cover << 1 | 1));
    s.put("bbbbbbbb", vb);
    s.sync();
    const FileImages baseline = offheap_test::read_dir_files(dir);
    SyncRecorder recorder;
    REQUIRE(s.remove("pppppppp"));
    REQUIRE(s.remove("xxxxxxxx"));  // merges into P's free record
    image = recorder.image(baseline, dir);  // the power goes now
  }
  offheap_test::write_dir_files(img, image);
  o.path = img;
  offheap::Store s(o);
  for (int i = 0; i < 5; ++i) CHECK(s.get("victim-" + std::to_string(i)) == std::string(100, 'v'));
  CHECK(s.contains("bbbbbbbb"));
  CHECK_FALSE(s.contains("xxxxxxxx"));
  CHECK_FALSE(s.contains("pppppppp"));
}

TEST_CASE("every_write: recovery frees an older record only once the newer one is on disk",
          "[files][recovery]") {
  // K = v1 is on disk. A child is killed as put(K, v2) starts its msync:
  // v2 is whole in the page cache, not on disk. The reopen takes v2 and
  // frees v1; a power loss then (the kernel may have written v1's freed
  // page back, not v2's) must still find one of them.
  TempDir tmp;
  const fs::path dir = tmp / "store", img = tmp / "image";
  offheap::Options o = opts(dir, Durability::every_write);
  o.min_chunk_bytes = 64 * 1024;
  {
    offheap::Store s(o);
    s.put("K", std::string(5000, '1'));    // v1: chunk pages 0 and 1
    s.put("pad", std::string(4000, '.'));  // v2 starts on another page
  }  // a clean close: everything durable
  const FileImages baseline = offheap_test::read_dir_files(dir);
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    offheap::Store s(o);
    offheap::detail::testing_sync_observer().store([](const void*, std::uint64_t, bool done) {
      if (!done) ::raise(SIGKILL);
    });
    s.put("K", std::string(5000, '2'));
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(WIFSIGNALED(status));
  // On disk: the baseline, with the meta the child's open wrote durably.
  FileImages durable = baseline;
  const FileImages after_kill = offheap_test::read_dir_files(dir);
  durable["meta"] = after_kill.at("meta");
  for (auto it = durable.begin(); it != durable.end();) {
    it = after_kill.count(it->first) == 0 ? durable.erase(it) : std::next(it);
  }
  {
    SyncRecorder recorder;
    offheap::Store s(o);  // recovery: v2 wins
    CHECK(s.get("K") == std::string(5000, '2'));
    FileImages image = recorder.image(durable, dir);
    // The kernel wrote back the page that holds v1's header (now free).
    const std::string chunk = fmt::chunk_file_name(0, 0);
    const FileImages now = offheap_test::read_dir_files(dir);
    image[chunk].replace(fmt::kChunkHeaderBytes, 4096, now.at(chunk), fmt::kChunkHeaderBytes, 4096);
    image["meta"] = now.at("meta");
    offheap_test::write_dir_files(img, image);
  }
  o.path = img;
  offheap::Store s(o);
  const auto k = s.get("K");
  CHECK((k == std::string(5000, '1') || k == std::string(5000, '2')));
}

TEST_CASE("periodic: a crash inside a removal's marker write never brings back an older value",
          "[files][recovery]") {
  // put(K, v1), put(K, v2): both acknowledged; v1 stays on disk until a
  // sync. Then remove(K), and a crash inside its marker's write: the
  // marker's stamp odd. Recovery must find v2 (the removal did not
  // complete), never v1.
  TempDir tmp;
  const fs::path dir = tmp / "store", crash = tmp / "crash";
  {
    offheap::Store s(opts(dir, Durability::periodic));
    s.put("K", std::string(100, '1'));
    s.put("K", std::string(100, '2'));
    REQUIRE(s.remove("K"));
    copy_dir(dir, crash);
  }
  FileImages files = offheap_test::read_dir_files(crash);
  std::string& chunk = files.at(fmt::chunk_file_name(0, 0));
  const auto walked = offheap_test::chunk_walk::walk(chunk, fmt::chunk_file_name(0, 0));
  std::size_t torn = 0;
  for (const auto& r : walked.records) {
    if (r.state() != offheap_test::chunk_walk::State::dead) continue;
    const std::uint64_t odd = r.stamp - 1;  // as begin_write leaves it
    std::memcpy(chunk.data() + r.file_offset, &odd, 8);
    ++torn;
  }
  REQUIRE(torn == 1);
  offheap_test::write_dir_files(crash, files);
  offheap::Store s(opts(crash, Durability::periodic));
  const auto k = s.get("K");
  CHECK((k == std::nullopt || k == std::string(100, '2')));
  CHECK(k != std::string(100, '1'));
}
