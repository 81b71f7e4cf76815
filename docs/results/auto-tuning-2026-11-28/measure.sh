#!/usr/bin/env bash
# The default tuning table (include/ccoll/algo/by_size.hpp), measured: `ccoll_perf --tune` for
# every collective at P = 2, 3 and 4 on forked shared-memory processes with staged buffers, 8 B to
# 64 MiB (factor 2), every candidate in both protocols, interleaved, best of 5 blocks of 10 calls.
# OUT_DIR/table.json is the table; OUT_DIR/<collective>-p<P>.json every candidate's times.
#   docs/results/auto-tuning-2026-11-28/measure.sh BUILD_DIR OUT_DIR
set -euo pipefail
build=$1 out=$2
mkdir -p "$out"
rm -f "$out/table.json"
perf="$build/benchmarks/ccoll_perf"
for p in 2 3 4; do
  for c in allreduce reduce_scatter all_gather broadcast reduce; do
    stdbuf -oL "$perf" --transport shm -t "$p" -C "$c" --tune "$out/table.json" -b 8 -e 64M -f 2 \
      -n 10 -w 3 -r 5 -m 0 --json "$out/$c-p$p.json" >"$out/$c-p$p.txt"
  done
done
