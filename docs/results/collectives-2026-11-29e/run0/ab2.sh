#!/usr/bin/env bash
# Run 0 of docs/results/collectives-2026-11-29e.md: before = ccoll_perf of e81576c, after = of the
# working tree that became 75c1478 (the same library headers), at /tmp/ab/BUILD/ccoll_perf.
# ab2.sh OUT builds... : alternate builds x 3 reps, bcast/reduce, P=2,3,4, eager 4K, 8B-4KiB
out=$1; shift; mkdir -p $out
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for rep in 1 2 3; do for c in broadcast reduce; do for p in 2 3 4; do for b in "$@"; do
  timeout 300 mpirun -np $p --oversubscribe --bind-to none /tmp/ab/$b/ccoll_perf --transport shm --peer mpi -C $c --eager_rooted 4K \
    -a direct,ring,tree -b 8 -e 4K -f 8 -n 1000 -w 20 -r 3 -m 0 --json $out/$b-$c-p$p-$rep.json > $out/$b-$c-p$p-$rep.txt 2>&1 || echo "FAIL $b $c $p $rep"
done; done; done; done
