#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# offheap-memcached behind twemproxy (Debian nutcracker 0.5, ketama): three
# servers on their own directories, started and stopped here by their PIDs.
#   1. 3,000 keys written through the proxy read back through it, and each
#      from exactly one server, directly;
#   2. warm restart in the tier: one server killed with SIGKILL while
#      writes go on through the proxy, restarted on its directory: at least
#      99% of the keys it held before the writes that raced the kill hit
#      again through the proxy, whole (values carry their key and a
#      checksum), with their TTLs (mg's t), and no cas unique it gave
#      before the kill is given again; memcached 1.6 in the same place
#      keeps none (its figure is printed beside ours);
#   3. the other route, for the commands twemproxy does not pass (meta,
#      gat): pymemcache's HashClient over the same three servers, the meta
#      commands sent to the server its hash names for the key.
#
#   tests/memcache/sharding_test.sh <offheap-memcached binary>
set -euo pipefail
server=$1
source "$(dirname "$0")/servers.sh"
command -v nutcracker >/dev/null || fail "nutcracker not found (apt-get install nutcracker)"

cat >"$work/client.py" <<'EOF'
import signal, socket, sys, zlib
from pymemcache.client.base import Client
action, port = sys.argv[1], int(sys.argv[2])
def value(key): return b"%s:%08x" % (key.encode(), zlib.crc32(key.encode()))
c = Client(("127.0.0.1", port), connect_timeout=2, timeout=2)
def meta(port, request):  # one meta command on its own socket: its first line
    with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
        s.sendall(request)
        return s.makefile("rb").readline()
if action == "write":  # keys first..last through the proxy, with a TTL of 1000 s
    first, last = int(sys.argv[3]), int(sys.argv[4])
    for i in range(first, last):
        assert c.set("key%d" % i, value("key%d" % i), expire=1000, noreply=False), i
elif action == "race":  # writes until SIGTERM (errors while a server is down are expected); prints how many
    i = 0
    def stop(*_):
        print(i)
        sys.exit(0)
    signal.signal(signal.SIGTERM, stop)
    while True:
        try: c.set("race%d" % i, value("race%d" % i), noreply=False)
        except Exception: pass
        i += 1
elif action == "ttls":  # of the listed keys this server holds, how many kept their TTL (900 < t <= 1000)
    kept = 0
    for line in open(sys.argv[3]):
        reply = meta(port, b"mg key%d t\r\n" % int(line)).split()
        if reply[0] == b"HD" and 900 < int(reply[1][1:]) <= 1000: kept += 1
    print(kept)
elif action == "uniques":  # the largest cas unique among key0..keyN-1 and race0..raceM-1 here, then a new write's
    top = 0
    for k in ["key%d" % i for i in range(int(sys.argv[3]))] + ["race%d" % i for i in range(int(sys.argv[4]))]:
        got = c.gets(k)
        if got[0] is not None: top = max(top, int(got[1]))
    assert c.set("fresh", b"x", noreply=False)
    print(top, int(c.gets("fresh")[1]))
elif action == "hashclient":  # argv[2:]: the three ports
    from pymemcache.client.hash import HashClient
    ports = [int(p) for p in sys.argv[2:5]]
    hc = HashClient([("127.0.0.1", p) for p in ports], default_noreply=False)
    routed = 0
    for i in range(300):
        k = "hc%d" % i
        assert hc.set(k, value(k), expire=500), k
        node = hc.clients[hc.hasher.get_node(k)].server[1]  # the server HashClient chose
        for p in ports:
            first = meta(p, b"mg %s v t\r\n" % k.encode())
            if p == node:
                assert first.startswith(b"VA %d t" % len(value(k))), (k, p, first)
                routed += 1
            else:
                assert first == b"EN\r\n", (k, p, first)
    print(routed)
elif action == "read":  # how many of keys first..last read back whole; any torn or foreign value fails
    first, last = int(sys.argv[3]), int(sys.argv[4])
    hits = 0
    for i in range(first, last):
        v = c.get("key%d" % i)
        if v is None: continue
        assert v == value("key%d" % i), ("a torn or foreign value", i, v)
        hits += 1
    print(hits)
elif action == "check":  # how many keys of the list (one index a line) hit whole
    hits = 0
    for line in open(sys.argv[3]):
        k = "key%d" % int(line)
        v = c.get(k)
        if v is None: continue
        assert v == value(k), ("a torn or foreign value", k, v)
        hits += 1
    print(hits)
elif action == "held":  # the keys first..last this server holds, one a line
    first, last = int(sys.argv[3]), int(sys.argv[4])
    for i in range(first, last):
        v = c.get("key%d" % i)
        if v is not None:
            assert v == value("key%d" % i), ("a torn or foreign value", i, v)
            print(i)
EOF

run_tier() {  # kind (offheap|memcached): prints "held-before hits-after"; offheap: checks TTLs, uniques, HashClient
  local kind=$1 ports=() spids=()
  # (A subshell: the EXIT trap stops what it started, also when a check fails.)
  tier_pids=()
  trap 'kill -9 "${tier_pids[@]}" 2>/dev/null; wait 2>/dev/null' EXIT
  for s in 0 1 2; do
    ports+=("$(free_port)")
    if [ "$kind" = offheap ]; then
      "$server" -p "${ports[$s]}" -t 1 -m 64 --dir "$work/$kind-$s" >>"$work/servers.log" 2>&1 &
    else
      memcached $( [ "$(id -u)" -eq 0 ] && echo -u root ) -p "${ports[$s]}" -l 127.0.0.1 -U 0 -t 1 -m 64 >>"$work/servers.log" 2>&1 &
    fi
    spids+=($!)
    tier_pids+=($!)
    wait_up "${ports[$s]}"
  done
  local proxy
  proxy=$(free_port)
  cat >"$work/$kind.yml" <<EOF
tier:
  listen: 127.0.0.1:$proxy
  hash: fnv1a_64
  distribution: ketama
  timeout: 2000
  auto_eject_hosts: false
  servers:
   - 127.0.0.1:${ports[0]}:1 s0
   - 127.0.0.1:${ports[1]}:1 s1
   - 127.0.0.1:${ports[2]}:1 s2
EOF
  nutcracker -c "$work/$kind.yml" -s "$(free_port)" -o "$work/nutcracker-$kind.log" >/dev/null 2>&1 &
  tier_pids+=($!)
  local npid=$!
  wait_up "$proxy"
  "$py" "$work/client.py" write "$proxy" 0 3000
  # 1. Through the proxy, and on exactly one server each.
  [ "$("$py" "$work/client.py" read "$proxy" 0 3000)" -eq 3000 ] || fail "$kind: not every key read back through the proxy"
  : >"$work/held-all"
  for s in 0 1 2; do "$py" "$work/client.py" held "${ports[$s]}" 0 3000 >"$work/held-$s"; cat "$work/held-$s" >>"$work/held-all"; done
  [ "$(sort -n "$work/held-all" | uniq | wc -l)" -eq 3000 ] && [ "$(wc -l <"$work/held-all")" -eq 3000 ] ||
    fail "$kind: the servers do not hold each key exactly once"
  # 2. Kill server 1 while writes go on; restart it on its directory.
  local before
  before=$(wc -l <"$work/held-1")
  "$py" "$work/client.py" race "$proxy" >"$work/raced" &
  local racer=$!
  tier_pids+=($!)
  sleep 0.3
  kill -9 "${spids[1]}"
  wait "${spids[1]}" 2>/dev/null || true
  kill "$racer"; wait "$racer" 2>/dev/null || true
  local raced
  raced=$(cat "$work/raced")
  if [ "$kind" = offheap ]; then
    "$server" -p "${ports[1]}" -t 1 -m 64 --dir "$work/$kind-1" >>"$work/servers.log" 2>&1 &
  else
    memcached $( [ "$(id -u)" -eq 0 ] && echo -u root ) -p "${ports[1]}" -l 127.0.0.1 -U 0 -t 1 -m 64 >>"$work/servers.log" 2>&1 &
  fi
  local restarted=$!
  tier_pids+=($!)
  wait_up "${ports[1]}"
  local hits
  hits=$("$py" "$work/client.py" check "$proxy" "$work/held-1")
  if [ "$kind" = offheap ]; then
    local ttls top fresh routed
    ttls=$("$py" "$work/client.py" ttls "${ports[1]}" "$work/held-1")
    [ $((ttls * 100)) -ge $((before * 99)) ] || fail "offheap: $ttls of $before keys kept their TTL after the restart"
    read -r top fresh < <("$py" "$work/client.py" uniques "${ports[1]}" 3000 "$raced")
    [ "$fresh" -gt "$top" ] || fail "offheap: a cas unique after the restart ($fresh) is not above those before it ($top)"
    routed=$("$py" "$work/client.py" hashclient "${ports[0]}" "${ports[1]}" "${ports[2]}")
    [ "$routed" -eq 300 ] || fail "offheap: HashClient's keys found on their server $routed times of 300"
    echo "offheap: TTLs kept $ttls of $before; uniques before the kill up to $top, the first after it $fresh; HashClient + meta: $routed of 300" >"$work/offheap-extra"
  fi
  # (The servers stop here too: the EXIT trap is for a check that fails.)
  kill "$npid" 2>/dev/null || true
  for p in "${spids[@]}" "$restarted"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  echo "$before $hits"
}

read -r ours_held ours_hits < <(run_tier offheap)
read -r theirs_held theirs_hits < <(run_tier memcached)
echo "sharding_test.sh: after kill -9 of one of three servers behind nutcracker, its keys hitting again:"
echo "  offheap-memcached: $ours_hits of $ours_held; memcached 1.6: $theirs_hits of $theirs_held"
echo "  $(cat "$work/offheap-extra")"
[ "$ours_held" -gt 0 ] || fail "the killed server held no key"
[ $((ours_hits * 100)) -ge $((ours_held * 99)) ] || fail "fewer than 99% of the killed server's keys hit again"
echo "sharding_test.sh: all passed"
