#!/bin/bash
# cur: main at 788877f; byval: call shapes by value (part of 6b729b0).
# A/B: /tmp/bin/ccoll_perf.{cur,byval}, alternating, eager, 8-64 B.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for pass in 1 2; do
for p in 2 3 4; do
for c in broadcast reduce; do
for e in 96 0; do
for b in ${BUILDS:-cur byval}; do
  echo "== pass $pass P=$p $c eager=$e build=$b"
  mpirun -np $p --oversubscribe --bind-to none /tmp/bin/ccoll_perf.$b --transport shm --peer mpi -C $c --eager_rooted $e -a auto -b 8 -e 64 -f 8 -n 4000 -w 50 -r 3 -m 0 -c 1 2>&1 | grep -v "^#" | grep -v "^$"
done; done; done; done; done
