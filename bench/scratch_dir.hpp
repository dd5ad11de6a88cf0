// SPDX-License-Identifier: Apache-2.0
// Where the file-backed subjects (LMDB, RocksDB, Tkrzw) keep their files: one
// directory per process on tmpfs, /dev/shm/offheap-bench-<pid>, and in it one
// fresh directory per subject built (a counter and the subject's name). A
// subject removes its directory when it is destroyed; the process directory
// goes at exit, and on SIGINT or SIGTERM (then the signal is raised again
// with its default action, so the exit status says what stopped the run).
//
// The trade-off: tmpfs keeps the peers' files in memory, as offheap's
// anonymous store is, so the runs compare the stores' own work (no disk);
// where /dev/shm is not tmpfs, the files go there anyway and the platform
// lines say so (the file-backed figures then include a file system).
//
// The signal handler may only make async-signal-safe calls: it walks the two
// levels (process directory, subject directories, their files) with openat,
// getdents64, unlinkat and close, from a path kept in a static buffer.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

namespace offheap_bench {

namespace scratch_detail {

/// The process directory, for the signal handler (set once, before any
/// subject exists).
inline char g_root[256] = {};

/// Removes `name` under `parent_fd`: a file, or a directory with what it
/// holds down to `depth` more levels. Async-signal-safe.
inline void remove_at(int parent_fd, const char* name, int depth) noexcept {
  const int fd = ::openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    ::unlinkat(parent_fd, name, 0);
    return;
  }
  alignas(8) char buf[4096];
  // Entries removed while the directory is read may hide others: read it
  // again from the start until a pass removes nothing.
  for (bool removed = true; removed;) {
    removed = false;
    ::lseek(fd, 0, SEEK_SET);
    for (;;) {
      const ssize_t n = ::getdents64(fd, buf, sizeof buf);
      if (n <= 0) break;
      for (ssize_t off = 0; off < n;) {
        const auto* d = reinterpret_cast<const struct dirent64*>(buf + off);
        off += d->d_reclen;
        if (std::strcmp(d->d_name, ".") == 0 || std::strcmp(d->d_name, "..") == 0) continue;
        if (d->d_type == DT_DIR && depth > 0) {
          remove_at(fd, d->d_name, depth - 1);
        } else {
          ::unlinkat(fd, d->d_name, 0);
        }
        removed = true;
      }
    }
  }
  ::close(fd);
  ::unlinkat(parent_fd, name, AT_REMOVEDIR);
}

inline void on_signal(int sig) {
  if (g_root[0] != '\0') remove_at(AT_FDCWD, g_root, 2);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

}  // namespace scratch_detail

class ScratchDir {
 public:
  /// The process directory, created on first use.
  static ScratchDir& instance() {
    static ScratchDir dir;
    return dir;
  }

  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& root() const noexcept { return root_; }
  bool on_tmpfs() const noexcept { return tmpfs_; }

  /// A new empty directory for one subject: "<root>/<counter>-<label>".
  std::filesystem::path make(std::string_view label) {
    const std::filesystem::path p =
        root_ / (std::to_string(next_.fetch_add(1) + 1) + "-" + std::string(label));
    std::filesystem::create_directory(p);
    return p;
  }

  /// Removes a subject's directory and its files (errors ignored: a run
  /// must not fail over a leftover in /dev/shm, which the exit removes).
  static void remove(const std::filesystem::path& dir) noexcept {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }

 private:
  ScratchDir() {
    const std::filesystem::path base = "/dev/shm";
    struct statfs fs {};
    tmpfs_ = ::statfs(base.c_str(), &fs) == 0 && fs.f_type == TMPFS_MAGIC;
    root_ = base / ("offheap-bench-" + std::to_string(::getpid()));
    std::filesystem::create_directories(root_);
    std::snprintf(scratch_detail::g_root, sizeof scratch_detail::g_root, "%s", root_.c_str());
    std::atexit([] { scratch_detail::remove_at(AT_FDCWD, scratch_detail::g_root, 2); });
    std::signal(SIGINT, scratch_detail::on_signal);
    std::signal(SIGTERM, scratch_detail::on_signal);
  }

  std::filesystem::path root_;
  bool tmpfs_ = false;
  std::atomic<unsigned> next_{0};
};

}  // namespace offheap_bench
