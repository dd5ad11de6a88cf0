// SPDX-License-Identifier: Apache-2.0
#include <offheap/detail/index/hash.hpp>

#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

using offheap::SeededHash;

TEST_CASE("the hash is a function of seed and key", "[hash]") {
  const SeededHash a(1), a2(1), b(2);
  for (const std::string& key : std::vector<std::string>{"", "a", "hello", "0123456789abcdef", std::string(100, 'z')}) {
    CHECK(a(key) == a2(key));
    CHECK(a(key) != b(key));
  }
}

TEST_CASE("keys differing only in length or trailing zeros hash apart", "[hash]") {
  const SeededHash h(7);
  std::unordered_set<std::uint64_t> seen;
  for (std::size_t n = 0; n <= 200; ++n) seen.insert(h(std::string(n, '\0')));
  CHECK(seen.size() == 201);
  seen.clear();
  for (std::size_t n = 0; n <= 200; ++n) seen.insert(h(std::string(n, 'a')));
  CHECK(seen.size() == 201);
}

TEST_CASE("no 64-bit collisions among a million sequential and random keys", "[hash]") {
  const SeededHash h(0x1234);
  std::unordered_set<std::string> keys;
  keys.reserve(2'000'000);
  for (int i = 0; i < 1'000'000; ++i) keys.insert(std::to_string(i));
  std::mt19937_64 rng(5);
  std::string key;
  for (int i = 0; i < 1'000'000; ++i) {
    key.resize(1 + rng() % 64);
    for (char& c : key) c = static_cast<char>(rng());
    keys.insert(key);  // short random keys repeat; distinct keys are what count
  }
  std::unordered_set<std::uint64_t> hashes;
  hashes.reserve(keys.size());
  for (const std::string& k : keys) hashes.insert(h(k));
  CHECK(keys.size() > 1'980'000);
  CHECK(hashes.size() == keys.size());
}

TEST_CASE("flipping one input bit flips about half of the output bits", "[hash]") {
  // Avalanche: for every key length class, every input bit, the mean number
  // of output bits that change must be close to 32, and each output bit must
  // change with a probability near 1/2.
  const SeededHash h(99);
  std::mt19937_64 rng(11);
  for (std::size_t len : {1, 3, 4, 7, 8, 12, 16, 17, 31, 32, 33, 64, 100}) {
    std::vector<double> flips(64, 0.0);
    double total = 0;
    int trials = 0;
    for (int t = 0; t < 60; ++t) {
      std::string key(len, '\0');
      for (char& c : key) c = static_cast<char>(rng());
      const std::uint64_t base = h(key);
      for (std::size_t bit = 0; bit < len * 8; ++bit) {
        std::string k2 = key;
        k2[bit / 8] = static_cast<char>(k2[bit / 8] ^ (1 << (bit % 8)));
        const std::uint64_t d = base ^ h(k2);
        total += std::popcount(d);
        for (int o = 0; o < 64; ++o) flips[o] += static_cast<double>((d >> o) & 1);
        ++trials;
      }
    }
    INFO("key length " << len);
    CHECK(std::abs(total / trials - 32.0) < 1.0);
    for (int o = 0; o < 64; ++o) {
      INFO("output bit " << o);
      CHECK(std::abs(flips[o] / trials - 0.5) < 0.1);
    }
  }
}

TEST_CASE("group bits and tag bits spread sequential keys evenly", "[hash]") {
  // Chi-square over 1024 buckets for the low bits (group choice) and the 7
  // tag bits (57-63), for keys that differ in few bits.
  const SeededHash h(3);
  constexpr int kKeys = 1 << 20;
  std::vector<int> low(1024, 0), tag(128, 0);
  for (int i = 0; i < kKeys; ++i) {
    const std::uint64_t x = h("user:" + std::to_string(i));
    ++low[x & 1023];
    ++tag[x >> 57];
  }
  const auto chi = [](const std::vector<int>& v, double expected) {
    double s = 0;
    for (int c : v) s += (c - expected) * (c - expected) / expected;
    return s;
  };
  // Degrees of freedom 1023 and 127: these bounds are far in the tail.
  CHECK(chi(low, kKeys / 1024.0) < 1250);
  CHECK(chi(tag, kKeys / 128.0) < 200);
}
