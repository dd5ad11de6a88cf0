// SPDX-License-Identifier: Apache-2.0
// A file-backed store's directory: finding or creating it, its lock, its
// meta file, and the inventory of its chunk files (format.hpp). What the
// shards do with their files is in journal.hpp (chunks) and shard.hpp
// (state files, recovery).
#pragma once

#include <offheap/detail/files/file.hpp>
#include <offheap/detail/files/format.hpp>
#include <offheap/detail/journal/journal.hpp>
#include <offheap/detail/index/location.hpp>
#include <offheap/detail/memory/os.hpp>
#include <offheap/error.hpp>
#include <offheap/options.hpp>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <sys/file.h>
#include <sys/stat.h>

namespace offheap::detail {

struct StoreFiles {
  std::string path;
  Fd dir;  // open for the store's lifetime: it carries the flock
  FileBacking backing;
  format::Meta meta{};
  bool read_only = false;
  bool created = false;
  std::vector<std::uint32_t> chunk_counts;  // per shard
  std::atomic<int> sync_error{0};           // errno of the first failed sync; writes refused after
  std::atomic<bool> closed{false};
  std::atomic<bool> close_synced{false};    // close() wrote every record to disk (see sync())
};

/// Policies whose records mean the same: a store written with one may be
/// opened with the other. (StorePolicy and SingleWriterPolicy differ only in
/// the writer lock.)
constexpr bool same_record_format(std::uint32_t a, std::uint32_t b) noexcept {
  return a == b || (a <= 2 && b <= 2);
}

inline void write_meta(StoreFiles& f, const std::string& store) {
  format::seal(f.meta);
  replace_file(f.dir.get(), f.path, "meta", &f.meta, sizeof f.meta, store);
}

/// Opens (or creates) the store directory of `o.path`, takes its lock and
/// reads its meta file; sets o.shards and o.hash_seed to the store's. Throws
/// Error: io_error (the directory cannot be made or opened), locked,
/// corrupt_file, format_version, invalid_argument (options that contradict
/// the store, a directory that holds something else).
inline std::unique_ptr<StoreFiles> open_store_files(Options& o, std::uint32_t policy_id,
                                                    std::uint32_t default_shards) {
  auto f = std::make_unique<StoreFiles>();
  f->path = o.path.string();
  f->read_only = o.read_only;
  const std::string& store = o.name;
  if (!o.read_only && ::mkdir(f->path.c_str(), 0755) != 0 && errno != EEXIST) {
    throw_os(errno, store, "creating the store directory " + f->path);
  }
  f->dir = Fd(open_at(AT_FDCWD, f->path, O_RDONLY | O_DIRECTORY));
  if (!f->dir) {
    const int err = errno;
    throw Error(err == ENOENT ? Errc::invalid_argument : errc_of(err),
                store + ": cannot open the store directory " + f->path + ": " + errno_text(err) +
                    (o.read_only ? " (a read-only open needs an existing store)" : ""));
  }
  if (::flock(f->dir.get(), (o.read_only ? LOCK_SH : LOCK_EX) | LOCK_NB) != 0) {
    const int err = errno;
    if (err == EWOULDBLOCK) {
      throw Error(Errc::locked,
                  store + ": " + f->path +
                      (o.read_only ? " is open for writing by another store object or process"
                                   : " is open in another store object or process (a writable "
                                     "open is exclusive)"));
    }
    throw_os(err, store, "locking " + f->path);
  }
  std::vector<std::string> names = list_dir(f->dir.get(), store, f->path);
  bool has_meta = false;
  for (const std::string& n : names) has_meta |= n == "meta";

  if (!has_meta) {
    if (o.read_only) {
      throw Error(Errc::invalid_argument,
                  store + ": " + f->path + " holds no store (a read-only open needs one)");
    }
    for (const std::string& n : names) {
      if (n != "meta.tmp") {
        throw Error(Errc::invalid_argument,
                    store + ": " + f->path + " holds other files (" + n +
                        ", ...) and no offheap store; refusing to create one there");
      }
    }
    std::memcpy(f->meta.magic, format::kMetaMagic, 8);
    f->meta.format_version = format::kFormatVersion;
    f->meta.meta_bytes = sizeof(format::Meta);
    f->meta.policy_id = policy_id;
    f->meta.shards = o.shards != 0 ? o.shards : default_shards;
    f->meta.hash_seed = o.hash_seed ? *o.hash_seed : random_u64();
    f->meta.store_id = random_u64();
    f->meta.generation = 0;
    f->meta.clean = 0;
    write_meta(*f, store);
    f->created = true;
    names.clear();
  } else {
    const std::string path = f->path + "/meta";
    Fd fd(open_at(f->dir.get(), "meta", O_RDONLY));
    if (!fd) throw_os(errno, store, "opening " + path);
    const std::uint64_t size = file_size(fd.get(), store, path);
    format::Meta& m = f->meta;
    const std::uint64_t got = read_at(fd.get(), &m, sizeof m, 0, store, path);
    if (got < 16 || std::memcmp(m.magic, format::kMetaMagic, 8) != 0) {
      throw Error(Errc::corrupt_file, store + ": " + path + " is not an offheap meta file");
    }
    if (m.format_version != format::kFormatVersion) {
      throw Error(Errc::format_version,
                  store + ": " + f->path + " holds a store in format version " +
                      std::to_string(m.format_version) + "; this library reads version " +
                      std::to_string(format::kFormatVersion));
    }
    if (size != sizeof m || got != sizeof m || m.meta_bytes != sizeof m ||
        format::header_checksum(m) != m.checksum) {
      throw Error(Errc::corrupt_file, store + ": " + path + " is damaged (size " +
                                          std::to_string(size) + ", or its checksum fails)");
    }
    if (m.shards == 0 || m.shards > 1024) {
      throw Error(Errc::corrupt_file, store + ": " + path + " says the store has " +
                                          std::to_string(m.shards) + " shards");
    }
    if (!same_record_format(m.policy_id, policy_id)) {
      throw Error(Errc::invalid_argument,
                  store + ": " + f->path + " was created by a store of policy id " +
                      std::to_string(m.policy_id) + "; this store's policy id is " +
                      std::to_string(policy_id));
    }
    if (o.shards != 0 && o.shards != m.shards) {
      throw Error(Errc::invalid_argument,
                  store + ": Options::shards is " + std::to_string(o.shards) + " but the store at " +
                      f->path + " has " + std::to_string(m.shards) +
                      " shards (set 0 to take the store's)");
    }
    if (o.hash_seed && *o.hash_seed != m.hash_seed) {
      throw Error(Errc::invalid_argument, store + ": Options::hash_seed differs from the seed of the "
                                                  "store at " + f->path + " (leave it unset)");
    }
  }
  o.shards = f->meta.shards;
  o.hash_seed = f->meta.hash_seed;

  // The inventory of chunk files; leftovers of a crash are removed.
  f->chunk_counts.assign(f->meta.shards, 0);
  std::vector<std::vector<bool>> seen(f->meta.shards);
  for (const std::string& n : names) {
    if (n.size() > 4 && n.compare(n.size() - 4, 4, ".tmp") == 0) {
      if (!o.read_only) ::unlinkat(f->dir.get(), n.c_str(), 0);
      continue;
    }
    std::uint32_t s = 0, c = 0;
    if (!format::parse_chunk_file_name(n, s, c)) continue;
    if (c >= Location::kMaxChunks) {
      throw Error(Errc::corrupt_file, store + ": " + f->path + "/" + n + " is no chunk file name");
    }
    if (s >= f->meta.shards) {
      throw Error(Errc::corrupt_file, store + ": " + f->path + "/" + n + " belongs to shard " +
                                          std::to_string(s) + " of a store with " +
                                          std::to_string(f->meta.shards) + " shards");
    }
    if (seen[s].size() <= c) seen[s].resize(c + 1, false);
    seen[s][c] = true;
  }
  for (std::uint32_t s = 0; s < f->meta.shards; ++s) {
    for (std::uint32_t c = 0; c < seen[s].size(); ++c) {
      if (!seen[s][c]) {
        throw Error(Errc::corrupt_file,
                    store + ": " + f->path + "/" + format::chunk_file_name(s, c) +
                        " is missing (shard " + std::to_string(s) + " has chunks up to " +
                        std::to_string(seen[s].size() - 1) + ")");
      }
    }
    f->chunk_counts[s] = static_cast<std::uint32_t>(seen[s].size());
  }

  f->backing.dir_fd = f->dir.get();
  f->backing.dir_path = f->path;
  f->backing.store_id = f->meta.store_id;
  f->backing.read_only = o.read_only;
  f->backing.sync_new_files = o.durability != Durability::none;
  return f;
}

}  // namespace offheap::detail
