// SPDX-License-Identifier: Apache-2.0
// Entries that expire: a session store where every session lives 30
// minutes unless renewed, a one-off token with its own lifetime, and a
// listener told of each expiry. The clock here is the program's own (a
// test clock), so that the example shows time passing without waiting.
#include <offheap/offheap.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>

using namespace std::chrono_literals;

/// Milliseconds since the Unix epoch that the program moves (a real program
/// leaves Options::clock unset: the steady clock, anchored to the wall clock).
struct ManualClock : offheap::Clock {
  std::atomic<std::uint64_t> ms{1'800'000'000'000};
  std::uint64_t now_ms() const noexcept override { return ms.load(); }
};

int main() {
  ManualClock clock;
  int expired = 0;
  offheap::Options options;
  options.default_ttl = 30min;              // every write without a Ttl of its own
  options.clock = &clock;
  options.background_maintenance = false;   // this program calls maintain() itself
  options.on_removal = [&](std::string_view key, std::string_view, offheap::RemovalCause cause) {
    if (cause == offheap::RemovalCause::expired) {
      ++expired;
      std::printf("expired: %.*s\n", static_cast<int>(key.size()), key.data());
    }
  };
  offheap::Store sessions(options);

  sessions.put("session:ada", "cart=3");                       // 30 minutes
  sessions.put("session:bob", "cart=1");
  sessions.put("token:reset-42", "bob", 5min);                 // its own lifetime
  sessions.put("config:motd", "hello", offheap::Ttl::never()); // never expires

  clock.ms += 20 * 60 * 1000;               // 20 minutes later
  sessions.put("session:ada", "cart=4");    // renewed: 30 minutes from now
  sessions.maintain();                      // the token expired (5 min)

  clock.ms += 15 * 60 * 1000;               // 35 minutes after the start
  const bool ada = sessions.contains("session:ada");  // renewed at 20 min
  const bool bob = sessions.contains("session:bob");  // expired at 30 min: gone for reads at once
  sessions.maintain();                      // and now removed, reported
  std::printf("ada %s, bob %s, %llu entries left\n", ada ? "present" : "gone", bob ? "present" : "gone",
              static_cast<unsigned long long>(sessions.size()));
  return ada && !bob && expired == 2 && sessions.size() == 2 ? 0 : 1;
}
