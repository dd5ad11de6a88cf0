// SPDX-License-Identifier: Apache-2.0
// offheap_collection_bench: offheap::Collection (document/collection.hpp) at
// scale, beside the same work on a plain in-memory model (issue 14).
//
// The documents: --docs=N (default 1,000,000; the smoke test 20,000), seven
// fields, about 100 bytes encoded, drawn from --seed:
//   age     integer, 0-99 uniform        city   string, one of 1,000
//   score   integer in [0, 2^31), uniform (unique-ish: ~N^2/2^32 ties)
//   name    string, 10 letters           email  string, 15 characters
//   joined  integer (a Unix time)        active boolean
// Two collections: the first N/10 documents, and all N. Each has a hash
// index on "city" and an ordered index on "score", created before the
// inserts; anonymous memory, Options{} with expected_entries = docs (as the
// model reserve()s), background maintenance on (the default).
//
// The model: what a program would write without the store, at its best:
// std::unordered_map<DocId, Document> reserve()d for its documents; city:
// std::unordered_map<std::string, std::vector<DocId>> with every city's
// vector reserve()d to its final size; score: std::multimap<std::int64_t,
// DocId> (typed keys: the model knows its schema, the collection orders
// Values by their ordered keys).
//
// Printed, in order:
//   1. Inserts: both sizes, collection and model built together in slices
//      of N/--slices documents, the two alternating which goes first; per
//      subject the total time, the median slice rate, the building
//      thread's CPU time and the other threads' (the stores' maintenance),
//      the heap growth (mallinfo2's uordblks + hblkhd, and the bytes
//      alloc_counter.hpp counts), the RssAnon growth (/proc/self/status)
//      and allocations per document. Making the Document (the same for
//      both) is timed alone beside them.
//   2. Backfill: a third collection of N documents without indexes (insert
//      rate, memory), then create_index("city", hash) and
//      create_index("score", ordered) timed on it; the model's equivalent,
//      building both maps from its documents. Its answers are checked
//      against the indexed collection's, then it is dropped.
//   3. Queries (Google Benchmark, kDefaultFlags of summary.hpp: 15
//      repetitions per benchmark, randomly interleaved, so every subject
//      sees the same swings of a shared machine; medians and ratios of
//      medians): find("city", c) for a random city (~N/1000 matches),
//      find("score", s) through the ordered index for a random document's
//      score, and find_range("score", [lo, hi]) with lo, hi chosen so that
//      k = 1, 10, 100, 1,000, 10,000 documents match (k <= docs / 2), at
//      N/10 and N. Every visitor reads "age" from each document it gets.
//      Per query: wall time (and the thread's CPU time: the machine is
//      shared), matches, heap allocations (after a warm-up query).
//      Every query kind's answers are compared between collection and
//      model before timing (ids): a difference fails the run.
//   4. The summary tables: per query the time per query and per match,
//      collection against model; per range size the time per match at N
//      against N/10 (the claim: flat as the collection grows 10x).
//
//   offheap_collection_bench                   the run (1M documents)
//   offheap_collection_bench --docs=20000      smoke scale
#include "cli.hpp"
#include "platform.hpp"
#include "summary.hpp"

#include <benchmark/benchmark.h>
#include <offheap/document/collection.hpp>
#include <offheap/version.hpp>

#include <malloc.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cinttypes>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

// Last: its definitions of malloc and friends must follow every declaration
// of them (cache_bench.cpp says why).
#include "alloc_counter.hpp"

namespace offheap_bench {
namespace {

using offheap::Collection;
using offheap::DocId;
using offheap::Document;
using offheap::DocumentView;
using offheap::IndexKind;
using offheap::Value;

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

constexpr std::uint64_t kCities = 1000;
constexpr std::uint64_t kRangeSizes[] = {1, 10, 100, 1000, 10000};
constexpr std::uint64_t kStream = 4096;  // query parameters drawn per query kind and size

struct Config {
  std::uint64_t docs = 1'000'000;
  std::uint64_t slices = 50;  // build slices per size
  std::uint64_t seed = 42;
  std::uint64_t verify_max = 200'000;  // Collection::verify() on collections up to this many documents
};
Config g_config;

// ---- memory readings ------------------------------------------------------------

/// Heap bytes in use as glibc sees them: every arena's blocks in use
/// (uordblks) plus the blocks it mmap()ed for large requests (hblkhd: the
/// model's bucket arrays, which uordblks alone leaves out).
std::int64_t malloc_heap() {
  const struct mallinfo2 m = ::mallinfo2();
  return static_cast<std::int64_t>(m.uordblks + m.hblkhd);
}

/// RssAnon of the process, bytes (no malloc_trim: read between slices).
std::int64_t rss_anon() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    long long kib = 0;
    if (std::sscanf(line.c_str(), "RssAnon: %lld kB", &kib) == 1) return kib * 1024;
  }
  return 0;
}

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

// ---- the documents ----------------------------------------------------------------

/// Every document's fields, drawn once (compact: ~24 bytes per document,
/// allocated before any subject is measured).
struct Corpus {
  std::vector<std::uint8_t> age;
  std::vector<std::uint16_t> city;
  std::vector<std::int32_t> score;
  std::vector<std::uint32_t> joined;
  std::vector<std::uint64_t> letters;  // seeds of name and email
  std::vector<Value> city_values;      // "city-0000" ... (short strings: no allocation to copy)

  explicit Corpus(std::uint64_t n, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    age.resize(n);
    city.resize(n);
    score.resize(n);
    joined.resize(n);
    letters.resize(n);
    for (std::uint64_t i = 0; i < n; ++i) {
      age[i] = static_cast<std::uint8_t>(rng() % 100);
      city[i] = static_cast<std::uint16_t>(rng() % kCities);
      score[i] = static_cast<std::int32_t>(rng() & 0x7FFF'FFFF);
      joined[i] = 1'500'000'000u + static_cast<std::uint32_t>(rng() % 200'000'000);
      letters[i] = rng();
    }
    char buf[16];
    for (std::uint64_t c = 0; c < kCities; ++c) {
      std::snprintf(buf, sizeof buf, "city-%04u", static_cast<unsigned>(c));
      city_values.emplace_back(std::string(buf));
    }
  }

  /// Document i into `d` (same field order every time: set() replaces in
  /// place; every string fits std::string's inline buffer, so this
  /// allocates nothing once `d` holds the seven fields).
  void fill(std::uint64_t i, Document& d) const {
    char name[10], email[15];
    std::uint64_t x = letters[i];
    for (char& ch : name) {
      ch = static_cast<char>('a' + x % 26);
      x /= 26;
    }
    name[0] = static_cast<char>(name[0] - 'a' + 'A');
    std::memcpy(email, name, 6);
    std::memcpy(email + 6, "@mail.org", 9);
    email[0] = static_cast<char>(email[0] - 'A' + 'a');
    d.set("age", static_cast<std::int64_t>(age[i]));
    d.set("city", city_values[city[i]]);
    d.set("score", static_cast<std::int64_t>(score[i]));
    d.set("name", std::string_view(name, sizeof name));
    d.set("email", std::string_view(email, sizeof email));
    d.set("joined", static_cast<std::int64_t>(joined[i]));
    d.set("active", (letters[i] >> 60) % 3 != 0);
  }
};
const Corpus* g_corpus = nullptr;

// ---- the model ----------------------------------------------------------------------

/// The in-memory reference (see the top of this file). Ids from 1, as the
/// collection's.
class Model {
 public:
  Model(const Corpus& c, std::uint64_t n) {
    docs_.reserve(n);
    std::vector<std::uint64_t> per_city(kCities, 0);
    for (std::uint64_t i = 0; i < n; ++i) ++per_city[c.city[i]];
    city_.reserve(kCities);
    for (std::uint64_t k = 0; k < kCities; ++k) city_[c.city_values[k].as_string()].reserve(per_city[k]);
  }

  DocId insert(const Document& d) {
    const DocId id = next_++;
    const Document& stored = docs_.emplace(id, d).first->second;
    city_[stored.get("city")->as_string()].push_back(id);
    score_.emplace(stored.get("score")->as_int(), id);
    return id;
  }

  template <class F>
  std::size_t find_city(const Value& city, F&& fn) const {
    const auto it = city_.find(city.as_string());
    if (it == city_.end()) return 0;
    for (const DocId id : it->second) fn(id, docs_.find(id)->second);
    return it->second.size();
  }
  /// lo <= score <= hi, ascending.
  template <class F>
  std::size_t find_score(std::int64_t lo, std::int64_t hi, F&& fn) const {
    std::size_t n = 0;
    for (auto it = score_.lower_bound(lo); it != score_.end() && it->first <= hi; ++it, ++n) {
      fn(it->second, docs_.find(it->second)->second);
    }
    return n;
  }

  /// Builds both maps again from the documents (the model's backfill);
  /// returns the entries made.
  std::uint64_t rebuild_indexes() const {
    std::unordered_map<std::string, std::vector<DocId>> city;
    std::multimap<std::int64_t, DocId> score;
    city.reserve(kCities);
    for (const auto& [id, d] : docs_) {
      city[d.get("city")->as_string()].push_back(id);
      score.emplace(d.get("score")->as_int(), id);
    }
    return city.size() + score.size();
  }

  std::uint64_t size() const noexcept { return docs_.size(); }

 private:
  std::unordered_map<DocId, Document> docs_;
  std::unordered_map<std::string, std::vector<DocId>> city_;
  std::multimap<std::int64_t, DocId> score_;
  DocId next_ = 1;
};

// ---- the subjects of one size -----------------------------------------------------

offheap::Options collection_options(std::uint64_t docs) {
  offheap::Options o;  // anonymous memory
  o.expected_entries = docs;
  return o;
}

/// What a subject's build cost.
struct Build {
  double seconds = 0;
  std::vector<double> slice_rates;  // documents per second, per slice
  std::int64_t heap = 0;            // mallinfo2 growth, construction included
  std::int64_t heap_counted = 0;    // alloc_counter's bytes in use, growth
  std::int64_t rss = 0;             // RssAnon growth
  std::uint64_t allocations = 0;
  double cpu = 0;        // CPU seconds of the building thread
  double others_cpu = 0;  // CPU seconds of the process's other threads meanwhile (the stores' maintenance)
};

double cpu_seconds(clockid_t clock) {
  timespec ts{};
  ::clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

/// The readings around one step of a subject's build.
class Step {
 public:
  explicit Step(Build& b) : b_(b), heap_(malloc_heap()), counted_(heap_bytes_in_use()), rss_(rss_anon()) {
    allocs_ = thread_allocation_count();
    process_cpu_ = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID);
    thread_cpu_ = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
    t_ = Clock::now();
  }
  /// Ends the step; returns its seconds.
  double done() {
    const double s = seconds_since(t_);
    const double thread_cpu = cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - thread_cpu_;
    b_.cpu += thread_cpu;
    b_.others_cpu += cpu_seconds(CLOCK_PROCESS_CPUTIME_ID) - process_cpu_ - thread_cpu;
    b_.allocations += thread_allocation_count() - allocs_;
    b_.heap += malloc_heap() - heap_;
    b_.heap_counted += heap_bytes_in_use() - counted_;
    b_.rss += rss_anon() - rss_;
    return s;
  }

 private:
  Build& b_;
  std::int64_t heap_, counted_, rss_;
  std::uint64_t allocs_;
  double process_cpu_ = 0, thread_cpu_ = 0;
  Clock::time_point t_;
};

/// Query parameters, drawn once per size.
struct Streams {
  std::vector<std::uint16_t> city;                                  // city numbers
  std::vector<std::int64_t> score;                                  // a present document's score
  std::map<std::uint64_t, std::vector<std::pair<std::int64_t, std::int64_t>>> range;  // k -> [lo, hi]
};

struct Subjects {
  std::uint64_t docs = 0;
  std::unique_ptr<Collection> collection;
  std::unique_ptr<Model> model;
  Build collection_build, model_build;
  std::int64_t heap_before = 0, heap_after = 0;  // malloc_heap() around both subjects' builds
  Streams streams;
  std::vector<std::uint64_t> range_sizes;  // the kRangeSizes this size runs (k <= docs / 2)
};
Subjects g_small, g_full;

/// Both subjects of `s.docs` documents, built in alternating slices.
void build(Subjects& s) {
  const Corpus& c = *g_corpus;
  s.heap_before = malloc_heap();
  {
    Step a(s.collection_build);
    s.collection = std::make_unique<Collection>(collection_options(s.docs));
    s.collection->create_index("city", IndexKind::hash);
    s.collection->create_index("score", IndexKind::ordered);
    s.collection_build.seconds += a.done();
    Step b(s.model_build);
    s.model = std::make_unique<Model>(c, s.docs);
    s.model_build.seconds += b.done();
  }
  Document d;
  c.fill(0, d);  // (d holds its seven fields from here on: fill allocates nothing)
  const std::uint64_t per = std::max<std::uint64_t>(1, (s.docs + g_config.slices - 1) / g_config.slices);
  std::uint64_t slice = 0;
  for (std::uint64_t from = 0; from < s.docs; from += per, ++slice) {
    const std::uint64_t to = std::min(s.docs, from + per);
    const auto run_collection = [&] {
      Step st(s.collection_build);
      for (std::uint64_t i = from; i < to; ++i) {
        c.fill(i, d);
        if (s.collection->insert(d) != i + 1) std::abort();  // ids from 1, in order
      }
      const double secs = st.done();
      s.collection_build.seconds += secs;
      s.collection_build.slice_rates.push_back(static_cast<double>(to - from) / secs);
    };
    const auto run_model = [&] {
      Step st(s.model_build);
      for (std::uint64_t i = from; i < to; ++i) {
        c.fill(i, d);
        if (s.model->insert(d) != i + 1) std::abort();
      }
      const double secs = st.done();
      s.model_build.seconds += secs;
      s.model_build.slice_rates.push_back(static_cast<double>(to - from) / secs);
    };
    if (slice % 2 == 0) {
      run_collection();
      run_model();
    } else {
      run_model();
      run_collection();
    }
  }
  s.heap_after = malloc_heap();
  // Query parameters.
  std::mt19937_64 rng(g_config.seed ^ s.docs);
  std::vector<std::int64_t> sorted(c.score.begin(), c.score.begin() + static_cast<std::ptrdiff_t>(s.docs));
  std::sort(sorted.begin(), sorted.end());
  for (std::uint64_t q = 0; q < kStream; ++q) {
    s.streams.city.push_back(static_cast<std::uint16_t>(rng() % kCities));
    s.streams.score.push_back(c.score[rng() % s.docs]);
  }
  for (const std::uint64_t k : kRangeSizes) {
    if (k > s.docs / 2) continue;
    s.range_sizes.push_back(k);
    auto& v = s.streams.range[k];
    for (std::uint64_t q = 0; q < kStream; ++q) {
      const std::uint64_t j = rng() % (s.docs - k + 1);
      v.emplace_back(sorted[j], sorted[j + k - 1]);
    }
  }
}

/// The ids a collection query visits, sorted.
template <class Query>
std::vector<DocId> ids_of(Query&& q) {
  std::vector<DocId> ids;
  q([&](DocId id, const auto&) { ids.push_back(id); });
  std::sort(ids.begin(), ids.end());
  return ids;
}

/// Each query kind's answers, collection against model (16 queries each).
bool cross_check(const Subjects& s) {
  const Corpus& c = *g_corpus;
  bool ok = true;
  const auto same = [&](const char* what, std::size_t q, const std::vector<DocId>& a, const std::vector<DocId>& b) {
    if (a == b && !a.empty()) return;
    std::fprintf(stderr, "cross-check at %s documents: %s query %zu: the collection finds %zu, the model %zu%s\n",
                 with_commas(s.docs).c_str(), what, q, a.size(), b.size(), a.empty() ? " (none)" : "");
    ok = false;
  };
  for (std::size_t q = 0; q < 16; ++q) {
    const Value& city = c.city_values[s.streams.city[q]];
    same("city", q, ids_of([&](auto fn) { s.collection->find("city", city, fn); }),
         ids_of([&](auto fn) { s.model->find_city(city, fn); }));
    const std::int64_t score = s.streams.score[q];
    same("score", q, ids_of([&](auto fn) { s.collection->find("score", Value(score), fn); }),
         ids_of([&](auto fn) { s.model->find_score(score, score, fn); }));
    for (const std::uint64_t k : s.range_sizes) {
      const auto [lo, hi] = s.streams.range.at(k)[q];
      offheap::Range r;
      r.low = Value(lo);
      r.high = Value(hi);
      const std::vector<DocId> a = ids_of([&](auto fn) { s.collection->find_range("score", r, fn); });
      same("range", q, a, ids_of([&](auto fn) { s.model->find_score(lo, hi, fn); }));
      if (a.size() < k) {
        std::fprintf(stderr, "cross-check: a range for %" PRIu64 " matches found %zu\n", k, a.size());
        ok = false;
      }
    }
  }
  if (s.collection->size() != s.docs || s.model->size() != s.docs) {
    std::fprintf(stderr, "cross-check: sizes %" PRIu64 " / %" PRIu64 ", expected %" PRIu64 "\n",
                 s.collection->size(), s.model->size(), s.docs);
    ok = false;
  }
  if (s.docs <= g_config.verify_max) {
    for (const std::string& p : s.collection->verify()) {
      std::fprintf(stderr, "verify() at %s documents: %s\n", with_commas(s.docs).c_str(), p.c_str());
      ok = false;
    }
  }
  return ok;
}

// ---- 2. backfill ---------------------------------------------------------------------

struct Backfill {
  Build insert;                 // N documents, no index
  double city_seconds = 0, score_seconds = 0;
  std::int64_t city_rss = 0, score_rss = 0, city_heap = 0, score_heap = 0;
  double model_seconds = 0;
  bool ok = true;
};

Backfill backfill() {
  const Corpus& c = *g_corpus;
  const std::uint64_t n = g_full.docs;
  Backfill b;
  {
    Step st(b.insert);
    Collection coll(collection_options(n));
    Document d;
    c.fill(0, d);
    for (std::uint64_t i = 0; i < n; ++i) {
      c.fill(i, d);
      coll.insert(d);
    }
    b.insert.seconds = st.done();
    Build city, score;
    {
      Step s2(city);
      coll.create_index("city", IndexKind::hash);
      b.city_seconds = s2.done();
    }
    {
      Step s3(score);
      coll.create_index("score", IndexKind::ordered);
      b.score_seconds = s3.done();
    }
    b.city_rss = city.rss;
    b.score_rss = score.rss;
    b.city_heap = city.heap;
    b.score_heap = score.heap;
    // The same answers as the collection indexed from the start.
    for (std::size_t q = 0; q < 16; ++q) {
      const Value& cv = c.city_values[g_full.streams.city[q]];
      const auto a = ids_of([&](auto fn) { coll.find("city", cv, fn); });
      const auto e = ids_of([&](auto fn) { g_full.collection->find("city", cv, fn); });
      const auto [lo, hi] = g_full.streams.range.at(g_full.range_sizes.back())[q];
      offheap::Range r;
      r.low = Value(lo);
      r.high = Value(hi);
      const auto ra = ids_of([&](auto fn) { coll.find_range("score", r, fn); });
      const auto re = ids_of([&](auto fn) { g_full.collection->find_range("score", r, fn); });
      if (a != e || ra != re) {
        std::fprintf(stderr, "backfill: query %zu differs from the collection indexed from the start\n", q);
        b.ok = false;
      }
    }
    if (n <= g_config.verify_max && !coll.verify().empty()) {
      std::fprintf(stderr, "backfill: verify() reports problems\n");
      b.ok = false;
    }
  }
  const auto t = Clock::now();
  benchmark::DoNotOptimize(g_full.model->rebuild_indexes());
  b.model_seconds = seconds_since(t);
  return b;
}

// ---- 3. queries ----------------------------------------------------------------------

enum class Kind { city, score, range };
std::uint64_t g_pos = 0;  // the next query parameter (continues across repetitions)

/// One query, of `kind` (k: the range's size), on the collection or the
/// model; returns the matches. Each match's "age" is read into `sum`.
template <bool OnCollection>
std::size_t query(const Subjects& s, Kind kind, std::uint64_t k, std::uint64_t pos, std::int64_t& sum) {
  const std::uint64_t p = pos % kStream;
  if constexpr (OnCollection) {
    const auto visit = [&](DocId, const DocumentView& d) { sum += d.get("age")->as_int(); };
    switch (kind) {
      case Kind::city: return s.collection->find("city", g_corpus->city_values[s.streams.city[p]], visit);
      case Kind::score: return s.collection->find("score", Value(s.streams.score[p]), visit);
      case Kind::range: {
        const auto [lo, hi] = s.streams.range.at(k)[p];
        offheap::Range r;
        r.low = Value(lo);
        r.high = Value(hi);
        return s.collection->find_range("score", r, visit);
      }
    }
  } else {
    const auto visit = [&](DocId, const Document& d) { sum += d.get("age")->as_int(); };
    switch (kind) {
      case Kind::city: return s.model->find_city(g_corpus->city_values[s.streams.city[p]], visit);
      case Kind::score: return s.model->find_score(s.streams.score[p], s.streams.score[p], visit);
      case Kind::range: {
        const auto [lo, hi] = s.streams.range.at(k)[p];
        return s.model->find_score(lo, hi, visit);
      }
    }
  }
  return 0;
}

template <bool OnCollection>
void BM_Query(benchmark::State& state, const Subjects* s, Kind kind, std::uint64_t k) {
  std::int64_t sum = 0;
  (void)query<OnCollection>(*s, kind, k, g_pos++, sum);  // warm-up: the reader's buffers
  std::uint64_t matches = 0;
  const std::uint64_t allocs = thread_allocation_count();
  for (auto _ : state) matches += query<OnCollection>(*s, kind, k, g_pos++, sum);
  const auto iterations = static_cast<double>(std::max<benchmark::IterationCount>(1, state.iterations()));
  state.counters["allocs/op"] = static_cast<double>(thread_allocation_count() - allocs) / iterations;
  state.counters["matches"] = static_cast<double>(matches) / iterations;
  state.SetItemsProcessed(state.iterations());
  benchmark::DoNotOptimize(sum);
}

std::string query_label(Kind kind, std::uint64_t k) {
  switch (kind) {
    case Kind::city: return "find/city";
    case Kind::score: return "find/score";
    case Kind::range: return "range/k:" + std::to_string(k);
  }
  return "?";
}
std::string bench_name(bool on_collection, Kind kind, std::uint64_t k, std::uint64_t docs) {
  return std::string(on_collection ? "BM_Collection_" : "BM_Model_") + query_label(kind, k) +
         "/docs:" + std::to_string(docs);
}

struct QueryRow {
  Kind kind;
  std::uint64_t k;
  const Subjects* s;
};
std::vector<QueryRow> query_rows() {
  std::vector<QueryRow> rows;
  for (const Subjects* s : {&g_small, &g_full}) {
    rows.push_back({Kind::city, 0, s});
    rows.push_back({Kind::score, 0, s});
  }
  for (const std::uint64_t k : kRangeSizes) {
    for (const Subjects* s : {&g_small, &g_full}) {
      if (std::find(s->range_sizes.begin(), s->range_sizes.end(), k) != s->range_sizes.end()) {
        rows.push_back({Kind::range, k, s});
      }
    }
  }
  return rows;
}

void register_queries() {
  for (const QueryRow& r : query_rows()) {
    const benchmark::TimeUnit unit = r.kind == Kind::range && r.k >= 1000 ? benchmark::kMillisecond
                                                                         : benchmark::kMicrosecond;
    benchmark::RegisterBenchmark(bench_name(true, r.kind, r.k, r.s->docs).c_str(), BM_Query<true>, r.s, r.kind, r.k)
        ->Unit(unit);
    benchmark::RegisterBenchmark(bench_name(false, r.kind, r.k, r.s->docs).c_str(), BM_Query<false>, r.s, r.kind, r.k)
        ->Unit(unit);
  }
}

// ---- 4. the summary --------------------------------------------------------------------

/// Medians of one benchmark's repetitions.
struct Figures {
  double us = NAN, ns_per_match = NAN, matches = NAN, allocs = NAN, spread = NAN;
  double cpu_us = NAN, cpu_ns_per_match = NAN;  // the same from the thread's CPU time
  std::vector<double> us_samples;
};
Figures figures(const SummaryReporter& rep, const std::string& name) {
  const std::vector<Sample> s = rep.samples(name);
  Figures f;
  f.us_samples = collect(s, [](const Sample& x) { return x.real_seconds / std::max(1.0, x.iterations) * 1e6; });
  f.us = median(f.us_samples);
  f.spread = half_iqr_percent(f.us_samples);
  f.ns_per_match = median(collect(s, [](const Sample& x) {
    const double m = x.counter("matches");
    return m > 0 ? x.real_seconds / std::max(1.0, x.iterations) / m * 1e9 : NAN;
  }));
  f.cpu_us = median(collect(s, [](const Sample& x) { return x.cpu_seconds / std::max(1.0, x.iterations) * 1e6; }));
  f.cpu_ns_per_match = median(collect(s, [](const Sample& x) {
    const double m = x.counter("matches");
    return m > 0 ? x.cpu_seconds / std::max(1.0, x.iterations) / m * 1e9 : NAN;
  }));
  f.matches = median(counter_values(s, "matches"));
  f.allocs = median(counter_values(s, "allocs/op"));
  return f;
}

std::string us_cell(const Figures& f) {
  if (std::isnan(f.us)) return "-";
  char b[48];
  std::snprintf(b, sizeof b, f.us >= 100 ? "%.0f +-%.0f%%" : f.us >= 10 ? "%.1f +-%.0f%%" : "%.2f +-%.0f%%", f.us,
                f.spread);
  return b;
}

void print_config() {
  const Corpus& c = *g_corpus;
  Document d;
  c.fill(0, d);
  double bytes = 0;
  const std::uint64_t sample = std::min<std::uint64_t>(g_full.docs == 0 ? g_config.docs : g_full.docs, 10000);
  for (std::uint64_t i = 0; i < sample; ++i) {
    c.fill(i, d);
    bytes += static_cast<double>(d.encoded_size());
  }
  std::printf("offheap_collection_bench: offheap %u.%u.%u\n", offheap::kVersionMajor, offheap::kVersionMinor,
              offheap::kVersionPatch);
  print_host();
  std::printf("  Load:     %s (1, 5, 15 min, at the start)\n", load_average().c_str());
  std::printf("  Documents: %s and %s (the first tenth), 7 fields, %.1f bytes encoded on average, e.g. %s\n",
              with_commas(g_config.docs / 10).c_str(), with_commas(g_config.docs).c_str(), bytes / static_cast<double>(sample),
              [&] { c.fill(0, d); return d.to_text(); }().c_str());
  std::printf("  Collection: anonymous memory, Options{} with expected_entries = its documents (both of its "
              "stores), background maintenance on; hash index on \"city\" (1,000 values), ordered index on "
              "\"score\" (uniform in [0, 2^31)), created before the inserts\n");
  std::printf("  Model:    std::unordered_map<DocId, Document> reserve()d; city: std::unordered_map<std::string, "
              "std::vector<DocId>>, each vector reserve()d to its final size; score: std::multimap<int64_t, DocId>\n");
  std::printf("  Queries:  every visitor reads \"age\" from each match; %" PRIu64
              " random parameters per query kind and size; Google Benchmark repetitions interleaved at random\n\n",
              kStream);
  std::fflush(stdout);
}

void print_builds(const Backfill& bf, double fill_ns) {
  std::printf("\n## 1. Inserts (collection and model built in alternating slices of 1/%" PRIu64 ")\n\n",
              g_config.slices);
  std::printf("Making the Document (the same for both, included below): %.0f ns per document.\n\n", fill_ns);
  std::printf("| subject | docs | seconds | us/doc | docs/s (median slice) | CPU us/doc | other threads' CPU, s | "
              "heap growth, B/doc (mallinfo2) | heap, B/doc (counted) | RssAnon growth, B/doc | allocs/doc |\n"
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  const auto row = [](const char* subject, std::uint64_t n, const Build& b) {
    const auto per = [&](double x) { return x / static_cast<double>(n); };
    std::printf("| %s | %s | %.2f | %.2f | %s | %.2f | %.2f | %.1f | %.1f | %.1f | %.2f |\n", subject,
                with_commas(n).c_str(), b.seconds, per(b.seconds * 1e6),
                b.slice_rates.empty() ? "-" : with_commas(static_cast<std::uint64_t>(median(b.slice_rates))).c_str(),
                per(b.cpu * 1e6), b.others_cpu,
                per(static_cast<double>(b.heap)), per(static_cast<double>(b.heap_counted)),
                per(static_cast<double>(b.rss)), per(static_cast<double>(b.allocations)));
  };
  for (const Subjects* s : {&g_small, &g_full}) {
    row("Collection, 2 indexes", s->docs, s->collection_build);
    row("Model, 2 indexes", s->docs, s->model_build);
  }
  row("Collection, no index", g_full.docs, bf.insert);
  std::printf("\nRatio of insert times, collection / model: %.2f at %s, %.2f at %s (median slice rates: %.2f, %.2f).\n",
              g_small.collection_build.seconds / g_small.model_build.seconds, with_commas(g_small.docs).c_str(),
              g_full.collection_build.seconds / g_full.model_build.seconds, with_commas(g_full.docs).c_str(),
              median(g_small.model_build.slice_rates) / median(g_small.collection_build.slice_rates),
              median(g_full.model_build.slice_rates) / median(g_full.collection_build.slice_rates));
  for (const Subjects* s : {&g_small, &g_full}) {
    std::printf("Heap in use (mallinfo2 uordblks + hblkhd) around the %s-document builds: %.1f MiB before, "
                "%.1f MiB after; of the growth, the collection's %.2f MiB, the model's %.1f MiB.\n",
                with_commas(s->docs).c_str(), static_cast<double>(s->heap_before) / (1 << 20),
                static_cast<double>(s->heap_after) / (1 << 20),
                static_cast<double>(s->collection_build.heap) / (1 << 20),
                static_cast<double>(s->model_build.heap) / (1 << 20));
  }
  const offheap::Stats st = g_full.collection->documents().stats();
  std::printf("The documents store of the %s collection: %.1f live bytes/doc, %.1f mapped bytes/doc "
              "(the indexes store is not exposed; RssAnon covers both).\n",
              with_commas(g_full.docs).c_str(), static_cast<double>(st.live_bytes) / static_cast<double>(g_full.docs),
              static_cast<double>(st.mapped_bytes) / static_cast<double>(g_full.docs));

  const double n = static_cast<double>(g_full.docs);
  std::printf("\n## 2. Backfill: create_index on %s documents\n\n", with_commas(g_full.docs).c_str());
  std::printf("| step | seconds | us/doc | RssAnon growth, B/doc | heap growth, B/doc (mallinfo2) |\n"
              "|---|---:|---:|---:|---:|\n");
  std::printf("| create_index(\"city\", hash) | %.2f | %.2f | %.1f | %.1f |\n", bf.city_seconds,
              bf.city_seconds * 1e6 / n, static_cast<double>(bf.city_rss) / n, static_cast<double>(bf.city_heap) / n);
  std::printf("| create_index(\"score\", ordered) | %.2f | %.2f | %.1f | %.1f |\n", bf.score_seconds,
              bf.score_seconds * 1e6 / n, static_cast<double>(bf.score_rss) / n, static_cast<double>(bf.score_heap) / n);
  std::printf("| both, inserted with the documents (section 1: indexed - unindexed insert) | %.2f | %.2f | | |\n",
              g_full.collection_build.seconds - bf.insert.seconds,
              (g_full.collection_build.seconds - bf.insert.seconds) * 1e6 / n);
  std::printf("| Model: both maps from its documents | %.2f | %.2f | | |\n", bf.model_seconds,
              bf.model_seconds * 1e6 / n);
}

void print_queries(const SummaryReporter& rep) {
  std::printf("\n## 3. Queries (wall time, medians of the repetitions; +-: half the interquartile range; the last "
              "column: the same ratio from the benchmark thread's CPU time)\n\n");
  std::printf("| query | docs | matches | Collection us/query | ns/match | allocs/query | Model us/query | "
              "ns/match | allocs/query | Collection / model | (CPU time) |\n"
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const QueryRow& r : query_rows()) {
    const Figures c = figures(rep, bench_name(true, r.kind, r.k, r.s->docs));
    const Figures m = figures(rep, bench_name(false, r.kind, r.k, r.s->docs));
    std::printf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", query_label(r.kind, r.k).c_str(),
                with_commas(r.s->docs).c_str(), number_cell(c.matches, "%.1f").c_str(), us_cell(c).c_str(),
                number_cell(c.ns_per_match, "%.0f").c_str(), number_cell(c.allocs, "%.2f").c_str(),
                us_cell(m).c_str(), number_cell(m.ns_per_match, "%.0f").c_str(),
                number_cell(m.allocs, "%.2f").c_str(), ratio_cell(c.us / m.us).c_str(),
                ratio_cell(c.cpu_us / m.cpu_us).c_str());
  }
  std::printf("\n## 4. Per match as the collection grows 10x (range on \"score\", ns per match)\n\n");
  std::printf("| k | Collection at %s | at %s | growth | (CPU time) | Model at %s | at %s | growth | (CPU time) |\n"
              "|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
              with_commas(g_small.docs).c_str(), with_commas(g_full.docs).c_str(), with_commas(g_small.docs).c_str(),
              with_commas(g_full.docs).c_str());
  const auto growth_row = [&](const std::string& label, Kind kind, std::uint64_t k) {
    const Figures cs = figures(rep, bench_name(true, kind, k, g_small.docs));
    const Figures cf = figures(rep, bench_name(true, kind, k, g_full.docs));
    const Figures ms = figures(rep, bench_name(false, kind, k, g_small.docs));
    const Figures mf = figures(rep, bench_name(false, kind, k, g_full.docs));
    std::printf("| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", label.c_str(),
                number_cell(cs.ns_per_match, "%.0f").c_str(), number_cell(cf.ns_per_match, "%.0f").c_str(),
                ratio_cell(cf.ns_per_match / cs.ns_per_match).c_str(),
                ratio_cell(cf.cpu_ns_per_match / cs.cpu_ns_per_match).c_str(),
                number_cell(ms.ns_per_match, "%.0f").c_str(), number_cell(mf.ns_per_match, "%.0f").c_str(),
                ratio_cell(mf.ns_per_match / ms.ns_per_match).c_str(),
                ratio_cell(mf.cpu_ns_per_match / ms.cpu_ns_per_match).c_str());
  };
  for (const std::uint64_t k : kRangeSizes) {
    const bool both = std::find(g_small.range_sizes.begin(), g_small.range_sizes.end(), k) != g_small.range_sizes.end() &&
                      std::find(g_full.range_sizes.begin(), g_full.range_sizes.end(), k) != g_full.range_sizes.end();
    if (both) growth_row(std::to_string(k), Kind::range, k);
  }
  growth_row("find/city (N/1000 vs N/10000 matches)", Kind::city, 0);
}

void usage(const char* argv0) {
  std::printf("usage: %s [--docs=N] [--slices=N] [--seed=N] [--verify_max=N] [Google Benchmark flags]\n"
              "  defaults: --docs=1000000 (the issue's run; the smoke test: --docs=20000) --slices=50 --seed=42\n"
              "  --verify_max: Collection::verify() on collections of at most this many documents (200000)\n"
              "  Google Benchmark defaults: %s %s %s\n",
              argv0, kDefaultFlags[0], kDefaultFlags[1], kDefaultFlags[2]);
}

int run(int argc, char** argv) {
  std::vector<char*> user;
  const std::pair<const char*, std::uint64_t*> numbers[] = {{"--docs=", &g_config.docs},
                                                            {"--slices=", &g_config.slices},
                                                            {"--seed=", &g_config.seed},
                                                            {"--verify_max=", &g_config.verify_max}};
  for (int i = 1; i < argc; ++i) {
    const Flag flag(argv[i]);
    bool taken = false;
    for (const auto& [prefix, out] : numbers) {
      if (const char* v = flag.value(prefix)) {
        if (!parse_u64(v, *out)) return flag.fail("expects a whole number"), 2;
        taken = true;
      }
    }
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) usage(argv[0]);
    if (!taken) user.push_back(argv[i]);
  }
  if (g_config.docs < 20 || g_config.slices == 0) {
    std::fprintf(stderr, "--docs must be at least 20 and --slices at least 1\n");
    return 2;
  }
  std::vector<char*> args = with_default_flags(argv[0], user);
  int n = static_cast<int>(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 2;

  const Corpus corpus(g_config.docs, g_config.seed);
  g_corpus = &corpus;
  g_small.docs = g_config.docs / 10;
  g_full.docs = g_config.docs;
  print_config();

  // Making the documents alone (the same work both subjects' inserts include).
  double fill_ns = 0;
  {
    Document d;
    corpus.fill(0, d);
    std::int64_t sum = 0;
    const auto t = Clock::now();
    for (std::uint64_t i = 0; i < g_full.docs; ++i) {
      corpus.fill(i, d);
      sum += d.size();
    }
    fill_ns = seconds_since(t) * 1e9 / static_cast<double>(g_full.docs);
    benchmark::DoNotOptimize(sum);
  }
  std::printf("Building %s and %s documents...\n", with_commas(g_small.docs).c_str(), with_commas(g_full.docs).c_str());
  std::fflush(stdout);
  build(g_small);
  build(g_full);
  bool ok = cross_check(g_small) && cross_check(g_full);
  std::printf("Backfill on %s documents...\n", with_commas(g_full.docs).c_str());
  std::fflush(stdout);
  const Backfill bf = backfill();
  ok = ok && bf.ok;
  print_builds(bf, fill_ns);
  if (!ok) {
    std::printf("\nFAILED: the collection's answers differ from the model's (above)\n");
    return 1;
  }
  std::printf("\n");
  std::fflush(stdout);

  register_queries();
  SummaryReporter reporter;
  if (benchmark::RunSpecifiedBenchmarks(&reporter) == 0) {
    std::fprintf(stderr, "offheap_collection_bench: --benchmark_filter=%s selects no benchmark\n",
                 benchmark::GetBenchmarkFilter().c_str());
    return 2;
  }
  std::printf("\n");
  print_config();
  print_builds(bf, fill_ns);
  print_queries(reporter);
  const std::int64_t heap_end = malloc_heap();
  std::printf("\nHeap in use at the end (mallinfo2): %.1f MiB; RssAnon %.1f MiB.\n",
              static_cast<double>(heap_end) / (1 << 20), static_cast<double>(rss_anon()) / (1 << 20));
  benchmark::Shutdown();
  return reporter.exit_code();
}

}  // namespace
}  // namespace offheap_bench

int main(int argc, char** argv) { return offheap_bench::run(argc, argv); }
