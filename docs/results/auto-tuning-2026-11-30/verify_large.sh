#!/usr/bin/env bash
# auto (the default table) against every registered algorithm that plans the collective, from 128
# KiB to 64 MiB, interleaved in each run (every algorithm once per round at each size), repeated
# PASSES times so that a size's ratio is a median over independent runs: every collective on
# staged buffers and allreduce in a registered window too, P = 2, 3, 4. LL=1: every candidate in
# the LowLatency protocol as well.
#   [LL=1] docs/results/auto-tuning-2026-11-30/verify_large.sh BUILD_DIR OUT_DIR [PASSES]
set -euo pipefail
build=$1 out=$2 passes=${3:-3}
mkdir -p "$out"
perf="$build/benchmarks/ccoll_perf"
common=(--transport shm -b 128K -e 64M -f 2 -n 10 -w 3 -r 5 -m 0 --interleave 1)
for ((pass = 1; pass <= passes; ++pass)); do
  for p in 2 3 4; do
    for c in allreduce reduce_scatter all_gather broadcast reduce; do
      case $c in
        allreduce) algos=auto,oneshot,recdoubling,ring,dbtree,tree,direct ;;
        broadcast | reduce) algos=auto,ring,direct,tree,dbtree ;;
        *) algos=auto,ring,direct ;;
      esac
      if [[ ${LL:-0} == 1 ]]; then
        ll=${algos#auto,}
        algos+=,${ll//,/+ll,}+ll
      fi
      stdbuf -oL "$perf" "${common[@]}" -t "$p" -C "$c" -a "$algos" \
        --json "$out/$c-p$p-staged-pass$pass.json" >"$out/$c-p$p-staged-pass$pass.txt"
      if [[ $c == allreduce ]]; then
        stdbuf -oL "$perf" "${common[@]}" -t "$p" -C "$c" -a "$algos" --window 1 \
          --json "$out/$c-p$p-window-pass$pass.json" >"$out/$c-p$p-window-pass$pass.txt"
      fi
    done
  done
done
