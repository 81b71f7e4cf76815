#!/usr/bin/env bash
# ccoll's other collectives (-a auto and ring) against Gloo's in the same processes, alternating
# blocks: mpirun -np P ccoll_perf --transport shm --peer gloo -C NAME, P = 2 and 4, 1 KiB to
# 64 MiB by 64, best of 3.
#   docs/results/collectives-2026-11-28b/gloo.sh BUILD_DIR OUT_DIR
set -euo pipefail
build=$1 out=$2
mkdir -p "$out"
for p in 2 4; do
  for c in reduce_scatter all_gather broadcast reduce; do
    stdbuf -oL timeout 600 mpirun --allow-run-as-root --oversubscribe -np "$p" \
      "$build/benchmarks/ccoll_perf" --transport shm --peer gloo -C "$c" -a auto,ring \
      -b 1K -e 64M -f 64 -n 10 -w 3 -r 3 -m 0 --json "$out/$c-p$p.json" >"$out/$c-p$p.txt" 2>&1
  done
done
