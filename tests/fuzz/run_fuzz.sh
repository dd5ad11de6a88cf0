#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the libFuzzer target on the open and recovery path of file-backed
# stores (tests/fuzz/open_fuzz.cpp) with clang, AddressSanitizer and UBSan,
# and runs it for a bounded time from a fresh corpus, seeded with each
# variant untouched and with the inputs in tests/fuzz/seeds/*.txt (targeted
# patches at free records, inputs that found defects: a seed that fails
# stops the run at once).
#
#   tests/fuzz/run_fuzz.sh [build dir] [seconds]      (defaults: build/fuzz, 60)
#
# Environment: CXX (default clang++-14, else clang++), FUZZ_TIMEOUT (seconds
# one input may take before it counts as a hang; default 10), FUZZ_ARGS
# (more libFuzzer flags), FUZZ_CORPUS (a corpus directory to keep and grow
# instead of a temporary one).
#
# Exits 0 when the run ends with no finding; otherwise non-zero, with the
# input that caused it in <build dir>/artifacts/ (replay it with
# <build dir>/open_fuzz <file>).
set -euo pipefail
cd "$(dirname "$0")/../.."

build_dir=${1:-build/fuzz}
seconds=${2:-60}
timeout=${FUZZ_TIMEOUT:-10}
if [ -z "${CXX:-}" ]; then
  if command -v clang++-14 >/dev/null; then CXX=clang++-14; else CXX=clang++; fi
fi

mkdir -p "$build_dir/artifacts"
binary="$build_dir/open_fuzz"
echo "+ $CXX ... -fsanitize=fuzzer,address,undefined tests/fuzz/open_fuzz.cpp -o $binary"
"$CXX" -std=c++20 -g -O1 -fno-omit-frame-pointer \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -Wall -Wextra -Iinclude -Itests tests/fuzz/open_fuzz.cpp -o "$binary"

# The target's scratch stores: in memory where possible (each open syncs),
# removed at exit (a target that crashes cannot remove its own).
if [ -z "${OFFHEAP_FUZZ_TMPDIR:-}" ]; then
  if [ -w /dev/shm ]; then shm=/dev/shm; else shm=${TMPDIR:-/tmp}; fi
  OFFHEAP_FUZZ_TMPDIR=$(mktemp -d "$shm/offheap-fuzz-scratch-XXXXXX")
  export OFFHEAP_FUZZ_TMPDIR
  cleanup="rm -rf '$OFFHEAP_FUZZ_TMPDIR'"
else
  cleanup=":"
fi
if [ -n "${FUZZ_CORPUS:-}" ]; then
  corpus=$FUZZ_CORPUS
  mkdir -p "$corpus"
else
  corpus=$(mktemp -d "${TMPDIR:-/tmp}/offheap-fuzz-corpus-XXXXXX")
  cleanup="$cleanup; rm -rf '$corpus'"
fi
trap "$cleanup" EXIT
# Seeds: each variant untouched, without and with writes (the first byte).
for v in 0 1 2 3 4 5 6 7; do printf "\\x0$v" >"$corpus/seed-$v"; done
# And tests/fuzz/seeds/*.txt: targeted patches, and inputs that found
# defects. One input a line: a name, then hex bytes (spaces ignored) or
# base64:<data>; '#' starts a comment.
for list in tests/fuzz/seeds/*.txt; do
  while read -r name data; do
    case "$name" in '' | '#'*) continue ;; esac
    data=${data%%#*}
    data=${data//[[:space:]]/}
    case "$data" in
      base64:*) printf '%s' "${data#base64:}" | base64 -d >"$corpus/$name" ;;
      *) printf "$(printf '%s' "$data" | sed 's/../\\x&/g')" >"$corpus/$name" ;;
    esac
  done <"$list"
done

echo "+ $binary -max_total_time=$seconds -timeout=$timeout ... $corpus"
status=0
# -rss_limit_mb: each execution maps a few small stores; far below this.
# -len_control=0: inputs are patch lists; let them grow from the start.
"$binary" -max_total_time="$seconds" -timeout="$timeout" -max_len=512 -len_control=0 \
  -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$build_dir/artifacts/" \
  ${FUZZ_ARGS:-} "$corpus" || status=$?

if [ "$status" -ne 0 ]; then
  echo "run_fuzz.sh: the fuzzer reported a finding (exit $status); inputs in $build_dir/artifacts/:" >&2
  ls -l "$build_dir/artifacts/" >&2 || true
  exit "$status"
fi
echo "run_fuzz.sh: no findings in $seconds s"
