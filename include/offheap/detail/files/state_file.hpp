// SPDX-License-Identifier: Apache-2.0
// A shard's state file (format.hpp's StateHeader, then the free-list table
// and the index table, page-aligned): written at a clean close, so that the
// next open maps the saved index (copy on write) instead of scanning every
// record. Trust is the trade-off: a clean open reads no record, so what the
// file says is checked before it is used (header checksum, agreement with
// the chunks, a 64-bit checksum of both tables, every control byte and
// count of the index), and anything that fails a check sends the open to a
// rebuild (recovery.hpp). Records and free records in the chunks are not
// read here: writers check each one they follow (free_lists.hpp,
// Shard::release).
#pragma once

#include <offheap/detail/files/file.hpp>
#include <offheap/detail/files/format.hpp>
#include <offheap/detail/journal/crc32c.hpp>
#include <offheap/detail/index/index.hpp>
#include <offheap/detail/journal/free_lists.hpp>

namespace offheap::detail {

/// A shard's state file, saved at a clean close and loaded at the next open
/// (S: the shard, which lets it in and forwards to it); no state of its own.
template <class S>
class ShardStateFile {
 public:
  static void save_state(S& sh, std::uint64_t generation);
  static bool load_state(S& sh, std::uint64_t generation, std::string& why);
  static std::uint64_t body_hash(const std::uint64_t* free_table, const std::uint64_t* index_head, const std::uint64_t* slots, std::uint64_t slot_words) noexcept;
};

/// Writes this shard's state file for a clean close at `generation`:
/// counters, the free-list table and the index table. Durable once the
/// caller syncs the directory. Requires: no writer is active.
template <class S>
void ShardStateFile<S>::save_state(S& sh, std::uint64_t generation) {
  const FileBacking& f = *sh.journal_.files();
  const StoreName& store = sh.journal_.store_name();
  // A migration under way ends first (the rest of it at once): the file
  // holds one table, as before migrations (its format is unchanged).
  sh.finish_index_migration();
  const IndexTable* t = sh.index_.table();
  const std::uint64_t page = page_size();
  format::StateHeader h{};
  std::memcpy(h.magic, format::kStateMagic, 8);
  h.format_version = format::kFormatVersion;
  h.shard = sh.number_;
  h.store_id = f.store_id;
  h.generation = generation;
  h.chunks = sh.journal_.chunks();
  h.tail_chunk = sh.journal_.tail_chunk();
  h.tail_offset = sh.journal_.tail_offset();
  h.stamp = sh.stamp_;
  h.records = sh.size();
  h.key_value_bytes = sh.key_value_bytes_;
  h.live_bytes = sh.live_bytes_;
  h.puts = sh.puts_;
  h.removes = sh.removes_;
  h.flags = sh.expiry_.had_deadlines() ? format::kStateDeadlines : 0;
  h.free_records = sh.free_.total_records();
  h.free_bytes = sh.free_.total_bytes();
  h.index_capacity = t->capacity();
  h.index_full = sh.index_.size();
  h.index_tombstones = sh.index_.tombstones();
  h.free_table_offset = round_up(sizeof h, page);
  h.free_table_bytes = FreeLists::table_size();
  h.index_offset = round_up(h.free_table_offset + h.free_table_bytes, page);
  h.index_bytes = t->mapped_bytes;
  IndexTable head = *t;  // as a clean open finds it: no retirement links
  head.next_retired = nullptr;
  head.retire_tag = 0;
  head.from_file = 0;
  const auto* slots = reinterpret_cast<const std::uint64_t*>(t + 1);
  const std::uint64_t slot_words = (t->mapped_bytes - sizeof(IndexTable)) / 8;
  h.body_hash = body_hash(static_cast<const std::uint64_t*>(sh.free_.table_bytes()),
                          reinterpret_cast<const std::uint64_t*>(&head), slots, slot_words);
  format::seal(h);

  const std::string name = format::state_file_name(sh.number_);
  const std::string tmp = name + ".tmp";
  const std::string path = f.dir_path + "/" + tmp;
  Fd fd(open_at(f.dir_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC));
  if (!fd) throw_os(errno, store, "creating " + path);
  try {
    write_at(fd.get(), &h, sizeof h, 0, store, path);
    write_at(fd.get(), sh.free_.table_bytes(), h.free_table_bytes, h.free_table_offset, store, path);
    write_at(fd.get(), &head, sizeof head, h.index_offset, store, path);
    write_at(fd.get(), slots, slot_words * 8, h.index_offset + sizeof head, store, path);
    sync_file(fd.get(), store, path);
    if (::renameat(f.dir_fd, tmp.c_str(), f.dir_fd, name.c_str()) != 0) {
      throw_os(errno, store, "renaming " + path + " to " + name);
    }
  } catch (...) {
    ::unlinkat(f.dir_fd, tmp.c_str(), 0);
    throw;
  }
}

/// A clean open: adopts the state file a clean close at `generation`
/// wrote, mapping its index table (copy on write) instead of scanning the
/// records. Returns false, with the shard unchanged and `why` set, if the
/// file is missing or anything in it fails a check (the caller then
/// rebuilds). Requires: chunks attached, no other thread in the shard.
template <class S>
bool ShardStateFile<S>::load_state(S& sh, std::uint64_t generation, std::string& why) {
  const FileBacking& f = *sh.journal_.files();
  const StoreName& store = sh.journal_.store_name();
  const std::string name = format::state_file_name(sh.number_);
  const std::string path = f.dir_path + "/" + name;
  if (sh.journal_.clear_marked()) {  // never after a clean close but in a damaged store
    why = "a clear() of shard " + std::to_string(sh.number_) + " was cut short";
    return false;
  }
  Fd fd(open_at(f.dir_fd, name, O_RDONLY));
  if (!fd) {
    why = path + " is missing";
    return false;
  }
  const std::uint64_t size = file_size(fd.get(), store, path);
  format::StateHeader h{};
  if (read_at(fd.get(), &h, sizeof h, 0, store, path) != sizeof h ||
      std::memcmp(h.magic, format::kStateMagic, 8) != 0 ||
      h.format_version != format::kFormatVersion || format::header_checksum(h) != h.checksum) {
    why = path + " has no valid header";
    return false;
  }
  const std::uint64_t page = page_size();
  const std::uint64_t cap = h.index_capacity;
  const bool tail_ok =
      h.tail_chunk < sh.journal_.chunks()
          ? h.tail_offset <= sh.journal_.chunk_size(static_cast<std::uint32_t>(h.tail_chunk)) &&
                format::end_of(sh.journal_.end_word(static_cast<std::uint32_t>(h.tail_chunk))) ==
                    h.tail_offset
          : h.tail_chunk == sh.journal_.chunks() && h.tail_offset == 0;
  if (h.shard != sh.number_ || h.store_id != f.store_id || h.generation != generation ||
      h.chunks != sh.journal_.chunks() || !tail_ok || h.tail_offset % 8 != 0 ||
      h.stamp % 2 != 0 || h.records != h.index_full || cap % IndexTable::kSlotsPerGroup != 0 ||
      cap / IndexTable::kSlotsPerGroup > (std::uint64_t{1} << 40) ||
      !std::has_single_bit(cap / IndexTable::kSlotsPerGroup) ||
      h.index_full + h.index_tombstones > Index::limit_of(cap) ||
      h.free_table_offset < sizeof h || h.free_table_offset % page != 0 ||
      h.free_table_bytes != FreeLists::table_size() || h.free_table_offset > size ||
      h.index_offset < h.free_table_offset || h.index_offset - h.free_table_offset < h.free_table_bytes ||
      h.index_offset % page != 0 || h.index_bytes != IndexTable::bytes_for(cap / IndexTable::kSlotsPerGroup) ||
      h.index_offset > size || size - h.index_offset < h.index_bytes) {
    // (Each bound compared without a sum that could wrap: the header's
    // checksum proves it unbroken, not well made.)
    why = path + " does not match the store's chunks or is damaged";
    return false;
  }
  std::vector<std::uint64_t> table(h.free_table_bytes / 8);
  if (read_at(fd.get(), table.data(), h.free_table_bytes, h.free_table_offset, store, path) !=
      h.free_table_bytes) {
    why = path + " is truncated";
    return false;
  }
  sh.index_.drop_unpublished_spares();  // adopt() keeps one again
  std::byte* map = map_file(fd.get(), h.index_offset, h.index_bytes, true, false, store, path);
  auto* t = reinterpret_cast<IndexTable*>(map);
  const auto* slots = reinterpret_cast<const std::uint64_t*>(t + 1);
  if (t->capacity() != cap || t->mapped_bytes != h.index_bytes ||
      body_hash(table.data(), reinterpret_cast<const std::uint64_t*>(t), slots,
                (h.index_bytes - sizeof(IndexTable)) / 8) != h.body_hash) {
    unmap(map, h.index_bytes, store);
    why = path + " fails its checksum";
    return false;
  }
  // Every probe ends at a group with an empty slot: the control bytes must
  // be what a table can hold, with the counts the header gives (which
  // leave empty slots).
  if (!Index::control_bytes_sound(t, h.index_full, h.index_tombstones)) {
    unmap(map, h.index_bytes, store);
    why = path + " holds an index whose control bytes disagree with its counts";
    return false;
  }
  t->next_retired = nullptr;
  t->retire_tag = 0;
  t->from_file = 1;  // replaced: zero_pages() over it, not MADV_DONTNEED (index.hpp)
  // Emptied chunks (compaction.hpp): before the tail, over the layout
  // compaction leaves; a mark anywhere else is damage (a rebuild trusts
  // none of it either).
  for (std::uint32_t c = 0; c < sh.journal_.chunks(); ++c) {
    if (sh.journal_.emptied(c) && (c >= h.tail_chunk || !sh.journal_.emptied_layout(c))) {
      unmap(map, h.index_bytes, store);
      why = path + " goes with a chunk marked emptied that is not (chunk " + std::to_string(c) + ")";
      return false;
    }
  }
  const std::uint64_t old_records = sh.free_.total_records(), old_bytes = sh.free_.total_bytes();
  std::vector<std::uint64_t> old_table(table.size());
  std::memcpy(old_table.data(), sh.free_.table_bytes(), h.free_table_bytes);
  sh.free_.load(table.data(), h.free_records, h.free_bytes);
  if (!sh.free_.heads_in_bounds()) {
    sh.free_.load(old_table.data(), old_records, old_bytes);
    unmap(map, h.index_bytes, store);
    why = path + " holds free-list heads outside the chunks";
    return false;
  }
  // From here on the state is adopted.
  sh.index_.adopt(t, h.index_full, h.index_tombstones);
  std::uint64_t used = h.tail_offset;
  for (std::uint32_t c = 0; c < h.tail_chunk && c < sh.journal_.chunks(); ++c) used += sh.journal_.chunk_size(c);
  sh.journal_.set_tail(static_cast<std::uint32_t>(h.tail_chunk), h.tail_offset, used);
  sh.stamp_ = h.stamp;
  sh.durability_.wrote_live(h.stamp);
  sh.records_.store(h.records, std::memory_order_relaxed);
  sh.key_value_bytes_ = h.key_value_bytes;
  sh.live_bytes_ = h.live_bytes;
  sh.puts_ = h.puts;
  sh.removes_ = h.removes;
  sh.expiry_.set_had_deadlines((h.flags & format::kStateDeadlines) != 0);
  return true;
}

template <class S>
std::uint64_t ShardStateFile<S>::body_hash(const std::uint64_t* free_table, const std::uint64_t* index_head,
                               const std::uint64_t* slots, std::uint64_t slot_words) noexcept {
  const std::uint64_t a = format::hash64(free_table, FreeLists::table_size() / 8);
  const std::uint64_t b = format::hash64(index_head, sizeof(IndexTable) / 8);
  const std::uint64_t c = format::hash64(slots, slot_words);
  return mix64(a ^ mix64(b ^ mix64(c)));
}

}  // namespace offheap::detail
