#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# offheap-memcached beside memcached 1.6 on this machine: throughput and
# latency under memcaslap (Debian libmemcached-tools), and resident memory
# per item.
#
#   bench/memcached_load.sh [offheap-memcached binary] [seconds per run] [rounds]
#     (defaults: build/dev/examples/offheap-memcached, 5, 3)
#
# Setup, the same for both servers: one worker thread each (-t 1, -m 1024),
# the server pinned to CPU 0 and memcaslap to CPU 1 (taskset), on loopback;
# memcaslap with 1 thread and 32 connections, its default 9:1 get/set mix,
# 20-byte keys (memcaslap's least is 17). Cells: 32-byte values, 1 KiB values, and 32-byte values
# fetched 10 keys per get (-d 10). Then memcslap (the same package's other
# load tool, libmemcached's memslap) with 4 threads: its set, get and mget
# tests over 50,000 keys each, keys per second. The servers alternate
# within each round (fresh processes each run); the tables give each cell's
# median over the rounds, and ours / memcached's.
#
# Memory: each server is started alone (-m 1024), its resident set read
# (/proc/<pid>/status VmRSS), then 1,000,000 items of 14-byte keys and
# 32-byte values are set (pipelined, noreply), and the resident set read
# again: (after - before) / 1,000,000 bytes per item.
set -euo pipefail
server=${1:-build/dev/examples/offheap-memcached}
seconds=${2:-5}
rounds=${3:-3}
py=/usr/bin/python3
for tool in memcached memcaslap memcslap taskset "$py"; do
  command -v "$tool" >/dev/null || { echo "memcached_load.sh: $tool not found (apt-get install memcached libmemcached-tools util-linux python3)" >&2; exit 2; }
done
[ -x "$server" ] || { echo "memcached_load.sh: no server at $server (build it first)" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/offheap-memcached-load-XXXXXX")
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null; rm -rf "$work"' EXIT
user=()
[ "$(id -u)" -eq 0 ] && user=(-u root)

free_port() { "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
start() {  # name port
  if [ "$1" = memcached ]; then
    taskset -c 0 memcached "${user[@]}" -p "$2" -l 127.0.0.1 -U 0 -t 1 -m 1024 &
  else
    taskset -c 0 "$server" -p "$2" -t 1 -m 1024 &
  fi
  pid=$!
  for _ in $(seq 100); do
    "$py" -c "import socket; socket.create_connection(('127.0.0.1', $2), 0.1)" 2>/dev/null && return 0
    sleep 0.05
  done
  echo "memcached_load.sh: $1 did not start" >&2
  exit 1
}
stop() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=; }

cat >"$work/keys.cfg" <<'EOF'
key
20 20 1
value
32 32 1
cmd
0 0.1
1 0.9
EOF

# One run: prints "ops/s get-latency-us".
run() {  # name port value-bytes division
  local out
  out=$(taskset -c 1 memcaslap -s "127.0.0.1:$2" -F "$work/keys.cfg" -X "$3" -d "$4" -T 1 -c 32 -t "${seconds}s" \
    -S "${seconds}s" 2>&1)
  local tps lat
  tps=$(sed -n 's/.*TPS: \([0-9]*\).*/\1/p' <<<"$out" | tail -n 1)
  # memcaslap's "Get Statistics" table: its Global line gives Avg(us) as the 9th field.
  lat=$(awk '/Get Statistics/{g=1} g && /^Global/{print $9; exit}' <<<"$out")
  echo "${tps:-0} ${lat:-?}"
}

# One memcslap test: prints keys/s.
run_slap() {  # port test
  local out
  out=$(taskset -c 1 memcslap -s "127.0.0.1:$1" -t "$2" -c 4 -e 50000 2>&1)
  awk '/^Time to (set|get|mget) /{for (i = 1; i <= NF; i++) if ($i == "keys") k = $(i-1); t = $(NF-1)} END{if (t > 0) printf "%d\n", k / t; else print 0}' <<<"$out"
}

median() { sort -n | awk '{a[NR]=$1} END{print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

cells=("32-byte values:32:1" "1 KiB values:1024:1" "multi-get of 10, 32-byte values:32:10")
declare -A tps lat
for round in $(seq "$rounds"); do
  for cell in "${cells[@]}"; do
    IFS=: read -r label bytes division <<<"$cell"
    for name in memcached offheap; do
      port=$(free_port)
      start "$name" "$port"
      read -r t l < <(run "$name" "$port" "$bytes" "$division")
      stop
      tps["$label|$name"]+="$t "
      lat["$label|$name"]+="$l "
    done
  done
done

slaps=(set get mget)
declare -A slap
for round in $(seq "$rounds"); do
  for name in memcached offheap; do
    port=$(free_port)
    start "$name" "$port"
    for test in "${slaps[@]}"; do slap["$test|$name"]+="$(run_slap "$port" "$test") "; done
    stop
  done
done

echo
echo "offheap-memcached beside memcached $(memcached -V | awk '{print $2}'), $(nproc) CPUs ($(uname -r)); memcaslap -T 1 -c 32, ${seconds} s runs, median of ${rounds}"
echo
echo "| cell | memcached ops/s | offheap ops/s | ratio | memcached get us | offheap get us |"
echo "|---|---:|---:|---:|---:|---:|"
for cell in "${cells[@]}"; do
  IFS=: read -r label bytes division <<<"$cell"
  m=$(tr ' ' '\n' <<<"${tps["$label|memcached"]}" | grep . | median)
  o=$(tr ' ' '\n' <<<"${tps["$label|offheap"]}" | grep . | median)
  ml=$(tr ' ' '\n' <<<"${lat["$label|memcached"]}" | grep . | median)
  ol=$(tr ' ' '\n' <<<"${lat["$label|offheap"]}" | grep . | median)
  printf "| %s | %s | %s | %.2fx | %s | %s |\n" "$label" "$m" "$o" "$(awk -v a="$o" -v b="$m" 'BEGIN{print (b > 0) ? a / b : 0}')" "$ml" "$ol"
done

echo
echo "memcslap -c 4 -e 50000 (keys per second), median of ${rounds}"
echo
echo "| test | memcached keys/s | offheap keys/s | ratio |"
echo "|---|---:|---:|---:|"
for test in "${slaps[@]}"; do
  m=$(tr ' ' '\n' <<<"${slap["$test|memcached"]}" | grep . | median)
  o=$(tr ' ' '\n' <<<"${slap["$test|offheap"]}" | grep . | median)
  printf "| %s | %s | %s | %.2fx |\n" "$test" "$m" "$o" "$(awk -v a="$o" -v b="$m" 'BEGIN{print (b > 0) ? a / b : 0}')"
done

# Memory per item.
cat >"$work/load.py" <<'EOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
value = b"v" * 32
batch = []
for i in range(1000000):
    batch.append(b"set k%013d 0 0 32 noreply\r\n%s\r\n" % (i, value))
    if len(batch) == 1000:
        s.sendall(b"".join(batch)); batch = []
s.sendall(b"".join(batch) + b"get k0000000000000\r\n")
f = s.makefile("rb")
assert f.readline().startswith(b"VALUE"), "the first item is not there"
EOF
rss_kib() { awk '/^VmRSS/{print $2}' "/proc/$1/status"; }
echo
echo "| 1,000,000 items, 14-byte keys, 32-byte values | resident bytes per item |"
echo "|---|---:|"
declare -A per_item
for name in memcached offheap; do
  port=$(free_port)
  start "$name" "$port"
  before=$(rss_kib "$pid")
  "$py" "$work/load.py" "$port"
  sleep 0.5
  after=$(rss_kib "$pid")
  stop
  per_item[$name]=$(( (after - before) * 1024 / 1000000 ))
  echo "| $name | ${per_item[$name]} |"
done
echo
echo "offheap / memcached memory per item: $(awk -v a="${per_item[offheap]}" -v b="${per_item[memcached]}" 'BEGIN{printf "%.2f", a / b}')x"
