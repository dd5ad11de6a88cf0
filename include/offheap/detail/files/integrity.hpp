// SPDX-License-Identifier: Apache-2.0
// What a file-backed shard does with records it cannot trust: a file may be
// damaged after a clean close (the next open reads no record). Writers
// check every indexed record they follow (bounds and checksum) and drop a
// damaged one from the index, counted, leaving its bytes where they are;
// readers pass over damage they cannot attribute to a key (counted) and
// report a damaged record of the key they read (Errc::corrupt_file).
#pragma once

#include <offheap/detail/shard/shard.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace offheap::detail {

template <class P>
typename Shard<P>::Examined Shard<P>::met_damage() const noexcept {
  corrupt_.fetch_add(1, std::memory_order_relaxed);
  return Examined::other;
}

/// File-backed stores: whether an indexed record is whole and intact, so
/// that its header's lengths can be trusted (a file damaged after a clean
/// close is found here, or by a read). The writer's view: no write is in
/// progress.
template <class P>
bool Shard<P>::intact(Location loc, const std::byte* rec) const noexcept {
  if (loc.chunk() >= journal_.chunks() ||
      loc.offset() + record::kMinRecord > journal_.chunk_size(loc.chunk())) {
    return false;
  }
  const std::uint64_t stamp = load_relaxed(word_at(rec));
  const record::Meta m = record::read_meta(rec);
  return record::stamp_is_stable(stamp) && m.state() == record::State::live &&
         loc.offset() + record::kHeaderBytes + m.capacity() <= journal_.chunk_size(loc.chunk()) &&
         record::checksum_in_place(crc_seed_, rec, loc, stamp, m.encode(),
                                   journal_.chunk_size(loc.chunk()) - loc.offset()) == record::stored_checksum(rec);
}

template <class P>
[[gnu::noinline]] Index::Found Shard<P>::find_intact_durable(std::string_view key, std::uint64_t h) {
  Location damaged[8];
  unsigned n = 0;
  Index::Found f = index_.find(h, [&](Location loc) {
    if (loc.chunk() >= journal_.chunks()) {
      if (n < 8) damaged[n++] = loc;
      return false;
    }
    const std::byte* rec = journal_.at(loc);
    if (!intact(loc, rec)) {
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
    const Index::Found d = index_.find(h, [&](Location loc) { return loc == damaged[i]; });
    if (d.found) drop_damaged(d.slot);
  }
  return find_for_write(key, h);
}

/// Takes a damaged record out of the index, leaving its bytes where they
/// are (its lengths cannot be trusted to free it); counted in stats().
template <class P>
void Shard<P>::drop_damaged(std::uint64_t slot) noexcept {
  index_.erase(slot);
  records_.store(records_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
  corrupt_.fetch_add(1, std::memory_order_relaxed);
  if (durable_) journal_.set_records_hint(size());
}

template <class P>
[[noreturn, gnu::cold]] void Shard<P>::report_corrupt(Location loc) const {
  corrupt_.fetch_add(1, std::memory_order_relaxed);
  throw Error(Errc::corrupt_file,
              journal_.name() + ": the record at shard " + std::to_string(number_) + ", chunk " +
                  std::to_string(loc.chunk()) + ", offset " + std::to_string(loc.offset()) +
                  " fails its checksum: the file " + format::chunk_file_name(number_, loc.chunk()) +
                  " is damaged there");
}

}  // namespace offheap::detail
