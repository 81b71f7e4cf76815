#!/usr/bin/env bash
# auto against ring and direct and against Open MPI in the same processes (mpirun: the processes
# every user of libccoll_mpi.so has, where the staged direct plan once lost 2.3x to the ring),
# allreduce on staged buffers, P = 2, 3, 4, 1 MiB to 64 MiB.
#   docs/results/auto-tuning-2026-11-30/mpi_large.sh BUILD_DIR OUT_DIR
set -euo pipefail
build=$1 out=$2
mkdir -p "$out"
for p in 2 3 4; do
  stdbuf -oL mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$p" \
    "$build/benchmarks/ccoll_perf" --transport shm --peer mpi -a auto,ring,direct -b 1M -e 64M \
    -f 2 -n 10 -w 3 -r 3 -m 0 --json "$out/allreduce-p$p-mpi.json" >"$out/allreduce-p$p-mpi.txt" 2>&1
done
