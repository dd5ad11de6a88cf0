// SPDX-License-Identifier: Apache-2.0
// Flags and numbers as the benchmarks read and print them: the walk over
// `--name=value` flags, a flag's value parsed whole or refused, counts with
// thousands separators, exponents as the issues write them. No Google Benchmark here, so that the
// plain executables (offheap_hit_ratio, offheap_warm_restart) share it with
// summary.hpp.
#pragma once

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace offheap_bench {

/// One command-line argument, as a flag parser sees it.
class Flag {
 public:
  explicit Flag(const char* arg) noexcept : arg_(arg) {}

  /// The text after `prefix` ("--objects=") if the argument starts with it,
  /// else nullptr.
  const char* value(std::string_view prefix) const noexcept {
    return std::string_view(arg_).substr(0, prefix.size()) == prefix ? arg_ + prefix.size() : nullptr;
  }

  /// Says "<argument>: <why>" on stderr; false, for `return flag.fail(...)`.
  bool fail(const char* why) const {
    std::fprintf(stderr, "%s: %s\n", arg_, why);
    return false;
  }
  bool unknown() const { return fail("unknown flag (see --help)"); }

 private:
  const char* arg_;
};

/// Hands each argument after argv[0] to `each(const Flag&)`, which returns
/// false (having said why with Flag::fail) to stop the walk, and refuses
/// what it does not know with Flag::unknown(). --help and -h print
/// usage(argv[0]) and exit 0. Returns: false if `each` refused an argument.
template <class Each>
bool parse_flags(int argc, char** argv, void (*usage)(const char*), Each&& each) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg(argv[i]);
    if (arg == "--help" || arg == "-h") {
      usage(argv[0]);
      std::exit(0);
    }
    if (!each(Flag(argv[i]))) return false;
  }
  return true;
}

/// A whole unsigned number (decimal, or 0x hex), nothing after it; false for
/// anything else, a sign included.
inline bool parse_u64(const char* v, std::uint64_t& out) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long n = std::strtoull(v, &end, 0);
  if (errno != 0 || end == v || *end != '\0' || *v == '-') return false;
  out = n;
  return true;
}

/// Comma-separated finite numbers >= 0 ("0.8,1.0"); false for anything else.
inline bool parse_doubles(const char* v, std::vector<double>& out) {
  out.clear();
  std::string_view rest(v);
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    const std::string item(rest.substr(0, comma));
    char* end = nullptr;
    const double d = std::strtod(item.c_str(), &end);
    if (item.empty() || *end != '\0' || !(d >= 0) || !std::isfinite(d)) return false;
    out.push_back(d);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
  }
  return true;
}

/// 10000000 -> "10,000,000".
inline std::string with_commas(std::uint64_t n) {
  std::string digits = std::to_string(n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i != 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

/// An exponent as the issues write it: 1.0, not 1.
inline std::string exponent(double a) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", a);
  std::string out = buf;
  if (out.find_first_of(".e") == std::string::npos) out += ".0";
  return out;
}

}  // namespace offheap_bench
