#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the libFuzzer target on the open and recovery path of file-backed
# stores (tests/fuzz/open_fuzz.cpp) with clang, AddressSanitizer and UBSan,
# and runs it for a bounded time. What the target checks (its oracle) is at
# the top of open_fuzz.cpp: an undamaged input must open with exactly its
# variant's contents, a damaged one may be refused but must serve only values
# its variant wrote for each key, and writes after the open must read back and
# survive a clean reopen.
#
#   tests/fuzz/run_fuzz.sh [build dir] [seconds]      (defaults: build/fuzz, 60)
#
# The run starts from the kept corpus, tests/fuzz/corpus/ (minimized inputs
# of earlier, longer runs: a short run starts where they stopped), each
# variant untouched, and the inputs in tests/fuzz/seeds/*.txt (targeted
# patches at free records, inputs that found defects): all are copied into a
# working corpus, and an input among them that fails stops the run at once.
#
# The run fails when the fuzzer reports a finding, and when it executed fewer
# inputs than a floor (libFuzzer's final stat::number_of_executed_units): a
# run that got nowhere found nothing.
#
# Environment:
#   CXX              the compiler (default clang++-14, else clang++)
#   FUZZ_TIMEOUT     seconds one input may take before it counts as a hang
#                    (default 10)
#   FUZZ_ARGS        more libFuzzer flags
#   FUZZ_CORPUS      a working corpus directory to keep and grow instead of a
#                    temporary one
#   FUZZ_MIN_RUNS    the floor on executions (default: 25 per second of the
#                    run, 3000 for CI's 120 s; 0: no floor). Measured on the
#                    2-core development machine, busy with other builds (load
#                    about 6): 15,500 executions in 120 s from the kept corpus,
#                    7,600 with a second fuzzer running beside it; the default
#                    is under half of the lower figure.
#   FUZZ_UPDATE_CORPUS=1
#                    after a run with no finding, merge its working corpus
#                    (which began as a copy of the kept one) into
#                    tests/fuzz/corpus/ with -merge=1 -use_counters=0: the
#                    directory is replaced by a small set of inputs that
#                    reaches every edge they reach (with hit counts as
#                    features too, a 25-minute run's corpus merged to 806
#                    inputs; edges alone, 127). To refresh the kept corpus,
#                    run for a long time and commit the result, e.g.
#                      FUZZ_UPDATE_CORPUS=1 tests/fuzz/run_fuzz.sh build/fuzz 1800
#                      git add -A tests/fuzz/corpus
#   FUZZ_PLANTED_FAULT=<name ...|all>
#                    the oracle's own test: instead of the fuzz run, build a
#                    twin of the target with -DOFFHEAP_FUZZ_PLANTED_FAULTS and
#                    run it once per named fault (see Fault in open_fuzz.cpp:
#                    lost_key changed_value open_refused foreign_value
#                    lost_write reopen_refused), from the same corpus, for at
#                    most [seconds] each. Each run must end in the finding of
#                    the check that fault breaks; exits 0 when every one did.
#
# Exits 0 when the run ends with no finding; otherwise non-zero, with the
# input that caused it in <build dir>/artifacts/ (replay it with
# <build dir>/open_fuzz <file>), and the fuzzer's output in
# <build dir>/fuzz.log.
set -euo pipefail
cd "$(dirname "$0")/../.."

build_dir=${1:-build/fuzz}
seconds=${2:-60}
timeout=${FUZZ_TIMEOUT:-10}
min_runs=${FUZZ_MIN_RUNS:-$((25 * seconds))}
planted=${FUZZ_PLANTED_FAULT:-}
if [ "$planted" = all ]; then
  planted="lost_key changed_value open_refused foreign_value lost_write reopen_refused"
fi
if [ -z "${CXX:-}" ]; then
  if command -v clang++-14 >/dev/null; then CXX=clang++-14; else CXX=clang++; fi
fi

mkdir -p "$build_dir/artifacts"
binary="$build_dir/open_fuzz"
defines=()
if [ -n "$planted" ]; then
  binary="$build_dir/open_fuzz_planted"
  defines=(-DOFFHEAP_FUZZ_PLANTED_FAULTS)
fi
echo "+ $CXX ... -fsanitize=fuzzer,address,undefined ${defines[*]} tests/fuzz/open_fuzz.cpp -o $binary"
"$CXX" -std=c++20 -g -O1 -fno-omit-frame-pointer \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -Wall -Wextra "${defines[@]}" -Iinclude -Itests tests/fuzz/open_fuzz.cpp -o "$binary"

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
# The kept corpus (file names are the inputs' SHA-1: copies never clash).
if [ -d tests/fuzz/corpus ]; then
  find tests/fuzz/corpus -maxdepth 1 -type f ! -name '.*' -exec cp {} "$corpus/" \;
fi
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
echo "run_fuzz.sh: starting corpus: $(find "$corpus" -maxdepth 1 -type f | wc -l) inputs"

# -rss_limit_mb: each execution maps a few small stores; far below this.
# -len_control=0: inputs are patch lists; let them grow from the start.
flags=(-timeout="$timeout" -max_len=512 -len_control=0 -rss_limit_mb=2048 -print_final_stats=1)

# The oracle's own test: each planted fault must be found.
if [ -n "$planted" ]; then
  failed=0
  for fault in $planted; do
    case "$fault" in
      lost_key | changed_value) tag=undamaged ;;
      open_refused) tag=refused ;;
      foreign_value) tag=history ;;
      lost_write) tag=written ;;
      reopen_refused) tag=reopen ;;
      *) echo "run_fuzz.sh: unknown planted fault '$fault'" >&2; exit 2 ;;
    esac
    log="$build_dir/planted-$fault.log"
    mkdir -p "$build_dir/planted-artifacts"
    echo "+ OFFHEAP_FUZZ_PLANTED_FAULT=$fault $binary -max_total_time=$seconds ... $corpus >$log"
    status=0
    OFFHEAP_FUZZ_PLANTED_FAULT=$fault "$binary" -max_total_time="$seconds" "${flags[@]}" \
      -artifact_prefix="$build_dir/planted-artifacts/$fault-" ${FUZZ_ARGS:-} "$corpus" \
      >"$log" 2>&1 || status=$?
    line=$(grep -m1 'open_fuzz: FINDING' "$log" || true)
    if [ "$status" -ne 0 ] && grep -q "open_fuzz: FINDING \[$tag\]" "$log"; then
      echo "run_fuzz.sh: planted fault $fault: found (exit $status): $line"
    else
      echo "run_fuzz.sh: planted fault $fault: NOT found as [$tag] (exit $status) ${line:-no finding}" >&2
      tail -n 20 "$log" >&2
      failed=1
    fi
  done
  if [ "$failed" -ne 0 ]; then
    echo "run_fuzz.sh: a planted fault went unnoticed: the oracle misses it" >&2
    exit 1
  fi
  echo "run_fuzz.sh: every planted fault was found"
  exit 0
fi

log="$build_dir/fuzz.log"
echo "+ $binary -max_total_time=$seconds ${flags[*]} ... $corpus"
status=0
set +e
"$binary" -max_total_time="$seconds" "${flags[@]}" -artifact_prefix="$build_dir/artifacts/" \
  ${FUZZ_ARGS:-} "$corpus" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e

if [ "$status" -ne 0 ]; then
  echo "run_fuzz.sh: the fuzzer reported a finding (exit $status); inputs in $build_dir/artifacts/:" >&2
  ls -l "$build_dir/artifacts/" >&2 || true
  exit "$status"
fi
runs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -n 1)
if [ -z "$runs" ]; then
  echo "run_fuzz.sh: no stat::number_of_executed_units in the fuzzer's output" >&2
  exit 1
fi
if [ "$runs" -lt "$min_runs" ]; then
  echo "run_fuzz.sh: only $runs executions in $seconds s, fewer than the floor of $min_runs" \
    "(FUZZ_MIN_RUNS): the run was too slow to count" >&2
  exit 1
fi
echo "run_fuzz.sh: no findings in $seconds s ($runs executions; floor $min_runs)"

if [ "${FUZZ_UPDATE_CORPUS:-0}" = 1 ]; then
  merged=$(mktemp -d "${TMPDIR:-/tmp}/offheap-fuzz-merged-XXXXXX")
  trap "$cleanup; rm -rf '$merged'" EXIT
  echo "+ $binary -merge=1 -use_counters=0 ... $merged $corpus"
  "$binary" -merge=1 -use_counters=0 "${flags[@]}" "$merged" "$corpus" 2>&1 | tail -n 3
  mkdir -p tests/fuzz/corpus
  find tests/fuzz/corpus -maxdepth 1 -type f ! -name '.*' -delete
  cp "$merged"/* tests/fuzz/corpus/
  echo "run_fuzz.sh: tests/fuzz/corpus/ now holds $(find tests/fuzz/corpus -maxdepth 1 -type f | wc -l)" \
    "inputs, $(cat tests/fuzz/corpus/* | wc -c) bytes"
fi
