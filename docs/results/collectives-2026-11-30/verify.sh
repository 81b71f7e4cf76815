#!/usr/bin/env bash
# auto (the default table with the re-measured rules up to 64 KiB) against every registered
# algorithm that plans the collective, in both protocols, in the same run (interleaved: every
# candidate once per round at each size): reduce-scatter, all-gather, broadcast and reduce,
# staged buffers, P = 2, 3, 4, 8 B to 64 KiB, forked shared-memory processes.
#   docs/results/collectives-2026-11-30/verify.sh BUILD_DIR OUT_DIR
set -euo pipefail
build=$1 out=$2
mkdir -p "$out"
perf="$build/benchmarks/ccoll_perf"
common=(--transport shm -f 2 -n 10 -w 3 -r 5 -m 0 --interleave 1)
for p in 2 3 4; do
  for c in reduce_scatter all_gather broadcast reduce; do
    algos=auto,ring,direct,ring+ll,direct+ll
    [[ $c == broadcast || $c == reduce ]] && algos+=,tree,dbtree,tree+ll,dbtree+ll
    stdbuf -oL "$perf" "${common[@]}" -t "$p" -C "$c" -a "$algos" -b 8 -e 64K \
      --json "$out/$c-p$p.json" >"$out/$c-p$p.txt"
  done
done
