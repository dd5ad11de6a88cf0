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

/// Whether this build runs under ThreadSanitizer (whose shadow of every
/// page the program touched stays resident after the program hands the
/// page back: resident-memory figures then say little) or AddressSanitizer.
#if defined(__has_feature)
#define OFFHEAP_TEST_HAS_FEATURE(x) __has_feature(x)
#else
#define OFFHEAP_TEST_HAS_FEATURE(x) 0
#endif
#if defined(__SANITIZE_THREAD__) || OFFHEAP_TEST_HAS_FEATURE(thread_sanitizer)
inline constexpr bool kThreadSanitized = true;
#else
inline constexpr bool kThreadSanitized = false;
#endif
#if defined(__SANITIZE_ADDRESS__) || OFFHEAP_TEST_HAS_FEATURE(address_sanitizer)
inline constexpr bool kAddressSanitized = true;
#else
inline constexpr bool kAddressSanitized = false;
#endif
/// Either (their runtimes make memory and time figures several times
/// larger): tests then run smaller.
inline constexpr bool kSanitized = kThreadSanitized || kAddressSanitized;

}  // namespace offheap_test
