// SPDX-License-Identifier: Apache-2.0
// Scratch directories for tests that copy, damage and reopen stores many
// times: in memory where possible (every writable open and clean close
// syncs files: free in /dev/shm, slow on a disk).
#pragma once

#include "support/env.hpp"

#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

#include <unistd.h>

namespace offheap_test {

/// Where scratch directories go: $`env_var` if set, else /dev/shm where it
/// is writable, else /tmp.
inline std::string scratch_base(const char* env_var) {
  if (const char* b = env(env_var)) return b;
  if (::access("/dev/shm", W_OK) == 0) return "/dev/shm";
  return "/tmp";
}

/// Creates a fresh directory <scratch_base(env_var)>/<prefix>-XXXXXX.
inline std::filesystem::path make_scratch_dir(const char* env_var, const std::string& prefix) {
  const std::string base = scratch_base(env_var);
  std::string tmpl = base + "/" + prefix + "-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed in " + base);
  return tmpl;
}

/// A scratch directory (make_scratch_dir), removed with its contents.
class ScratchDir {
 public:
  explicit ScratchDir(const char* env_var = "OFFHEAP_TEST_TMPDIR",
                      const std::string& prefix = "offheap-damage")
      : path_(make_scratch_dir(env_var, prefix)) {}
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const noexcept { return path_; }
  /// A path inside the directory (not created).
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

}  // namespace offheap_test
