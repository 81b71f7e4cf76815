#!/usr/bin/env bash
# auto (the default table) against every registered plan of reduce-scatter, all-gather, broadcast
# and reduce, in both protocols, interleaved in the same processes, 8 B to 64 KiB, forked
# shared-memory processes, P = 2, 3, 4, staged buffers: auto-small-2026-12-01/verify.sh without
# allreduce, whose rules did not change.
#   docs/results/auto-small-2026-12-01b/verify.sh BUILD_DIR OUT_DIR
set -euo pipefail
build=$1 out=$2
mkdir -p "$out"
perf="$build/benchmarks/ccoll_perf"
common=(--transport shm -f 2 -n 10 -w 3 -r 5 -m 0 --interleave 1 -b 8 -e 64K)
both() {  # every name, and its LowLatency form
  local out_list="" a
  for a in "$@"; do out_list+=",$a,$a+ll"; done
  echo "auto$out_list"
}
for p in 2 3 4; do
  for c in reduce_scatter all_gather broadcast reduce; do
    algos=$(both ring direct)
    [[ $c == broadcast || $c == reduce ]] && algos=$(both ring direct tree dbtree)
    stdbuf -oL "$perf" "${common[@]}" -t "$p" -C "$c" -a "$algos" \
      --json "$out/$c-p$p.json" >"$out/$c-p$p.txt"
  done
done
