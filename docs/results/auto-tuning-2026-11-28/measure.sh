#!/usr/bin/env bash
# The measurements behind the default tuning table (include/ccoll/algo/by_size.hpp): every
# candidate plan of every collective on forked shared-memory processes with staged buffers, P = 2,
# 3 and 4, 8 B to 64 MiB (factor 2), best of 5 blocks of 20 calls, each protocol where it can win.
#   docs/results/auto-tuning-2026-11-28/measure.sh BUILD_DIR OUT_DIR
set -euo pipefail
build=$1 out=$2
mkdir -p "$out"
perf="$build/benchmarks/ccoll_perf"
common=(--transport shm -f 2 -n 20 -w 5 -r 5 -m 0)
for p in 2 3 4; do
  for c in allreduce reduce_scatter all_gather broadcast reduce; do
    case $c in
      allreduce) algos=oneshot,recdoubling,ring,dbtree,direct ;;
      reduce_scatter | all_gather) algos=ring,direct ;;
      *) algos=ring,direct,tree,dbtree ;;
    esac
    stdbuf -oL "$perf" "${common[@]}" -t "$p" -C "$c" -a "$algos" -b 8 -e 64M --protocol simple \
      --json "$out/$c-p$p-simple.json" >"$out/$c-p$p-simple.txt"
    stdbuf -oL "$perf" "${common[@]}" -t "$p" -C "$c" -a "$algos" -b 8 -e 256K --protocol ll \
      --json "$out/$c-p$p-ll.json" >"$out/$c-p$p-ll.txt"
  done
done
