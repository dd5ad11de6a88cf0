// SPDX-License-Identifier: Apache-2.0
// The file-system calls of file-backed stores, each wrapped so that a
// failure becomes an offheap::Error that names the store, the file and errno:
// ENOSPC, EDQUOT and EFBIG (a file size limit) become Errc::out_of_space,
// everything else Errc::io_error.
#pragma once

#include <offheap/detail/memory/os.hpp>
#include <offheap/error.hpp>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace offheap::detail {

inline Errc errc_of(int err) noexcept {
  return err == ENOSPC || err == EDQUOT || err == EFBIG ? Errc::out_of_space : Errc::io_error;
}

[[noreturn, gnu::cold]] inline void throw_os(int err, const std::string& store,
                                             const std::string& what) {
  throw Error(errc_of(err), store + ": " + what + ": " + errno_text(err));
}

/// An owned file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) noexcept : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  ~Fd() { reset(); }
  void reset() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

/// openat() that retries on EINTR; -1 with errno set on failure.
inline int open_at(int dir, const std::string& name, int flags, mode_t mode = 0644) noexcept {
  int fd;
  do {
    fd = ::openat(dir, name.c_str(), flags | O_CLOEXEC, mode);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

/// The size of an open file.
inline std::uint64_t file_size(int fd, const std::string& store, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw_os(errno, store, "fstat of " + path);
  return static_cast<std::uint64_t>(st.st_size);
}

/// Reserves [offset, offset + bytes) on disk, growing the file: later stores
/// through a mapping cannot fail for lack of space (no SIGBUS).
inline void allocate_file(int fd, std::uint64_t offset, std::uint64_t bytes,
                          const std::string& store, const std::string& path) {
  const int err = ::posix_fallocate(fd, static_cast<off_t>(offset), static_cast<off_t>(bytes));
  if (err != 0) {
    throw_os(err, store, "reserving " + std::to_string(bytes) + " bytes for " + path +
                             " (posix_fallocate)");
  }
}

/// pwrite of all n bytes.
inline void write_at(int fd, const void* data, std::uint64_t n, std::uint64_t offset,
                     const std::string& store, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (n != 0) {
    const ssize_t w = ::pwrite(fd, p, n > (1u << 30) ? (1u << 30) : n, static_cast<off_t>(offset));
    if (w < 0) {
      if (errno == EINTR) continue;
      throw_os(errno, store, "writing " + path);
    }
    p += w;
    n -= static_cast<std::uint64_t>(w);
    offset += static_cast<std::uint64_t>(w);
  }
}

/// pread of n bytes; returns the bytes read (fewer at the end of the file).
inline std::uint64_t read_at(int fd, void* data, std::uint64_t n, std::uint64_t offset,
                             const std::string& store, const std::string& path) {
  char* p = static_cast<char*>(data);
  std::uint64_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd, p + got, n - got, static_cast<off_t>(offset + got));
    if (r < 0) {
      if (errno == EINTR) continue;
      throw_os(errno, store, "reading " + path);
    }
    if (r == 0) break;
    got += static_cast<std::uint64_t>(r);
  }
  return got;
}

inline void sync_file(int fd, const std::string& store, const std::string& path) {
  if (::fdatasync(fd) != 0) throw_os(errno, store, "fdatasync of " + path);
}

/// Makes the directory's entries (files created, renamed, removed) durable.
inline void sync_dir(int dir, const std::string& store, const std::string& path) {
  if (::fsync(dir) != 0) throw_os(errno, store, "fsync of the directory " + path);
}

/// Maps [offset, offset + bytes) of a file. `shared`: stores reach the file
/// (and other mappings); otherwise they stay private (copy on write).
/// Counted against the store's budget first, as map_anonymous() is.
inline std::byte* map_file(int fd, std::uint64_t offset, std::uint64_t bytes, bool writable,
                           bool shared, const StoreName& store, const std::string& path) {
  if (!store.budget.take(bytes)) throw_limit_reached(store, bytes, "a mapping of a file");
  void* p = ::mmap(nullptr, bytes, writable ? PROT_READ | PROT_WRITE : PROT_READ,
                   shared ? MAP_SHARED : MAP_PRIVATE, fd, static_cast<off_t>(offset));
  if (p == MAP_FAILED) {
    const int err = errno;
    store.budget.give(bytes);
    throw Error(err == ENOMEM ? Errc::out_of_space : Errc::io_error,
                store.name + ": mmap of " + std::to_string(bytes) + " bytes of " + path +
                    " failed: " + errno_text(err));
  }
  return static_cast<std::byte*>(p);
}

/// Fault injection for tests: while nonzero, every sync_mapping() fails
/// with this errno instead of calling msync.
inline std::atomic<int>& testing_fail_syncs() noexcept {
  static std::atomic<int> err{0};
  return err;
}

/// Observation for tests: when set, sync_mapping() calls it with the range
/// it is about to write before the msync (done = false) and, if the msync
/// succeeded, after it (done = true), so that a test can record what the
/// library makes durable and when (tests/support/durable_image.hpp).
using SyncObserver = void (*)(const void* p, std::uint64_t bytes, bool done);
inline std::atomic<SyncObserver>& testing_sync_observer() noexcept {
  static std::atomic<SyncObserver> observer{nullptr};
  return observer;
}

/// Writes the dirty pages of [p, p + bytes) (page-aligned p) to the file and
/// waits for them. Returns 0 or the errno.
inline int sync_mapping(void* p, std::uint64_t bytes) noexcept {
  if (bytes == 0) return 0;
  if (const int err = testing_fail_syncs().load(std::memory_order_relaxed)) return err;
  const SyncObserver observe = testing_sync_observer().load(std::memory_order_acquire);
  if (observe != nullptr) observe(p, bytes, false);
  const int err = ::msync(p, bytes, MS_SYNC) == 0 ? 0 : errno;
  if (observe != nullptr && err == 0) observe(p, bytes, true);
  return err;
}

/// The names in a directory.
inline std::vector<std::string> list_dir(int dir, const std::string& store,
                                         const std::string& path) {
  const int fd = ::dup(dir);
  if (fd < 0) throw_os(errno, store, "listing " + path);
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    const int err = errno;
    ::close(fd);
    throw_os(err, store, "listing " + path);
  }
  ::rewinddir(d);
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  return names;
}

/// Writes `bytes` as the whole file `name` in `dir`, durably and atomically:
/// a temporary file, fdatasync, rename over the old one, fsync of the
/// directory. A crash leaves the old file or the new one, never a mix.
inline void replace_file(int dir, const std::string& dir_path, const std::string& name,
                         const void* bytes, std::uint64_t n, const std::string& store,
                         bool durable = true) {
  const std::string tmp = name + ".tmp";
  const std::string path = dir_path + "/" + tmp;
  Fd fd(open_at(dir, tmp, O_WRONLY | O_CREAT | O_TRUNC));
  if (!fd) throw_os(errno, store, "creating " + path);
  try {
    write_at(fd.get(), bytes, n, 0, store, path);
    if (durable) sync_file(fd.get(), store, path);
  } catch (...) {
    ::unlinkat(dir, tmp.c_str(), 0);
    throw;
  }
  fd.reset();
  if (::renameat(dir, tmp.c_str(), dir, name.c_str()) != 0) {
    const int err = errno;
    ::unlinkat(dir, tmp.c_str(), 0);
    throw_os(err, store, "renaming " + path + " to " + name);
  }
  if (durable) sync_dir(dir, store, dir_path);
}

}  // namespace offheap::detail
