#!/usr/bin/env bash
# auto (the default table) against every registered algorithm that plans the collective, in the
# same run (interleaved: every algorithm once per round at each size): staged and windowed buffers (allreduce), every collective staged, P = 2, 3, 4, 8 B to
# 64 MiB; and auto against Open MPI from 1 MiB on staged buffers (mpirun, alternating blocks).
#   docs/results/auto-tuning-2026-11-28/verify.sh BUILD_DIR OUT_DIR
set -euo pipefail
build=$1 out=$2
mkdir -p "$out"
perf="$build/benchmarks/ccoll_perf"
common=(--transport shm -f 2 -n 10 -w 3 -r 5 -m 0 --interleave 1)
for p in 2 3 4; do
  stdbuf -oL "$perf" "${common[@]}" -t "$p" -a auto,oneshot,recdoubling,ring,dbtree,tree,direct \
    -b 8 -e 64M --json "$out/allreduce-p$p-staged.json" >"$out/allreduce-p$p-staged.txt"
  stdbuf -oL "$perf" "${common[@]}" -t "$p" -a auto,oneshot,recdoubling,ring,dbtree,tree,direct \
    -b 8 -e 64M --window 1 --json "$out/allreduce-p$p-window.json" >"$out/allreduce-p$p-window.txt"
  for c in reduce_scatter all_gather broadcast reduce; do
    stdbuf -oL "$perf" "${common[@]}" -t "$p" -C "$c" -a auto,ring,direct$([[ $c == broadcast || $c == reduce ]] && echo ,tree,dbtree) \
      -b 8 -e 64M --json "$out/$c-p$p.json" >"$out/$c-p$p.txt"
  done
  stdbuf -oL mpirun --allow-run-as-root --oversubscribe -np "$p" "$perf" --transport shm -f 2 \
    -n 20 -w 5 -r 5 -m 0 --peer mpi -a auto -b 1M -e 64M \
    --json "$out/allreduce-p$p-mpi.json" >"$out/allreduce-p$p-mpi.txt" 2>&1
done
