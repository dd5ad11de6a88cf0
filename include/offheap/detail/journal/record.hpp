// SPDX-License-Identifier: Apache-2.0
// The record: its layout, the seqlock write, and the validated read.
//
// Every record starts on an 8-byte boundary of a chunk:
//
//  byte  0        8        12     14     15     16        20        24
//        +--------+--------+------+------+------+---------+---------+------------------+
//        | stamp  | value  | key  | flags| type | checksum| expiry  | key, value, pad  |
//        |  u64   | len u32| len  |  u8  |  u8  |   u32   |   u32   | to a multiple of |
//        |        |        | u16  |      |      |         |         | 8 (>= 8 bytes)   |
//        +--------+--------+------+------+------+---------+---------+------------------+
//        word 0    word 1 (one atomic load)       word 2             payload words
//
//  stamp     even: the record is stable; odd: a writer is inside it; 0: never
//            written (zeroed memory). Drawn from the shard's counter, which
//            only grows, on every write and every free: a slot never shows the
//            same stamp twice, and a newer write of a key has a higher stamp.
//  value len live: the value's length in bytes; free: the payload capacity.
//  key len   live: the key's length (0-65,535); free: 0.
//  flags     bits 0-1 state (0 none, 1 live, 2 free, 3 dead); bits 2-4 slack: how many
//            spare 8-byte words the payload has beyond payload_for(key, value),
//            0-4 (a larger spare is split off as a free record); bit 5
//            prev-free: the record just before this one in its chunk is free
//            (kept exact by the writer, which may flip it in a live record's
//            header without a new stamp: readers ignore it); bits 6-7 are the
//            eviction policy's per-record state (0 for StorePolicy).
//  type      0 for bytes written by put(); a value type tag for put_value<T>.
//  checksum  CRC32C of the record for file-backed stores; 0 in memory.
//  expiry    bit 0: the record has a deadline, a 64-bit count of
//            milliseconds since the Unix epoch (the store's clock,
//            offheap/expiry.hpp) in the payload word right after the key and
//            value (at deadline_offset(), inside the payload's capacity:
//            payload_for(key, value, true) makes room for it); 0: never
//            expires. Bits 1-31: the node word, the eviction policy's
//            number for the record plus one (0: none; Lru and WTinyLfu
//            keep their list node's number there: eviction/policy.hpp,
//            the host's node()). The writer sets the node word in a live
//            record without a new stamp, as the prev-free bit, and carries
//            it over to a record that replaces or moves this one; readers
//            and the checksum ignore it, and the policy checks any word it
//            reads against its own node, so a stale or damaged one is
//            harmless.
//
// Header 24 bytes plus up to 7 of padding (payloads are at least 16 bytes,
// and an in-place shrink may leave up to 32 bytes of slack): per-record
// overhead stays at or under 32 bytes for a freshly written record of 9
// bytes or more. A free record keeps the locations of the next and previous
// free records of its size class in its first two payload words, never in
// the header, so that a reader holding a stale location sees the stamp
// change first. Its last payload word is a footer, (capacity << 1) | 1, so
// that the record after it can find its start and merge with it; in a
// 16-byte free record that word is the previous-link, an even location or
// all ones, which is how a footer read says "16".
//
// Seqlock protocol. Writer (under the shard's lock): store the stamp odd,
// release fence, store every other word, store the new even stamp with
// release. Reader: load the stamp with acquire (odd or 0: retry), read what
// it needs with relaxed loads, bounds-check lengths before following them,
// acquire fence, load the stamp again: any conclusion drawn from the words
// read holds only if the two loads are equal. Equal stamps prove a snapshot
// only where the word is a stamp: once a freed record merges into a
// neighbour, its old start may become another record's value bytes, which
// can show any "stamp". The index closes that gap (index.hpp, shard.hpp): a
// reader also requires the slot to still lead to the record and the index
// generation, loaded before the slot and moved by every merge, to be
// unchanged, and only then lets a length read here size anything.
#pragma once

#include <offheap/detail/memory/atomic_word.hpp>
#include <offheap/detail/journal/crc32c.hpp>
#include <offheap/detail/index/location.hpp>
#include <offheap/detail/memory/os.hpp>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <type_traits>

namespace offheap::detail {

static_assert(std::endian::native == std::endian::little,
              "offheap's record layout is defined for little-endian machines");

namespace record {

inline constexpr std::uint64_t kHeaderBytes = 24;
inline constexpr std::uint64_t kMinPayload = 16;  ///< room for two free-list links
inline constexpr std::uint64_t kMinRecord = kHeaderBytes + kMinPayload;
/// Spare payload smaller than a whole record stays with its record as slack.
inline constexpr std::uint64_t kMaxSlackWords = (kMinRecord - 8) / 8;
static_assert(kMaxSlackWords <= 7, "slack is kept in 3 bits of the flags byte");
inline constexpr std::uint32_t kMaxKeyBytes = 0xFFFF;
inline constexpr std::uint64_t kMaxValueBytes = 0xFFFFFFFFu;
/// A free record's capacity lives in the 32-bit length field.
inline constexpr std::uint64_t kMaxFreeCapacity = 0xFFFFFFF8u;

/// dead: a removal's marker, a record that holds the removed key (and no
/// value) with a higher stamp and its checksum, which outranks the key's
/// older records until they are freed for good (file-backed stores in
/// Durability::periodic; see Shard::erase).
enum class State : std::uint8_t { none = 0, live = 1, free = 2, dead = 3 };

/// Payload bytes a record of this key and value needs: key + value rounded
/// up to 8, at least kMinPayload.
constexpr std::uint64_t payload_for(std::uint64_t key_len, std::uint64_t value_len) noexcept {
  const std::uint64_t n = (key_len + value_len + 7) & ~std::uint64_t{7};
  return n < kMinPayload ? kMinPayload : n;
}

/// Word 2's expiry half: the deadline bit, and the node word above it.
inline constexpr std::uint64_t kDeadlineFlag = std::uint64_t{1} << 32;
inline constexpr unsigned kNodeShift = 33;
inline constexpr std::uint64_t kNodeBits = ~std::uint64_t{0} << kNodeShift;
/// The record has a deadline (word 2 as loaded).
constexpr bool has_deadline(std::uint64_t word2) noexcept { return (word2 & kDeadlineFlag) != 0; }

/// Where a record's deadline word lies in its payload: right after the key
/// and the value, on the next word boundary.
constexpr std::uint64_t deadline_offset(std::uint64_t key_len, std::uint64_t value_len) noexcept {
  return (key_len + value_len + 7) & ~std::uint64_t{7};
}

/// Payload bytes a record needs, with room for a deadline word if
/// `deadline`.
constexpr std::uint64_t payload_for(std::uint64_t key_len, std::uint64_t value_len, bool deadline) noexcept {
  if (!deadline) return payload_for(key_len, value_len);
  const std::uint64_t n = deadline_offset(key_len, value_len) + 8;
  return n < kMinPayload ? kMinPayload : n;
}

/// Header word 1, decoded.
struct Meta {
  std::uint32_t value_len = 0;
  std::uint16_t key_len = 0;
  std::uint8_t flags = 0;
  std::uint8_t type = 0;

  static constexpr Meta decode(std::uint64_t w) noexcept {
    return Meta{static_cast<std::uint32_t>(w), static_cast<std::uint16_t>(w >> 32),
                static_cast<std::uint8_t>(w >> 48), static_cast<std::uint8_t>(w >> 56)};
  }
  constexpr std::uint64_t encode() const noexcept {
    return std::uint64_t{value_len} | std::uint64_t{key_len} << 32 |
           std::uint64_t{flags} << 48 | std::uint64_t{type} << 56;
  }
  constexpr State state() const noexcept { return static_cast<State>(flags & 3u); }
  constexpr std::uint64_t slack_words() const noexcept { return (flags >> 2) & 7u; }
  constexpr bool prev_free() const noexcept { return (flags >> 5) & 1u; }
  constexpr std::uint8_t policy_bits() const noexcept { return flags >> 6; }
  /// Payload capacity: what the slot holds, whatever its state.
  constexpr std::uint64_t capacity() const noexcept {
    return state() == State::free ? value_len
                                  : payload_for(key_len, value_len) + slack_words() * 8;
  }
  static constexpr std::uint8_t make_flags(State s, std::uint64_t slack, bool prev_free,
                                           std::uint8_t policy) noexcept {
    return static_cast<std::uint8_t>(static_cast<unsigned>(s) | (slack << 2) |
                                     (unsigned{prev_free} << 5) | (unsigned{policy} << 6));
  }
};

// ---- word access ----------------------------------------------------------

inline std::uint64_t* stamp_word(std::byte* rec) noexcept { return word_at(rec); }
inline const std::uint64_t* stamp_word(const std::byte* rec) noexcept { return word_at(rec); }
inline std::uint64_t* payload_words(std::byte* rec) noexcept { return word_at(rec + kHeaderBytes); }
inline const std::uint64_t* payload_words(const std::byte* rec) noexcept {
  return word_at(rec + kHeaderBytes);
}
/// The bytes of a record's value, for callbacks that read in place.
inline const char* value_bytes(const std::byte* rec, std::uint64_t key_len) noexcept {
  return reinterpret_cast<const char*>(rec + kHeaderBytes + key_len);
}

// ---- writer side (the shard's lock is held) --------------------------------

/// Opens a write: the odd stamp becomes visible no later than any byte that
/// follows. The release fence pairs with the reader's acquire fence in
/// `validate`: a reader that sees any word stored after this fence sees the
/// odd stamp (or a later one) on its second load.
inline void begin_write(std::byte* rec, std::uint64_t new_stamp) noexcept {
  store_relaxed(stamp_word(rec), new_stamp - 1);
  std::atomic_thread_fence(std::memory_order_release);
}

/// Closes a write: the release store pairs with the reader's acquire load of
/// the stamp, so a reader that sees `new_stamp` sees every word written.
inline void end_write(std::byte* rec, std::uint64_t new_stamp) noexcept {
  store_release(stamp_word(rec), new_stamp);
}

/// Stores bytes a[0..na) followed by b[0..nb) into aligned words starting at
/// dst, zero-filling the last word's tail. Relaxed stores; the caller brackets
/// them with begin_write/end_write.
[[gnu::always_inline]] inline void store_concat(std::uint64_t* dst, const char* a, std::size_t na, const char* b,
                         std::size_t nb) noexcept {
  std::size_t i = 0;
  for (; (i + 1) * 8 <= na; ++i) store_relaxed(dst + i, load_u64(a + i * 8));
  const std::size_t head = na - i * 8;  // bytes of a left over, 0-7
  std::size_t off = 0;                  // next byte of b
  if (head != 0) {
    // The word that holds the end of a and the start of b.
    off = std::min<std::size_t>(8 - head, nb);
    store_relaxed(dst + i++, load_partial(a + na - head, head) | load_partial(b, off) << (8 * head));
  }
  for (; off + 32 <= nb; off += 32, i += 4) {  // unrolled: atomics do not vectorize
    store_relaxed(dst + i, load_u64(b + off));
    store_relaxed(dst + i + 1, load_u64(b + off + 8));
    store_relaxed(dst + i + 2, load_u64(b + off + 16));
    store_relaxed(dst + i + 3, load_u64(b + off + 24));
  }
  for (; off + 8 <= nb; off += 8) store_relaxed(dst + i++, load_u64(b + off));
  if (off < nb) store_relaxed(dst + i, load_partial(b + off, nb - off));
}

/// write_live() and rewrite_value(): the record written whole but for its
/// first `kept_key_words` words of key, which hold `key`'s bytes already.
[[gnu::always_inline]] inline void store_live(std::byte* rec, std::uint64_t new_stamp, std::string_view key,
                                              std::string_view value, std::uint8_t type,
                                              std::uint64_t capacity, bool prev_free, std::uint8_t policy_bits,
                                              std::uint64_t word2, State state, std::uint64_t deadline,
                                              std::size_t kept_key_words) noexcept {
  if (deadline != 0) word2 |= kDeadlineFlag;
  const std::uint64_t slack = (capacity - payload_for(key.size(), value.size())) / 8;
  begin_write(rec, new_stamp);
  const Meta m{static_cast<std::uint32_t>(value.size()), static_cast<std::uint16_t>(key.size()),
               Meta::make_flags(state, slack, prev_free, policy_bits), type};
  store_relaxed(word_at(rec + 8), m.encode());
  store_relaxed(word_at(rec + 16), word2);
  std::uint64_t* payload = payload_words(rec);
  if (key.size() + value.size() == 0) {
    store_relaxed(payload, 0);
  } else {
    const std::size_t kept = kept_key_words * 8;
    store_concat(payload + kept_key_words, key.data() + kept, key.size() - kept, value.data(), value.size());
  }
  if (deadline != 0) store_relaxed(payload + deadline_offset(key.size(), value.size()) / 8, deadline);
  end_write(rec, new_stamp);
}

/// Writes a live record at `rec` with the given payload capacity (at least
/// payload_for(key, value, deadline != 0), at most kMaxSlackWords words
/// more). `word2`: the checksum (0 in anonymous stores) and the node word
/// (kNodeBits), its deadline bit clear: set here from `deadline` (0: none). `state`: live, or dead (a removal's
/// marker, which holds the key and no value: see Shard::erase).
/// Out of line: store_concat() is inlined into it, and GCC, inlining both
/// into a caller with literal keys, warns of the word loads of branches
/// that those lengths never take (-Warray-bounds).
[[gnu::noinline]] inline void write_live(std::byte* rec, std::uint64_t new_stamp, std::string_view key,
                       std::string_view value, std::uint8_t type, std::uint64_t capacity,
                       bool prev_free, std::uint8_t policy_bits = 0, std::uint64_t word2 = 0,
                       State state = State::live, std::uint64_t deadline = 0) noexcept {
  store_live(rec, new_stamp, key, value, type, capacity, prev_free, policy_bits, word2, state, deadline, 0);
}

/// Rewrites a live record's value in place; the key stays where it is
/// (`key` is the record's own: of its words only the one that holds the
/// key's last bytes beside the value's first is stored again), and the
/// prev-free and policy bits and the node word carry over. The record ends as write_live()
/// would leave it. (Anonymous stores only: no checksum.) Inline, unlike
/// write_live(): the overwrite's short path (Shard::overwrite_in_place).
[[gnu::always_inline]] inline void rewrite_value(std::byte* rec, std::uint64_t new_stamp, std::string_view key,
                          std::string_view value, std::uint8_t type, std::uint64_t capacity,
                          std::uint64_t deadline = 0) noexcept {
  const Meta old = Meta::decode(load_relaxed(word_at(rec + 8)));
  const std::uint64_t node_word = load_relaxed(word_at(rec + 16)) & kNodeBits;
  store_live(rec, new_stamp, key, value, type, capacity, old.prev_free(), old.policy_bits(), node_word,
             State::live, deadline, key.size() / 8);
}

/// Turns the slot at `rec` into a free record of `capacity` payload bytes
/// linked to `next` and `prev` in its class, with its footer. The stamp
/// changes before anything else.
inline void write_free(std::byte* rec, std::uint64_t new_stamp, std::uint64_t capacity,
                       Location next, Location prev, bool prev_free) noexcept {
  begin_write(rec, new_stamp);
  const Meta m{static_cast<std::uint32_t>(capacity), 0,
               Meta::make_flags(State::free, 0, prev_free, 0), 0};
  store_relaxed(word_at(rec + 8), m.encode());
  store_relaxed(word_at(rec + 16), 0);
  store_relaxed(payload_words(rec), next.raw());
  store_relaxed(payload_words(rec) + 1, prev.raw());
  if (capacity > kMinPayload) store_relaxed(payload_words(rec) + capacity / 8 - 1, capacity << 1 | 1);
  end_write(rec, new_stamp);
}

/// The first of the free records that cover `bytes` (>= kMinRecord) of
/// free space: as much as the 32-bit capacity says, leaving the rest
/// either nothing or room for another free record. Every cover of a range
/// (Shard::push_free_range, compaction's emptied chunks) cuts it the same.
constexpr std::uint64_t free_piece(std::uint64_t bytes) noexcept {
  std::uint64_t piece = bytes < kHeaderBytes + kMaxFreeCapacity ? bytes : kHeaderBytes + kMaxFreeCapacity;
  if (bytes - piece != 0 && bytes - piece < kMinRecord) piece -= kMinRecord;
  return piece;
}

/// The capacity of the free record whose last payload word is `footer`.
constexpr std::uint64_t capacity_from_footer(std::uint64_t footer) noexcept {
  return (footer & 1) != 0 && footer != ~std::uint64_t{0} ? footer >> 1 : kMinPayload;
}

/// Sets or clears the prev-free bit of the record at `rec`, live or free,
/// leaving its stamp: the writer's bookkeeping, which readers ignore.
inline void set_prev_free(std::byte* rec, bool prev_free) noexcept {
  Meta m = Meta::decode(load_relaxed(word_at(rec + 8)));
  m.flags = static_cast<std::uint8_t>((m.flags & ~(1u << 5)) | (unsigned{prev_free} << 5));
  store_relaxed(word_at(rec + 8), m.encode());
}

/// Stores the eviction policy's bits (flags bits 6-7, outside the
/// checksum) in a live record's header without a new stamp, as
/// set_prev_free(): readers ignore them. A copy of the index slot's
/// frequency, so that a rebuild after a crash finds it.
inline void set_policy_bits(std::byte* rec, std::uint8_t bits) noexcept {
  Meta m = Meta::decode(load_relaxed(word_at(rec + 8)));
  const auto flags = static_cast<std::uint8_t>((m.flags & 0x3Fu) | ((bits & 3u) << 6));
  if (flags == m.flags) return;
  m.flags = flags;
  store_relaxed(word_at(rec + 8), m.encode());
}

/// The node word of the record at `rec` (writer side): the policy's
/// number + 1, 0 for none. Any value: the policy checks it.
inline std::uint32_t node_word(const std::byte* rec) noexcept {
  return static_cast<std::uint32_t>(load_relaxed(word_at(rec + 16)) >> kNodeShift);
}
/// Stores a live record's node word (below 2^31) without a new stamp, as
/// set_prev_free(): readers and the checksum ignore it. Writes only if it
/// changes (a reopened file's records keep theirs: no page is dirtied).
inline void set_node_word(std::byte* rec, std::uint32_t word) noexcept {
  const std::uint64_t w2 = load_relaxed(word_at(rec + 16));
  const std::uint64_t next = (w2 & ~kNodeBits) | std::uint64_t{word} << kNodeShift;
  if (next != w2) store_relaxed(word_at(rec + 16), next);
}

/// A free record's links (writer side). Relinking leaves the stamp alone:
/// a reader never reads a free record's payload.
inline Location free_next(const std::byte* rec) noexcept {
  return Location::from_raw(load_relaxed(payload_words(rec)));
}
inline Location free_prev(const std::byte* rec) noexcept {
  return Location::from_raw(load_relaxed(payload_words(rec) + 1));
}
inline void set_free_next(std::byte* rec, Location next) noexcept {
  store_relaxed(payload_words(rec), next.raw());
}
inline void set_free_prev(std::byte* rec, Location prev) noexcept {
  store_relaxed(payload_words(rec) + 1, prev.raw());
}

// ---- checksums (file-backed stores) ---------------------------------------
//
// A live record's checksum is the CRC32C, continued from its shard's seed
// (which depends on the store id and the shard), of: the stamp, word 1 with
// the prev-free and policy bits cleared (the writer flips those without a
// new stamp), the record's Location, then the key and value bytes; a
// record with a deadline mixes kDeadlineSalt into the location and goes on
// over the zero padding to its deadline word and that word. So a record is
// intact only whole, at its own place, in its own store, with its deadline
// (or without one).

inline constexpr std::uint64_t kChecksummedMeta = ~(std::uint64_t{0x7} << 53);
inline constexpr std::uint64_t kDeadlineSalt = 0x9E3779B97F4A7C15u;

/// The checksum of a record about to be written (`deadline`: 0 for none).
inline std::uint32_t checksum_of(std::uint32_t seed, std::uint64_t stamp, std::uint64_t word1,
                                 Location loc, std::string_view key, std::string_view value,
                                 std::uint64_t deadline = 0) noexcept {
  const std::uint64_t head[3] = {stamp, word1 & kChecksummedMeta,
                                 deadline != 0 ? loc.raw() ^ kDeadlineSalt : loc.raw()};
  std::uint32_t crc = crc32c_extend(seed, head, sizeof head);
  crc = crc32c_extend(crc, key.data(), key.size());
  crc = crc32c_extend(crc, value.data(), value.size());
  if (deadline == 0) return crc;
  const std::uint64_t tail[2] = {0, deadline};
  const std::uint64_t pad = deadline_offset(key.size(), value.size()) - key.size() - value.size();
  return crc32c_extend(crc, reinterpret_cast<const char*>(tail) + 8 - pad, pad + 8);
}

/// The checksum stored in word 2.
inline std::uint32_t stored_checksum(const std::byte* rec) noexcept {
  return static_cast<std::uint32_t>(load_relaxed(word_at(rec + 16)));
}

/// The checksum of the record at `rec` as it lies, read with relaxed word
/// loads (a reader validates the stamp afterwards). The caller has
/// bounds-checked the payload (key and value) within `avail` bytes from
/// `rec`; a deadline word that would lie outside them, or outside the
/// record's capacity, is damage: the result then differs from the stored
/// checksum.
inline std::uint32_t checksum_in_place(std::uint32_t seed, const std::byte* rec, Location loc,
                                       std::uint64_t stamp, std::uint64_t word1,
                                       std::uint64_t avail) noexcept {
  const Meta m = Meta::decode(word1);
  const bool deadline = has_deadline(load_relaxed(word_at(rec + 16)));
  std::uint64_t n = std::uint64_t{m.key_len} + m.value_len;
  std::uint64_t salt = 0;
  if (deadline) {
    const std::uint64_t end = deadline_offset(m.key_len, m.value_len) + 8;
    if (end > m.capacity() || kHeaderBytes + end > avail) return ~stored_checksum(rec);
    n = end;  // the zero padding and the deadline word
    salt = kDeadlineSalt;
  }
  // The head, then the payload, through one buffer: a small record is one
  // CRC call (recovery runs this for every record).
  std::uint64_t buf[35] = {stamp, word1 & kChecksummedMeta, loc.raw() ^ salt};
  const std::uint64_t* w = payload_words(rec);
  std::uint64_t have = 3;  // words of buf in use
  std::uint32_t crc = seed;
  for (;;) {
    const std::uint64_t room = (35 - have) * 8;
    const std::uint64_t take = n < room ? n : room;
    const std::uint64_t words = (take + 7) / 8;
    for (std::uint64_t i = 0; i < words; ++i) buf[have + i] = load_relaxed(w + i);
    crc = crc32c_extend(crc, buf, have * 8 + take);
    w += words;
    n -= take;
    if (n == 0) return crc;
    have = 0;
  }
}

// ---- reader side ----------------------------------------------------------

/// First load of a read: pairs with end_write's release store.
[[gnu::always_inline]] inline std::uint64_t read_stamp(const std::byte* rec) noexcept {
  return load_acquire(stamp_word(rec));
}
[[gnu::always_inline]] inline Meta read_meta(const std::byte* rec) noexcept {
  return Meta::decode(load_relaxed(word_at(rec + 8)));
}
/// True when nothing was written to the record since `stamp` was read. The
/// acquire fence pairs with begin_write's release fence: relaxed loads made
/// before it cannot be reordered after the second stamp load.
[[gnu::always_inline]] inline bool validate(const std::byte* rec, std::uint64_t stamp) noexcept {
  std::atomic_thread_fence(std::memory_order_acquire);
#if defined(OFFHEAP_TESTING_NO_SECOND_STAMP_CHECK)
  // Test-only build (tests/torn_read_test.cpp): accepts whatever was read,
  // to prove that the torn-read test can fail.
  (void)rec;
  (void)stamp;
  return true;
#else
  return load_relaxed(stamp_word(rec)) == stamp;
#endif
}
[[gnu::always_inline]] inline bool stamp_is_stable(std::uint64_t stamp) noexcept {
  return stamp != 0 && (stamp & 1) == 0;
}

/// Compares the first key.size() bytes of the record's payload with `key`,
/// reading whole words. The caller has compared the key length from the
/// header and bounds-checked the payload, and resolved the record with
/// at least kMinRecord bytes of chunk from its start.
[[gnu::always_inline]] inline bool key_equals(const std::byte* rec, std::string_view key) noexcept {
  const std::uint64_t* w = payload_words(rec);
  const char* k = key.data();
  std::size_t n = key.size();
  if (n <= 16) [[likely]] {
    // Keys of up to two words, without a loop: both words lie in the
    // chunk, as the caller resolved the record with avail >= kMinRecord
    // (a stale or forged header promises nothing); the key's bytes are
    // read with loads that stay inside key.
    if (n > 8) {
      const unsigned drop = 8 * (16 - static_cast<unsigned>(n));  // bytes of word 1 past the key, in bits
      const std::uint64_t tail = load_u64(k + n - 8) >> drop;      // the key's bytes [8, n)
      return ((load_relaxed(w) ^ load_u64(k)) | ((load_relaxed(w + 1) & (~std::uint64_t{0} >> drop)) ^ tail)) == 0;
    }
    if (n == 0) return true;
    return (load_relaxed(w) & (~std::uint64_t{0} >> (64 - 8 * n))) == load_partial(k, n);
  }
  for (; n >= 16; n -= 16, k += 16, w += 2) {
    if (((load_relaxed(w) ^ load_u64(k)) | (load_relaxed(w + 1) ^ load_u64(k + 8))) != 0) {
      return false;
    }
  }
  if (n >= 8) {
    if (load_relaxed(w++) != load_u64(k)) return false;
    n -= 8;
    k += 8;
  }
  if (n == 0) return true;
  const std::uint64_t mask = (std::uint64_t{1} << (n * 8)) - 1;
  return (load_relaxed(w) & mask) == load_partial(k, n);
}

/// Whether the header `m` (read from `rec`, `avail` bytes of chunk from
/// there) is a live record of `key` whose key and value lie inside the
/// chunk. Lengths are checked before the key is compared; the caller
/// validates the stamp afterwards. Requires: avail >= kMinRecord (as
/// resolve() with kMinRecord returns it).
[[gnu::always_inline]] inline bool is_live_record_of(const std::byte* rec, const Meta& m,
                                                     std::uint64_t avail, std::string_view key) noexcept {
  // The state and the key length in one comparison: flags bits 0-1 at bit
  // 56, far above any key.size() (a longer key than the header's 16 bits
  // can hold never matches a record's, whatever its state).
  const std::uint64_t state_and_len = std::uint64_t{m.flags & 3u} << 56 | m.key_len;
  // payload_for(key, value) <= avail - kHeaderBytes without its rounding:
  // the record starts on a word, so the payload's words fit in the chunk
  // exactly when key and value fit in the chunk's whole words from there;
  // payload_for's 16-byte minimum fits as avail >= kMinRecord.
  return state_and_len == (std::uint64_t{static_cast<unsigned>(State::live)} << 56 | key.size()) &&
         kHeaderBytes + std::uint64_t{m.key_len} + m.value_len <= (avail & ~std::uint64_t{7}) &&
         key_equals(rec, key);
}

/// The deadline of the live record `rec` whose header `m` was read from it
/// (`avail` bytes of chunk from there): 0 if it has none; else the deadline,
/// or 1 (long past) when the word would lie outside the chunk or the
/// record, or holds 0: only a torn read (which the stamp check throws
/// away) or damage shows that. Relaxed loads; the caller validates.
[[gnu::always_inline]] inline std::uint64_t deadline_of(const std::byte* rec, const Meta& m,
                                                        std::uint64_t avail) noexcept {
  if (!has_deadline(load_relaxed(word_at(rec + 16)))) [[likely]] return 0;
  const std::uint64_t at = deadline_offset(m.key_len, m.value_len);
  if (at + 8 > m.capacity() || kHeaderBytes + at + 8 > avail) return 1;
  const std::uint64_t d = load_relaxed(payload_words(rec) + at / 8);
  return d == 0 ? 1 : d;
}

/// Copies n bytes starting `from` bytes into the payload into dst
/// (caller-owned), reading exactly those bytes. The caller has
/// bounds-checked them and validates the stamp afterwards.
///
/// Plain loads, not the relaxed atomics of every other word a reader
/// loads: the bytes are a value or a key, which a reader only copies (as
/// Engine::call_in_place hands them to a callback), and only a copy that
/// the stamp validates afterwards counts (TsanIgnoreAccesses' compiler
/// barrier and validate()'s acquire fence keep these loads before the
/// stamp's second load; no length is taken from the bytes copied); 16 bytes at a time where 8-byte
/// atomics would go word by word. ThreadSanitizer builds ignore them, and
/// the stores into dst (TsanIgnoreAccesses), as they ignore a callback's.
[[gnu::always_inline]] inline void copy_out(char* dst, const std::byte* rec, std::size_t from,
                                            std::size_t n) noexcept {
  const char* src = reinterpret_cast<const char*>(rec + kHeaderBytes + from);
  const TsanIgnoreAccesses seqlock_race;
  // Up to 64 bytes inline, in loads that overlap rather than loop.
  const auto copy = [&](std::size_t at, auto width) {
    char b[decltype(width)::value];
    std::memcpy(b, src + at, sizeof b);
    std::memcpy(dst + at, b, sizeof b);
  };
  using W16 = std::integral_constant<std::size_t, 16>;
  using W8 = std::integral_constant<std::size_t, 8>;
  using W4 = std::integral_constant<std::size_t, 4>;
  if (n > 64) {
    std::memcpy(dst, src, n);
  } else if (n > 32) {
    copy(0, W16{});
    copy(16, W16{});
    copy(n - 32, W16{});
    copy(n - 16, W16{});
  } else if (n > 16) {
    copy(0, W16{});
    copy(n - 16, W16{});
  } else if (n >= 8) {
    copy(0, W8{});
    copy(n - 8, W8{});
  } else if (n >= 4) {
    copy(0, W4{});
    copy(n - 4, W4{});
  } else if (n != 0) {
    dst[0] = src[0];
    dst[n / 2] = src[n / 2];
    dst[n - 1] = src[n - 1];
  }
  // (seqlock_race's end is a compiler barrier: these loads stay before the
  // stamp's second load.)
}

}  // namespace record
}  // namespace offheap::detail
