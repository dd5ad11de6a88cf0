// SPDX-License-Identifier: Apache-2.0
// A store's shards, constructed in place in one block (a shard is a few
// pointers away from the hash, with no extra indirection), the key's shard
// picked from its hash, and work spread over them on a few threads.
#pragma once

#include <offheap/detail/shard/shard.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

namespace offheap::detail {

/// The shards, constructed in place in one block: a shard is a few pointers
/// away from the hash, with no extra indirection.
template <class Shard>
class ShardSet {
 public:
  ShardSet(std::uint32_t n, const ShardConfig& c, const StoreName& name,
           const typename Shard::Hash& hash, WalkGate& walks)
      : n_(n),
        shards_(static_cast<Shard*>(::operator new(sizeof(Shard) * n, std::align_val_t{64}))) {
    std::uint32_t built = 0;
    try {
      for (; built < n; ++built) new (shards_ + built) Shard(c, built, name, hash, walks);
    } catch (...) {
      while (built > 0) shards_[--built].~Shard();
      ::operator delete(shards_, std::align_val_t{64});
      throw;
    }
  }
  ~ShardSet() {
    for (std::uint32_t i = n_; i > 0; --i) shards_[i - 1].~Shard();
    ::operator delete(shards_, std::align_val_t{64});
  }
  ShardSet(const ShardSet&) = delete;
  ShardSet& operator=(const ShardSet&) = delete;

  /// Bits 24-55 of the hash pick the shard (the index uses the low bits
  /// and bits 57-63), by multiply-shift: any shard count works.
  Shard& for_hash(std::uint64_t h) const noexcept {
    return shards_[((h >> 24) & 0xFFFFFFFFu) * n_ >> 32];
  }
  std::uint32_t size() const noexcept { return n_; }
  Shard* begin() const noexcept { return shards_; }
  Shard* end() const noexcept { return shards_ + n_; }

 private:
  std::uint32_t n_;
  Shard* shards_;
};

/// Runs fn(i) for every i in [0, n) on up to one thread per core; the
/// first exception is rethrown once all are done.
template <class F>
void parallel_for(std::uint32_t n, F& fn) {
  const std::uint32_t threads =
      std::min<std::uint32_t>(n, std::max(1u, std::thread::hardware_concurrency()));
  std::atomic<std::uint32_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&] {
    for (std::uint32_t i; (i = next.fetch_add(1)) < n;) {
      try {
        fn(i);
      } catch (...) {
        std::lock_guard<std::mutex> g(error_mutex);
        if (!error) error = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (std::uint32_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace offheap::detail
