// SPDX-License-Identifier: Apache-2.0
// Environment variables that tune a test run (seeds, iterations, verbosity).
#pragma once

#include <cstdint>
#include <cstdlib>

namespace offheap_test {

/// The variable's value, or null when it is unset or empty.
inline const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

/// The variable as a number (decimal, 0x.. or 0..), or `fallback`.
inline std::uint64_t env_u64(const char* name, std::uint64_t fallback) {
  const char* v = env(name);
  return v != nullptr ? std::strtoull(v, nullptr, 0) : fallback;
}

/// Whether this build runs under AddressSanitizer or ThreadSanitizer (whose
/// runtimes make memory and time figures several times larger): tests then
/// run smaller.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

/// Whether this build runs under ThreadSanitizer, whose shadow of every
/// page the program touched stays resident after the program hands the
/// page back (resident-memory figures then say little).
#if defined(__SANITIZE_THREAD__)
inline constexpr bool kThreadSanitized = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
inline constexpr bool kThreadSanitized = true;
#else
inline constexpr bool kThreadSanitized = false;
#endif
#else
inline constexpr bool kThreadSanitized = false;
#endif

}  // namespace offheap_test
