// SPDX-License-Identifier: Apache-2.0
// A temporary directory for a test's stores, removed with everything in it.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace offheap_test {

class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("OFFHEAP_TEST_TMPDIR");
    std::string tmpl = std::string(base != nullptr ? base : "/tmp") + "/offheap-test-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const noexcept { return path_; }
  /// A path inside the directory (not created).
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

}  // namespace offheap_test
