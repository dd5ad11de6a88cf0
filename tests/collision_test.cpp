// SPDX-License-Identifier: Apache-2.0
// Hash collisions cost time, never correctness (DESIGN.md §5). Each test
// policy below replaces the key hash with a bad one:
//
//   CollidingPolicy   every key hashes to 42: one probe path, one tag
//   FourHashPolicy    keys map to 4 hash values, two sharing their group
//                     bits and two sharing their tag bits
//   TagOnlyPolicy     a real hash with bits 57-63 (the index tag) forced
//                     equal: every slot's tag matches every key
//   GroupOnlyPolicy   a real hash with the low 32 bits (which pick the
//                     starting group) zeroed: every key starts at group 0,
//                     tags still differ
//
// Over a few thousand keys built to be hard to tell apart (a long shared
// prefix with same-length suffixes, keys that are prefixes of one another,
// keys differing only by trailing zeros, same-length keys differing in one
// byte, the empty key), the store must answer for each key with its own
// value through puts, conditional writes aimed at a colliding neighbour's
// value, overwrites, removals, re-adds, a full removal and a reload; size()
// and for_each must agree with the model throughout.
#include <offheap/offheap.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace {

struct CollidingPolicy : offheap::StorePolicy {
  struct Hash {
    explicit Hash(std::uint64_t) {}
    std::uint64_t operator()(std::string_view) const noexcept { return 42; }
  };
  static constexpr std::uint8_t id = 250;
};

struct FourHashPolicy : offheap::StorePolicy {
  struct Hash {
    explicit Hash(std::uint64_t) {}
    std::uint64_t operator()(std::string_view key) const noexcept {
      // v0 and v1 share every low (group) bit; v1 and v2 share the tag bits.
      static constexpr std::uint64_t kValues[4] = {
          42, 42 | (std::uint64_t{0x55} << 57), (std::uint64_t{0x55} << 57) | 0x1000,
          ~std::uint64_t{0}};
      std::uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a
      for (const char c : key) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001B3ull;
      return kValues[(h ^ (h >> 32)) & 3];
    }
  };
  static constexpr std::uint8_t id = 251;
};

struct TagOnlyPolicy : offheap::StorePolicy {
  struct Hash {
    explicit Hash(std::uint64_t seed) : inner(seed) {}
    std::uint64_t operator()(std::string_view key) const noexcept {
      return (inner(key) & ((std::uint64_t{1} << 57) - 1)) | (std::uint64_t{0x2A} << 57);
    }
    offheap::SeededHash inner;
  };
  static constexpr std::uint8_t id = 252;
};

struct GroupOnlyPolicy : offheap::StorePolicy {
  struct Hash {
    explicit Hash(std::uint64_t seed) : inner(seed) {}
    std::uint64_t operator()(std::string_view key) const noexcept {
      return inner(key) & ~((std::uint64_t{1} << 32) - 1);
    }
    offheap::SeededHash inner;
  };
  static constexpr std::uint8_t id = 253;
};

static_assert(offheap::Policy<CollidingPolicy> && offheap::Policy<FourHashPolicy> &&
              offheap::Policy<TagOnlyPolicy> && offheap::Policy<GroupOnlyPolicy>);

std::vector<std::string> hard_keys() {
  std::vector<std::string> keys;
  std::unordered_set<std::string> seen;
  const auto add = [&](std::string k) {
    if (seen.insert(k).second) keys.push_back(std::move(k));
  };
  add(std::string());
  // A 250-byte shared prefix, then a 2-byte suffix: 600 keys of one length.
  std::string prefix;
  for (int i = 0; i < 250; ++i) prefix += static_cast<char>((i * 37) & 0xFF);
  for (int i = 0; i < 600; ++i) {
    add(prefix + static_cast<char>(i & 0xFF) + static_cast<char>(i >> 8));
  }
  // Keys that are prefixes of one another, and keys differing only by
  // trailing zeros.
  for (std::size_t n = 1; n <= 300; ++n) add(std::string(n, 'c'));
  for (std::size_t n = 0; n < 300; ++n) add("z" + std::string(n, '\0'));
  // 24-byte keys differing in exactly one byte from a base.
  const std::string base = "same-length-key-24-bytes";
  for (int i = 0; i < 24 * 33; ++i) {
    std::string k = base;
    k[static_cast<std::size_t>(i % 24)] =
        static_cast<char>(static_cast<unsigned char>(k[static_cast<std::size_t>(i % 24)]) ^ (1 + i / 24));
    add(std::move(k));
  }
  // Binary keys with zeros and 0xFF bytes, 1-64 bytes.
  std::uint64_t s = 0x1234567;
  for (int i = 0; i < 1000; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    std::string k(1 + (s >> 58), '\0');
    for (std::size_t j = 0; j < k.size(); ++j) {
      const auto b = static_cast<unsigned char>((s >> (j % 7 * 8)) + j);
      k[j] = static_cast<char>(b % 3 == 0 ? 0 : b % 3 == 1 ? 0xFF : b);
    }
    add(std::move(k));
  }
  return keys;
}

/// Each key's value names its index and version, so a value that belongs to
/// a colliding neighbour, or to an older write, cannot pass.
std::string value_for(std::size_t i, int version) {
  std::string v = "key#" + std::to_string(i) + " v" + std::to_string(version) + ":";
  v.append((i * 7 + static_cast<std::size_t>(version) * 13) % 120, static_cast<char>('a' + version));
  return v;
}

template <class P>
class Scenario {
 public:
  using Store = offheap::OffHeapStore<P>;

  Scenario() : keys_(hard_keys()), model_(keys_.size()) {
    for (std::size_t i = 0; i < keys_.size(); ++i) index_of_.emplace(keys_[i], i);
    offheap::Options o;
    o.name = "collisions";
    o.hash_seed = 7;
    store_ = std::make_unique<Store>(o);
  }

  std::size_t count() const { return keys_.size(); }
  Store& store() { return *store_; }
  const std::string& key(std::size_t i) const { return keys_[i]; }
  const std::optional<std::string>& model(std::size_t i) const { return model_[i]; }

  void put(std::size_t i, int version) {
    std::string v = value_for(i, version);
    store_->put(keys_[i], v);
    model_[i] = std::move(v);
  }
  void forget_all() {
    for (auto& m : model_) m.reset();
  }
  void remove(std::size_t i) {
    INFO("key #" << i << " of " << keys_[i].size() << " bytes");
    REQUIRE(store_->remove(keys_[i]) == model_[i].has_value());
    model_[i].reset();
  }

  /// Every key answers with its own value through every read; removed keys
  /// are absent; size() and for_each agree with the model.
  void check_all(const char* phase) {
    INFO("phase: " << phase);
    std::uint64_t live = 0;
    std::string out;
    std::uint64_t wrong = 0, first_wrong = keys_.size();
    for (std::size_t i = 0; i < keys_.size(); ++i) {
      const std::string_view k = keys_[i];
      bool ok = true;
      if (model_[i]) {
        ++live;
        ok = store_->contains(k) && store_->get(k, out) && out == *model_[i];
        bool same = false;
        ok = ok && store_->read(k, [&](std::string_view v) { same = v == *model_[i]; }) && same;
        const auto view = store_->view(k);
        ok = ok && view && view.key() == k &&
             view.read([&](std::string_view v) { return v == *model_[i]; });
      } else {
        ok = !store_->contains(k) && !store_->get(k).has_value() && !store_->view(k);
      }
      if (!ok) {
        ++wrong;
        if (first_wrong == keys_.size()) first_wrong = i;
      }
    }
    INFO("first wrong key #" << first_wrong);
    CHECK(wrong == 0);
    CHECK(store_->size() == live);
    CHECK(store_->stats().records == live);

    std::vector<char> visited(keys_.size(), 0);
    std::uint64_t visits = 0, unknown = 0, twice = 0, bad_value = 0;
    store_->for_each([&](std::string_view k, std::string_view v) {
      ++visits;
      const auto it = index_of_.find(std::string(k));
      if (it == index_of_.end() || !model_[it->second]) {
        ++unknown;
        return;
      }
      if (visited[it->second]++) ++twice;
      if (v != *model_[it->second]) ++bad_value;
    });
    CHECK(visits == live);
    CHECK(unknown == 0);
    CHECK(twice == 0);
    CHECK(bad_value == 0);
  }

 private:
  std::vector<std::string> keys_;
  std::vector<std::optional<std::string>> model_;
  std::unordered_map<std::string, std::size_t> index_of_;
  std::unique_ptr<Store> store_;
};

}  // namespace

TEMPLATE_TEST_CASE("collisions: every key keeps its own value under a degenerate hash",
                   "[collision]", CollidingPolicy, FourHashPolicy, TagOnlyPolicy,
                   GroupOnlyPolicy) {
  Scenario<TestType> sc;
  auto& store = sc.store();
  const std::size_t n = sc.count();
  REQUIRE(n > 2500);

  for (std::size_t i = 0; i < n; ++i) sc.put(i, 1);
  sc.check_all("after the first puts");

  // Conditional writes aimed at a colliding neighbour's value must not touch
  // either key.
  std::uint64_t wrongly_applied = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t j = (i + 1) % n;
    const std::string& neighbour = *sc.model(j);
    wrongly_applied += store.put_if_absent(sc.key(i), neighbour);
    wrongly_applied += store.replace(sc.key(i), neighbour, "hijacked");
    wrongly_applied += store.remove(sc.key(i), neighbour);
  }
  CHECK(wrongly_applied == 0);
  sc.check_all("after conditional writes with a neighbour's value");

  // Overwrite every other key, with another length (some in place, some moved).
  for (std::size_t i = 0; i < n; i += 2) sc.put(i, 2);
  sc.check_all("after overwriting every other key");

  // Remove every third key; removed keys stay absent for every write that
  // needs them present.
  for (std::size_t i = 0; i < n; i += 3) sc.remove(i);
  std::uint64_t phantom = 0;
  for (std::size_t i = 0; i < n; i += 3) {
    phantom += store.remove(sc.key(i));
    phantom += store.replace(sc.key(i), "ghost");
    phantom += store.replace(sc.key(i), *sc.model((i + 1) % n), "ghost");
    phantom += store.remove(sc.key(i), *sc.model((i + 1) % n));
  }
  CHECK(phantom == 0);
  sc.check_all("after removing every third key");

  // Re-add the removed keys through put_if_absent; matching conditional
  // writes on the others.
  std::uint64_t refused = 0;
  for (std::size_t i = 0; i < n; i += 3) {
    const std::string v = value_for(i, 3);
    if (store.put_if_absent(sc.key(i), v)) {
      sc.put(i, 3);  // same bytes: keeps the model in step
    } else {
      ++refused;
    }
  }
  CHECK(refused == 0);
  std::uint64_t missed = 0;
  for (std::size_t i = 1; i < n; i += 3) {
    const std::string v = value_for(i, 4);
    if (store.replace(sc.key(i), *sc.model(i), v)) {
      sc.put(i, 4);
    } else {
      ++missed;
    }
  }
  CHECK(missed == 0);
  sc.check_all("after re-adding and conditional replaces");

  // A view of one key stays live while its colliding neighbours are written
  // and removed (and the index grows or rebuilds under them).
  {
    const auto view = store.view(sc.key(5));
    REQUIRE(view);
    for (std::size_t i = 0; i < n; ++i) {
      if (i == 5) continue;
      if (i % 2) sc.put(i, 5);
      else sc.remove(i);
    }
    CHECK(view.status() == offheap::ViewStatus::live);
    CHECK(view.read([&](std::string_view v) { return v == *sc.model(5); }));
    sc.check_all("after writing every neighbour of a viewed key");
  }

  // Remove everything, then reload.
  for (std::size_t i = 0; i < n; ++i) sc.remove(i);
  CHECK(store.size() == 0);
  CHECK(store.empty());
  sc.check_all("after removing every key");
  for (std::size_t i = n; i-- > 0;) sc.put(i, 6);
  sc.check_all("after reloading in reverse order");
  store.clear();
  sc.forget_all();
  sc.check_all("after clear");
  for (std::size_t i = 0; i < n; ++i) sc.put(i, 7);
  sc.check_all("after clear and reload");
}
