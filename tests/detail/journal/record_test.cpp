// SPDX-License-Identifier: Apache-2.0
#include <offheap/detail/journal/record.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace record = offheap::detail::record;
using offheap::detail::Location;

namespace {
// An 8-byte aligned scratch area standing in for a chunk.
struct Area {
  explicit Area(std::size_t bytes) : words(bytes / 8 + 1, 0) {}
  std::byte* at(std::size_t off) { return reinterpret_cast<std::byte*>(words.data()) + off; }
  std::vector<std::uint64_t> words;
};

std::string pattern(std::size_t n, char seed) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>(seed + 7 * i);
  return s;
}
}  // namespace

TEST_CASE("record header fields sit where the layout says", "[record]") {
  Area a(256);
  std::byte* rec = a.at(0);
  record::write_live(rec, 42, "key", "value!", 9, record::payload_for(3, 6), false);
  std::uint64_t w[4];
  std::memcpy(w, rec, sizeof w);
  CHECK(w[0] == 42);                          // bytes 0-7: stamp
  CHECK((w[1] & 0xFFFFFFFF) == 6);            // bytes 8-11: value length
  CHECK(((w[1] >> 32) & 0xFFFF) == 3);        // bytes 12-13: key length
  CHECK(((w[1] >> 48) & 0x3) == 1);           // byte 14 bits 0-1: live
  CHECK(((w[1] >> 50) & 0x3) == 0);           // byte 14 bits 2-3: no slack
  CHECK((w[1] >> 56) == 9);                   // byte 15: type
  CHECK(w[2] == 0);                           // checksum and expiry
  CHECK(std::memcmp(rec + 24, "keyvalue!", 9) == 0);  // key, then value
  CHECK(std::memcmp(rec + 24 + 9, "\0\0\0\0\0\0\0", 7) == 0);  // zero padding to 16
}

TEST_CASE("payload size rounds key plus value up to 8, at least 8", "[record]") {
  CHECK(record::payload_for(0, 0) == 16);
  CHECK(record::payload_for(1, 0) == 16);
  CHECK(record::payload_for(8, 8) == 16);
  CHECK(record::payload_for(8, 9) == 24);
  CHECK(record::payload_for(16, 64) == 80);
  CHECK(record::payload_for(36, 8) == 48);
  CHECK(record::kHeaderBytes + record::payload_for(16, 64) - 80 <= 32);
}

TEST_CASE("meta encodes and decodes every field", "[record]") {
  record::Meta m{0xDEADBEEF, 0xFFFF, record::Meta::make_flags(record::State::live, 4, true, 0x2), 0x7F};
  const record::Meta d = record::Meta::decode(m.encode());
  CHECK(d.value_len == 0xDEADBEEF);
  CHECK(d.key_len == 0xFFFF);
  CHECK(d.state() == record::State::live);
  CHECK(d.slack_words() == 4);
  CHECK(d.prev_free());
  CHECK(d.policy_bits() == 0x2);
  CHECK(d.type == 0x7F);
  CHECK(d.capacity() == record::payload_for(0xFFFF, 0xDEADBEEF) + 32);
  const record::Meta f{4096, 0, record::Meta::make_flags(record::State::free, 0, false, 0), 0};
  CHECK(f.capacity() == 4096);
}

TEST_CASE("every key and value length round-trips at every alignment", "[record]") {
  Area a(1024);
  for (std::size_t k = 0; k <= 40; ++k) {
    for (std::size_t v = 0; v <= 40; ++v) {
      const std::string key = pattern(k, 'k'), value = pattern(v, 'v');
      std::byte* rec = a.at(64);
      std::memset(rec, 0xEE, 512);  // garbage from an earlier life
      record::write_live(rec, 2 * (k * 64 + v + 1), key, value, 0, record::payload_for(k, v), false);
      const record::Meta m = record::read_meta(rec);
      REQUIRE(m.key_len == k);
      REQUIRE(m.value_len == v);
      CHECK(record::key_equals(rec, key));
      std::string out(v, '\0');
      record::copy_out(out.data(), rec, k, v);
      CHECK(out == value);
      // Nothing written past the padded payload.
      CHECK(static_cast<unsigned char>(rec[24 + record::payload_for(k, v)]) == 0xEE);
    }
  }
}

TEST_CASE("key comparison catches a difference in any byte, including the last", "[record]") {
  Area a(512);
  for (std::size_t n = 1; n <= 33; ++n) {
    const std::string key = pattern(n, 'a');
    record::write_live(a.at(0), 2, key, "tail-value", 0, record::payload_for(n, 10), false);
    for (std::size_t i = 0; i < n; ++i) {
      std::string other = key;
      other[i] = static_cast<char>(other[i] ^ 0x01);
      CHECK_FALSE(record::key_equals(a.at(0), other));
    }
    CHECK(record::key_equals(a.at(0), key));
  }
  // key_equals compares bytes only; lengths are compared from the header
  // first, so a key that spills into the value's bytes never matches.
  record::write_live(a.at(0), 4, "abc", "def", 0, 16, false);
  CHECK(record::key_equals(a.at(0), "abcd"));  // the bytes agree...
  CHECK(record::read_meta(a.at(0)).key_len == 3);  // ...the length does not
}

TEST_CASE("a key longer than a header can say never matches a record, whatever its state", "[record]") {
  // is_live_record_of compares the state and the key length in one word:
  // a key of 65,536 + 3 bytes must not pass for a live record's key of 3
  // bytes (nor 131,072 + 3 for a dead one's), or key_equals would compare
  // 65,539 bytes of a record that has 16. Here the bytes after the record
  // all equal the key's, so that a comparison that ran on would match.
  Area a(1 << 18);
  std::memset(a.at(0), 'a', (1 << 18));
  for (const record::State state : {record::State::live, record::State::dead}) {
    record::write_live(a.at(0), 2, "aaa", std::string(13, 'a'), 0, 16, false, 0, 0, state);
    const record::Meta m = record::read_meta(a.at(0));
    REQUIRE(m.key_len == 3);
    REQUIRE(m.state() == state);
    for (const std::size_t high : {std::size_t{1} << 16, std::size_t{2} << 16, std::size_t{3} << 16}) {
      const std::string key(high + 3, 'a');
      CHECK_FALSE(record::is_live_record_of(a.at(0), m, record::kMinRecord, key));
    }
    // (The record itself, found by its own key when live.)
    CHECK(record::is_live_record_of(a.at(0), m, record::kMinRecord, "aaa") == (state == record::State::live));
  }
}

TEST_CASE("copy_out reads any sub-range of a payload", "[record]") {
  Area a(512);
  const std::string value = pattern(200, 'x');
  record::write_live(a.at(0), 2, "", value, 0, record::payload_for(0, 200), false);
  for (std::size_t from = 0; from < 200; from += 3) {
    // Every branch of copy_out's overlapping copies (1-3, 4-7, 8-16,
    // 17-32, 33-64 bytes) and the memcpy past 64.
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{4},
                          std::size_t{7}, std::size_t{8}, std::size_t{9}, std::size_t{15}, std::size_t{16},
                          std::size_t{17}, std::size_t{31}, std::size_t{32}, std::size_t{33}, std::size_t{63},
                          std::size_t{64}, std::size_t{65}, 200 - from}) {
      if (from + n > 200) continue;
      std::string out(n, '\0');
      record::copy_out(out.data(), a.at(0), from, n);
      CHECK(out == value.substr(from, n));
    }
  }
}

TEST_CASE("the stamp is odd during a write and changes on every write and free", "[record]") {
  Area a(256);
  std::byte* rec = a.at(0);
  record::write_live(rec, 10, "k", "v1", 0, 16, false);
  const std::uint64_t s = record::read_stamp(rec);
  CHECK(s == 10);
  CHECK(record::stamp_is_stable(s));
  CHECK(record::validate(rec, s));
  record::begin_write(rec, 12);
  CHECK(record::read_stamp(rec) == 11);
  CHECK_FALSE(record::stamp_is_stable(record::read_stamp(rec)));
  CHECK_FALSE(record::validate(rec, s));
  record::end_write(rec, 12);
  CHECK(record::read_stamp(rec) == 12);
  CHECK_FALSE(record::stamp_is_stable(0));  // zeroed memory is never a record

  record::write_free(rec, 14, 16, Location::make(3, 64), Location::make(2, 8), false);
  CHECK(record::read_stamp(rec) == 14);
  const record::Meta m = record::read_meta(rec);
  CHECK(m.state() == record::State::free);
  CHECK(m.key_len == 0);
  CHECK(m.capacity() == 16);
  CHECK(record::free_next(rec) == Location::make(3, 64));
  CHECK(record::free_prev(rec) == Location::make(2, 8));
}

TEST_CASE("a rewrite keeps the policy bits and may keep slack", "[record]") {
  Area a(256);
  std::byte* rec = a.at(0);
  record::write_live(rec, 2, "key", std::string(45, 'a'), 0, 48, true, 0x3);  // 3 + 45 = 48
  record::rewrite_value(rec, 4, "key", "b", 7, 48);  // needs 16, keeps 48: slack 4 words
  const record::Meta m = record::read_meta(rec);
  CHECK(m.policy_bits() == 0x3);
  CHECK(m.prev_free());
  CHECK(m.slack_words() == 4);
  CHECK(m.capacity() == 48);
  CHECK(m.type == 7);
  std::string out(1, '\0');
  record::copy_out(out.data(), rec, 3, 1);
  CHECK(out == "b");
}

TEST_CASE("a free record's footer gives its capacity to the record after it", "[record]") {
  Area a(512);
  record::write_free(a.at(0), 2, 64, Location::none(), Location::make(1, 8), false);
  std::uint64_t footer = 0;
  std::memcpy(&footer, a.at(24 + 64 - 8), 8);
  CHECK(record::capacity_from_footer(footer) == 64);
  // The smallest free record has no room for a footer: its last word is the
  // previous-link, an even location or all ones, read as 16.
  record::write_free(a.at(128), 4, 16, Location::none(), Location::make(1, 8), false);
  std::memcpy(&footer, a.at(128 + 24 + 8), 8);
  CHECK(record::capacity_from_footer(footer) == 16);
  record::write_free(a.at(128), 6, 16, Location::none(), Location::none(), false);
  std::memcpy(&footer, a.at(128 + 24 + 8), 8);
  CHECK(record::capacity_from_footer(footer) == 16);
  CHECK(record::capacity_from_footer(record::kMaxFreeCapacity << 1 | 1) == record::kMaxFreeCapacity);
}

TEST_CASE("the prev-free bit flips without touching the stamp or other fields", "[record]") {
  Area a(256);
  record::write_live(a.at(0), 8, "key", "value", 9, 16, false, 0x1);
  record::set_prev_free(a.at(0), true);
  record::Meta m = record::read_meta(a.at(0));
  CHECK(m.prev_free());
  CHECK(m.key_len == 3);
  CHECK(m.value_len == 5);
  CHECK(m.type == 9);
  CHECK(m.policy_bits() == 0x1);
  CHECK(record::read_stamp(a.at(0)) == 8);
  record::set_prev_free(a.at(0), false);
  CHECK_FALSE(record::read_meta(a.at(0)).prev_free());
}

TEST_CASE("a deadline lies after the value, inside the capacity, and the checksum covers it", "[record][expiry]") {
  Area a(256);
  std::byte* rec = a.at(0);
  const Location loc = Location::make(0, 0);
  // key 3 + value 6 = 9 bytes: the deadline word at payload byte 16.
  CHECK(record::deadline_offset(3, 6) == 16);
  CHECK(record::payload_for(3, 6, true) == 24);
  CHECK(record::payload_for(0, 0, true) == 16);  // the minimum payload holds it
  CHECK(record::payload_for(8, 8, true) == 24);
  const std::uint64_t deadline = 1'800'000'000'123;
  const record::Meta m0{6, 3, record::Meta::make_flags(record::State::live, 1, false, 0), 0};
  const std::uint32_t crc = record::checksum_of(7, 42, m0.encode(), loc, "key", "value!", deadline);
  record::write_live(rec, 42, "key", "value!", 0, 24, false, 0, crc, record::State::live, deadline);
  const record::Meta m = record::read_meta(rec);
  CHECK(m.slack_words() == 1);  // the deadline word counts as slack beyond payload_for(key, value)
  CHECK(m.capacity() == 24);
  CHECK(record::deadline_of(rec, m, 256) == deadline);
  CHECK(record::checksum_in_place(7, rec, loc, 42, m.encode(), 256) == crc);
  // Without a deadline, the same bytes check differently (the flag is in the sum).
  CHECK(record::checksum_of(7, 42, m0.encode(), loc, "key", "value!") != crc);
  // A deadline word outside the chunk or the record: damage.
  CHECK(record::deadline_of(rec, m, 24 + 16) == 1);
  CHECK(record::checksum_in_place(7, rec, loc, 42, m.encode(), 24 + 16) != crc);
  // The node word (bits 33-63) is outside both: any value leaves the
  // deadline and the checksum as they were.
  std::uint64_t* w2 = reinterpret_cast<std::uint64_t*>(rec + 16);
  for (const std::uint32_t word : {1u, 0x12345u, 0x7FFFFFFFu}) {
    record::set_node_word(rec, word);
    CHECK(record::node_word(rec) == word);
    CHECK(*w2 >> 32 == (std::uint64_t{word} << 1 | 1));
    CHECK(record::deadline_of(rec, m, 256) == deadline);
    CHECK(record::checksum_in_place(7, rec, loc, 42, m.encode(), 256) == crc);
  }
  // The deadline bit cleared (damage, or a forged record): no deadline is
  // read, and the checksum, which the bit salts, fails.
  *w2 &= ~record::kDeadlineFlag;
  CHECK(record::deadline_of(rec, m, 256) == 0);
  CHECK(record::checksum_in_place(7, rec, loc, 42, m.encode(), 256) != crc);
  // A record without one reads 0.
  record::write_live(rec, 44, "key", "value!", 0, 16, false);
  CHECK(record::deadline_of(rec, record::read_meta(rec), 256) == 0);
}
