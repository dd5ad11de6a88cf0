# SPDX-License-Identifier: Apache-2.0
# offheap-memcached through two clients nobody here wrote, Debian's
# python3-pymemcache and python3-memcache: every command each client has
# (set, get, multi-get, add, replace, append, prepend, gets and cas, delete,
# incr, decr, touch, flush_all, version, stats), expiry, and gat, gats and
# the meta commands on the client's own socket (neither client has them),
# pipelined as a meta client sends them (quiet mode, then mn).
#
#   /usr/bin/python3 tests/memcache/clients.py <port>
import socket
import sys
import time

import memcache
from pymemcache.client.base import Client

port = int(sys.argv[1])
checks = 0


def check(got, want, what):
    global checks
    checks += 1
    if got != want:
        sys.exit("clients.py: %s: got %r, want %r" % (what, got, want))


# ---- pymemcache ----------------------------------------------------------
c = Client(("127.0.0.1", port), default_noreply=False)
c.flush_all()
check(c.version().decode().startswith("1.6."), True, "version")
check(c.set("p:a", b"alpha"), True, "set")
check(c.get("p:a"), b"alpha", "get")
check(c.get("p:none"), None, "get of a missing key")
check(c.set_many({"p:b": b"beta", "p:c": b"gamma"}), [], "set_many")
check(c.get_many(["p:a", "p:b", "p:c", "p:none"]), {"p:a": b"alpha", "p:b": b"beta", "p:c": b"gamma"}, "get_many")
check(c.add("p:a", b"x"), False, "add of a present key")
check(c.add("p:d", b"delta"), True, "add")
check(c.replace("p:none", b"x"), False, "replace of a missing key")
check(c.replace("p:d", b"DELTA"), True, "replace")
check(c.append("p:d", b"++"), True, "append")
check(c.prepend("p:d", b"--"), True, "prepend")
check(c.get("p:d"), b"--DELTA++", "after append and prepend")
value, unique = c.gets("p:d")
check(value, b"--DELTA++", "gets")
check(c.cas("p:d", b"new", unique), True, "cas with the current unique")
check(c.cas("p:d", b"newer", unique), False, "cas with a stale unique")
check(c.cas("p:none", b"x", b"1"), None, "cas of a missing key")
check(c.get("p:d"), b"new", "after cas")
check(c.set("p:n", b"10"), True, "set a number")
check(c.incr("p:n", 5), 15, "incr")
check(c.decr("p:n", 20), 0, "decr stops at 0")
check(c.incr("p:none", 1), None, "incr of a missing key")
check(c.touch("p:a", 100), True, "touch")
check(c.touch("p:none", 100), False, "touch of a missing key")
check(c.delete("p:a"), True, "delete")
check(c.delete("p:a"), False, "delete of a missing key")
check(c.set("p:short", b"x", expire=1), True, "set with a TTL of 1 s")
check(c.set("p:long", b"y", expire=100), True, "set with a TTL of 100 s")
stats = c.stats()
check(stats[b"curr_connections"] >= 1, True, "stats")
check(b"cmd_get" in stats and b"get_hits" in stats, True, "stats counters")

# ---- python-memcache ------------------------------------------------------
m = memcache.Client(["127.0.0.1:%d" % port], cache_cas=True)
check(m.set("m:a", "alpha"), True, "set")
check(m.get("m:a"), "alpha", "get")
check(m.set("m:i", 42), True, "set an int (flags)")
check(m.get("m:i"), 42, "get an int back through its flags")
check(m.set_multi({"m:b": "beta", "m:c": "gamma"}), [], "set_multi")
check(m.get_multi(["m:a", "m:b", "m:c", "m:none"]), {"m:a": "alpha", "m:b": "beta", "m:c": "gamma"}, "get_multi")
check(m.add("m:a", "x"), False, "add of a present key")
check(bool(m.replace("m:b", "BETA")), True, "replace")
check(bool(m.append("m:b", "!")), True, "append")
check(bool(m.prepend("m:b", "<")), True, "prepend")
check(m.get("m:b"), "<BETA!", "after append and prepend")
check(m.gets("m:c"), "gamma", "gets")
check(bool(m.cas("m:c", "GAMMA")), True, "cas")
m.reset_cas()
check(m.gets("m:c"), "GAMMA", "after cas")
check(m.set("m:c", "changed"), True, "a write between gets and cas")
check(bool(m.cas("m:c", "lost")), False, "cas after another write")
check(m.set("m:n", "7"), True, "set a number")
check(m.incr("m:n", 3), 10, "incr")
check(m.decr("m:n", 4), 6, "decr")
check(bool(m.touch("m:a", 100)), True, "touch")
check(bool(m.delete("m:a")), True, "delete")
check(m.get("m:a"), None, "after delete")

# ---- gat and gats, on a socket --------------------------------------------
s = socket.create_connection(("127.0.0.1", port))
f = s.makefile("rb")
s.sendall(b"gat 100 p:long m:b p:none\r\n")
check([f.readline() for _ in range(5)], [b"VALUE p:long 0 1\r\n", b"y\r\n", b"VALUE m:b 16 6\r\n", b"<BETA!\r\n", b"END\r\n"], "gat (python-memcache flags a str 16)")
s.sendall(b"gats 100 p:long\r\n")
line = f.readline().split()
check(line[:4], [b"VALUE", b"p:long", b"0", b"1"], "gats")
check(line[4].isdigit(), True, "gats's unique")
check([f.readline(), f.readline()], [b"y\r\n", b"END\r\n"], "gats's data")

# ---- the meta commands, pipelined on a socket -------------------------------
def meta(request, lines):
    """Sends `request` (several commands) and then mn; returns the reply lines before MN."""
    s.sendall(request + b"mn\r\n")
    got = []
    while True:
        line = f.readline()
        if line == b"MN\r\n":
            return got
        got.append(line)
        if len(got) > lines:
            sys.exit("clients.py: meta: more than %d lines: %r" % (lines, got))


check(meta(b"ms mt:a 5 F7 T100 c\r\nhello\r\nms mt:b 2\r\nhi\r\n", 2)[1], b"HD\r\n", "ms")
got = meta(b"mg mt:a v f t s k O42\r\n", 2)
check(got[0].split()[:3] + got[0].split()[4:], [b"VA", b"5", b"f7", b"s5", b"kmt:a", b"O42"], "mg with flags")
check(int(got[0].split()[3][1:]) in (99, 100), True, "mg t: the TTL left")
check(got[1], b"hello\r\n", "mg's value")
# Quiet mode: a miss says nothing, the hits answer, mn closes the batch.
check(meta(b"mg mt:a q v k\r\nmg mt:none q v k\r\nmg mt:b q v k\r\n", 4),
      [b"VA 5 kmt:a\r\n", b"hello\r\n", b"VA 2 kmt:b\r\n", b"hi\r\n"], "mg in quiet mode")
check(meta(b"ms bXQ6Yw== 3 b k\r\nb64\r\nmg mt:c v\r\n", 3),
      [b"HD kbXQ6Yw== b\r\n", b"VA 3\r\n", b"b64\r\n"], "a base64 key")
check(meta(b"ma mt:n N0 J10 v\r\nma mt:n D5 v\r\nma mt:n MD D100 v\r\n", 6),
      [b"VA 2\r\n", b"10\r\n", b"VA 2\r\n", b"15\r\n", b"VA 1\r\n", b"0\r\n"], "ma")
check(meta(b"ms mt:a 1 MA q\r\n!\r\nmd mt:b q\r\nmd mt:b\r\nmg mt:a v\r\n", 3),
      [b"NF\r\n", b"VA 6\r\n", b"hello!\r\n"], "ms append, md, in quiet mode")
check(meta(b"me mt:a\r\n", 1)[0].startswith(b"ME mt:a exp="), True, "me")
check(meta(b"mg mt:w N30 c\r\nmg mt:w c\r\n", 2)[1].endswith(b" Z\r\n"), True, "vivify: the second client sees the token went")

# ---- expiry ---------------------------------------------------------------
time.sleep(2.1)
check(c.get("p:short"), None, "a TTL of 1 s, 2 s later")
check(c.get("p:long"), b"y", "a TTL of 100 s")
c.flush_all()
check(c.get("p:long"), None, "after flush_all")
check(m.get("m:b"), None, "after flush_all (python-memcache)")
print("clients.py: %d checks passed (pymemcache %s, python-memcache %s)" % (
    checks, __import__("pymemcache").__version__, memcache.__version__))
