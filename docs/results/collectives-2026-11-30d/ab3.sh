#!/bin/bash
# cur: main at 788877f; fpref: 6b729b0 (call shapes by value, failure points by reference); polite:
# the same as fpref, plus a test-only pause of CCOLL_POLITE x pause before a reader polls an empty box (not kept).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for pass in 1 2 3 4 5 6; do
for c in broadcast reduce; do
for v in cur:0 fpref:0 polite:100 polite:400; do
  b=${v%%:*}; pol=${v##*:}
  echo -n "pass $pass $c $b/$pol: "
  CCOLL_POLITE=$pol mpirun -x CCOLL_POLITE -np 2 --oversubscribe --bind-to none /tmp/bin/ccoll_perf.$b --transport shm --peer mpi -C $c --eager_rooted 96 -a auto -b 8 -e 64 -f 8 -n 20000 -w 100 -r 3 -m 0 2>&1 | grep -v "^#" | grep -v "^$" | awk '{printf "%s:%s(%s) ", $1, $5, $NF}'; echo
done; done; done
