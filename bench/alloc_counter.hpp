// SPDX-License-Identifier: Apache-2.0
// Heap accounting for the benchmark binary: replaces malloc, calloc, realloc,
// the aligned allocators, free and every global operator new/delete with
// versions that count, then forward to glibc (__libc_malloc and friends).
//
// Three figures: allocations made by the process (every malloc-family call
// and every operator new, whatever the size), allocations made by the calling
// thread (for loops timed on several threads at once), and heap bytes in use
// (malloc_usable_size of each live block plus 8 for glibc's per-chunk size
// word). Counting is a relaxed atomic add and a thread-local increment: cheap
// enough to leave on during timed loops, which is where the
// allocations-per-operation figures come from.
//
// Replacement functions must be defined once per program: include this header
// in exactly one translation unit. glibc only.
#pragma once

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <malloc.h>
#include <new>

// glibc declares the malloc family __THROW, which is noexcept in C++.
extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);
void __libc_free(void*);
}

namespace offheap_bench {

namespace alloc_detail {
inline std::atomic<std::uint64_t> g_allocations{0};
inline std::atomic<std::int64_t> g_heap_bytes{0};
// Static TLS of a trivial type in the executable: reading it from inside
// malloc neither allocates nor recurses.
inline thread_local constinit std::uint64_t t_allocations = 0;

constexpr std::int64_t kChunkHeader = 8;  // glibc's size word before each block

inline std::int64_t block_bytes(void* p) noexcept {
  return p == nullptr ? 0 : static_cast<std::int64_t>(::malloc_usable_size(p)) + kChunkHeader;
}
inline void* allocated(void* p) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  ++t_allocations;
  g_heap_bytes.fetch_add(block_bytes(p), std::memory_order_relaxed);
  return p;
}
inline void release(void* p) noexcept {
  if (p == nullptr) return;
  g_heap_bytes.fetch_sub(block_bytes(p), std::memory_order_relaxed);
  __libc_free(p);
}
}  // namespace alloc_detail

/// Allocations made by the process so far (malloc family and operator new).
inline std::uint64_t allocation_count() noexcept {
  return alloc_detail::g_allocations.load(std::memory_order_relaxed);
}

/// Allocations made by the calling thread so far.
inline std::uint64_t thread_allocation_count() noexcept { return alloc_detail::t_allocations; }

/// Heap bytes in use now: usable size + 8 per live block.
inline std::int64_t heap_bytes_in_use() noexcept {
  return alloc_detail::g_heap_bytes.load(std::memory_order_relaxed);
}

}  // namespace offheap_bench

extern "C" {
void* malloc(std::size_t n) noexcept { return offheap_bench::alloc_detail::allocated(__libc_malloc(n)); }
void* calloc(std::size_t n, std::size_t m) noexcept {
  return offheap_bench::alloc_detail::allocated(__libc_calloc(n, m));
}
void* realloc(void* p, std::size_t n) noexcept {
  using namespace offheap_bench::alloc_detail;
  const std::int64_t before = block_bytes(p);
  void* q = __libc_realloc(p, n);
  if (q == nullptr && n != 0) return nullptr;  // p is untouched
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  ++t_allocations;
  g_heap_bytes.fetch_add(block_bytes(q) - before, std::memory_order_relaxed);
  return q;
}
void* memalign(std::size_t a, std::size_t n) noexcept {
  return offheap_bench::alloc_detail::allocated(__libc_memalign(a, n));
}
void* aligned_alloc(std::size_t a, std::size_t n) noexcept {
  return offheap_bench::alloc_detail::allocated(__libc_memalign(a, n));
}
int posix_memalign(void** out, std::size_t a, std::size_t n) noexcept {
  void* p = __libc_memalign(a, n);
  if (p == nullptr) return ENOMEM;
  *out = offheap_bench::alloc_detail::allocated(p);
  return 0;
}
void free(void* p) noexcept { offheap_bench::alloc_detail::release(p); }
}

void* operator new(std::size_t n) {
  if (void* p = __libc_malloc(n == 0 ? 1 : n)) return offheap_bench::alloc_detail::allocated(p);
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  return offheap_bench::alloc_detail::allocated(__libc_malloc(n == 0 ? 1 : n));
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void* operator new(std::size_t n, std::align_val_t a) {
  if (void* p = __libc_memalign(static_cast<std::size_t>(a), n == 0 ? 1 : n)) {
    return offheap_bench::alloc_detail::allocated(p);
  }
  throw std::bad_alloc();
}
void* operator new[](std::size_t n, std::align_val_t a) { return operator new(n, a); }
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return offheap_bench::alloc_detail::allocated(
      __libc_memalign(static_cast<std::size_t>(a), n == 0 ? 1 : n));
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t& t) noexcept {
  return operator new(n, a, t);
}
void operator delete(void* p) noexcept { offheap_bench::alloc_detail::release(p); }
void operator delete[](void* p) noexcept { offheap_bench::alloc_detail::release(p); }
void operator delete(void* p, std::size_t) noexcept { offheap_bench::alloc_detail::release(p); }
void operator delete[](void* p, std::size_t) noexcept { offheap_bench::alloc_detail::release(p); }
void operator delete(void* p, std::align_val_t) noexcept { offheap_bench::alloc_detail::release(p); }
void operator delete[](void* p, std::align_val_t) noexcept {
  offheap_bench::alloc_detail::release(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  offheap_bench::alloc_detail::release(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
  offheap_bench::alloc_detail::release(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  offheap_bench::alloc_detail::release(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  offheap_bench::alloc_detail::release(p);
}
