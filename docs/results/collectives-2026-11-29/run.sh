#!/usr/bin/env bash
# The figures of docs/results/collectives-2026-11-29.md: ccoll's reduce-scatter and all-gather on
# shared memory with every rank's buffers in a registered window (--window 1: the calls read the
# peers' buffers directly) and staged (--window 0), each against Open MPI's
# MPI_Reduce_scatter_block / MPI_Allgather in the same processes and on the same buffers
# (ccoll_perf --peer mpi: alternating blocks, best of -r each). For each configuration the
# windowed run and the staged run follow each other.
#
#   run.sh BUILD OUT_DIR
set -uo pipefail
perf=$1/benchmarks/ccoll_perf out=$2
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run() {  # name, then ccoll_perf's args
  local name=$1
  shift
  timeout 600 mpirun -np "$p" --oversubscribe --bind-to none "$perf" "$@" \
    --json "$out/$name.json" >"$out/$name.txt" 2>&1
  echo "rc=$?" >>"$out/$name.txt"
  echo "$name: $(tail -1 "$out/$name.txt")"
}
for c in all_gather reduce_scatter; do
  for p in 2 4; do
    for w in 1 0; do
      run "bw-$c-p$p-w$w" --transport shm --peer mpi -C "$c" --window "$w" -b 16M -e 64M -f 4 \
        -n 10 -w 3 -r 3 -m 0
    done
  done
  for p in 2 3 4; do
    for w in 1 0; do
      run "lat-$c-p$p-w$w" --transport shm --peer mpi -C "$c" --window "$w" -b 8 -e 4K -f 8 \
        -n 200 -w 20 -r 3 -m 0
    done
  done
done
echo "done: $out"
