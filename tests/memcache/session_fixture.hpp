// SPDX-License-Identifier: Apache-2.0
// What the memcache session tests share: a Cache in memory on a clock the
// test moves, its ServerState, and talk(): bytes in, replies out.
#pragma once

#include <offheap/memcache/text_session.hpp>

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

using offheap::memcache::ServerState;
using offheap::memcache::TextLimits;
using offheap::memcache::TextSession;

namespace memcache_test {

struct TestClock : offheap::Clock {
  std::atomic<std::uint64_t> ms{1'800'000'000'000};  // 2027-01-15
  std::uint64_t now_ms() const noexcept override { return ms.load(); }
  void advance_s(std::uint64_t s) { ms += s * 1000; }
};

struct Server {
  TestClock clock;
  offheap::Cache cache;
  ServerState state;
  explicit Server(std::uint64_t first_cas = 1) : cache(options(clock)), state(first_cas) {}
  static offheap::Options options(const TestClock& c) {
    offheap::Options o;
    o.capacity_bytes = 64 << 20;
    o.clock = &c;
    o.background_maintenance = false;
    return o;
  }
};

/// Feeds `in` whole to a session; returns the replies (and "<close>" if it closes).
inline std::string talk(TextSession<offheap::CachePolicy>& s, std::string_view in) {
  std::string out;
  std::size_t used = 0;
  while (used < in.size()) {
    const auto fed = s.feed(in.substr(used), out);
    used += fed.consumed;
    if (fed.close) return out + "<close>";
    if (fed.consumed == 0) break;
  }
  return out;
}
inline std::string talk(Server& server, std::string_view in, TextLimits limits = {}) {
  TextSession<offheap::CachePolicy> s(server.cache, server.state, limits);
  return talk(s, in);
}

}  // namespace memcache_test

using namespace memcache_test;
