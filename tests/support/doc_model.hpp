// SPDX-License-Identifier: Apache-2.0
// The plain model a Collection is checked against (the differential and
// crash tests): documents by id in a std::map, every query answered by
// looking at each document with Value's own comparisons.
#pragma once

#include <offheap/document/collection.hpp>

#include <catch2/catch.hpp>

#include <cstring>
#include <random>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace offheap_test {

using offheap::DocId;
using offheap::Document;
using offheap::IndexKind;
using offheap::Range;
using offheap::Value;
using offheap::Collection;
using offheap::DocumentView;

/// The model: documents by id; the query answers computed from them.
struct Model {
  friend bool operator==(const Model&, const Model&) = default;

  std::map<DocId, Document> docs;
  std::set<std::pair<std::string, IndexKind>> indexes;

  std::vector<DocId> find(const std::string& field, const Value& v) const {
    std::vector<DocId> out;
    for (const auto& [id, d] : docs) {
      const Value* f = d.get(field);
      if (f != nullptr && f->type() == v.type() && (*f <=> v) == 0) out.push_back(id);
    }
    return out;
  }
  std::vector<DocId> range(const std::string& field, const Range& r, const std::string* prefix) const {
    std::vector<std::pair<const Value*, DocId>> hits;
    for (const auto& [id, d] : docs) {
      const Value* f = d.get(field);
      if (f == nullptr) continue;
      if (prefix != nullptr) {
        if (f->type() == offheap::FieldType::string && f->as_string().starts_with(*prefix)) hits.emplace_back(f, id);
        continue;
      }
      if (r.low) {
        const auto c = *f <=> *r.low;
        if (c < 0 || (c == 0 && !r.low_inclusive)) continue;
        if (!r.high && f->type() != r.low->type()) continue;
      }
      if (r.high) {
        const auto c = *f <=> *r.high;
        if (c > 0 || (c == 0 && !r.high_inclusive)) continue;
        if (!r.low && f->type() != r.high->type()) continue;
      }
      hits.emplace_back(f, id);
    }
    std::sort(hits.begin(), hits.end(), [](const auto& a, const auto& b) {
      const auto c = *a.first <=> *b.first;
      return c < 0 || (c == 0 && a.second < b.second);
    });
    if (r.descending) std::reverse(hits.begin(), hits.end());
    std::vector<DocId> out;
    for (const auto& h : hits) {
      if (out.size() >= r.limit) break;
      out.push_back(h.second);
    }
    return out;
  }
};

/// The ids find() hands out, in its order.
inline std::vector<DocId> ids_of(const offheap::Collection& c, std::string_view field, const Value& v) {
  std::vector<DocId> out;
  c.find(field, v, [&](DocId id, const offheap::DocumentView&) { out.push_back(id); });
  return out;
}
inline std::vector<DocId> range_ids(const offheap::Collection& c, std::string_view field, const Range& r) {
  std::vector<DocId> out;
  c.find_range(field, r, [&](DocId id, const offheap::DocumentView&) { out.push_back(id); });
  return out;
}

inline const char* const kFields[] = {"a", "b", "c", "d"};

inline Value random_value(std::mt19937_64& rng) {
  switch (rng() % 9) {
    case 0: return static_cast<std::int64_t>(rng() % 20) - 5;
    case 1: return static_cast<std::int64_t>(rng() % 20);
    case 2: return static_cast<double>(rng() % 7) / 2 - 1;
    case 3: return rng() % 8 == 0 ? -0.0 : 0.0;
    case 4: {
      static const char* const words[] = {"", "a", "ab", "abc", "abd", "b", "ba", "z", "a\0b"};
      const std::size_t w = rng() % 9;
      return std::string(words[w], w == 8 ? 3 : std::strlen(words[w]));
    }
    case 5: return rng() % 2 == 0;
    case 6: return nullptr;
    case 7: return offheap::Bytes{std::string(rng() % 3, '\x01')};
    default: return Value::list({static_cast<std::int64_t>(rng() % 3), std::string(rng() % 2, 'x')});
  }
}

inline Document random_doc(std::mt19937_64& rng) {
  Document d;
  for (const char* f : kFields) {
    if (rng() % 4 != 0) d.set(f, random_value(rng));
  }
  if (rng() % 4 == 0) d.set("payload", std::string(rng() % 3000, 'p'));  // some bigger documents
  return d;
}

inline void check_queries(const Collection& c, const Model& m, std::mt19937_64& rng, int n) {
  for (int q = 0; q < n; ++q) {
    const std::string field = kFields[rng() % 4];
    const bool any = m.indexes.count({field, IndexKind::hash}) + m.indexes.count({field, IndexKind::ordered}) != 0;
    const bool ordered = m.indexes.count({field, IndexKind::ordered}) != 0;
    const Value v = random_value(rng);
    INFO("field " << field << ", value " << offheap::to_text(v));
    if (!any) {
      REQUIRE_THROWS_AS(ids_of(c, field, v), offheap::Error);
      continue;
    }
    std::vector<DocId> got = ids_of(c, field, v);
    std::sort(got.begin(), got.end());  // (a hash index's order is its own)
    REQUIRE(got == m.find(field, v));
    if (!ordered) continue;
    Range r;
    if (rng() % 3 != 0) r.low = random_value(rng);
    if (rng() % 3 != 0) r.high = random_value(rng);
    if (r.low && r.high && r.low->type() != r.high->type() && rng() % 2 == 0) r.high = r.low;
    r.low_inclusive = rng() % 2 == 0;
    r.high_inclusive = rng() % 2 == 0;
    r.descending = rng() % 2 == 0;
    r.limit = rng() % 3 == 0 ? 1 + rng() % 5 : SIZE_MAX;
    INFO("range " << (r.low ? offheap::to_text(*r.low) : "open") << (r.low_inclusive ? "[" : "(") << " .. "
                  << (r.high ? offheap::to_text(*r.high) : "open") << (r.high_inclusive ? "]" : ")")
                  << (r.descending ? " descending" : "") << " limit " << r.limit);
    REQUIRE(range_ids(c, field, r) == m.range(field, r, nullptr));
    static const char* const prefixes[] = {"", "a", "ab", "b", "q", std::string_view("a\0", 2).data()};
    const std::size_t pi = rng() % 6;
    const std::string prefix(prefixes[pi], pi == 5 ? 2 : std::strlen(prefixes[pi]));
    std::vector<DocId> pgot;
    c.find_prefix(field, prefix, [&](DocId id, const DocumentView&) { pgot.push_back(id); }, r.descending, r.limit);
    Range pr;
    pr.descending = r.descending;
    pr.limit = r.limit;
    REQUIRE(pgot == m.range(field, pr, &prefix));
  }
}

inline void check_all(const Collection& c, const Model& m) {
  REQUIRE(c.size() == m.docs.size());
  for (const auto& [id, d] : m.docs) REQUIRE(c.get(id) == d);
  std::size_t walked = 0;
  c.for_each([&](DocId id, const DocumentView& d) {
    ++walked;
    REQUIRE(m.docs.count(id) == 1);
    REQUIRE(d.to_document() == m.docs.at(id));
  });
  REQUIRE(walked == m.docs.size());
  const std::vector<std::string> problems = c.verify();
  INFO((problems.empty() ? "" : problems.front()));
  REQUIRE(problems.empty());
}

}  // namespace offheap_test
