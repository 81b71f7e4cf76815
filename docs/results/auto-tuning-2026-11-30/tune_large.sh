#!/usr/bin/env bash
# Every candidate plan (every registered algorithm that plans the collective, in both protocols)
# from 128 KiB to 64 MiB, interleaved in each run (`ccoll_perf --tune`), repeated PASSES times so
# that derive_large.py takes each candidate's median over independent runs: the five collectives
# on staged buffers, P = 2, 3, 4.
#   docs/results/auto-tuning-2026-11-30/tune_large.sh BUILD_DIR OUT_DIR [PASSES]
set -euo pipefail
build=$1 out=$2 passes=${3:-3}
mkdir -p "$out"
perf="$build/benchmarks/ccoll_perf"
for ((pass = 1; pass <= passes; ++pass)); do
  for p in 2 3 4; do
    for c in allreduce reduce_scatter all_gather broadcast reduce; do
      stdbuf -oL "$perf" --transport shm -t "$p" -C "$c" --tune "$out/table-$c-p$p-pass$pass.json" \
        -b 128K -e 64M -f 2 -n 10 -w 3 -r 5 -m 0 \
        --json "$out/$c-p$p-pass$pass.json" >"$out/$c-p$p-pass$pass.txt"
    done
  done
done
