// SPDX-License-Identifier: Apache-2.0
// SIGKILL torture of a file-backed Collection: a child process runs a
// stream of collection writes (inserts, updates, modifies, removes, index
// creations and drops), publishing in shared memory the number of each
// operation before it starts and after it returns; the parent kills it at
// a random moment, reopens the collection (which, not closed cleanly,
// rebuilds its indexes) and checks it against the model replayed to the
// acknowledged operation, or to the one in flight: every document, the set
// of indexes, verify(), and queries of every kind, each answer exactly the
// documents that match. One cycle in four the parent leaves the collection
// unclean for the child to reopen (the kill may then land in the rebuild).
// Operations are idempotent: the next child starts again at the one that
// was in flight.
//
// Environment: OFFHEAP_COLLECTION_CRASH_CYCLES (default 40; .ci/run more),
// OFFHEAP_SEED.
#include <offheap/document/collection.hpp>

#include "support/doc_model.hpp"
#include "support/env.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <new>
#include <chrono>
#include <csignal>
#include <random>
#include <thread>

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

using offheap::Collection;
using offheap::DocId;
using offheap::Document;
using offheap::IndexKind;
using offheap_test::Model;

/// What the child publishes.
struct Channel {
  std::atomic<std::uint64_t> started;  // operations begun (the one in flight included)
  std::atomic<std::uint64_t> acked;    // operations returned
  std::atomic<std::uint32_t> opened;   // the child's open returned
};

/// Operation k of the stream: what it does depends only on the seed and
/// k (and applies to whatever state there is), so the parent can replay it.
struct Op {
  enum Kind { insert, update, modify, remove, create, drop } kind;
  DocId id;
  Document doc;
  std::string field;
  offheap::Value value;
  IndexKind index_kind;
};

Op op_at(std::uint64_t seed, std::uint64_t k) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + k);
  Op op{};
  const unsigned what = static_cast<unsigned>(rng() % 100);
  op.id = 1 + rng() % 400;
  op.field = offheap_test::kFields[rng() % 4];
  op.index_kind = rng() % 2 == 0 ? IndexKind::hash : IndexKind::ordered;
  if (what < 35) {
    op.kind = Op::insert;
    op.doc = offheap_test::random_doc(rng);
  } else if (what < 60) {
    op.kind = Op::update;
    op.doc = offheap_test::random_doc(rng);
  } else if (what < 75) {
    op.kind = Op::modify;
    op.value = offheap_test::random_value(rng);
  } else if (what < 97) {
    op.kind = Op::remove;
  } else if (what < 99) {
    op.kind = Op::create;
  } else {
    op.kind = Op::drop;
  }
  return op;
}

/// Applies op to the collection (c) or the model (m).
void apply(Collection* c, Model* m, const Op& op) {
  switch (op.kind) {
    case Op::insert:
      if (c != nullptr) c->insert(op.id, op.doc);
      if (m != nullptr) m->docs.emplace(op.id, op.doc);
      return;
    case Op::update:
      if (c != nullptr) c->update(op.id, op.doc);
      if (m != nullptr && m->docs.count(op.id) != 0) m->docs[op.id] = op.doc;
      return;
    case Op::modify:
      if (c != nullptr) c->modify(op.id, [&](Document& d) { d.set(op.field, op.value); });
      if (m != nullptr && m->docs.count(op.id) != 0) m->docs[op.id].set(op.field, op.value);
      return;
    case Op::remove:
      if (c != nullptr) c->remove(op.id);
      if (m != nullptr) m->docs.erase(op.id);
      return;
    case Op::create:
      if (c != nullptr) c->create_index(op.field, op.index_kind);
      if (m != nullptr) m->indexes.insert({op.field, op.index_kind});
      return;
    case Op::drop:
      if (c != nullptr) c->drop_index(op.field, op.index_kind);
      if (m != nullptr) m->indexes.erase({op.field, op.index_kind});
      return;
  }
}

Model state_of(const Collection& c) {
  Model m;
  c.for_each([&](DocId id, const offheap::DocumentView& d) { m.docs.emplace(id, d.to_document()); });
  for (const offheap::IndexInfo& i : c.indexes()) m.indexes.insert({i.field, i.kind});
  return m;
}

}  // namespace

TEST_CASE("A file-backed collection killed at any moment reopens with every query exact", "[document][collection][crash]") {
  const std::uint64_t seed = offheap_test::env_u64("OFFHEAP_SEED", 77);
  const std::uint64_t cycles = offheap_test::env_u64("OFFHEAP_COLLECTION_CRASH_CYCLES", offheap_test::kSanitized ? 12 : 40);
  offheap_test::TempDir dir;
  offheap::Options o;
  o.path = dir / "c";
  void* shared = ::mmap(nullptr, sizeof(Channel), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  REQUIRE(shared != MAP_FAILED);
  auto* ch = new (shared) Channel{};
  {
    // Two indexes to begin with; the stream creates and drops more.
    Collection c(o);
    c.create_index("a", IndexKind::hash);
    c.create_index("b", IndexKind::ordered);
  }
  Model model;
  model.indexes = {{"a", IndexKind::hash}, {"b", IndexKind::ordered}};
  std::uint64_t next_op = 0, in_ops = 0, in_open = 0, unclean_opens = 0;
  std::mt19937_64 rng(seed);
  bool flight_carried = false;  // an unchecked cycle's operation in flight, not run again since
  for (std::uint64_t cycle = 0; cycle < cycles; ++cycle) {
    const std::uint64_t first = next_op;
    ch->started.store(next_op, std::memory_order_relaxed);
    ch->acked.store(next_op, std::memory_order_relaxed);
    ch->opened.store(0, std::memory_order_relaxed);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      // The child: open (a rebuild if the last cycle left it unclean), then
      // the stream from next_op on, until killed.
      try {
        Collection c(o);
        ch->opened.store(1, std::memory_order_release);
        for (std::uint64_t k = next_op;; ++k) {
          const Op op = op_at(seed, k);
          ch->started.store(k + 1, std::memory_order_release);
          apply(&c, nullptr, op);
          ch->acked.store(k + 1, std::memory_order_release);
        }
      } catch (...) {
        ::_exit(3);
      }
    }
    // Kill 1-40 ms after the fork in one cycle of four, wherever the child
    // is (inside its open, often: opening an unclean collection takes a
    // few ms, more under a sanitizer); in the others 1-40 ms after its open
    // returned (waited for up to 10 s), so that most kills land inside
    // operations however slowly a loaded machine opens.
    if (rng() % 4 != 0) {
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (ch->opened.load(std::memory_order_acquire) == 0 && std::chrono::steady_clock::now() < give_up) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(1000 + rng() % 39000));
    ::kill(pid, SIGKILL);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFSIGNALED(status));  // (exit 3: the child's collection threw)
    const std::uint64_t acked = ch->acked.load(std::memory_order_acquire);
    const std::uint64_t started = ch->started.load(std::memory_order_acquire);
    if (ch->opened.load(std::memory_order_acquire) == 0) ++in_open;
    if (started != acked) ++in_ops;
    INFO("cycle " << cycle << ", operations " << next_op << " .. " << acked << " (in flight: " << (started != acked)
                  << "), seed " << seed);
    // The model after the acknowledged operations; the one in flight may
    // have happened or not.
    for (; next_op < acked; ++next_op) apply(nullptr, &model, op_at(seed, next_op));
    const bool maybe_flight = started != acked || (flight_carried && acked == first);
    Model with_flight = model;
    if (maybe_flight) apply(nullptr, &with_flight, op_at(seed, acked));
    // Every operation is idempotent (an insert of a taken id, a remove of
    // a missing one do nothing), so the next child may run the one in
    // flight again whether it happened or not.
    if (rng() % 4 == 0 && cycle + 1 < cycles) {
      ++unclean_opens;  // the next child opens it unclean (rebuilds)
      flight_carried = maybe_flight;
      continue;
    }
    Collection c(o);  // not closed cleanly: indexes rebuilt
    const Model found = state_of(c);
    flight_carried = false;
    const bool flight_done = maybe_flight && found == with_flight;
    INFO("in flight and done: " << flight_done);
    REQUIRE((found == model || flight_done));
    if (flight_done) model = with_flight;
    const std::vector<std::string> problems = c.verify();
    INFO((problems.empty() ? "" : problems.front()));
    REQUIRE(problems.empty());
    offheap_test::check_all(c, model);
    offheap_test::check_queries(c, model, rng, 30);
  }
  INFO("kills inside an operation " << in_ops << ", inside an open " << in_open << ", unclean opens left for the child "
                                    << unclean_opens << ", operations " << next_op);
  WARN("kills inside an operation " << in_ops << " of " << cycles << ", inside an open " << in_open << ", operations acknowledged " << next_op);
  CHECK(in_ops > cycles / 5);
  CHECK(next_op > cycles * 10);
  ::munmap(shared, sizeof(Channel));
}
