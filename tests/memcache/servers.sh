# SPDX-License-Identifier: Apache-2.0
# What the memcache scripts that start servers share (sourced, after
# `set -euo pipefail`, by server_test.sh and sharding_test.sh):
#   py           Debian's python3, whatever else is first on PATH
#   work         a scratch directory, removed at exit
#   pids         the processes started: add each; all are killed at exit
#   fail msg     prints "<script>: FAILED: msg" and exits 1
#   free_port    a loopback port free now
#   wait_up port waits (up to 10 s) for something to listen on port, else fails
py=/usr/bin/python3
work=$(mktemp -d "${TMPDIR:-/tmp}/offheap-$(basename "$0" .sh)-XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "$(basename "$0"): FAILED: $*" >&2; exit 1; }
free_port() { "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_up() {
  for _ in $(seq 200); do
    "$py" -c "import socket; socket.create_connection(('127.0.0.1', $1), 0.1)" 2>/dev/null && return 0
    sleep 0.05
  done
  fail "nothing listens on port $1"
}
