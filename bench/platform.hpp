// SPDX-License-Identifier: Apache-2.0
// The host lines a benchmark prints before its figures: CPU, OS, compiler,
// and whether the build is optimized (figures from another build say
// little).
#pragma once

#include <sys/utsname.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

namespace offheap_bench {

/// The CPU's model name from /proc/cpuinfo.
inline std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  }
  return "unknown CPU";
}

/// The compiler and its version.
inline std::string compiler() {
#if defined(__clang__)
  return std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
  return std::string("GCC ") + __VERSION__;
#else
  return "unknown compiler";
#endif
}

/// Prints the CPU, OS and compiler lines, indented under a title line.
inline void print_host() {
  utsname u{};
  ::uname(&u);
  std::printf("  CPU:      %s, %u hardware threads\n", cpu_model().c_str(),
              std::thread::hardware_concurrency());
  std::printf("  OS:       %s %s %s\n", u.sysname, u.release, u.machine);
  std::printf("  Compiler: %s", compiler().c_str());
#if defined(NDEBUG) && defined(__OPTIMIZE__)
  std::printf(", optimized, NDEBUG\n");
#else
  std::printf(", WARNING: not an optimized NDEBUG build, numbers are not meaningful\n");
#endif
}

}  // namespace offheap_bench
