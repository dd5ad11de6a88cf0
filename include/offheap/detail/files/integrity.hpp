// SPDX-License-Identifier: Apache-2.0
// What a file-backed shard does with records it cannot trust: a file may be
// damaged after a clean close (the next open reads no record). Writers
// check every indexed record they follow (bounds and checksum) and drop a
// damaged one from the index, counted, leaving its bytes where they are;
// readers pass over damage they cannot attribute to a key (counted) and
// report a damaged record of the key they read (Errc::corrupt_file).
#pragma once

#include <offheap/detail/index/index.hpp>
#include <offheap/detail/journal/record.hpp>
#include <offheap/detail/files/format.hpp>
#include <offheap/error.hpp>

#include <atomic>
#include <string>
#include <string_view>

namespace offheap::detail {

/// What a file-backed shard (S, which lets it in and forwards to it) does
/// with records it cannot trust; no state of its own (the damage counters
/// are the shard's).
template <class S>
class ShardIntegrity {
 public:
  static typename S::Examined met_damage(const S& sh) noexcept;
  static bool intact(const S& sh, Location loc, const std::byte* rec) noexcept;
  [[gnu::noinline]] static Index::Found find_intact_durable(S& sh, std::string_view key, std::uint64_t h);
  static void drop_damaged(S& sh, std::uint64_t slot) noexcept;
  [[noreturn, gnu::cold]] static void report_corrupt(const S& sh, Location loc);
};

template <class S>
typename S::Examined ShardIntegrity<S>::met_damage(const S& sh) noexcept {
  sh.corrupt_.fetch_add(1, std::memory_order_relaxed);
  return S::Examined::other;
}

/// File-backed stores: whether an indexed record is whole and intact, so
/// that its header's lengths can be trusted (a file damaged after a clean
/// close is found here, or by a read). The writer's view: no write is in
/// progress.
template <class S>
bool ShardIntegrity<S>::intact(const S& sh, Location loc, const std::byte* rec) noexcept {
  if (loc.chunk() >= sh.journal_.chunks() ||
      loc.offset() + record::kMinRecord > sh.journal_.chunk_size(loc.chunk())) {
    return false;
  }
  const std::uint64_t stamp = load_relaxed(word_at(rec));
  const record::Meta m = record::read_meta(rec);
  return record::stamp_is_stable(stamp) && m.state() == record::State::live &&
         loc.offset() + record::kHeaderBytes + m.capacity() <= sh.journal_.chunk_size(loc.chunk()) &&
         record::checksum_in_place(sh.crc_seed_, rec, loc, stamp, m.encode(),
                                   sh.journal_.chunk_size(loc.chunk()) - loc.offset()) == record::stored_checksum(rec);
}

template <class S>
[[gnu::noinline]] Index::Found ShardIntegrity<S>::find_intact_durable(S& sh, std::string_view key, std::uint64_t h) {
  Location damaged[8];
  unsigned n = 0;
  Index::Found f = sh.index_.find(h, [&](Location loc) {
    if (loc.chunk() >= sh.journal_.chunks()) {
      if (n < 8) damaged[n++] = loc;
      return false;
    }
    const std::byte* rec = sh.journal_.at(loc);
    if (!intact(sh, loc, rec)) {
      if (n < 8) damaged[n++] = loc;
      return false;
    }
    const record::Meta m = record::read_meta(rec);
    return m.key_len == key.size() &&
           equal_bytes(reinterpret_cast<const char*>(rec + record::kHeaderBytes), key.data(),
                       key.size());
  });
  if (n == 0) return f;
  for (unsigned i = 0; i < n; ++i) {
    const Index::Found d = sh.index_.find(h, [&](Location loc) { return loc == damaged[i]; });
    if (d.found) drop_damaged(sh, d.slot);
  }
  return sh.find_for_write(key, h);
}

/// Takes a damaged record out of the index, leaving its bytes where they
/// are (its lengths cannot be trusted to free it); counted in stats().
template <class S>
void ShardIntegrity<S>::drop_damaged(S& sh, std::uint64_t slot) noexcept {
  sh.index_.erase(slot);
  sh.records_.store(sh.records_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
  sh.corrupt_.fetch_add(1, std::memory_order_relaxed);
  if (sh.durable_) sh.journal_.set_records_hint(sh.size());
}

template <class S>
[[noreturn, gnu::cold]] void ShardIntegrity<S>::report_corrupt(const S& sh, Location loc) {
  sh.corrupt_.fetch_add(1, std::memory_order_relaxed);
  throw Error(Errc::corrupt_file,
              sh.journal_.name() + ": the record at shard " + std::to_string(sh.number_) + ", chunk " +
                  std::to_string(loc.chunk()) + ", offset " + std::to_string(loc.offset()) +
                  " fails its checksum: the file " + format::chunk_file_name(sh.number_, loc.chunk()) +
                  " is damaged there");
}

}  // namespace offheap::detail
