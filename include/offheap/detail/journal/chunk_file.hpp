// SPDX-License-Identifier: Apache-2.0
// Making a journal chunk's file (format.hpp): created under a temporary
// name, reserved whole with posix_fallocate (so that no later store through
// the mapping can fail for lack of disk), given its header and an end word
// of no records, synced (sync_new_files), mapped, renamed to its chunk name,
// and the directory synced.
//
// Two makers, each under a temporary name of its own:
//  - the writer, adding the chunk an append needs now (ChunkFileUse::needed,
//    under the shard's lock): its rename replaces whatever the name holds,
//    which can only be a spare made for the same number (a chunk of the
//    journal is never made twice: numbers only grow);
//  - the maintenance thread or maintain(), making the next chunk ahead of
//    need (ChunkFileUse::spare, no lock held, one maker per shard at a
//    time; see Journal::make_spare): another temporary name, created
//    O_EXCL, and a rename that refuses to replace (RENAME_NOREPLACE) the
//    chunk the writer made meanwhile. Journal::keep_spare then refuses a
//    spare if the writer tried to make that chunk meanwhile (its failed
//    attempt may have replaced the spare's file, then removed its own). A spare on disk that the journal
//    never took holds no records (its end word says none): an open counts
//    it as an empty chunk, as one the writer made just before a crash.
// A temporary file a crash leaves is removed by the next open (store_files.hpp).
#pragma once

#include <offheap/detail/files/file.hpp>
#include <offheap/detail/files/format.hpp>
#include <offheap/detail/memory/memory_budget.hpp>
#include <offheap/detail/memory/os.hpp>
#include <offheap/error.hpp>

#include <fcntl.h>
#include <stdio.h>  // renameat2, RENAME_NOREPLACE
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace offheap::detail {

/// Where a file-backed store keeps its files.
struct FileBacking {
  int dir_fd = -1;
  std::string dir_path;
  std::uint64_t store_id = 0;
  bool read_only = false;
  bool sync_new_files = true;  // fdatasync a new chunk file and its directory entry
};

enum class ChunkFileUse { needed, spare };

/// Makes chunk `c` of `shard`'s file with `size` bytes of records (see the
/// top of this file) and returns the start of its mapping (the header page;
/// the records start format::kChunkHeaderBytes further). `end_salt`: the
/// chunk's end-word salt. Throws LimitReached when the store's budget
/// cannot take the mapping, Error(io_error) / Error(out_of_space) when the
/// OS refuses; a spare whose name a needed chunk took meanwhile throws
/// Error(io_error) too. Nothing is left behind by a throw but, for a spare
/// whose directory sync failed, the file under its chunk name (an empty
/// chunk to an open; the writer's own chunk replaces it).
inline std::byte* create_chunk_file(const FileBacking& f, std::uint32_t shard, std::uint32_t c, std::uint64_t size,
                                    std::uint64_t end_salt, const StoreName& store, ChunkFileUse use) {
  const std::string name = format::chunk_file_name(shard, c);
  const std::string tmp = name + (use == ChunkFileUse::spare ? ".spare.tmp" : ".tmp");
  const std::string path = f.dir_path + "/" + name;
  const std::uint64_t bytes = format::kChunkHeaderBytes + size;
  // Under Options::memory_limit_bytes: refused before any file work (the
  // mapping checks again, against other shards meanwhile).
  if (store.budget.available() < bytes) throw_limit_reached(store, bytes, "a journal chunk");
  // A spare's temporary name is its maker's alone (one maker per shard at
  // a time, Shard::make_spare_chunk): O_EXCL refuses a name that is not.
  Fd fd(open_at(f.dir_fd, tmp, O_RDWR | O_CREAT | (use == ChunkFileUse::spare ? O_EXCL : O_TRUNC)));
  if (!fd) throw_os(errno, store, "creating " + path);
  std::byte* map = nullptr;
  bool renamed = false;
  try {
    allocate_file(fd.get(), 0, bytes, store, path);
    format::ChunkHeader h{};
    std::memcpy(h.magic, format::kChunkMagic, 8);
    h.format_version = format::kFormatVersion;
    h.shard = shard;
    h.chunk = c;
    h.data_bytes = size;
    h.store_id = f.store_id;
    format::seal(h);
    write_at(fd.get(), &h, sizeof h, 0, store, path);
    const std::uint64_t end = format::end_word(0, end_salt);  // no records yet
    write_at(fd.get(), &end, sizeof end, format::kEndWordOffset, store, path);
    // A spare always: its name may reach the disk with any later sync of
    // the directory, and no sync of the journal's writes its header (it is
    // no chunk of the journal yet); off the writers' path, it costs them nothing.
    if (f.sync_new_files || use == ChunkFileUse::spare) sync_file(fd.get(), store, path);
    map = map_file(fd.get(), 0, bytes, true, true, store, path);
    const int r = use == ChunkFileUse::spare
                      ? ::renameat2(f.dir_fd, tmp.c_str(), f.dir_fd, name.c_str(), RENAME_NOREPLACE)
                      : ::renameat(f.dir_fd, tmp.c_str(), f.dir_fd, name.c_str());
    if (r != 0) throw_os(errno, store, "renaming " + f.dir_path + "/" + tmp + " to " + name);
    renamed = true;
    if (f.sync_new_files) sync_dir(f.dir_fd, store, f.dir_path);
  } catch (...) {
    if (map != nullptr) unmap(map, bytes, store);
    if (!renamed) {
      ::unlinkat(f.dir_fd, tmp.c_str(), 0);
    } else if (use == ChunkFileUse::needed) {
      // The file exists under its name but may not survive a power loss;
      // undo, so that the journal and the directory agree. (Not a spare:
      // the writer's chunk may have replaced it under that name already.)
      ::unlinkat(f.dir_fd, name.c_str(), 0);
    }
    throw;
  }
#if defined(MADV_HUGEPAGE)
  if (store.huge_pages && size >= (std::uint64_t{4} << 20)) ::madvise(map, bytes, MADV_HUGEPAGE);
#endif
  return map;
}

}  // namespace offheap::detail
