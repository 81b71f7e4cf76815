#!/usr/bin/env bash
# The single-copy bound of a staged all-gather at P = 2: cma_all_gather.c (each process reads its
# peer's block from the peer's own memory with process_vm_readv, as Open MPI's shared-memory
# transport does for large messages) against ccoll's staged plans and Open MPI's MPI_Allgather in
# the same processes, alternating, PASSES times.
#   docs/results/collectives-2026-11-30e/run.sh BUILD_DIR OUT_DIR [PASSES]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$1 out=$2 passes=${3:-3}
mkdir -p "$out"
cc -O2 -Wall -Werror "$here/cma_all_gather.c" -o "$out/cma_all_gather"
for ((pass = 1; pass <= passes; ++pass)); do
  "$out/cma_all_gather" 20 >"$out/cma-pass$pass.txt"
  stdbuf -oL mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 \
    "$build/benchmarks/ccoll_perf" --transport shm --peer mpi -C all_gather -a auto,ring,direct \
    -b 16M -e 64M -f 4 -n 10 -w 3 -r 3 -m 0 --json "$out/ccoll-pass$pass.json" \
    >"$out/ccoll-pass$pass.txt" 2>&1
done
