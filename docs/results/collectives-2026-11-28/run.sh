#!/usr/bin/env bash
# The collectives' figures of docs/results/collectives-2026-11-28.md: ccoll's reduce-scatter,
# all-gather, broadcast and reduce on shared memory against Open MPI's in the same processes
# (ccoll_perf --peer mpi: alternating blocks, best of -r each), and allreduce before and after the
# change, alternating builds.
#
#   run.sh NEW_BUILD OLD_BUILD OUT_DIR
#
# NEW_BUILD / OLD_BUILD: build directories whose benchmarks/ccoll_perf to run (OLD: the commit
# before the collectives, for the allreduce A/B). Logs and JSON go to OUT_DIR.
set -euo pipefail
new=$1/benchmarks/ccoll_perf old=$2/benchmarks/ccoll_perf out=$3
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi() { timeout 900 mpirun -np "$1" --oversubscribe --bind-to none "${@:2}"; }

# 1. Bandwidth: P = 2 and 4, 16 and 64 MiB, fp32 (sum for the reductions).
for c in reduce_scatter all_gather broadcast reduce; do
  for p in 2 4; do
    mpi "$p" "$new" --transport shm --peer mpi -C "$c" -b 16M -e 64M -f 4 -n 10 -w 3 -r 3 -m 0 \
      --json "$out/bw-$c-p$p.json" >"$out/bw-$c-p$p.txt" 2>&1
  done
done

# 2. Latency: P = 2, 3, 4, 8 B .. 4 KiB.
for c in reduce_scatter all_gather broadcast reduce; do
  for p in 2 3 4; do
    mpi "$p" "$new" --transport shm --peer mpi -C "$c" -b 8 -e 4K -f 8 -n 200 -w 20 -r 3 -m 0 \
      --json "$out/lat-$c-p$p.json" >"$out/lat-$c-p$p.txt" 2>&1
  done
done

# 3. Allreduce before and after, alternating builds, 16 and 64 MiB, P = 2 and 4, ring.
for round in 1 2 3; do
  for build in old new; do
    bin=$old; [ "$build" = new ] && bin=$new
    for p in 2 4; do
      mpi "$p" "$bin" --transport shm -a ring -b 16M -e 64M -f 4 -n 10 -w 3 -m 0 \
        --json "$out/ab-$build-p$p-r$round.json" >"$out/ab-$build-p$p-r$round.txt" 2>&1
    done
  done
done
echo "done: $out"
