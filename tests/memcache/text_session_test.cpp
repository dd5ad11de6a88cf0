// SPDX-License-Identifier: Apache-2.0
// The text protocol's sessions (memcache/text_session.hpp) on a Cache in
// memory: each command's replies, byte for byte, against what memcached
// 1.6.18 (Debian) answered to the same bytes (the expected strings below
// are its replies, recorded, with its cas values where the test gives
// ours: those differ by design), expiry on a clock the test moves, data
// arriving a byte at a time, refused blocks discarded across calls, and
// several sessions on one store.
#include <offheap/memcache/text_session.hpp>

#include "session_fixture.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

TEST_CASE("memcache text session: storage, retrieval and their replies", "[memcache]") {
  Server server(72);
  // memcached: STORED, then the value; flags and length kept; gets adds the cas.
  CHECK(talk(server, "set a 0 0 1\r\nx\r\nget a\r\n") == "STORED\r\nVALUE a 0 1\r\nx\r\nEND\r\n");
  CHECK(talk(server, "set b 4294967295 0 1\r\nx\r\ngets b\r\n") == "STORED\r\nVALUE b 4294967295 1 73\r\nx\r\nEND\r\n");
  CHECK(talk(server, "get a b zz a\r\n") ==
        "VALUE a 0 1\r\nx\r\nVALUE b 4294967295 1\r\nx\r\nVALUE a 0 1\r\nx\r\nEND\r\n");
  CHECK(talk(server, "get nothing\r\n") == "END\r\n");
  // A key over 250 bytes: the error alone (memcached), after gat touched the keys before it.
  const std::string k251(251, 'k');
  CHECK(talk(server, "get a " + k251 + " b\r\n") == "CLIENT_ERROR bad command line format\r\n");
  CHECK(talk(server, "gat -1 a " + k251 + "\r\nget a\r\n") == "CLIENT_ERROR bad command line format\r\nEND\r\n");
  CHECK(talk(server, "set a 0 0 1\r\nx\r\nget " + std::string(250, 'k') + " a\r\n") == "STORED\r\nVALUE a 0 1\r\nx\r\nEND\r\n");
  CHECK(talk(server, "set c 0 0 1 noreply\r\nx\r\nget c\r\n") == "VALUE c 0 1\r\nx\r\nEND\r\n");
  CHECK(talk(server, "add c 0 0 1\r\ny\r\nadd d 0 0 1\r\ny\r\n") == "NOT_STORED\r\nSTORED\r\n");
  CHECK(talk(server, "replace zz 0 0 1\r\ny\r\nreplace d 9 0 2\r\nyy\r\nget d\r\n") ==
        "NOT_STORED\r\nSTORED\r\nVALUE d 9 2\r\nyy\r\nEND\r\n");
  // memcached: append and prepend keep the flags; a missing key is NOT_STORED.
  CHECK(talk(server, "append nokey 0 0 1\r\nx\r\nprepend nokey 0 0 1\r\nx\r\n") == "NOT_STORED\r\nNOT_STORED\r\n");
  CHECK(talk(server, "set n 5 0 3\r\n109\r\nappend n 7 0 2\r\nxy\r\nprepend n 8 0 1\r\n<\r\nget n\r\n") ==
        "STORED\r\nSTORED\r\nSTORED\r\nVALUE n 5 6\r\n<109xy\r\nEND\r\n");
  CHECK(talk(server, "add k 0 0 0\r\n\r\nget k\r\n") == "STORED\r\nVALUE k 0 0\r\n\r\nEND\r\n");
  CHECK(talk(server, "delete a 0\r\ndelete a\r\ndelete a 5\r\ndelete c noreply\r\nget c\r\n") ==
        "DELETED\r\nNOT_FOUND\r\nCLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\nEND\r\n");
  CHECK(talk(server, "version\r\nverbosity 1\r\nverbosity 1 noreply\r\n") == "VERSION 1.6.18\r\nOK\r\n");
  CHECK(talk(server, "quit\r\nget b\r\n") == "<close>");
}

TEST_CASE("memcache text session: cas uniques, cas, incr, decr and touch", "[memcache]") {
  Server server(1000);
  CHECK(talk(server, "set k 3 0 1\r\nx\r\ngets k\r\n") == "STORED\r\nVALUE k 3 1 1000\r\nx\r\nEND\r\n");
  CHECK(talk(server, "cas k 0 0 1 999\r\ny\r\ncas nokey 0 0 1 1\r\ny\r\n") == "EXISTS\r\nNOT_FOUND\r\n");
  CHECK(talk(server, "cas k 4 0 1 1000\r\ny\r\ngets k\r\n") == "STORED\r\nVALUE k 4 1 1001\r\ny\r\nEND\r\n");
  // The old unique no longer passes; a refused cas takes no unique.
  CHECK(talk(server, "cas k 4 0 1 1000 noreply\r\nz\r\ngets k\r\n") == "VALUE k 4 1 1001\r\ny\r\nEND\r\n");

  // memcached: 15, 0, 2^64 - 1, 0 (incr wraps, decr stops at 0); a shorter
  // result padded with spaces to the old length.
  CHECK(talk(server, "set n 5 0 2\r\n10\r\nincr n 5\r\ndecr n 100\r\nget n\r\n") ==
        "STORED\r\n15\r\n0\r\nVALUE n 5 2\r\n0 \r\nEND\r\n");
  CHECK(talk(server, "incr n 18446744073709551615\r\nincr n 1\r\nincr n 1\r\nget n\r\n") ==
        "18446744073709551615\r\n0\r\n1\r\nVALUE n 5 20\r\n1                   \r\nEND\r\n");
  CHECK(talk(server, "set m 0 0 3\r\n 12\r\nincr m 1\r\nget m\r\n") == "STORED\r\n13\r\nVALUE m 0 3\r\n13 \r\nEND\r\n");
  CHECK(talk(server, "set q 0 0 4\r\n12ab\r\nincr q 1\r\nset e 0 0 0\r\n\r\nincr e 1\r\n") ==
        "STORED\r\nCLIENT_ERROR cannot increment or decrement non-numeric value\r\nSTORED\r\n"
        "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n");
  CHECK(talk(server, "incr nokey 1\r\ndecr nokey 1\r\nincr n 1 noreply\r\nget n\r\n") ==
        "NOT_FOUND\r\nNOT_FOUND\r\nVALUE n 5 20\r\n2                   \r\nEND\r\n");
  CHECK(talk(server, "set w 0 0 2\r\n99\r\nincr w 1\r\nget w\r\n") == "STORED\r\n100\r\nVALUE w 0 3\r\n100\r\nEND\r\n");

  // touch keeps the cas (memcached: gets after touch shows the same unique).
  const std::string before = talk(server, "gets k\r\n");
  CHECK(talk(server, "touch k 100\r\ntouch zz 10\r\n") == "TOUCHED\r\nNOT_FOUND\r\n");
  CHECK(talk(server, "gets k\r\n") == before);
}

TEST_CASE("memcache text session: expiry times as memcached reads them", "[memcache]") {
  Server server;
  const std::uint64_t now = server.clock.now_ms() / 1000;
  CHECK(talk(server, "set neg 0 -1 1\r\nx\r\nget neg\r\n") == "STORED\r\nEND\r\n");  // memcached: the same
  CHECK(talk(server, "set rel 0 100 1\r\nx\r\nset max 0 2592000 1\r\nx\r\n") == "STORED\r\nSTORED\r\n");
  CHECK(talk(server, "set past 0 " + std::to_string(now - 1) + " 1\r\nx\r\nget past\r\n") == "STORED\r\nEND\r\n");
  CHECK(talk(server, "set abs 0 " + std::to_string(now + 50) + " 1\r\nx\r\n") == "STORED\r\n");
  CHECK(talk(server, "set never 0 0 1\r\nx\r\n") == "STORED\r\n");
  // 2,592,001 is an absolute time, in 1970: already expired.
  CHECK(talk(server, "set old 0 2592001 1\r\nx\r\nget old\r\n") == "STORED\r\nEND\r\n");
  CHECK(talk(server, "get rel abs max never\r\n") ==
        "VALUE rel 0 1\r\nx\r\nVALUE abs 0 1\r\nx\r\nVALUE max 0 1\r\nx\r\nVALUE never 0 1\r\nx\r\nEND\r\n");
  server.clock.advance_s(51);
  CHECK(talk(server, "get rel abs\r\n") == "VALUE rel 0 1\r\nx\r\nEND\r\n");
  server.clock.advance_s(50);
  CHECK(talk(server, "get rel max never\r\n") == "VALUE max 0 1\r\nx\r\nVALUE never 0 1\r\nx\r\nEND\r\n");

  // touch and gat move the deadline; append and incr keep it.
  CHECK(talk(server, "set t 0 10 2\r\n10\r\ntouch t 1000\r\n") == "STORED\r\nTOUCHED\r\n");
  server.clock.advance_s(20);
  CHECK(talk(server, "append t 0 0 1\r\n0\r\nincr t 1\r\ngat 5 t\r\n") == "STORED\r\n101\r\nVALUE t 0 3\r\n101\r\nEND\r\n");
  server.clock.advance_s(6);
  CHECK(talk(server, "get t\r\n") == "END\r\n");
  CHECK(talk(server, "set g 0 0 1\r\nx\r\ngats -1 g\r\nget g\r\n").find("VALUE g 0 1 ") != std::string::npos);
  CHECK(talk(server, "get g\r\n") == "END\r\n");  // gat with an exptime past: served once, then gone
}

TEST_CASE("memcache text session: flush_all now and later", "[memcache]") {
  Server server;
  CHECK(talk(server, "set a 0 0 1\r\nx\r\nflush_all\r\nget a\r\n") == "STORED\r\nOK\r\nEND\r\n");
  // memcached's timing: a delay of N flushes at N - 1 seconds (1: now).
  CHECK(talk(server, "set a 0 0 1\r\nx\r\nflush_all 1\r\nget a\r\n") == "STORED\r\nOK\r\nEND\r\n");
  CHECK(talk(server, "set a 0 0 1\r\nx\r\nflush_all 10\r\nget a\r\n") == "STORED\r\nOK\r\nVALUE a 0 1\r\nx\r\nEND\r\n");
  server.clock.advance_s(8);
  CHECK(talk(server, "set b 0 0 1\r\nx\r\nget a b\r\n") == "STORED\r\nVALUE a 0 1\r\nx\r\nVALUE b 0 1\r\nx\r\nEND\r\n");
  server.clock.advance_s(1);
  CHECK(talk(server, "get a b\r\n") == "END\r\n");  // everything written before the delay's end
  // ...and during its second (memcached's time-based flush), not after.
  CHECK(talk(server, "set c 0 0 1\r\nx\r\nget c\r\n") == "STORED\r\nEND\r\n");
  server.clock.advance_s(1);
  CHECK(talk(server, "set d 0 0 1\r\nx\r\nget c d\r\n") == "STORED\r\nVALUE d 0 1\r\nx\r\nEND\r\n");
  // A flushed item is absent to every command: add stores over it, the rest miss.
  CHECK(talk(server, "replace a 0 0 1\r\ny\r\nincr a 1\r\ntouch a 1\r\nappend a 0 0 1\r\ny\r\ncas a 0 0 1 1\r\ny\r\n") ==
        "NOT_STORED\r\nNOT_FOUND\r\nNOT_FOUND\r\nNOT_STORED\r\nNOT_FOUND\r\n");
  CHECK(talk(server, "add a 0 0 1\r\nz\r\nget a\r\n") == "STORED\r\nVALUE a 0 1\r\nz\r\nEND\r\n");
  // An absolute time before the server started flushes nothing, and cancels a pending flush.
  CHECK(talk(server, "flush_all 100\r\nflush_all 1000000000\r\n") == "OK\r\nOK\r\n");
  server.clock.advance_s(200);
  CHECK(talk(server, "get a\r\n") == "VALUE a 0 1\r\nz\r\nEND\r\n");
  CHECK(talk(server, "set c 0 0 1\r\nx\r\nflush_all noreply\r\nget c\r\nflush_all -1\r\n") == "STORED\r\nEND\r\nOK\r\n");
  CHECK(talk(server, "set d 0 0 1\r\nx\r\nflush_all 100\r\nflush_all 0\r\nset e 0 0 1\r\ny\r\n") ==
        "STORED\r\nOK\r\nOK\r\nSTORED\r\n");
  server.clock.advance_s(200);
  CHECK(talk(server, "get e\r\n") == "VALUE e 0 1\r\ny\r\nEND\r\n");  // flush_all 0 cancelled the pending one
}

TEST_CASE("memcache text session: refused items, errors and partial input", "[memcache]") {
  Server server;
  TextLimits tiny;
  tiny.max_item_bytes = 100;  // 40 data bytes with a 1-byte key and flags 0
  CHECK(talk(server, "set k 0 0 1\r\nx\r\n", tiny) == "STORED\r\n");
  CHECK(talk(server, "set k 0 0 40\r\n" + std::string(40, 'v') + "\r\nget k\r\n", tiny) ==
        "STORED\r\nVALUE k 0 40\r\n" + std::string(40, 'v') + "\r\nEND\r\n");
  // Too large: refused, the block discarded, and for set the old value removed (memcached).
  CHECK(talk(server, "set k 0 0 41\r\n" + std::string(41, 'v') + "\r\nget k\r\n", tiny) ==
        "SERVER_ERROR object too large for cache\r\nEND\r\n");
  CHECK(talk(server, "set j 0 0 1\r\nx\r\nadd j 0 0 42\r\n" + std::string(42, 'v') + "\r\nget j\r\n", tiny) ==
        "STORED\r\nSERVER_ERROR object too large for cache\r\nVALUE j 0 1\r\nx\r\nEND\r\n");
  // memcached: an append past the limit is NOT_STORED (measured at -I 1m).
  CHECK(talk(server, "append j 0 0 40\r\n" + std::string(40, 'v') + "\r\nget j\r\n", tiny) ==
        "NOT_STORED\r\nVALUE j 0 1\r\nx\r\nEND\r\n");
  CHECK(talk(server, "append j 0 0 39\r\n" + std::string(39, 'v') + "\r\nget j\r\n", tiny) ==
        "STORED\r\nVALUE j 0 40\r\nx" + std::string(39, 'v') + "\r\nEND\r\n");
  CHECK(talk(server, "stats\r\n").find("STAT store_too_large 2\r\n") != std::string::npos);
  // memcached refuses incr on an item kept in chunks (over half of -I).
  CHECK(talk(server, "set big 0 0 25\r\n1" + std::string(24, ' ') + "\r\nincr big 1\r\n", tiny) ==
        "STORED\r\nCLIENT_ERROR cannot increment or decrement non-numeric value\r\n");
  CHECK(talk(server, "set big 0 0 2\r\n1 \r\nincr big 1\r\n") == "STORED\r\n2\r\n");
  // A multi-get past the pause stops between two keys and goes on when its
  // line is fed again: every value once, one END.
  {
    TextLimits small_pause;
    small_pause.pause_reply_bytes = 40;
    TextSession<offheap::CachePolicy> s(server.cache, server.state, small_pause);
    CHECK(talk(s, "set r 0 0 10\r\n0123456789\r\n") == "STORED\r\n");
    const std::string in = "get r nor r r r\r\nget r\r\n";
    const std::string value = "VALUE r 0 10\r\n0123456789\r\n";
    std::string all;
    std::size_t used = 0;
    int pauses = 0;
    while (used < in.size()) {
      std::string out;
      const auto fed = s.feed(std::string_view(in).substr(used), out);
      CHECK(out.size() <= 40 + value.size());
      all += out;
      used += fed.consumed;
      pauses += fed.paused ? 1 : 0;
      REQUIRE(pauses < 10);
    }
    CHECK(pauses == 2);
    CHECK(all == value + value + value + value + "END\r\n" + value + "END\r\n");
  }

  SECTION("a refused block discarded across calls, a byte at a time") {
    TextSession<offheap::CachePolicy> s(server.cache, server.state, tiny);
    const std::string in = "set z 0 0 60\r\n" + std::string(60, 'v') + "\r\nset z 0 0 2\r\nok\r\nget z\r\n";
    std::string out;
    std::string buffered;
    for (const char c : in) {
      buffered += c;
      const auto fed = s.feed(buffered, out);
      REQUIRE_FALSE(fed.close);
      buffered.erase(0, fed.consumed);
    }
    CHECK(buffered.empty());
    CHECK(s.discarding() == 0);
    CHECK(out == "SERVER_ERROR object too large for cache\r\nSTORED\r\nVALUE z 0 2\r\nok\r\nEND\r\n");
  }
  SECTION("requests split anywhere give the replies of the whole") {
    const std::string in =
        "set a 1 0 3\r\nabc\r\nget a\r\nincr a 1\r\nbogus\r\nset b 0 0 2\r\nxyz\r\ngets a b\r\ndelete a\r\n";
    Server whole_server(5), split_server(5);
    const std::string whole = talk(whole_server, in);
    for (std::size_t cut = 1; cut < in.size(); ++cut) {
      Server fresh(5);
      TextSession<offheap::CachePolicy> s(fresh.cache, fresh.state);
      std::string out, buffered = in.substr(0, cut);
      auto fed = s.feed(buffered, out);
      buffered.erase(0, fed.consumed);
      buffered += in.substr(cut);
      fed = s.feed(buffered, out);
      buffered.erase(0, fed.consumed);
      INFO("cut at " << cut);
      CHECK(out == whole);
      CHECK(buffered.empty());
    }
  }
  SECTION("meta commands run in the stream with the others") {
    TextSession<offheap::CachePolicy> s(server.cache, server.state);
    std::string out;
    const std::string in = "get k\r\nmg k v\r\nms k 1\r\nx\r\nget k\r\nmn\r\n";
    const auto fed = s.feed(in, out);
    CHECK(fed.consumed == in.size());
    CHECK(out == "END\r\nEN\r\nHD\r\nVALUE k 0 1\r\nx\r\nEND\r\nMN\r\n");
  }
  SECTION("a line too long closes the connection") {
    CHECK(talk(server, "set " + std::string(3000, 'k')) == "<close>");
  }
}

TEST_CASE("memcache text session: stats counts and resets", "[memcache]") {
  Server server;
  talk(server, "set a 0 0 1\r\nx\r\nget a b\r\ndelete b\r\nincr a 1\r\ntouch a 1\r\ncas a 0 0 1 12345\r\ny\r\n");
  const std::string s = talk(server, "stats\r\n");
  for (const char* line : {"STAT cmd_get 2\r\n", "STAT get_hits 1\r\n", "STAT get_misses 1\r\n", "STAT cmd_set 2\r\n",
                           "STAT delete_misses 1\r\n", "STAT incr_hits 0\r\n", "STAT cmd_touch 1\r\n",
                           "STAT touch_hits 1\r\n", "STAT cas_badval 1\r\n", "STAT curr_items 1\r\n",
                           "STAT version 1.6.18\r\n"}) {
    INFO(line);
    CHECK(s.find(line) != std::string::npos);
  }
  CHECK(s.rfind("END\r\n") == s.size() - 5);
  CHECK(talk(server, "stats reset\r\nstats foo\r\nstats reset foo\r\n") == "RESET\r\nERROR\r\nRESET\r\n");
  CHECK(talk(server, "stats\r\n").find("STAT cmd_get 0\r\n") != std::string::npos);
  CHECK(talk(server, "stats settings\r\n").find("STAT item_size_max 1048576\r\n") != std::string::npos);
}

TEST_CASE("memcache text session: sessions on several threads share the store and the uniques", "[memcache]") {
  Server server;
  constexpr int kThreads = 4, kIncrements = 2000;
  talk(server, "set counter 0 0 1\r\n0\r\n");
  std::vector<std::thread> threads;
  std::vector<std::string> outs(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      TextSession<offheap::CachePolicy> s(server.cache, server.state);
      std::string in;
      for (int i = 0; i < kIncrements; ++i) in += "incr counter 1 noreply\r\nset k" + std::to_string(t) + " 0 0 1 noreply\r\nx\r\n";
      outs[t] = talk(s, in);
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& o : outs) CHECK(o.empty());
  CHECK(talk(server, "get counter\r\n") ==
        "VALUE counter 0 4\r\n" + std::to_string(kThreads * kIncrements) + "\r\nEND\r\n");
  // 1 set, then 2 writes per round on each thread: every unique once.
  CHECK(server.state.peek_cas() == 1 + 1 + 2 * kThreads * kIncrements);
}

TEST_CASE("memcache flush marks: a delayed flush racing commands on other threads flushes nothing early", "[memcache]") {
  // (review: written word by word, a flush_all with a delay racing another
  // connection's command could take effect at once and then never.)
  ServerState state;
  const std::uint64_t now = 1'800'000'000;
  std::atomic<bool> stop{false};
  std::thread other([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      const ServerState::FlushMarks m = state.flush_marks();
      if (m.needs_clock()) state.note_time(m, now);
    }
  });
  std::uint64_t early = 0;
  for (int round = 0; round < 200000; ++round) {
    state.flush(0, now);                      // flush now: the marks in the past
    const std::uint64_t written = state.next_cas();
    state.flush(60, now);                     // then one 59 s from now
    const ServerState::FlushMarks m = state.flush_marks();
    early += !m.live(written, now);           // written after the first flush: it must count
  }
  stop = true;
  other.join();
  CHECK(early == 0);
}
