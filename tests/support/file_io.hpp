// SPDX-License-Identifier: Apache-2.0
// Whole-file and in-place byte access for tests that build, inspect and
// damage store files: read or write a file, read a word, overwrite, flip or
// zero bytes at an offset, truncate. Failures throw std::runtime_error
// naming the file (read_u64 returns 0 instead: a probe, not a check).
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/types.h>
#include <unistd.h>

namespace offheap_test {

namespace detail_io {
[[noreturn]] inline void fail(const char* what, const std::filesystem::path& p) {
  throw std::runtime_error(std::string(what) + " " + p.string() + ": " + std::strerror(errno));
}
}  // namespace detail_io

/// The whole file.
inline std::string read_file(const std::filesystem::path& p) {
  std::string out;
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) detail_io::fail("opening", p);
  char buf[65536];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return out;
}

/// Creates or replaces the file with `bytes`.
inline void write_file(const std::filesystem::path& p, const std::string& bytes) {
  const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) detail_io::fail("creating", p);
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w <= 0) {
      ::close(fd);
      detail_io::fail("writing", p);
    }
    done += static_cast<std::size_t>(w);
  }
  ::close(fd);
}

/// The 8-byte little-endian word at `off`, or 0 if it cannot be read.
inline std::uint64_t read_u64(const std::filesystem::path& p, std::uint64_t off) {
  std::uint64_t w = 0;
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    if (::pread(fd, &w, 8, static_cast<off_t>(off)) != 8) w = 0;
    ::close(fd);
  }
  return w;
}

/// Overwrites `n` bytes at `off` with `data`.
inline void write_bytes(const std::filesystem::path& p, std::uint64_t off, const void* data,
                        std::size_t n) {
  const int fd = ::open(p.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) detail_io::fail("opening", p);
  const ssize_t w = ::pwrite(fd, data, n, static_cast<off_t>(off));
  ::close(fd);
  if (w != static_cast<ssize_t>(n)) detail_io::fail("writing to", p);
}

/// XORs `mask` into the byte at `off`.
inline void flip_byte(const std::filesystem::path& p, std::uint64_t off, unsigned char mask) {
  const int fd = ::open(p.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) detail_io::fail("opening", p);
  unsigned char b = 0;
  if (::pread(fd, &b, 1, static_cast<off_t>(off)) != 1) {
    ::close(fd);
    detail_io::fail("reading", p);
  }
  b = static_cast<unsigned char>(b ^ mask);
  const ssize_t w = ::pwrite(fd, &b, 1, static_cast<off_t>(off));
  ::close(fd);
  if (w != 1) detail_io::fail("writing to", p);
}

/// Overwrites `n` bytes at `off` with zeros.
inline void zero_range(const std::filesystem::path& p, std::uint64_t off, std::uint64_t n) {
  const std::vector<char> zeros(n, 0);
  write_bytes(p, off, zeros.data(), zeros.size());
}

inline void truncate_to(const std::filesystem::path& p, std::uint64_t size) {
  if (::truncate(p.c_str(), static_cast<off_t>(size)) != 0) detail_io::fail("truncating", p);
}

}  // namespace offheap_test
