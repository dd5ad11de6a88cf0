// SPDX-License-Identifier: Apache-2.0
// A store's directory as a set of files: list them by suffix, copy the
// directory, empty it, or hold all of it in memory and write it back (the
// fuzzer keeps its pristine stores that way).
#pragma once

#include "support/file_io.hpp"

#include <algorithm>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace offheap_test {

/// The names of the files in `dir` that end with `suffix`, sorted.
inline std::vector<std::string> files_of(const std::filesystem::path& dir, std::string_view suffix) {
  std::vector<std::string> out;
  for (const std::filesystem::directory_entry& e : std::filesystem::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (n.size() >= suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0) {
      out.push_back(n);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// Makes `to` a copy of the flat directory `from` (anything in `to` goes).
inline void copy_dir(const std::filesystem::path& from, const std::filesystem::path& to) {
  std::filesystem::remove_all(to);
  std::filesystem::create_directory(to);
  for (const std::filesystem::directory_entry& e : std::filesystem::directory_iterator(from)) {
    std::filesystem::copy_file(e.path(), to / e.path().filename());
  }
}

/// Removes every file in the flat directory `dir`, leaving it (if it exists).
inline void clear_dir(const std::filesystem::path& dir) {
  std::error_code ec;
  std::vector<std::filesystem::path> names;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    names.push_back(it->path());
  }
  for (const std::filesystem::path& p : names) std::filesystem::remove(p, ec);
}

/// One file of a store held in memory.
struct File {
  std::string name;
  std::string bytes;
};

/// Every file of the flat directory `dir`, sorted by name.
inline std::vector<File> capture_dir(const std::filesystem::path& dir) {
  std::vector<File> files;
  for (const std::filesystem::directory_entry& e : std::filesystem::directory_iterator(dir)) {
    files.push_back({e.path().filename().string(), read_file(e.path())});
  }
  std::sort(files.begin(), files.end(), [](const File& a, const File& b) { return a.name < b.name; });
  return files;
}

/// Writes `files` into `dir` (which exists).
inline void write_dir(const std::filesystem::path& dir, const std::vector<File>& files) {
  for (const File& f : files) write_file(dir / f.name, f.bytes);
}

}  // namespace offheap_test
