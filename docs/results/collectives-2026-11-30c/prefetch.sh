#!/bin/bash
# The writer's prefetch of the box two on, A/B: /tmp/bin/ccoll_perf.box6 (with it) against
# /tmp/bin/ccoll_perf.nopf (the same tree without it), eager, alternating, three passes.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for P in 2 3; do for C in broadcast reduce; do for pass in 1 2 3; do
for b in box6 nopf; do
  printf "%-5s %-9s P=%s: " $b $C $P
  timeout 120 mpirun --oversubscribe --bind-to none -np $P /tmp/bin/ccoll_perf.$b --transport shm --peer mpi -C $C --eager_rooted 96 -a auto -b 8 -e 64 -f 8 -n 4000 -w 50 -r 3 -m 0 2>&1 | grep -v "^#" | awk '{printf "%s B %s us (mpi %.3f us) %s wrong %s | ", $1, $5, $1/$9/1000, $10, $8}'; echo
done; done; done; done
