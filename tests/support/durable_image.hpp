// SPDX-License-Identifier: Apache-2.0
// What a power loss would leave: the files as they were at a durability
// point known to the test, plus exactly the ranges the library has msynced
// since, with the bytes they held when it did. Reading the files back would
// not do: the page cache holds every write whether or not it was synced.
//
// SyncRecorder installs the library's sync observer (detail/files/file.hpp), which
// copies each range as its msync starts (finding the file behind it through
// /proc/self/maps) and counts it once the msync has returned; image() lays
// the copies over a baseline. One recorder at a time per process.
#pragma once

#include <offheap/detail/files/file.hpp>

#include <algorithm>
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
  /// Bytes an msync wrote to one file: `bytes` at `offset` of `path`.
  struct Range {
    std::string path;  // as /proc/self/maps names the mapped file
    std::uint64_t offset;
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
  /// The number of msyncs that returned since the recorder was made or
  /// reset() (each may have written several files' ranges).
  std::size_t count() const {
    std::lock_guard<std::mutex> g(mutex_);
    return syncs_;
  }
  /// Forgets what was recorded (msyncs in flight still count when they return).
  void reset() {
    std::lock_guard<std::mutex> g(mutex_);
    ranges_.clear();
    syncs_ = 0;
  }

  /// `baseline` (the files of `dir` at a durability point) with every range
  /// recorded since laid over it, in order: what the disk holds. Ranges of
  /// files outside `dir` are ignored. The files are found as each msync
  /// started, so the image can be made after the store has closed.
  FileImages image(const FileImages& baseline, const std::filesystem::path& dir) const {
    FileImages out = baseline;
    const std::string prefix = std::filesystem::canonical(dir).string() + "/";
    for (const Range& r : ranges()) {
      if (r.path.rfind(prefix, 0) != 0) continue;
      const std::string name = r.path.substr(prefix.size());
      if (name.find('/') != std::string::npos) continue;  // a subdirectory's file
      std::string& file = out[name];
      if (file.size() < r.offset + r.bytes.size()) file.resize(r.offset + r.bytes.size(), '\0');
      std::memcpy(file.data() + r.offset, r.bytes.data(), r.bytes.size());
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
  /// [p, p + bytes) as ranges of the files mapped there, with their bytes now.
  static std::vector<Range> resolve(const void* p, std::uint64_t bytes) {
    std::vector<Range> out;
    const std::vector<Mapping> maps = mappings();
    const auto address = reinterpret_cast<std::uintptr_t>(p);
    for (std::uint64_t done = 0; done < bytes;) {
      const std::uintptr_t a = address + done;
      const Mapping* m = nullptr;
      for (const Mapping& x : maps) {
        if (a >= x.start && a < x.end) m = &x;
      }
      if (m == nullptr) break;  // not mapped (cannot happen: the library syncs its mappings)
      const std::uint64_t n = std::min<std::uint64_t>(bytes - done, m->end - a);
      out.push_back({m->path, m->offset + (a - m->start),
                     std::string(reinterpret_cast<const char*>(a), n)});
      done += n;
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
      std::vector<Range> copy = resolve(p, bytes);
      {
        std::lock_guard<std::mutex> g(self->mutex_);
        self->pending_.push_back({address, bytes, std::move(copy)});
      }
      if (self->before_msync) self->before_msync(p, bytes);
      return;
    }
    std::lock_guard<std::mutex> g(self->mutex_);
    for (auto it = self->pending_.begin(); it != self->pending_.end(); ++it) {
      if (it->address == address && it->bytes == bytes) {
        for (Range& r : it->ranges) self->ranges_.push_back(std::move(r));
        ++self->syncs_;
        self->pending_.erase(it);
        return;
      }
    }
  }

  struct Pending {
    std::uintptr_t address;
    std::uint64_t bytes;
    std::vector<Range> ranges;
  };
  mutable std::mutex mutex_;
  std::vector<Pending> pending_;  // msyncs started, not yet returned
  std::vector<Range> ranges_;     // what msyncs that returned wrote, in the order they did
  std::size_t syncs_ = 0;
};

}  // namespace offheap_test
