#!/usr/bin/env bash
# The ring at P = 2 on staged buffers, 1-8 MiB, against Open MPI in the same processes (--peer
# mpi: alternating blocks, best of 5 each), with the FIFO knobs one at a time.
#   docs/results/shm-large-2026-11-30/knobs.sh [BUILD_DIR]   (default build-perf)
P=${1:-build-perf}/benchmarks/ccoll_perf
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for knobs in "" "--slot_bytes 64K" "--slot_bytes 256K" "--nslots 8" "--nchannels 2" "--slot_stores cached" "--slot_stores streamed"; do
  echo "=== knobs: ${knobs:-default}"
  timeout 120 mpirun --oversubscribe -np 2 $P --transport shm --peer mpi -a ring -b 1M -e 8M -f 2 -n 20 -w 5 -r 5 -m 0 $knobs 2>&1 | grep -E "^ +[0-9]" 
done
