// SPDX-License-Identifier: Apache-2.0
// The document layer: Value order, the encoding (round trips, a golden
// vector, damaged bytes), DocumentView, the text form and ordered keys.
#include <offheap/document.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

using offheap::Bytes;
using offheap::Document;
using offheap::DocumentView;
using offheap::Errc;
using offheap::Error;
using offheap::FieldType;
using offheap::Value;
using offheap::ValueView;

namespace {

constexpr std::int64_t kMinInt = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kMaxInt = std::numeric_limits<std::int64_t>::max();
const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string to_hex(std::string_view bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (const char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    out += digits[b >> 4];
    out += digits[b & 0x0F];
  }
  return out;
}

std::string from_hex(std::string_view hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    out += static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16));
  }
  return out;
}

int sign(int c) { return (c > 0) - (c < 0); }
int sign(std::weak_ordering c) { return c < 0 ? -1 : c > 0 ? 1 : 0; }

// memcmp order of two byte strings, as an index compares keys.
int key_order(const std::string& a, const std::string& b) {
  return sign(std::string_view(a).compare(std::string_view(b)));
}

double real_from_bits(std::uint64_t bits) { return std::bit_cast<double>(bits); }

// Random values and documents. `small` draws from a tiny universe so that
// equal values, shared prefixes and neighbours turn up often.
struct Gen {
  std::mt19937_64 rng;
  bool small = false;

  explicit Gen(std::uint64_t seed, bool small_universe = false)
      : rng(seed), small(small_universe) {}

  std::size_t below(std::size_t n) { return static_cast<std::size_t>(rng() % n); }
  bool one_in(std::size_t n) { return below(n) == 0; }

  std::string string() {
    static constexpr char alphabet[] = {'\0', '\x01', '\xFF', 'a', 'b', '\x7F', '\x80', '"'};
    std::size_t length = below(small ? 4 : 9);
    if (!small && one_in(40)) length = 1000 + below(100000);
    std::string s(length, '\0');
    const bool any_byte = !small && one_in(2);
    for (char& c : s) {
      c = any_byte ? static_cast<char>(rng()) : alphabet[below(small ? 4 : sizeof alphabet)];
    }
    return s;
  }

  std::int64_t integer() {
    static constexpr std::int64_t special[] = {kMinInt, kMinInt + 1, -65, -64, -1, 0, 1,
                                               63,      64,          127, 128, kMaxInt - 1,
                                               kMaxInt};
    if (small) return static_cast<std::int64_t>(below(5)) - 2;
    if (one_in(2)) return special[below(std::size(special))];
    const auto bits = static_cast<int>(below(64));
    return static_cast<std::int64_t>(rng() >> bits) * (one_in(2) ? -1 : 1);
  }

  double real() {
    const double special[] = {0.0,
                              -0.0,
                              kNaN,
                              -kNaN,
                              real_from_bits(0x7FF0'0000'0000'0001u),  // a signalling NaN
                              real_from_bits(0xFFF8'0000'0000'1234u),  // a negative NaN, payload
                              kInf,
                              -kInf,
                              std::numeric_limits<double>::denorm_min(),
                              -std::numeric_limits<double>::denorm_min(),
                              std::numeric_limits<double>::max(),
                              std::numeric_limits<double>::lowest(),
                              1.0,
                              -1.0,
                              0.5};
    if (small) return special[below(8)];
    if (one_in(2)) return special[below(std::size(special))];
    if (one_in(2)) return static_cast<double>(static_cast<std::int64_t>(below(2001)) - 1000) / 8;
    return real_from_bits(rng());  // any bits, NaNs included
  }

  Value value(int depth = 0) {
    const std::size_t kinds = depth < (small ? 2 : 4) ? 7 : 6;
    switch (below(kinds)) {
      case 0: return Value();
      case 1: return Value(one_in(2));
      case 2: return Value(integer());
      case 3: return Value(real());
      case 4: return Value(string());
      case 5: return Value(Bytes{string()});
      default: {
        Value::List list(below(small ? 3 : 5));
        for (Value& element : list) element = value(depth + 1);
        return Value(std::move(list));
      }
    }
  }

  Document document() {
    Document doc;
    std::size_t fields = below(10);
    if (one_in(10)) fields = 60 + below(60);  // past the validator's 64 names on the stack
    for (std::size_t i = 0; i < fields; ++i) {
      std::string name = string();
      if (name.empty() || name.size() > 65535) name = "f" + std::to_string(i);
      doc.set(name, value());
    }
    return doc;
  }
};

std::vector<std::string> field_names(const Document& doc) {
  std::vector<std::string> out;
  for (const auto& field : doc) out.push_back(field.first);
  return out;
}

std::vector<std::string> field_names(const DocumentView& view) {
  std::vector<std::string> out;
  view.for_each([&](std::string_view name, ValueView) { out.emplace_back(name); });
  return out;
}

// Everything a DocumentView offers, checked against the Document it should equal.
void check_view_matches(const DocumentView& view, const Document& doc) {
  REQUIRE(view.size() == doc.size());
  REQUIRE(field_names(view) == field_names(doc));
  REQUIRE(view.to_document() == doc);
  REQUIRE(field_names(view.to_document()) == field_names(doc));
  REQUIRE(view.to_text() == doc.to_text());
  for (const auto& [name, value] : doc) {
    const std::optional<ValueView> v = view.get(name);
    REQUIRE(v.has_value());
    REQUIRE(v->type() == value.type());
    REQUIRE(*v == value);
    REQUIRE(sign(*v <=> value) == 0);
    REQUIRE(v->to_value() == value);
    REQUIRE(offheap::ordered_key(*v) == offheap::ordered_key(value));
    REQUIRE(offheap::to_text(*v) == offheap::to_text(value));
  }
}

// The Errc and message Document::decode throws, or nullopt if it decodes.
std::optional<Error> decode_error(std::string_view bytes) {
  try {
    (void)Document::decode(bytes);
  } catch (const Error& e) {
    return e;
  }
  return std::nullopt;
}

void require_decode_error(std::string_view bytes, Errc code, std::string_view says) {
  const std::optional<Error> e = decode_error(bytes);
  INFO("bytes " << to_hex(bytes));
  REQUIRE(e.has_value());
  INFO("message: " << e->what());
  REQUIRE(e->code() == code);
  REQUIRE(std::string_view(e->what()).find(says) != std::string_view::npos);
  REQUIRE_FALSE(DocumentView::parse(bytes).has_value());
}

// A document whose only field "a" is `depth` nested lists around true.
Document nested(std::size_t depth) {
  Value v(true);
  for (std::size_t i = 0; i < depth; ++i) v = Value(Value::List{std::move(v)});
  return Document().set("a", std::move(v));
}

}  // namespace

TEST_CASE("Value: constructors, accessors and type mismatches", "[document]") {
  CHECK(Value().type() == FieldType::null);
  CHECK(Value(nullptr).is_null());
  CHECK(Value(true).as_bool());
  CHECK(Value(std::uint8_t{200}).as_int() == 200);
  CHECK(Value(-5).as_int() == -5);
  CHECK(Value(kMinInt).as_int() == kMinInt);
  CHECK(Value(static_cast<std::uint64_t>(kMaxInt)).as_int() == kMaxInt);
  CHECK(Value(1.5f).as_double() == 1.5);
  CHECK(Value("hi").as_string() == "hi");
  CHECK(Value(std::string_view("sv")).as_string() == "sv");
  CHECK(Value(std::string("s", 1)).type() == FieldType::string);
  CHECK(Value(Bytes{std::string("\0\xFF", 2)}).as_bytes() == std::string("\0\xFF", 2));
  const Value list = Value::list({1, "a", Value::list({})});
  REQUIRE(list.as_list().size() == 3);
  CHECK(list.as_list()[0] == Value(1));
  CHECK(list.as_list()[2].as_list().empty());
  CHECK(Value{42}.type() == FieldType::integer);

  try {
    (void)Value(static_cast<std::uint64_t>(kMaxInt) + 1);
    FAIL("no throw");
  } catch (const Error& e) {
    CHECK(e.code() == Errc::invalid_argument);
    CHECK(std::string(e.what()).find("9223372036854775808") != std::string::npos);
  }
  try {
    (void)Value(42).as_string();
    FAIL("no throw");
  } catch (const Error& e) {
    CHECK(e.code() == Errc::type_mismatch);
    CHECK(std::string(e.what()) == "offheap: document value: holds an integer, asked for a string");
  }
  try {
    (void)Value(1).as_double();  // no numeric conversions
    FAIL("no throw");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("holds an integer, asked for a real") != std::string::npos);
  }
  CHECK_THROWS_AS(Value("x").as_bytes(), Error);
  CHECK_THROWS_AS(Value().as_bool(), Error);
  CHECK_THROWS_AS(Value(true).as_list(), Error);

  // The same through a view.
  const std::string bytes = Document().set("n", 7).set("l", Value::list({"x"})).encode();
  const auto view = DocumentView::parse(bytes);
  REQUIRE(view);
  try {
    (void)view->get("n")->as_string();
    FAIL("no throw");
  } catch (const Error& e) {
    CHECK(e.code() == Errc::type_mismatch);
    CHECK(std::string(e.what()) == "offheap: document value: holds an integer, asked for a string");
  }
  CHECK_THROWS_AS(view->get("l")->as_int(), Error);
  CHECK(view->get("n")->as_int() == 7);
  CHECK(ValueView().is_null());
}

TEST_CASE("Value order: types first, then values, with -0.0, NaN and prefixes", "[document]") {
  // Strictly increasing, as listed.
  const std::vector<Value> ascending = {
      Value(),
      Value(false),
      Value(true),
      Value(kMinInt),
      Value(-1),
      Value(0),
      Value(kMaxInt),
      Value(-kInf),
      Value(std::numeric_limits<double>::lowest()),
      Value(-1.0),
      Value(0.0),
      Value(std::numeric_limits<double>::denorm_min()),
      Value(kInf),
      Value(kNaN),
      Value(""),
      Value(std::string("\0", 1)),
      Value(std::string("\0\0", 2)),
      Value(std::string("\0\x01", 2)),
      Value("a"),
      Value(std::string("a\0", 2)),
      Value("a\x01"),
      Value("a\x7F"),
      Value("a\x80"),
      Value("a\xFF"),
      Value("b"),
      Value(Bytes{}),
      Value(Bytes{"a"}),
      Value::list({}),
      Value::list({nullptr}),
      Value::list({nullptr, nullptr}),
      Value::list({false}),
      Value::list({1, "a"}),
      Value::list({1, "b"}),
      Value::list({Value::list({})}),
  };
  for (std::size_t i = 0; i < ascending.size(); ++i) {
    for (std::size_t j = 0; j < ascending.size(); ++j) {
      INFO(i << " vs " << j << ": " << offheap::to_text(ascending[i]) << " vs "
              << offheap::to_text(ascending[j]));
      const int expect = i < j ? -1 : i > j ? 1 : 0;
      REQUIRE(sign(ascending[i] <=> ascending[j]) == expect);
      REQUIRE((ascending[i] == ascending[j]) == (expect == 0));
      REQUIRE(key_order(offheap::ordered_key(ascending[i]), offheap::ordered_key(ascending[j])) ==
              expect);
    }
  }
  // Equal though different.
  CHECK(Value(-0.0) == Value(0.0));
  CHECK(offheap::ordered_key(Value(-0.0)) == offheap::ordered_key(Value(0.0)));
  CHECK(Value(kNaN) == Value(-kNaN));
  CHECK(Value(real_from_bits(0x7FF0'0000'0000'0001u)) == Value(kNaN));
  CHECK(offheap::ordered_key(Value(-kNaN)) == offheap::ordered_key(Value(kNaN)));
  CHECK(offheap::ordered_key(Value(real_from_bits(0xFFF8'0000'0000'1234u))) ==
        offheap::ordered_key(Value(kNaN)));
  // Integers and reals are different types.
  CHECK(Value(1) != Value(1.0));
  CHECK(Value(2) < Value(0.5));
  CHECK(Value("a") != Value(Bytes{"a"}));
  // Implicit conversions make comparisons with literals read naturally.
  CHECK(Value(3) == 3);
  CHECK(Value("x") == "x");
}

TEST_CASE("Ordered keys: layout of each type", "[document]") {
  CHECK(to_hex(offheap::ordered_key(Value())) == "01");
  CHECK(to_hex(offheap::ordered_key(Value(true))) == "0201");
  CHECK(to_hex(offheap::ordered_key(Value(0))) == "038000000000000000");
  CHECK(to_hex(offheap::ordered_key(Value(kMinInt))) == "030000000000000000");
  CHECK(to_hex(offheap::ordered_key(Value(-1))) == "037fffffffffffffff");
  CHECK(to_hex(offheap::ordered_key(Value(1.0))) == "04bff0000000000000");
  CHECK(to_hex(offheap::ordered_key(Value(-1.0))) == "04400fffffffffffff");
  CHECK(to_hex(offheap::ordered_key(Value(-0.0))) == "048000000000000000");
  CHECK(to_hex(offheap::ordered_key(Value(kNaN))) == "04fff8000000000000");
  CHECK(to_hex(offheap::ordered_key(Value(std::string("a\0b", 3)))) == "056100ff620001");
  CHECK(to_hex(offheap::ordered_key(Value(Bytes{""}))) == "060001");
  CHECK(to_hex(offheap::ordered_key(Value::list({nullptr, Value::list({})}))) == "0701070000");

  std::string out = "prefix";
  offheap::append_ordered_key(Value(true), out);
  CHECK(out == "prefix\x02\x01");
  // Too deep for the format: refused, and out left as it was.
  Value deep(1);
  for (int i = 0; i < 33; ++i) deep = Value(Value::List{deep});
  try {
    offheap::append_ordered_key(deep, out);
    FAIL("no throw");
  } catch (const Error& e) {
    CHECK(e.code() == Errc::invalid_argument);
  }
  CHECK(out == "prefix\x02\x01");
}

TEST_CASE("Ordered keys sort as the values do, on random pairs", "[document]") {
  for (const bool small : {true, false}) {
    Gen gen(small ? 11 : 12, small);
    for (int i = 0; i < (small ? 20000 : 4000); ++i) {
      const Value a = gen.value();
      const Value b = gen.one_in(8) ? a : gen.value();
      const std::string ka = offheap::ordered_key(a);
      const std::string kb = offheap::ordered_key(b);
      const int order = sign(a <=> b);
      INFO(offheap::to_text(a) << " vs " << offheap::to_text(b));
      REQUIRE(key_order(ka, kb) == order);
      REQUIRE((ka == kb) == (a == b));
      REQUIRE(sign(b <=> a) == -order);

      // Prefix-free: an 8-byte id appended decides only between equal values.
      std::string ida(8, '\0');
      std::string idb(8, '\0');
      for (char& c : ida) c = static_cast<char>(gen.rng());
      for (char& c : idb) c = static_cast<char>(gen.rng());
      const int with_ids = key_order(ka + ida, kb + idb);
      REQUIRE(with_ids == (order != 0 ? order : key_order(ida, idb)));
      if (ka != kb) {
        REQUIRE(ka.compare(0, kb.size(), kb) != 0);  // kb is no prefix of ka
        REQUIRE(kb.compare(0, ka.size(), ka) != 0);
      }

      // Views of encoded values compare and key the same way.
      const std::string bytes = Document().set("a", a).set("b", b).encode();
      const auto view = DocumentView::parse(bytes);
      REQUIRE(view);
      const ValueView va = *view->get("a");
      const ValueView vb = *view->get("b");
      REQUIRE(sign(va <=> vb) == order);
      REQUIRE(sign(va <=> b) == order);
      REQUIRE(sign(a <=> vb) == order);
      REQUIRE((va == vb) == (order == 0));
      REQUIRE(offheap::ordered_key(va) == ka);
      std::string appended = "x";
      offheap::append_ordered_key(vb, appended);
      REQUIRE(appended == "x" + kb);
    }
  }
}

TEST_CASE("Document: set, get, erase, order and equality", "[document]") {
  Document doc;
  doc.set("b", 1).set("a", "two").set("c", nullptr);
  REQUIRE(doc.size() == 3);
  REQUIRE(field_names(doc) == std::vector<std::string>{"b", "a", "c"});
  doc.set("a", 2.5);  // replaced in place
  REQUIRE(field_names(doc) == std::vector<std::string>{"b", "a", "c"});
  REQUIRE(doc.get("a") != nullptr);
  CHECK(doc.get("a")->as_double() == 2.5);
  CHECK(doc.get("zz") == nullptr);
  CHECK(doc.contains("c"));
  CHECK_FALSE(doc.contains("C"));
  CHECK(doc.erase("b"));
  CHECK_FALSE(doc.erase("b"));
  REQUIRE(field_names(doc) == std::vector<std::string>{"a", "c"});
  CHECK_FALSE(doc.empty());
  CHECK(Document().empty());

  const Document listed{{"x", 1}, {"y", "s"}, {"x", 2}};
  REQUIRE(field_names(listed) == std::vector<std::string>{"x", "y"});
  CHECK(*listed.get("x") == 2);

  // Equality ignores order, not values, names or extra fields.
  const Document one{{"a", 1}, {"b", Value::list({1.0, "x"})}, {"c", Bytes{"z"}}};
  const Document two{{"c", Bytes{"z"}}, {"a", 1}, {"b", Value::list({1.0, "x"})}};
  CHECK(one == two);
  CHECK(Document(one).set("a", 1.0) != two);
  CHECK(Document(one).set("d", nullptr) != two);
  Document renamed = two;
  renamed.erase("a");
  renamed.set("A", 1);
  CHECK(one != renamed);
  CHECK(Document() == Document());
  CHECK(Document{{"n", kNaN}, {"z", -0.0}} == Document{{"z", 0.0}, {"n", -kNaN}});

  // Large documents (the sorted path of operator==).
  Document big_a;
  Document big_b;
  for (int i = 0; i < 100; ++i) big_a.set("f" + std::to_string(i), i);
  for (int i = 99; i >= 0; --i) big_b.set("f" + std::to_string(i), i);
  CHECK(big_a == big_b);
  big_b.set("f50", 51);
  CHECK(big_a != big_b);
  big_b.set("f50", 50);
  big_b.erase("f7");
  big_b.set("g7", 7);
  CHECK(big_a != big_b);
}

TEST_CASE("Encoding: golden vector of format 1", "[document]") {
  Document doc;
  doc.set("name", "Alice")
      .set("age", 42)
      .set("ratio", 0.5)
      .set("ok", true)
      .set("raw", Bytes{std::string("\x00\xff", 2)})
      .set("tags", Value::list({"a", 1}))
      .set("x", nullptr)
      .set("neg", -300)
      .set("min", kMinInt)
      .set("deep", Value::list({Value::list({true}), Value::list({})}));
  const std::string golden =
      "d1"                            // tag: document format 1
      "0a"                            // 10 fields
      "046e616d65" "0405416c696365"   // "name": string "Alice"
      "03616765" "0254"               // "age": integer, zigzag(42) = 84
      "05726174696f" "03000000000000e03f"  // "ratio": real 0.5, little-endian
      "026f6b" "0101"                 // "ok": true
      "03726177" "050200ff"           // "raw": bytes 00 ff
      "0474616773" "060204016102" "02"  // "tags": list of 2: "a", 1
      "0178" "00"                     // "x": null
      "036e6567" "02d704"             // "neg": zigzag(-300) = 599
      "036d696e" "02ffffffffffffffffff01"  // "min": zigzag(INT64_MIN) = 2^64-1
      "0464656570" "0602060101010600";  // "deep": [[true], []]
  REQUIRE(to_hex(doc.encode()) == golden);
  REQUIRE(doc.encoded_size() == golden.size() / 2);
  const Document back = Document::decode(from_hex(golden));
  REQUIRE(back == doc);
  REQUIRE(field_names(back) == field_names(doc));

  // The example drawn in format.hpp.
  REQUIRE(to_hex(Document().set("a", 1).set("b", Value::list({true, "x"})).encode()) ==
          "d102016102020162060201010401" "78");
  REQUIRE(to_hex(Document().encode()) == "d100");

  // encode_to writes the same bytes into a caller's buffer of the exact size.
  std::vector<std::byte> buffer(doc.encoded_size());
  doc.encode_to(buffer);
  REQUIRE(std::string(reinterpret_cast<const char*>(buffer.data()), buffer.size()) ==
          from_hex(golden));
  std::vector<std::byte> wrong(buffer.size() + 1);
  try {
    doc.encode_to(wrong);
    FAIL("no throw");
  } catch (const Error& e) {
    CHECK(e.code() == Errc::invalid_argument);
  }
}

TEST_CASE("Text form", "[document]") {
  Document doc;
  doc.set("name", "Alice")
      .set("age", 42)
      .set("ratio", 0.5)
      .set("ok", true)
      .set("raw", Bytes{std::string("\x00\xff", 2)})
      .set("tags", Value::list({"a", 1}))
      .set("x", nullptr);
  const std::string expected =
      R"({"name": "Alice", "age": 42, "ratio": 0.5, "ok": true, "raw": b"00ff", )"
      R"("tags": ["a", 1], "x": null})";
  REQUIRE(doc.to_text() == expected);
  const std::string bytes = doc.encode();
  REQUIRE(DocumentView::parse(bytes)->to_text() == expected);

  Document odd;
  odd.set("q\"\\", std::string("tab\t nl\n nul\0 del\x7F bell\x07", 24))
      .set("utf8", "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80")
      .set("bad", "\xC3 \xFF \xED\xA0\x80 \xC0\x80")
      .set("reals", Value::list({1.0, -0.0, 1e300, -2.5e-8, 0.1, kInf, -kInf, kNaN, -kNaN}))
      .set("ints", Value::list({kMinInt, kMaxInt, 0}))
      .set("empty", Value::list({"", Bytes{}, Value::list({})}));
  REQUIRE(odd.to_text() ==
          R"({"q\"\\": "tab\t nl\n nul\u0000 del\u007f bell\u0007", )"
          "\"utf8\": \"caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80\", "
          R"("bad": "\xc3 \xff \xed\xa0\x80 \xc0\x80", )"
          R"("reals": [1.0, -0.0, 1e+300, -2.5e-08, 0.1, inf, -inf, nan, nan], )"
          R"("ints": [-9223372036854775808, 9223372036854775807, 0], )"
          R"("empty": ["", b"", []]})");
  REQUIRE(DocumentView::parse(odd.encode())->to_text() == odd.to_text());
  REQUIRE(Document().to_text() == "{}");
  REQUIRE(DocumentView().to_text() == "{}");
  REQUIRE(offheap::to_text(Value(Bytes{"\x01\xab"})) == "b\"01ab\"");
}

TEST_CASE("Encoding: random documents round-trip through decode and DocumentView",
          "[document]") {
  Gen gen(20240614);
  for (int i = 0; i < 1500; ++i) {
    const Document doc = gen.document();
    const std::string bytes = doc.encode();
    REQUIRE(bytes.size() == doc.encoded_size());
    const Document back = Document::decode(bytes);
    REQUIRE(back == doc);
    REQUIRE(field_names(back) == field_names(doc));
    REQUIRE(back.encode() == bytes);  // -0.0 and NaN payloads keep their bits
    const auto view = DocumentView::parse(bytes);
    REQUIRE(view);
    REQUIRE(view->bytes().data() == bytes.data());
    REQUIRE(view->bytes().size() == bytes.size());
    check_view_matches(*view, doc);
  }
}

TEST_CASE("Encoding: limits are enforced on encode and decode", "[document]") {
  const auto require_invalid = [](const Document& doc, std::string_view says) {
    try {
      (void)doc.encode();
      FAIL("no throw");
    } catch (const Error& e) {
      INFO(e.what());
      CHECK(e.code() == Errc::invalid_argument);
      CHECK(std::string_view(e.what()).find(says) != std::string_view::npos);
    }
    CHECK_THROWS_AS(doc.encoded_size(), Error);
  };
  require_invalid(Document().set("", 1), "names are 1 to 65535 bytes");
  require_invalid(Document().set(std::string(65536, 'n'), 1), "is 65536 bytes");
  require_invalid(nested(33), "nested deeper than 32");

  const Document longest = Document().set(std::string(65535, 'n'), "v");
  REQUIRE(Document::decode(longest.encode()) == longest);
  const Document deepest = nested(32);
  REQUIRE(Document::decode(deepest.encode()) == deepest);
  REQUIRE(DocumentView::parse(deepest.encode())->to_document() == deepest);

  // The same limits, met by hand-made bytes.
  std::string too_deep = "\xD1\x01\x01" "a";
  for (int i = 0; i < 32; ++i) too_deep += "\x06\x01";
  too_deep += std::string("\x06\x00", 2);
  require_decode_error(too_deep, Errc::corrupt_file, "nested deeper than 32 lists");
  too_deep.replace(too_deep.size() - 4, 4, std::string("\x06\x00", 2));  // 32 deep is fine
  REQUIRE(Document::decode(too_deep).size() == 1);

  std::string long_name = "\xD1\x01\x80\x80\x04" + std::string(65536, 'n') + '\0';
  require_decode_error(long_name, Errc::corrupt_file, "a field name of 65536 bytes");
  require_decode_error(std::string("\xD1\x01\x00\x00\x00", 5), Errc::corrupt_file,
                       "a field name of 0 bytes");
  // 2^32 fields.
  require_decode_error(std::string("\xD1\x80\x80\x80\x80\x10", 6) + std::string(64, '\0'),
                       Errc::corrupt_file, "4294967296 fields");
}

TEST_CASE("Document::decode: malformed bytes throw with the right Errc and message",
          "[document]") {
  using namespace std::string_literals;
  require_decode_error("", Errc::corrupt_file, "no bytes");
  require_decode_error("A", Errc::corrupt_file, "the first byte is 0x41, not a document format");
  require_decode_error("\xD2\x00"s, Errc::format_version, "format tag 0xd2 is document format 2");
  require_decode_error("\xD0\x00"s, Errc::format_version, "document format 0");
  require_decode_error("\xD1", Errc::corrupt_file, "truncated");
  require_decode_error("\xD1\x00\x00"s, Errc::corrupt_file, "1 trailing byte(s)");
  require_decode_error("\xD1\x01\x01" "a\x00\x02"s, Errc::corrupt_file, "trailing");
  require_decode_error("\xD1\x02\x01" "a\x00\x01" "a\x02\x02"s, Errc::corrupt_file,
                       "the field name \"a\" appears more than once (again at offset 6)");
  require_decode_error("\xD1\x01\x01" "a\x07"s, Errc::corrupt_file, "unknown type byte 0x07");
  CHECK(std::string(decode_error("\xD1\x01\x01" "a\x07"s)->what()) ==
        "offheap: document: unknown type byte 0x07 at offset 4 of the 5-byte document");
  require_decode_error("\xD1\x01\x01" "a\x01\x02"s, Errc::corrupt_file,
                       "the boolean byte 0x02 at offset 5");
  require_decode_error("\xD1\x01\x01" "a\x02" + std::string(10, '\xFF') + '\x01',
                       Errc::corrupt_file, "longer than 10 bytes");
  require_decode_error("\xD1\x01\x01" "a\x02\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\x02"s,
                       Errc::corrupt_file, "beyond 64 bits");
  require_decode_error("\xD1\x01\x01" "a\x02\x80\x00"s, Errc::corrupt_file, "shortest form");
  require_decode_error("\xD1\x01\x01" "a\x04\x05" "abc"s, Errc::corrupt_file,
                       "the length or count 5 at offset 4 reaches past the end");
  require_decode_error("\xD1\x01\x01" "a\x06\x05\x00"s, Errc::corrupt_file, "count 5");
  require_decode_error("\xD1\x01\x01" "a\x03\x00\x00"s, Errc::corrupt_file, "truncated");
  require_decode_error("\xD1\x05\x01" "a\x00"s, Errc::corrupt_file, "count 5");
  // A large document's duplicate (the heap path of the name check).
  Document big;
  for (int i = 0; i < 100; ++i) big.set("f" + std::to_string(i), i);
  std::string dup = big.encode();
  const std::size_t at = dup.find("f99");
  REQUIRE(at != std::string::npos);
  dup[at + 2] = '8';
  require_decode_error(dup, Errc::corrupt_file, "the field name \"f98\" appears more than once");
}

TEST_CASE("DocumentView::parse refuses every truncation of a valid encoding", "[document]") {
  Gen gen(7);
  for (int i = 0; i < 300; ++i) {
    Document doc = gen.document();
    const std::string bytes = doc.encode();
    if (bytes.size() > 4096) continue;  // every prefix of a big one costs O(n^2)
    for (std::size_t n = 0; n < bytes.size(); ++n) {
      const std::string_view prefix(bytes.data(), n);
      REQUIRE_FALSE(DocumentView::parse(prefix).has_value());
      const std::optional<Error> e = decode_error(prefix);
      REQUIRE(e.has_value());
      REQUIRE(e->code() == Errc::corrupt_file);
    }
    REQUIRE(DocumentView::parse(bytes).has_value());
  }
}

TEST_CASE("DocumentView::parse on damaged bytes: nullopt, or what decode returns", "[document]") {
  Gen gen(99);
  int accepted = 0;
  int refused = 0;
  const auto check = [&](const std::string& damaged) {
    const auto view = DocumentView::parse(damaged);
    const std::optional<Error> e = decode_error(damaged);
    INFO("bytes " << to_hex(damaged.substr(0, 200)));
    if (view) {
      ++accepted;
      REQUIRE_FALSE(e.has_value());
      const Document doc = Document::decode(damaged);
      check_view_matches(*view, doc);
      REQUIRE(doc.encode() == damaged);  // one encoding per document
      for (const auto f : *view) {
        (void)offheap::ordered_key(f.value);
        (void)f.value.encoded();
      }
    } else {
      ++refused;
      REQUIRE(e.has_value());
      REQUIRE((e->code() == Errc::corrupt_file || e->code() == Errc::format_version));
      REQUIRE(std::string_view(e->what()).substr(0, 19) == "offheap: document: ");
    }
  };
  for (int i = 0; i < 1500; ++i) {
    const std::string bytes = gen.document().encode();
    if (bytes.size() > 1 << 16) continue;
    std::string damaged = bytes;
    switch (gen.below(4)) {
      case 0:  // flip one bit
        damaged[gen.below(damaged.size())] ^= static_cast<char>(1 << gen.below(8));
        break;
      case 1:  // overwrite 1-3 bytes
        for (std::size_t k = 1 + gen.below(3); k > 0; --k) {
          damaged[gen.below(damaged.size())] = static_cast<char>(gen.rng());
        }
        break;
      case 2: {  // insert a byte (drawn in a fixed order, the same with every compiler)
        const auto where = static_cast<std::ptrdiff_t>(gen.below(damaged.size() + 1));
        damaged.insert(damaged.begin() + where, static_cast<char>(gen.rng()));
        break;
      }
      default:  // remove a byte
        damaged.erase(damaged.begin() + static_cast<std::ptrdiff_t>(gen.below(damaged.size())));
        break;
    }
    check(damaged);
  }
  // Short random bytes after a valid tag: the validator's small paths.
  for (int i = 0; i < 20000; ++i) {
    std::string junk = "\xD1";
    for (std::size_t k = gen.below(24); k > 0; --k) {
      junk += gen.one_in(2) ? static_cast<char>(gen.below(8)) : static_cast<char>(gen.rng());
    }
    check(junk);
  }
  CHECK(accepted > 100);
  CHECK(refused > 100);
}

TEST_CASE("DocumentView: reading in place", "[document]") {
  const Document doc{{"s", "str"},
                     {"b", Bytes{"\x01"}},
                     {"l", Value::list({1, Value::list({2.5, nullptr}), "z"})},
                     {"t", false}};
  const std::string bytes = doc.encode();
  const auto view = DocumentView::parse(bytes);
  REQUIRE(view);
  CHECK(view->size() == 4);
  CHECK_FALSE(view->empty());
  CHECK(view->contains("l"));
  CHECK_FALSE(view->get("missing").has_value());
  CHECK(view->get("s")->as_string() == "str");
  CHECK(view->get("s")->as_string().data() >= bytes.data());  // in place
  CHECK(view->get("b")->as_bytes() == "\x01");
  CHECK(view->get("t")->as_bool() == false);
  const offheap::ListView list = view->get("l")->as_list();
  REQUIRE(list.size() == 3);
  std::vector<std::string> texts;
  for (const ValueView element : list) texts.push_back(offheap::to_text(element));
  CHECK(texts == std::vector<std::string>{"1", "[2.5, null]", "\"z\""});
  auto it = list.begin();
  ++it;
  const offheap::ListView inner = (*it).as_list();
  REQUIRE(inner.size() == 2);
  CHECK((*inner.begin()).as_double() == 2.5);
  CHECK(to_hex(view->get("t")->encoded()) == "0100");

  const DocumentView empty;
  CHECK(empty.size() == 0);
  CHECK(empty.to_document() == Document());
  CHECK(to_hex(empty.bytes()) == "d100");
}
