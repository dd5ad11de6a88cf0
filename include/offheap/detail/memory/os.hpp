// SPDX-License-Identifier: Apache-2.0
// The operating-system calls the engine makes, each wrapped so that a failure
// becomes an offheap::Error naming the call and errno. Nothing here allocates
// on the heap except the message of an error being thrown.
#pragma once

#include <offheap/detail/memory/memory_budget.hpp>
#include <offheap/error.hpp>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include <time.h>

#if defined(__SANITIZE_ADDRESS__)
#define OFFHEAP_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define OFFHEAP_ASAN 1
#endif
#endif
#if defined(OFFHEAP_ASAN)
#include <sanitizer/asan_interface.h>
#endif
#if defined(__SANITIZE_THREAD__)
#define OFFHEAP_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define OFFHEAP_TSAN 1
#endif
#endif
#if defined(OFFHEAP_TSAN)
// ThreadSanitizer's dynamic annotations, defined by its runtime (clang's
// and GCC's libtsan); no header declares them.
extern "C" void AnnotateIgnoreReadsBegin(const char* file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char* file, int line);
#endif

#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

namespace offheap::detail {

inline std::size_t page_size() noexcept {
  static const std::size_t size = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

constexpr std::uint64_t round_up(std::uint64_t n, std::uint64_t to) noexcept {
  return (n + to - 1) / to * to;
}

inline std::string errno_text(int err) {
  char buf[128];
  // GNU strerror_r returns a pointer that may or may not be buf.
  const char* text = ::strerror_r(err, buf, sizeof buf);
  return std::string(text) + " (errno " + std::to_string(err) + ")";
}

/// Zeroed anonymous memory of `bytes` (a multiple of the page size), private
/// to this process, with no swap reservation: pages cost memory only once
/// touched. Counted against the store's budget first: LimitReached if it
/// would pass Options::memory_limit_bytes. Throws Error(out_of_space) when
/// the kernel refuses; the message names the store and `what` (built only
/// then: mapping allocates nothing).
inline std::byte* map_anonymous(std::uint64_t bytes, const StoreName& store, const char* what, bool huge = false) {
  if (!store.budget.take(bytes)) throw_limit_reached(store, bytes, what);
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    store.budget.give(bytes);
    throw Error(Errc::out_of_space, store.name + ": mmap of " + std::to_string(bytes) + " bytes for " +
                                        what + " failed: " + errno_text(err));
  }
#if defined(MADV_HUGEPAGE)
  // Options::huge_pages, for the large mappings read at random (`huge`:
  // journal chunks, index tables): transparent huge pages cut the TLB
  // misses (where THP is set to "madvise"; a hint, ignored elsewhere), and
  // a first touch may compact memory for a 2 MiB page (milliseconds).
  if (huge && store.huge_pages && bytes >= (std::uint64_t{4} << 20)) ::madvise(p, bytes, MADV_HUGEPAGE);
#endif
  return static_cast<std::byte*>(p);
}

/// Anonymous address space of `bytes`, reserved but inaccessible
/// (PROT_NONE) and not counted against the store's budget: for a
/// structure that opens (open_reserved()) and counts the parts it uses
/// itself (HitBuffers' pages, as reader threads come). Unmapped with
/// unmap_reserved().
inline std::byte* reserve_address_space(std::uint64_t bytes, const StoreName& store, const char* what) {
  void* p = ::mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    throw Error(Errc::out_of_space, store.name + ": mmap of " + std::to_string(bytes) + " bytes for " + what +
                                        " failed: " + errno_text(err));
  }
  return static_cast<std::byte*>(p);
}

/// Makes [p, p + bytes) of a reserve_address_space() range readable and
/// writable (zeros): false if the kernel refuses. The caller counts it.
inline bool open_reserved(void* p, std::uint64_t bytes) noexcept {
  return ::mprotect(p, bytes, PROT_READ | PROT_WRITE) == 0;
}

/// Unmaps what reserve_address_space() mapped (the budget is the caller's
/// to give for what it opened).
inline void unmap_reserved(void* p, std::uint64_t bytes) noexcept {
  if (p != nullptr && bytes != 0) ::munmap(p, bytes);
}

/// map_anonymous() for a structure that can do without the memory (an
/// S3-FIFO ghost, a frequency sketch that keeps its size): under
/// Options::memory_limit_bytes, only while every such structure of the
/// store holds at most a sixteenth of the limit, and another sixteenth
/// stays unmapped after it for what cannot do without (queue segments,
/// list pages, dead markers); LimitReached otherwise. Unmapped with
/// unmap_optional().
inline std::byte* map_optional(std::uint64_t bytes, const StoreName& store, const char* what) {
  const std::uint64_t limit = store.budget.limit();
  if (limit != 0 && store.budget.available() < bytes + limit / 16) throw_limit_reached(store, bytes, what);
  if (!store.budget.take_optional(bytes)) throw_limit_reached(store, bytes, what);
  try {
    return map_anonymous(bytes, store, what);
  } catch (...) {
    store.budget.give_optional(bytes);
    throw;
  }
}

/// Unmaps what map_anonymous() or map_file() mapped for `store`, and gives
/// the bytes back to its budget.
inline void unmap(void* p, std::uint64_t bytes, const StoreName& store) noexcept {
  if (p != nullptr && bytes != 0) {
    ::munmap(p, bytes);
    store.budget.give(bytes);
  }
}

/// Unmaps what map_optional() mapped.
inline void unmap_optional(void* p, std::uint64_t bytes, const StoreName& store) noexcept {
  if (p != nullptr && bytes != 0) {
    unmap(p, bytes, store);
    store.budget.give_optional(bytes);
  }
}

/// Hands the pages of [p, p + bytes) back to the OS; anonymous private
/// pages read back as zeros afterwards. `p` and `bytes` are page-aligned.
/// Returns whether the kernel did it (false, e.g. for locked pages: the
/// range is then as it was).
inline bool discard_pages(void* p, std::uint64_t bytes) noexcept {
  return bytes == 0 || ::madvise(p, bytes, MADV_DONTNEED) == 0;
}

/// Replaces whatever is mapped at [p, p + bytes) (anonymous memory or a
/// private file mapping) with fresh anonymous zero pages, in one step: a
/// thread reading the range meanwhile sees the old bytes or zeros, never an
/// unmapped page. The old pages go back to the OS. Returns false if the
/// kernel refused (the range is then as it was).
/// `huge`: ask for transparent huge pages, as map_anonymous() does.
inline bool zero_pages(void* p, std::uint64_t bytes, bool huge = false) noexcept {
  void* q = ::mmap(p, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  if (q == MAP_FAILED) return false;
#if defined(MADV_HUGEPAGE)
  if (huge && bytes >= (std::uint64_t{4} << 20)) ::madvise(p, bytes, MADV_HUGEPAGE);
#else
  (void)huge;
#endif
  return true;
}

/// AddressSanitizer builds poison memory the engine has freed but keeps
/// mapped, so that a stray access is reported; elsewhere these do nothing.
inline void asan_poison(const void* p, std::uint64_t bytes) noexcept {
#if defined(OFFHEAP_ASAN)
  ASAN_POISON_MEMORY_REGION(p, bytes);
#else
  (void)p;
  (void)bytes;
#endif
}
inline void asan_unpoison(const void* p, std::uint64_t bytes) noexcept {
#if defined(OFFHEAP_ASAN)
  ASAN_UNPOISON_MEMORY_REGION(p, bytes);
#else
  (void)p;
  (void)bytes;
#endif
}

/// Test-only builds: gives up a range as if nothing could touch it again:
/// poisoned where AddressSanitizer is on (a later access is reported),
/// unmapped elsewhere (a later access faults). Either way its bytes go back
/// to the store's budget.
inline void asan_poison_or_unmap(void* p, std::uint64_t bytes, const StoreName& store) noexcept {
#if defined(OFFHEAP_ASAN)
  ASAN_POISON_MEMORY_REGION(p, bytes);
  store.budget.give(bytes);
#else
  unmap(p, bytes, store);
#endif
}

/// ThreadSanitizer builds: while one is alive, TSan checks none of this
/// thread's plain memory accesses (its runtime ignores writes too, not only
/// reads); atomics and locks still order. For the seqlock's intentional
/// race: a reader's callback reads record bytes a writer may be rewriting,
/// and the stamps, checked after the callback, decide whether what it read
/// counts. Elsewhere an empty object.
///
/// In every build its end is a compiler barrier: the plain loads made
/// while it was alive stay before what follows, the stamp's second load
/// (record::validate) included. validate()'s acquire fence orders only
/// atomic reads in the standard's terms; the barrier emits nothing (x86-64
/// keeps loads in order, and the fence's instruction orders them on weaker
/// CPUs).
class TsanIgnoreAccesses {
 public:
#if defined(OFFHEAP_TSAN)
  TsanIgnoreAccesses() noexcept { ::AnnotateIgnoreReadsBegin(__FILE__, __LINE__); }
  ~TsanIgnoreAccesses() {
    ::AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
    __asm__ __volatile__("" ::: "memory");
  }
#else
  TsanIgnoreAccesses() noexcept {}  // user-provided: no unused-variable warning
  ~TsanIgnoreAccesses() { __asm__ __volatile__("" ::: "memory"); }
#endif
  TsanIgnoreAccesses(const TsanIgnoreAccesses&) = delete;
  TsanIgnoreAccesses& operator=(const TsanIgnoreAccesses&) = delete;
};

/// 64 bits from the kernel's random source, for per-store hash seeds.
inline std::uint64_t random_u64() noexcept {
  std::uint64_t v = 0;
  ssize_t got = ::getrandom(&v, sizeof v, 0);
  if (got != static_cast<ssize_t>(sizeof v)) {
    // getrandom cannot fail for 8 bytes once the pool is ready; mix the
    // address of a local and the clock as a last resort.
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    v = (reinterpret_cast<std::uintptr_t>(&v) * 0x9E3779B97F4A7C15ull) ^
        (static_cast<std::uint64_t>(::getpid()) << 32) ^
        static_cast<std::uint64_t>(ts.tv_nsec) ^ (static_cast<std::uint64_t>(ts.tv_sec) << 20);
  }
  return v;
}

}  // namespace offheap::detail
