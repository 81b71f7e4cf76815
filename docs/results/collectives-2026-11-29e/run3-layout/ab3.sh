#!/usr/bin/env bash
# Run 3 of docs/results/collectives-2026-11-29e.md: perf-e81576c and perf-75c1478 as in run.sh;
# perf-interleaved = 75c1478 with call s's summary on line s % 4 of its rank's four (consecutive
# calls on different lines), at /tmp/ab/BUILD.
out=$1; shift; mkdir -p $out
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for rep in 1 2 3; do
 for cfg in "default broadcast 4 0" "default reduce 4 0" "eager broadcast 2 4K" "eager broadcast 4 4K" "default broadcast 2 0"; do
  set -- $cfg; kind=$1 c=$2 p=$3 e=$4
  for b in perf-e81576c perf-75c1478 perf-interleaved; do
   timeout 300 mpirun -np $p --oversubscribe --bind-to none /tmp/ab/$b --transport shm --peer mpi -C $c --eager_rooted $e \
    -a direct,ring,tree -b 8 -e 4K -f 8 -n 1000 -w 20 -r 3 -m 0 --json $out/$kind-$c-p$p-$rep-$b.json > /dev/null 2>&1 || echo FAIL
  done
 done
done
