// SPDX-License-Identifier: Apache-2.0
// The index's growth (Index::grow) and its migrations: a table past
// kRebuildGroups groups grows by publishing the new table beside it and
// moving a few groups per write (index.hpp says how readers and walks see
// the two tables, and why no key is ever in neither).
#pragma once

#include <offheap/detail/index/index.hpp>

#include <algorithm>
#include <cstdint>

namespace offheap::detail {

template <class HashOf>
void Index::grow(HashOf&& hash_of, WalkGate& walks) {
  IndexTable* cur = table_;
  const std::uint64_t live = size();
  std::uint64_t groups = cur->groups;
  IndexTable* t = nullptr;
  if (live + 1 > limit_of(cur->capacity()) / 2) {
    try {
      // Under a limit, twice the size only with room for its spare too
      // (keep_spare()): else a rebuild of the same size, in the spare.
      const std::uint64_t twice = IndexTable::bytes_for(groups * 2);
      if (name_.budget.limit() != 0 && name_.budget.available() / 2 < twice) {
        throw_limit_reached(name_, 2 * twice, "an index table twice the size and its spare");
      }
      t = create(groups * 2);
    } catch (LimitReached& e) {
      // Evicting helps a cache when live entries, not tombstones, fill
      // the table: with fewer, a rebuild of the same capacity does.
      e.evicting_helps = live + 1 > limit_of(cur->capacity()) / 4 * 3;
      if (e.evicting_helps) throw;
    }
  }
  if (t == nullptr) t = create(groups);
  if (old_ == nullptr && cur->groups > kRebuildGroups) {
    begin_migration(t);
    // Under a limit, the new size's spare now (as after a rebuild): a
    // rebuild of both tables, should walks hold the migration back until the
    // new one fills, then maps nothing.
    keep_spare();
    return;
  }
  // At once: every entry of the drained table (if any) and the current one.
  std::uint64_t kept = 0;
  const auto place_all = [&](const IndexTable* from) {
    for_each_full_of(from, 0, [&](std::uint64_t slot, Location) {
      const std::uint64_t word = load_relaxed(from->slot_word(slot));  // with its policy bits
      std::uint64_t h = 0;
      if (!hash_of(Location::from_slot(word), h)) return;  // a damaged record: left out
      place(t, h, word);
      ++kept;
    });
  };
  IndexTable* drained = old_;
  if (drained != nullptr) place_all(drained);
  place_all(cur);
  full_ = kept;
  tombstones_ = 0;
  old_ = nullptr;
  old_full_ = 0;
  cursor_ = 0;
  publish(t, 0);  // the pair at once (its seqlock): no reader holds one table without the other
  // After the publish: a reader that sees this generation sees the new table.
  generation_.store(generation_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  if (drained != nullptr) retire(drained, walks);
  retire(cur, walks);
  keep_spare();
}

template <class HashOf, class Prefetch>
void Index::migrate(HashOf&& hash_of, Prefetch&& prefetch, WalkGate& walks, std::uint64_t max_groups) noexcept {
  if (old_ == nullptr) return;
  moving_.store(1);
  if (walks.active()) {
    moving_.store(0);
    return;
  }
  IndexTable* o = old_;
  const std::uint64_t end = o->groups - cursor_ <= max_groups ? o->groups : cursor_ + max_groups;
  for (std::uint64_t g = cursor_; g < end; ++g) {
    for_each_full_in_group(o, g, [&](std::uint64_t slot) {
      prefetch(Location::from_slot(load_relaxed(o->slot_word(slot))));
    });
  }
  move_groups(end, hash_of);
  moving_.store(0);
  if (cursor_ == o->groups) end_migration(walks);
}

template <class HashOf>
void Index::move_groups(std::uint64_t end, HashOf& hash_of) noexcept {
  for (std::uint64_t g = cursor_; g < end; ++g) move_group(old_, g, hash_of);
  cursor_ = end;
  moves_.store(moves_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

template <class HashOf>
void Index::finish_migration(HashOf&& hash_of, WalkGate& walks) noexcept {
  if (old_ == nullptr) return;
  moving_.store(1);
  move_groups(old_->groups, hash_of);
  moving_.store(0);
  end_migration(walks);
}

inline void Index::begin_migration(IndexTable* t) noexcept {
  IndexTable* o = table_;
  ++migrations_;
  old_ = o;
  old_full_ = full_;
  full_ = 0;
  tombstones_ = 0;
  cursor_ = 0;
  publish(t, word_of(o));  // the pair at once (its seqlock)
  generation_.store(generation_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

inline void Index::end_migration(WalkGate& walks) noexcept {
  IndexTable* o = old_;
  old_ = nullptr;
  old_full_ = 0;
  cursor_ = 0;
  // Release: a reader that sees no drained table sees every entry moved.
  old_word_.store(0, std::memory_order_release);
  invalidate_readers();
  retire(o, walks);
  keep_spare();
}

template <class HashOf>
void Index::move_group(IndexTable* o, std::uint64_t g, HashOf& hash_of) noexcept {
  std::uint64_t* cw = o->ctrl_word(g);
  const std::uint64_t w = load_relaxed(cw);
  std::uint64_t next = w;
  for (std::uint64_t m = w & ctrl::kHighs; m; m &= m - 1) {
    const unsigned i = ctrl::first(m);
    std::uint64_t* sw = o->slot_word(g * 8 + i);
    const std::uint64_t word = load_relaxed(sw);  // with its policy bits
    std::uint64_t h = 0;
    // A damaged record (hash_of false) is left out, as in grow().
    const bool keep = hash_of(Location::from_slot(word), h);
#if defined(OFFHEAP_TESTING_MIGRATION_ERASE_FIRST)
    store_release(sw, Location::none().raw());
    store_release(cw, (load_relaxed(cw) & ~(std::uint64_t{0xFF} << (8 * i))) |
                          (std::uint64_t{ctrl::kTombstone} << (8 * i)));
#else
    if (keep) place_live(h, word);
#endif
#if defined(OFFHEAP_TESTING_MIGRATION_HOOK)
    if (testing_between_move_stores != nullptr) testing_between_move_stores();
#endif
#if defined(OFFHEAP_TESTING_MIGRATION_ERASE_FIRST)
    if (keep) place_live(h, word);
#else
    store_release(sw, Location::none().raw());
#endif
    next = (next & ~(std::uint64_t{0xFF} << (8 * i))) | (std::uint64_t{ctrl::kTombstone} << (8 * i));
    --old_full_;
  }
  if (next != w) store_release(cw, next);
}

inline void Index::place_live(std::uint64_t hash, std::uint64_t word) noexcept {
  IndexTable* t = table_;
  for (ProbeSeq seq(hash, t->groups - 1);; seq.next()) {
    const std::uint64_t g = seq.group();
    if (const std::uint64_t a = ctrl::match_available(load_relaxed(t->ctrl_word(g)))) {
      const std::uint64_t slot = g * 8 + ctrl::first(a);
      if (ctrl::byte_of(*t->ctrl_word(g), slot % 8) == ctrl::kTombstone) --tombstones_;
      store_release(t->slot_word(slot), word);
      set_ctrl(t, slot, ctrl::tag_of(hash));
      ++full_;
      return;
    }
  }
}

}  // namespace offheap::detail
