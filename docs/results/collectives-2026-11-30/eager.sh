#!/usr/bin/env bash
# Eager broadcasts and reduces (--eager_rooted 4K), 8 and 64 B, P = 2, 3, 4, FIFO depth
# (--nslots) 4 and 16, builds alternating, against Open MPI (--peer mpi), `direct`, best of 3.
#   eager.sh OUT BUILD1_PERF BUILD2_PERF ...: one line per group and build
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$1; shift
for c in broadcast reduce; do for p in 2 3 4; do for ns in 4 16; do for b in "$@"; do
  r=$(timeout 120 mpirun -np $p --oversubscribe --bind-to none $b --transport shm --peer mpi -C $c --eager_rooted 4K --nslots $ns -a direct -b 8 -e 64 -f 8 -n 1000 -w 20 -r 3 -m 0 2>&1 | grep -E "^ +[0-9]" | awk '{printf "%sB %sus %s  ", $1, $5, $10}')
  echo "$c P=$p ns=$ns $(basename $b): $r"
done; done; done; done | tee $out
