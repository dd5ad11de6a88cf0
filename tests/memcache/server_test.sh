#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# offheap-memcached as a program, started and stopped here by its PID:
#   1. memccapable -a (Debian libmemcached-tools): all 27 text-protocol tests;
#   2. its options: a bad one exits 64, a port in use and a directory it
#      cannot use exit 69, each with its reason on stderr;
#   3. --dir: 3,000 keys written, the server killed with SIGKILL while a
#      client still writes, restarted on its directory: every key written
#      before the writes that raced the kill reads back whole, TTLs kept,
#      and no cas unique of the first run comes again;
#   4. SIGTERM: a clean close, exit 0, and the keys there on the next start;
#      a cas-epoch file of another item layout, or damaged: exit 69;
#   5. tests/memcache/clients.py (Debian python3-pymemcache and
#      python3-memcache): every command through each client, and the meta
#      commands on a socket, against
#      memcached 1.6 first (the control: the script's expectations are
#      memcached's), then against offheap-memcached.
#
#   tests/memcache/server_test.sh <offheap-memcached binary>
set -euo pipefail
server=$1
source "$(dirname "$0")/servers.sh"

start() {  # port, more options...
  local port=$1
  shift
  "$server" -p "$port" -t 2 "$@" >>"$work/server.log" 2>&1 &
  pids+=($!)
  last_pid=$!
  wait_up "$port"
}

# A client on raw sockets: the protocol as bytes, nothing else in between.
cat >"$work/client.py" <<'EOF'
import socket, sys
port, action, count = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
s = socket.create_connection(("127.0.0.1", port))
f = s.makefile("rb")
def value(i): return b"v%08d-" % i + b"x" * (i % 200)
if action == "write":  # set key0..count-1 (odd ones with a TTL of a day), then gets each; print the uniques
    for i in range(count):
        v = value(i)
        s.sendall(b"set key%d %d %d %d\r\n%s\r\n" % (i, i, 86400 if i % 2 else 0, len(v), v))
        assert f.readline() == b"STORED\r\n"
    for i in range(count):
        s.sendall(b"gets key%d\r\n" % i)
        head = f.readline().split()
        print(head[4].decode())
        f.readline(); assert f.readline() == b"END\r\n"
elif action == "race":  # writes until the server goes away
    try:
        i = count
        while True:
            v = value(i)
            s.sendall(b"set key%d 0 0 %d\r\n%s\r\n" % (i, len(v), v))
            f.readline()
            i += 1
    except (BrokenPipeError, ConnectionResetError, OSError):
        pass
elif action == "check":  # every key0..count-1 whole with its flags; print the uniques
    for i in range(count):
        s.sendall(b"gets key%d\r\n" % i)
        head = f.readline().split()
        assert head[:4] == [b"VALUE", b"key%d" % i, b"%d" % i, b"%d" % len(value(i))], (i, head)
        assert f.readline() == value(i) + b"\r\n", i
        assert f.readline() == b"END\r\n"
        print(head[4].decode())
    s.sendall(b"touch key1 100\r\nset fresh 0 0 1\r\nx\r\ngets fresh\r\n")
    assert f.readline() == b"TOUCHED\r\n"
    assert f.readline() == b"STORED\r\n"
    print(f.readline().split()[4].decode())
EOF

# 1. memccapable.
port=$(free_port)
start "$port"
memccapable -a -h 127.0.0.1 -p "$port" >"$work/memccapable.log" 2>&1 || true
cat "$work/memccapable.log"
grep -q "All tests passed" "$work/memccapable.log" || fail "memccapable -a did not pass"
[ "$(grep -c '\[pass\]' "$work/memccapable.log")" -eq 27 ] || fail "memccapable ran other than 27 tests"
kill "$last_pid"
wait "$last_pid" || fail "SIGTERM: exit status $?"

# 2. Options.
status=0
"$server" -p notaport 2>"$work/err" || status=$?
[ "$status" -eq 64 ] && grep -q -- "-p takes a number" "$work/err" || fail "a bad -p exited $status: $(cat "$work/err")"
status=0
"$server" --no-such-option 2>"$work/err" || status=$?
[ "$status" -eq 64 ] && grep -q "unknown option" "$work/err" || fail "an unknown option exited $status"
port=$(free_port)
start "$port"
status=0
"$server" -p "$port" 2>"$work/err" || status=$?
[ "$status" -eq 69 ] && grep -q "cannot listen on 127.0.0.1:$port" "$work/err" || fail "a port in use exited $status: $(cat "$work/err")"
kill "$last_pid"; wait "$last_pid" || true
touch "$work/a-file"
status=0
"$server" -p "$(free_port)" --dir "$work/a-file/store" 2>"$work/err" || status=$?
[ "$status" -eq 69 ] && grep -q "cannot use --dir" "$work/err" || fail "an unusable --dir exited $status: $(cat "$work/err")"

# 3. kill -9 while a client writes, then a restart on the directory.
dir=$work/data
port=$(free_port)
start "$port" --dir "$dir"
"$py" "$work/client.py" "$port" write 3000 >"$work/uniques-1"
"$py" "$work/client.py" "$port" race 3000 &
racer=$!
sleep 0.3
kill -9 "$last_pid"
wait "$racer" || true
start "$port" --dir "$dir"
"$py" "$work/client.py" "$port" check 3000 >"$work/uniques-2" || fail "keys lost or damaged after kill -9"
# The uniques the first run handed out, and one handed out after the restart.
head -n 3000 "$work/uniques-2" | cmp -s - "$work/uniques-1" || fail "the uniques changed across the restart"
fresh=$(tail -n 1 "$work/uniques-2")
sort -n "$work/uniques-1" | tail -n 1 >"$work/max-1"
[ "$fresh" -gt "$(cat "$work/max-1")" ] || fail "a unique of the first run came again ($fresh)"

# 4. SIGTERM: a clean close and a warm start.
kill "$last_pid"
wait "$last_pid" || fail "SIGTERM after the restart: exit status $?"
start "$port" --dir "$dir"
"$py" "$work/client.py" "$port" check 3000 >/dev/null || fail "keys lost after a clean stop"
kill "$last_pid"
wait "$last_pid" || true
# A directory whose cas-epoch names another item layout (the first wrote the
# epoch alone), or is damaged: refused, the store untouched.
for text in "7" "7 item-layout 9" "x"; do
  printf '%s\n' "$text" >"$dir/cas-epoch"
  status=0
  "$server" -p "$(free_port)" --dir "$dir" 2>"$work/err" || status=$?
  [ "$status" -eq 69 ] && grep -q "layout\|damaged" "$work/err" || fail "cas-epoch \"$text\" exited $status: $(cat "$work/err")"
done
# 5. Two Python clients, memcached first.
here=$(cd "$(dirname "$0")" && pwd)
port=$(free_port)
user=()
[ "$(id -u)" -eq 0 ] && user=(-u root)
memcached "${user[@]}" -p "$port" -l 127.0.0.1 -U 0 -t 1 >>"$work/memcached.log" 2>&1 &
pids+=($!)
control=$!
wait_up "$port"
"$py" "$here/clients.py" "$port" || fail "clients.py against memcached (the control)"
kill "$control"
port=$(free_port)
start "$port"
"$py" "$here/clients.py" "$port" || fail "clients.py against offheap-memcached"
kill "$last_pid"
wait "$last_pid" || true
echo "server_test.sh: all passed"
