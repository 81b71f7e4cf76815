#!/usr/bin/env bash
# The figures of docs/results/collectives-2026-11-29e.md: two builds of ccoll_perf, alternating run
# by run (three passes), each against Open MPI in the same processes and buffers (--peer mpi:
# alternating blocks, best of -r each), shared memory, fp32, sum:
#   eager-*:   broadcast and reduce with --eager_rooted 4K, P = 2, 3, 4, 8 B-4 KiB;
#   default-*: broadcast and reduce agreeing first (the default), P = 2 and 4, 8 B-4 KiB;
#   allreduce-*: allreduce (in-band agreement up to 64 KiB), P = 2 and 4, 8 B-64 KiB.
#
#   run.sh BEFORE_PERF AFTER_PERF OUT_DIR
set -uo pipefail
before=$1 after=$2 out=$3
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
small=(-b 8 -e 4K -f 8 -n 1000 -w 20 -r 3)
for pass in 1 2 3; do
  for c in broadcast reduce; do
    for p in 2 3 4; do
      run "eager-$c-p$p-$pass" "$p" -C "$c" --eager_rooted 4K -a direct,ring,tree "${small[@]}"
    done
    for p in 2 4; do
      run "default-$c-p$p-$pass" "$p" -C "$c" -a direct,ring,tree "${small[@]}"
    done
  done
  for p in 2 4; do
    run "allreduce-p$p-$pass" "$p" -C allreduce -a ring,direct -b 8 -e 64K -f 8 -n 1000 -w 20 -r 3
  done
done
echo "done: $out"
