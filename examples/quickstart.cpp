// SPDX-License-Identifier: Apache-2.0
// Quick start: put, get, overwrite, remove, iterate, statistics.
#include <offheap/offheap.hpp>

#include <cstdio>
#include <string>

int main() {
  offheap::Options options;
  options.name = "quickstart";
  options.expected_entries = 1000;  // pre-size the index: no rehash up to here
  offheap::Store store(options);

  store.put("user:1", "Ada Lovelace");
  store.put("user:2", "Grace Hopper");
  store.put("user:1", "Ada King, Countess of Lovelace");  // overwrite

  std::string name;  // reused buffer: no allocation once it is large enough
  if (store.get("user:1", name)) std::printf("user:1 = %s\n", name.c_str());

  store.put_if_absent("user:3", "Edsger Dijkstra");
  store.replace("user:2", "Grace Hopper", "Rear Admiral Grace Hopper");
  store.remove("user:3");

  store.for_each([](std::string_view key, std::string_view value) {
    std::printf("  %.*s -> %.*s\n", int(key.size()), key.data(), int(value.size()), value.data());
  });

  const offheap::Stats s = store.stats();
  std::printf("%llu records, %llu puts, %llu hits, %llu bytes mapped\n",
              static_cast<unsigned long long>(s.records), static_cast<unsigned long long>(s.puts),
              static_cast<unsigned long long>(s.hits),
              static_cast<unsigned long long>(s.mapped_bytes));
  return store.size() == 2 ? 0 : 1;
}
