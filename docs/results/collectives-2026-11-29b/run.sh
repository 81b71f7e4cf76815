#!/usr/bin/env bash
# The figures of docs/results/collectives-2026-11-29b.md: ccoll's broadcasts and reduces on shared
# memory against Open MPI's MPI_Bcast / MPI_Reduce in the same processes and on the same buffers
# (ccoll_perf --peer mpi: alternating blocks, best of -r each):
#   lat-*: 8 B-4 KiB, eager (--eager_rooted 4K: Config::eager_rooted_bytes) and agreeing first
#          (the default), one after the other;
#   bw-*:  16 and 64 MiB, buffers in a registered window (--window 1: the calls read the peers'
#          buffers) and staged (--window 0), one after the other.
# The whole list runs twice.
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
for pass in 1 2; do
  for c in broadcast reduce; do
    for p in 2 4; do
      # In a window every plan takes the same direct path: one is enough.
      run "bw-$c-p$p-w1-$pass" --transport shm --peer mpi -C "$c" --window 1 -a ring \
        -b 16M -e 64M -f 4 -n 10 -w 3 -r 3 -m 0
      run "bw-$c-p$p-w0-$pass" --transport shm --peer mpi -C "$c" --window 0 -a ring,dbtree \
        -b 16M -e 64M -f 4 -n 10 -w 3 -r 3 -m 0
    done
    for p in 2 3 4; do
      for e in 4K 0; do
        run "lat-$c-p$p-e$e-$pass" --transport shm --peer mpi -C "$c" --eager_rooted "$e" \
          -a direct,ring,tree -b 8 -e 4K -f 8 -n 200 -w 20 -r 3 -m 0
      done
    done
  done
done
echo "done: $out"
