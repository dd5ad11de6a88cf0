// SPDX-License-Identifier: Apache-2.0
// Typed values: arithmetic types and trivially copyable structs, stored with
// a type tag that get_value checks.
#include <offheap/offheap.hpp>

#include <cstdint>
#include <cstdio>
#include <optional>

// put_value stores a struct's bytes as they lie, so it takes only structs
// without padding: frame fills the 4 bytes the compiler would otherwise add
// after a lone uint32_t, and the doubles mean the compiler cannot prove the
// struct padding-free by itself, so it is declared below.
struct Position {
  double x, y, z;
  std::uint32_t frame;
  std::uint32_t flags;
};
static_assert(sizeof(Position) == 3 * sizeof(double) + 2 * sizeof(std::uint32_t));

template <>
struct offheap::ValueTypeTag<Position> {
  static constexpr bool padding_free = true;  // checked by the static_assert above
  // Optional: a tag of its own, so that another 32-byte struct is refused.
  static constexpr std::uint8_t value = 130;
};

int main() {
  offheap::Store store;
  store.put_value("hits", std::uint64_t{41});
  // An atomic increment: the function runs under the key's shard lock, so
  // threads that count at once lose nothing (a get_value, then a
  // put_value, would).
  store.compute_value<std::uint64_t>("hits", [](std::optional<std::uint64_t> n) {
    return std::optional<std::uint64_t>(n.value_or(0) + 1);
  });
  store.put_value("ship", Position{1.5, -2.0, 30.25, 7, 0});

  std::printf("hits = %llu\n", static_cast<unsigned long long>(*store.get_value<std::uint64_t>("hits")));
  const Position p = *store.get_value<Position>("ship");
  std::printf("ship at (%.2f, %.2f, %.2f) frame %u\n", p.x, p.y, p.z, p.frame);

  try {
    store.get_value<double>("hits");  // stored as uint64_t
  } catch (const offheap::Error& e) {
    std::printf("%s: %s\n", std::string(offheap::to_string(e.code())).c_str(), e.what());
  }
  return store.get_value<int>("missing").has_value() ? 1 : 0;
}
