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

}  // namespace offheap_test
