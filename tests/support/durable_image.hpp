// SPDX-License-Identifier: Apache-2.0
// What a power loss would leave: the files as they were at a durability
// point known to the test, plus exactly the ranges the library has msynced
// since, with the bytes they held when it did. Reading the files back would
// not do: the page cache holds every write whether or not it was synced.
//
// SyncRecorder installs the library's sync observer (detail/file.hpp), which
// copies each range as its msync starts and counts it once the msync has
// returned; image() finds the file behind each recorded address through
// /proc/self/maps and lays the copies over a baseline. One recorder at a
// time per process.
#pragma once

#include <offheap/detail/file.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

namespace offheap_test {

using FileImages = std::map<std::string, std::string>;  // file name -> bytes

/// Every regular file in `dir`, as read() returns it now.
inline FileImages read_dir_files(const std::filesystem::path& dir) {
  FileImages out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    out[e.path().filename().string()] = s.str();
  }
  return out;
}

/// Makes `dir` (created if missing) hold exactly `files`.
inline void write_dir_files(const std::filesystem::path& dir, const FileImages& files) {
  std::filesystem::create_directories(dir);
  for (const auto& e : std::filesystem::directory_iterator(dir)) std::filesystem::remove_all(e.path());
  for (const auto& [name, bytes] : files) {
    std::ofstream out(dir / name, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
}

class SyncRecorder {
 public:
  struct Range {
    std::uintptr_t address;
    std::string bytes;
  };

  SyncRecorder() {
    instance() = this;
    offheap::detail::testing_sync_observer().store(&observe, std::memory_order_release);
  }
  ~SyncRecorder() {
    offheap::detail::testing_sync_observer().store(nullptr, std::memory_order_release);
    instance() = nullptr;
  }
  SyncRecorder(const SyncRecorder&) = delete;
  SyncRecorder& operator=(const SyncRecorder&) = delete;

  /// Runs before each recorded msync, after the copy (e.g. to hold a
  /// syncing thread back); called without the recorder's lock.
  std::function<void(const void*, std::uint64_t)> before_msync;

  std::vector<Range> ranges() const {
    std::lock_guard<std::mutex> g(mutex_);
    return ranges_;
  }
  std::size_t count() const {
    std::lock_guard<std::mutex> g(mutex_);
    return ranges_.size();
  }

  /// `baseline` (the files of `dir` at a durability point) with every range
  /// recorded since laid over it, in order: what the disk holds. Ranges of
  /// mappings of files outside `dir` are ignored.
  FileImages image(const FileImages& baseline, const std::filesystem::path& dir) const {
    FileImages out = baseline;
    const std::vector<Mapping> maps = mappings();
    const std::string prefix = std::filesystem::canonical(dir).string() + "/";
    for (const Range& r : ranges()) {
      for (std::size_t done = 0; done < r.bytes.size();) {
        const std::uintptr_t a = r.address + done;
        const Mapping* m = nullptr;
        for (const Mapping& x : maps) {
          if (a >= x.start && a < x.end) m = &x;
        }
        if (m == nullptr) break;  // not a file mapping (cannot happen for chunks)
        const std::size_t n = std::min<std::size_t>(r.bytes.size() - done, m->end - a);
        if (m->path.rfind(prefix, 0) == 0) {
          std::string& file = out[m->path.substr(prefix.size())];
          const std::uint64_t off = m->offset + (a - m->start);
          if (file.size() < off + n) file.resize(off + n, '\0');
          std::memcpy(file.data() + off, r.bytes.data() + done, n);
        }
        done += n;
      }
    }
    return out;
  }

 private:
  struct Mapping {
    std::uintptr_t start, end;
    std::uint64_t offset;
    std::string path;
  };
  static std::vector<Mapping> mappings() {
    std::vector<Mapping> out;
    std::ifstream in("/proc/self/maps");
    for (std::string line; std::getline(in, line);) {
      unsigned long long start = 0, end = 0, offset = 0;
      char perms[8] = {};
      int path_at = 0;
      if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %*s %*s %n", &start, &end, perms, &offset,
                      &path_at) < 4 ||
          path_at <= 0 || static_cast<std::size_t>(path_at) >= line.size()) {
        continue;
      }
      out.push_back({static_cast<std::uintptr_t>(start), static_cast<std::uintptr_t>(end), offset,
                     line.substr(static_cast<std::size_t>(path_at))});
    }
    return out;
  }
  static SyncRecorder*& instance() {
    static SyncRecorder* r = nullptr;
    return r;
  }
  /// Copies the range as its msync starts; it counts as durable only once
  /// that msync has returned (a sync that returns earlier proves nothing).
  static void observe(const void* p, std::uint64_t bytes, bool done) {
    SyncRecorder* self = instance();
    if (self == nullptr) return;
    const auto address = reinterpret_cast<std::uintptr_t>(p);
    if (!done) {
      {
        std::lock_guard<std::mutex> g(self->mutex_);
        self->pending_.push_back({address, std::string(static_cast<const char*>(p), bytes)});
      }
      if (self->before_msync) self->before_msync(p, bytes);
      return;
    }
    std::lock_guard<std::mutex> g(self->mutex_);
    for (auto it = self->pending_.begin(); it != self->pending_.end(); ++it) {
      if (it->address == address && it->bytes.size() == bytes) {
        self->ranges_.push_back(std::move(*it));
        self->pending_.erase(it);
        return;
      }
    }
  }

  mutable std::mutex mutex_;
  std::vector<Range> pending_;  // msyncs started, not yet returned
  std::vector<Range> ranges_;   // msyncs returned, in the order they did
};

}  // namespace offheap_test
