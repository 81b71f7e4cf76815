#!/usr/bin/env bash
# The figures of docs/results/collectives-2026-11-30.md: two builds of ccoll_perf, alternating run
# by run, each against Open MPI in the same processes and buffers (--peer mpi: alternating blocks,
# best of -r each), shared memory, fp32, sum, the library's defaults (no eager calls):
#   small-*: reduce-scatter, all-gather, broadcast and reduce, P = 2, 3, 4, 8 B-64 KiB;
#   large-*: allreduce, P = 2 and 4, 16 and 64 MiB (unchanged path: a control).
#
#   [ALGOS=...] run.sh BEFORE_PERF AFTER_PERF OUT_DIR [PASSES]
set -uo pipefail
before=$1 after=$2 out=$3 passes=${4:-2}
ALGOS=${ALGOS:-direct,ring}  # run1: direct,ring; run2: auto,direct,ring,direct+ll,ring+ll
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run() {  # name, np, then ccoll_perf's args
  local name=$1 np=$2 build
  shift 2
  for build in before after; do
    local perf=$before
    [ "$build" = after ] && perf=$after
    timeout 300 mpirun -np "$np" --oversubscribe --bind-to none "$perf" --transport shm --peer mpi \
      "$@" -m 0 --json "$out/$name-$build.json" >"$out/$name-$build.txt" 2>&1
    echo "rc=$?" >>"$out/$name-$build.txt"
  done
  echo "$name done"
}
for pass in $(seq 1 "$passes"); do
  for c in reduce_scatter all_gather broadcast reduce; do
    for p in 2 3 4; do
      run "small-$c-p$p-$pass" "$p" -C "$c" -a "$ALGOS" -b 8 -e 64K -f 8 -n 1000 -w 20 -r 3
    done
  done
  for p in 2 4; do
    run "large-p$p-$pass" "$p" -C allreduce -a ring -b 16M -e 64M -f 4 -n 20 -w 3 -r 3
  done
done
echo "done: $out"
