#!/usr/bin/env bash
# auto against every allreduce plan in both protocols at P = 4, staged and in a registered window,
# 512 B to 16 KiB, interleaved in the same processes (auto-small-2026-12-01/verify.sh's allreduce
# part, at the sizes whose rule moved).
#   docs/results/auto-small-2026-12-01b/verify_allreduce.sh BUILD_DIR OUT_DIR
set -euo pipefail
build=$1 out=$2
mkdir -p "$out"
perf="$build/benchmarks/ccoll_perf"
common=(--transport shm -f 2 -n 10 -w 3 -r 5 -m 0 --interleave 1 -b 512 -e 16K -t 4)
ar=auto
for a in oneshot recdoubling ring dbtree tree direct; do ar+=",$a,$a+ll"; done
stdbuf -oL "$perf" "${common[@]}" -a "$ar" --json "$out/allreduce-p4-staged.json" \
  >"$out/allreduce-p4-staged.txt"
stdbuf -oL "$perf" "${common[@]}" -a "$ar" --window 1 --json "$out/allreduce-p4-window.json" \
  >"$out/allreduce-p4-window.txt"
