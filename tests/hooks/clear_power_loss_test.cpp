// SPDX-License-Identifier: Apache-2.0
// Review reproduction (review11): a power loss after clear() in
// Durability::periodic can bring back a removal that a sync made durable.
//
// Durable state D: keys k50.. removed and sync()ed once, so that their dead
// markers (chunk 0) are on disk and their older records (later chunks) still
// read as live there (periodic frees them in memory at that sync, durably
// only at the next one). Then clear(). Nothing in reset() is msynced outside
// every_write, so the kernel may write back chunk 0's header page (end 0,
// clear mark already removed) before anything else of the clear reaches the
// disk (the other chunks' header pages, their zeroing). The image: D plus
// that one page. Recovery sees no mark, reads nothing of chunk 0 (the
// markers) and every record of the later chunks: the removed keys are back.
// "A durable removal stays removed" (README, Files and durability) fails.
#include <offheap/offheap.hpp>
#include <offheap/detail/files/format.hpp>

#include "support/clear_store.hpp"
#include "support/durable_image.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <cerrno>
#include <string>

namespace {

using offheap::Durability;
using offheap::Options;
using offheap::Store;
using namespace offheap_test::clear_store;

struct Images {
  offheap_test::FileImages durable;       // D: what the disk holds before clear()
  offheap_test::FileImages with_header0;  // D, what clear() msynced, chunk 0's header page as it left it
};

Images make_images(Durability d) {
  offheap_test::TempDir dir;
  const std::filesystem::path path = dir / "store";
  offheap_test::SyncRecorder rec;
  Images out;
  Store s(options(path, d));
  for (int i = 0; i < kFillers; ++i) s.put(filler(i), value_of(filler(i)));
  for (int i = 0; i < kKeys; ++i) s.put(key(i), value_of(key(i)));
  for (int i = 0; i < kFillers; ++i) s.remove(filler(i));
  for (int i = 0; i < 4; ++i) s.sync();
  // Nothing waits for a sync now: the page cache is what the disk holds.
  const offheap_test::FileImages baseline = offheap_test::read_dir_files(path);
  rec.reset();
  for (int i = kRemovedFrom; i < kKeys; ++i) s.remove(key(i));
  s.sync();  // the removals are durable (markers on disk)
  out.durable = rec.image(baseline, path);
  s.clear();  // (in periodic, nothing of it msynced)
  const offheap_test::FileImages now = offheap_test::read_dir_files(path);
  out.with_header0 = rec.image(baseline, path);  // D plus whatever clear() msynced
  const std::string c0 = offheap::detail::format::chunk_file_name(0, 0);
  out.with_header0[c0].replace(0, 4096, now.at(c0).substr(0, 4096));
  return out;
}

int resurrected(const offheap_test::FileImages& image, Durability d) {
  offheap_test::TempDir dir;
  const std::filesystem::path path = dir / "store";
  offheap_test::write_dir_files(path, image);
  Store s(options(path, d));
  int n = 0;
  for (int i = kRemovedFrom; i < kKeys; ++i) n += s.contains(key(i)) ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("review11: power loss after clear() keeps durable removals removed", "[clear][power]") {
  for (const Durability d : {Durability::periodic, Durability::every_write}) {
    INFO(offheap::to_string(d));
    const Images im = make_images(d);
    CHECK(resurrected(im.durable, d) == 0);       // control: the removals are durable
    CHECK(resurrected(im.with_header0, d) == 0);  // fails in periodic
  }
}

// Review reproduction (review11): reset()'s early returns on a failed msync
// (every_write) skip the tail/used reset at its end, so the journal still
// reports the old tail: verify() then walks the uncleared records against
// an empty index and reports damage that is not there; stats are stale.
TEST_CASE("review11: a failed msync inside clear() leaves the journal consistent", "[clear][power]") {
  offheap_test::TempDir dir;
  Store s(options(dir / "store", Durability::every_write));
  for (int i = 0; i < kKeys; ++i) s.put(key(i), value_of(key(i)));
  offheap::detail::testing_fail_syncs().store(EIO);
  s.clear();
  offheap::detail::testing_fail_syncs().store(0);
  CHECK(s.size() == 0);
  CHECK(s.stats().journal_bytes == 0);
  CHECK(s.verify() == "");
}
