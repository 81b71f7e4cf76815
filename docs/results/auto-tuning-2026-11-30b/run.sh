#!/usr/bin/env bash
# Two independent `ccoll_perf --tune` runs (A and B) of the same cases, each in --tune_passes
# passes (3: the default; 1: one run's table, as before), staged buffers, 128 KiB-64 MiB:
# allreduce and broadcast at P = 2 and 4. compare.py scores how well A's table does by B's times
# and the other way round.
#   docs/results/auto-tuning-2026-11-30b/run.sh BUILD_DIR OUT_DIR PASSES
set -euo pipefail
build=$1 out=$2 passes=$3
mkdir -p "$out"
perf="$build/benchmarks/ccoll_perf"
for run in A B; do
  for p in 2 4; do
    for c in allreduce broadcast; do
      rm -f "$out/table-$c-p$p-$run.json"
      stdbuf -oL "$perf" --transport shm -t "$p" -C "$c" --tune "$out/table-$c-p$p-$run.json" \
        --tune_passes "$passes" -b 128K -e 64M -f 2 -n 10 -w 3 -r 5 -m 0 \
        --json "$out/$c-p$p-$run.json" >"$out/$c-p$p-$run.txt"
    done
  done
done
