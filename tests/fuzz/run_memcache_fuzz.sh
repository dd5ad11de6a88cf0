#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the libFuzzer target on the memcache text protocol's engine
# (tests/fuzz/memcache_fuzz.cpp: its oracle is at its top) with clang,
# AddressSanitizer and UBSan, and runs it for a bounded time from a few seed
# requests. Fails on a finding, and below a floor of executions (a run that
# got nowhere found nothing).
#
#   tests/fuzz/run_memcache_fuzz.sh [build dir] [seconds]   (defaults: build/fuzz, 60)
#
# Environment: CXX (default clang++-14, else clang++); FUZZ_MIN_RUNS, the
# floor (default 200 per second of the run: measured 4,000 a second on the
# 2-core development machine).
set -euo pipefail
cd "$(dirname "$0")/../.."
build_dir=${1:-build/fuzz}
seconds=${2:-60}
min_runs=${FUZZ_MIN_RUNS:-$((200 * seconds))}
if [ -z "${CXX:-}" ]; then
  if command -v clang++-14 >/dev/null; then CXX=clang++-14; else CXX=clang++; fi
fi
mkdir -p "$build_dir/memcache-artifacts"
binary=$build_dir/memcache_fuzz
echo "+ $CXX ... -fsanitize=fuzzer,address,undefined tests/fuzz/memcache_fuzz.cpp -o $binary"
"$CXX" -std=c++20 -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined \
  -fno-sanitize-recover=undefined -Wall -Wextra -Iinclude -Itests tests/fuzz/memcache_fuzz.cpp -o "$binary"
corpus=$(mktemp -d "${TMPDIR:-/tmp}/offheap-memcache-fuzz-XXXXXX")
trap 'rm -rf "$corpus"' EXIT
# Seeds: the first byte picks the limits (odd: small) and the cuts.
printf '\000set a 0 0 1\r\nx\r\nget a b\r\ngets a\r\n' >"$corpus/storage"
printf '\001set a 0 0 200\r\nxx\r\nget a a a a a a\r\nincr a 1\r\nappend a 0 0 1\r\ny\r\n' >"$corpus/limits"
printf '\002gets a b\r\nflush_all 1\r\ncas a 0 0 1 1\r\nz\r\ntouch a 10\r\ngat 5 a\r\nmg a v\r\nstats\r\nquit\r\n' >"$corpus/mixed"
printf '\003set n 0 0 2\r\n10\r\nincr n 5\r\ndecr n 100\r\ndelete n 0 noreply\r\nGET / HTTP/1.1\r\n' >"$corpus/numbers"
printf '\004ms a 2 T9 F3 c k O1\r\nhi\r\nmg a v t f c s h l k q O2\r\nmg YQ== b N5 R3 v\r\nmd a I q\r\nmg a\r\nma n N0 J5 D2 MD v t\r\nme a\r\nms a 1 MA C1 I\r\nz\r\nmn\r\n' >"$corpus/meta"
log=$build_dir/memcache_fuzz.log
status=0
set +e
"$binary" -max_total_time="$seconds" -timeout=10 -max_len=512 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$build_dir/memcache-artifacts/" "$corpus" >"$log" 2>&1
status=$?
set -e
tail -n 8 "$log"
if [ "$status" -ne 0 ]; then
  grep -a -m1 "memcache_fuzz: FINDING" "$log" >&2 || true
  echo "run_memcache_fuzz.sh: a finding (exit $status); the input is in $build_dir/memcache-artifacts/" >&2
  exit "$status"
fi
runs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -n 1)
if [ -z "$runs" ] || [ "$runs" -lt "$min_runs" ]; then
  echo "run_memcache_fuzz.sh: ${runs:-no} executions in $seconds s, under the floor of $min_runs" >&2
  exit 1
fi
echo "run_memcache_fuzz.sh: no findings in $seconds s ($runs executions; floor $min_runs)"
