#!/bin/bash
# Alternates builds per row (binaries /tmp/bin/ccoll_perf.NAME): VARIANTS is a list of
# "NAME EAGER" pairs, EAGER the --eager_rooted value. run2.txt: base 0, box6 0, box5 96, box6 96.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
VARIANTS=${VARIANTS:-"base:0 box6:0 box5:96 box6:96"}
for P in 2 3 4; do for C in broadcast reduce; do for pass in 1 2; do
for v in $VARIANTS; do b=${v%:*}; e=${v#*:}
  printf "%-5s e=%-3s %-9s P=%s: " $b $e $C $P
  timeout 120 mpirun --oversubscribe --bind-to none -np $P /tmp/bin/ccoll_perf.$b --transport shm --peer mpi -C $C --eager_rooted $e -a auto -b 8 -e 64 -f 8 -n 4000 -w 50 -r 3 -m 0 2>&1 | grep -v "^#" | awk '{printf "%s B %s us (mpi %.3f us) %s wrong %s | ", $1, $5, $1/$9/1000, $10, $8}'; echo
done; done; done; done
