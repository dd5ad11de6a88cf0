// SPDX-License-Identifier: Apache-2.0
// Memory per entry, measured the same way for every subject, offheap
// included: from what the process holds, not from any store's bookkeeping.
//
//   bytes = (RssAnon after filling − RssAnon before creating the subject)
//         + (bytes of the subject's files: st_blocks × 512 summed over its
//            directory)
//         + (RssShmem after − before, beyond those file bytes; 0 for every
//            subject measured today, see below)
//
// RssAnon (/proc/self/status) counts the process's private anonymous pages
// that are resident: the heap (malloc), offheap's anonymous chunks and index,
// the peers' own anonymous maps (RocksDB's memtables and block cache live in
// the heap), thread stacks. Pages of tmpfs files that a subject maps (LMDB's
// map, Tkrzw's file, RocksDB's tables with mmap reads) count in RssShmem, not
// RssAnon, so adding the files' allocated bytes counts them once, mapped or
// not. Shared anonymous memory (none of the subjects uses it) would count in
// RssShmem with no file behind it: the third term takes whatever RssShmem
// grew beyond the subject's file bytes, so such memory would not go unseen.
//
// Before both readings the heap's free memory is handed back to the kernel
// (malloc_trim, and tbbmalloc's buffers where oneTBB is linked: its
// concurrent_hash_map allocates there), so that what an earlier subject freed
// and an allocator kept does not hide this one's growth, and what this one
// freed while growing (old tables) is not charged to it. tbbmalloc keeps
// some freed blocks for its threads even so, which a small table reuses: for
// oneTBB, figures from tables of a few tens of thousands of entries (W1, a
// smoke run) run low; at millions of entries the difference is noise. Linux keeps the RSS counters exact since 6.2;
// older kernels batch up to 64 pages per thread, which matters only for small
// tables (W1: about 2 MB).
#pragma once

#include <malloc.h>
#include <sys/stat.h>

#if defined(OFFHEAP_BENCH_HAVE_TBBMALLOC)
#include <oneapi/tbb/scalable_allocator.h>
#endif

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace offheap_bench {

/// Resident memory of the process, in bytes.
struct ProcessMemory {
  std::int64_t rss_anon = 0;
  std::int64_t rss_shmem = 0;
};

/// Reads RssAnon and RssShmem from /proc/self/status (after handing the
/// allocators' free pages back to the kernel).
inline ProcessMemory process_memory() {
  ::malloc_trim(0);
#if defined(OFFHEAP_BENCH_HAVE_TBBMALLOC)
  scalable_allocation_command(TBBMALLOC_CLEAN_ALL_BUFFERS, nullptr);
#endif
  ProcessMemory m;
  if (std::FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f) != nullptr) {
      long long kib = 0;
      if (std::sscanf(line, "RssAnon: %lld kB", &kib) == 1) m.rss_anon = kib * 1024;
      if (std::sscanf(line, "RssShmem: %lld kB", &kib) == 1) m.rss_shmem = kib * 1024;
    }
    std::fclose(f);
  }
  return m;
}

/// Bytes allocated to the files under `dir` (st_blocks × 512), recursively;
/// 0 for an empty path.
inline std::uint64_t file_bytes(const std::filesystem::path& dir) {
  if (dir.empty()) return 0;
  std::uint64_t total = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir, ec)) {
    struct stat st {};
    if (::lstat(e.path().c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      total += static_cast<std::uint64_t>(st.st_blocks) * 512;
    }
  }
  return total;
}

/// Memory per entry of one filled subject (see the top of this file).
struct Footprint {
  double bytes = 0;     ///< per entry: anonymous + file + shared beyond files
  double beyond = 0;    ///< per entry beyond the key and value bytes
  double anon = 0;      ///< per entry: the RssAnon growth
  double files = 0;     ///< per entry: the files' allocated bytes
  double heap = 0;      ///< per entry: heap bytes in use growth (the malloc counter)
};

/// Takes the readings before a subject is created; finish() after filling.
class FootprintProbe {
 public:
  explicit FootprintProbe(std::int64_t heap_bytes_now)
      : before_(process_memory()), heap_before_(heap_bytes_now) {}

  Footprint finish(const std::filesystem::path& files_dir, std::uint64_t entries,
                   std::uint64_t key_value_bytes, std::int64_t heap_bytes_now) const {
    const ProcessMemory after = process_memory();
    const auto files = static_cast<double>(file_bytes(files_dir));
    const auto anon = static_cast<double>(after.rss_anon - before_.rss_anon);
    const auto shmem = static_cast<double>(after.rss_shmem - before_.rss_shmem);
    const auto n = static_cast<double>(entries == 0 ? 1 : entries);
    Footprint f;
    f.anon = anon / n;
    f.files = files / n;
    f.bytes = (anon + files + (shmem > files ? shmem - files : 0.0)) / n;
    f.beyond = f.bytes - static_cast<double>(key_value_bytes) / n;
    f.heap = static_cast<double>(heap_bytes_now - heap_before_) / n;
    return f;
  }

 private:
  ProcessMemory before_;
  std::int64_t heap_before_;
};

}  // namespace offheap_bench
