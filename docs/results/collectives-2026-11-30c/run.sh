#!/bin/bash
# Alternates three builds per row: BASE (main before fast boxes), BOX (fast boxes) with the
# default agreement (--eager_rooted 0) and BOX eager (--eager_rooted 96); binaries in /tmp/bin
# named ccoll_perf.base and ccoll_perf.box5 (see the page). Output: run1.txt.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for P in 2 3 4; do for C in broadcast reduce; do for pass in 1 2; do
for v in "base 0" "box5 0" "box5 96"; do set -- $v
  printf "%-5s e=%-3s %-9s P=%s: " $1 $2 $C $P
  timeout 120 mpirun --oversubscribe --bind-to none -np $P /tmp/bin/ccoll_perf.$1 --transport shm --peer mpi -C $C --eager_rooted $2 -a auto -b 8 -e 64 -f 8 -n 4000 -w 50 -r 3 -m 0 2>&1 | grep -v "^#" | awk '{printf "%s B %s us (mpi %.3f us) %s | ", $1, $5, $1/$9/1000, $10}'; echo
done; done; done; done
