#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Instructions per W1 get by stage, from callgrind profiles of
offheap_get_loop (bench/get_loop.cpp), one profile per subject.

  # line tables are needed (the release preset has none):
  cmake -S . -B build/prof -DCMAKE_BUILD_TYPE=Release \\
        -DCMAKE_CXX_FLAGS_RELEASE="-O3 -DNDEBUG -g" \\
        -DOFFHEAP_BUILD_TESTS=OFF -DOFFHEAP_BUILD_EXAMPLES=OFF
  cmake --build build/prof --target offheap_get_loop
  for s in store cache lru tinylfu absl boost; do
    valgrind --tool=callgrind --instr-atstart=no \\
        --callgrind-out-file=get.$s.out build/prof/bench/offheap_get_loop $s 2097152
  done
  python3 bench/stage_table.py --gets=2097152 get.*.out

Each source line that callgrind charges (inlined code is charged to the
line it came from) goes to one stage, by its file and then by what the
line does (the rules below); what no rule claims is "other" and printed,
so that a rule can be added. Lines of the standard library and of atomic
helpers go to the stage of the function they were inlined into when the
function says (the value copy inside get's visitor), else to "loads
(inlined atomics)". Figures are instructions, not time: these machines
expose no hardware counters, so misses and branch mispredictions come
from cachegrind's simulation (--cache-sim=yes --branch-sim=yes), a
separate run.
"""
import argparse
import collections
import os
import re
import subprocess
import sys

STAGES = [
    "harness (loop, key stream)",
    "hash",
    "shard pick",
    "probe (control word, tag match)",
    "location decode, chunk lookup",
    "header decode",
    "key compare",
    "stamp checks",
    "generation and slot checks",
    "expiry check",
    "hit bookkeeping",
    "copy out",
    "call glue",
    "loads (inlined atomics)",
    "other",
]

# (file name regex, line text regex or None, stage); first match wins.
RULES = [
    (r"get_loop\.cpp$|workload\.hpp$|w1\.hpp$", None, "harness (loop, key stream)"),
    (r"index/hash\.hpp$|container_hash|/hash/|city|low_level_hash|hash\.h$|xmx\.hpp$|mulx", None, "hash"),
    (r"shard_set\.hpp$|store/engine\.hpp$", None, "shard pick"),
    (r"index/index\.hpp$", None, "probe (control word, tag match)"),
    (r"index/location\.hpp$|journal/journal\.hpp$", None, "location decode, chunk lookup"),
    (r"cache_host\.hpp$|hit_buffers\.hpp$|thread_slots\.hpp$|node_list\.hpp$|count_min\.hpp$|ghost_set\.hpp$|eviction/", None, "hit bookkeeping"),
    (r"shard/probe\.hpp$", r"record_hit|raise_frequency|counts_hits|count_hits", "hit bookkeeping"),
    (r"shard/probe\.hpp$", r"expired|deadline|gone", "expiry check"),
    (r"shard/probe\.hpp$", r"unchanged_since|acquire_generation|acquire_serial|still_current|leads_to|load_relaxed\(slot\)", "generation and slot checks"),
    (r"shard/probe\.hpp$", r"stamp|validate|s1\b", "stamp checks"),
    (r"shard/probe\.hpp$", r"slot_location|resolve|avail", "location decode, chunk lookup"),
    (r"shard/probe\.hpp$", r"read_meta|Meta", "header decode"),
    (r"shard/probe\.hpp$", r"is_live_record_of|mine", "key compare"),
    (r"shard/probe\.hpp$", None, "probe (control word, tag match)"),
    (r"record\.hpp$", r"deadline", "expiry check"),
    (r"record\.hpp$", r"equal_bytes|key_len|key\.size|load_u64\(k|n >= 16|n >= 8|n == 0|\bk \+=|is_live_record_of", "key compare"),
    (r"record\.hpp$", r"stamp|validate|fence", "stamp checks"),
    (r"record\.hpp$", r"copy|value|dst|src|out", "copy out"),
    (r"record\.hpp$", None, "header decode"),
    (r"shard/shard\.hpp$", r"expired|deadline|now_ms", "expiry check"),
    (r"shard/shard\.hpp$", None, "call glue"),
    (r"store\.hpp$|store/reads\.hpp$", r"validate", "stamp checks"),
    (r"store\.hpp$|store/reads\.hpp$", r"assign|resize|copy|out\b|value", "copy out"),
    (r"store\.hpp$|store/reads\.hpp$|store/checks\.hpp$", None, "call glue"),
    (r"basic_string|char_traits|string_view|memcpy|memmove", None, "copy out"),
    # absl and boost: their table probe, their key compare
    (r"raw_hash_set|foa\.hpp$|foa/|unordered_flat|flat_hash_map|container_memory|hash_policy|common\.h|core\.hpp|table\.hpp|emmintrin\.h$|prefetch\.h$|boost/core/bit\.hpp$", None, "probe (control word, tag match)"),
    (r"atomic_base\.h$|atomic_word\.hpp$|/atomic$|bits/atomic", None, "loads (inlined atomics)"),
    (r"/bit$|bits/stl_|type_traits|utility|/functional", None, "call glue"),
]


def classify(path, text):
    for frx, trx, stage in RULES:
        if re.search(frx, path) and (trx is None or re.search(trx, text)):
            return stage
    return "other"


def annotate(profile):
    """One callgrind_annotate run: (the program's total instructions, a list
    of (file, line number, instructions, source text))."""
    out = subprocess.run(
        ["callgrind_annotate", "--auto=yes", "--show-percs=no", "--threshold=100", "--context=0", profile],
        check=True, capture_output=True, text=True).stdout
    total = int(re.search(r"([\d,]+)(?: \([\d.]+%\))?\s+PROGRAM TOTALS", out).group(1).replace(",", ""))
    lines = []
    path = None
    lineno = None
    for raw in out.splitlines():
        if "events annotated" in raw or raw.startswith("The following files"):
            break  # the summary after the sources
        m = re.match(r"-- Auto-annotated source: (.*)$", raw)
        if m:
            path = m.group(1).strip()
            continue
        m = re.match(r"-- line (\d+) -+", raw)
        if m:
            lineno = int(m.group(1))
            continue
        if path is None or lineno is None:
            continue
        m = re.match(r"\s*([\d,]+)\s(.*)$", raw)
        if m:
            lines.append((path, lineno, int(m.group(1).replace(",", "")), m.group(2)))
            lineno = None
    return total, lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gets", type=int, default=2097152)
    ap.add_argument("--show-other", action="store_true", help="print the lines no rule claims")
    ap.add_argument("profiles", nargs="+")
    a = ap.parse_args()
    table = {}
    unclaimed = collections.Counter()
    for p in a.profiles:
        name = re.sub(r"^get\.|\.out$", "", os.path.basename(p))
        by_stage = collections.Counter()
        seen = 0
        total, lines = annotate(p)
        for path, lineno, ir, text in lines:
            stage = classify(path, text)
            by_stage[stage] += ir
            seen += ir
            if stage == "other":
                unclaimed[(os.path.basename(path), lineno, text.strip()[:60])] += ir
        # Code without line information (no -g: libc, the dynamic loader).
        by_stage["other"] += total - seen
        table[name] = (total, by_stage)
    names = list(table)
    print("| stage | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for stage in STAGES:
        row = [table[n][1][stage] / a.gets for n in names]
        if all(v < 0.05 for v in row):
            continue
        print(f"| {stage} | " + " | ".join(f"{v:.1f}" for v in row) + " |")
    print("| **total** | " + " | ".join(f"**{table[n][0] / a.gets:.1f}**" for n in names) + " |")
    if a.show_other:
        for (f, n, t), ir in unclaimed.most_common(25):
            print(f"other: {ir / a.gets:6.2f}  {f}:{n}  {t}", file=sys.stderr)


if __name__ == "__main__":
    main()
