#!/usr/bin/env bash
# Issue 2, item 9: ccoll SharedMemory against Open MPI's MPI_Allreduce and against the memory
# bounds, fp32 sum, P = 2 and 4, 16 and 64 MiB, every algorithm, repeated REPS times (the machine
# is shared, so one run proves little). Each run puts both libraries in the same mpirun invocation
# and times them in alternating blocks per size (-r 3: MPI, ccoll, MPI, ccoll, MPI, ccoll; the
# best block of each), so that they see the same load; the warm-up (-w 5) covers the first call
# of a size and the slot-store tuner's four timed trial calls (runtime/slot_store_tuner.hpp). Before
# each run, bench_slot_handoff (if built) records how fast the two CPUs hand data to each other,
# which on the development VM changes with the placement of its virtual CPUs.
# benchmarks/ccoll_perf/summarize_issue2.py aggregates the runs.
#
#   benchmarks/ccoll_perf/issue2_shm_vs_mpi.sh [ccoll_perf binary] [output dir] [reps]
#
# Environment: RT=1 runs every command under SCHED_FIFO (chrt -f 1) so that other jobs on the
# machine do not take the CPUs during the measurement (needs root; the kernel still keeps 5% of
# every second for other tasks); ALGOS=ring,direct limits the algorithms (default: the five host algorithms).
set -euo pipefail
BIN=${1:-build/benchmarks/ccoll_perf}
OUT=${2:-issue2-results}
REPS=${3:-3}
ALGOS=${ALGOS:-ring,dbtree,tree,tree-overlap,direct}
HANDOFF=$(dirname "$BIN")/bench_slot_handoff
PREFIX=()
if [ "${RT:-0}" = 1 ]; then PREFIX=(chrt -f 1); fi
MPIRUN=(mpirun --allow-run-as-root --oversubscribe)
mkdir -p "$OUT"
{
  echo "# date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "# cpu: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores"
  echo "# mpirun: $(mpirun --version | head -1)"
  echo "# scheduling: ${PREFIX[*]:-default (SCHED_OTHER)}"
} > "$OUT/environment.txt"
for rep in $(seq 1 "$REPS"); do
  for p in 2 4; do
    tag="p$p-r$rep"
    echo "# uptime before: $(uptime)" > "$OUT/$tag.txt"
    if [ -x "$HANDOFF" ]; then
      "${PREFIX[@]}" "$HANDOFF" 64 > "$OUT/$tag.handoff.txt" 2>&1 || true
    fi
    args=(--transport shm --peer mpi -b 16M -e 64M -f 4 -w 5 -r 3 -a "$ALGOS"
          --json "$OUT/$tag.json")
    echo "# command: ${PREFIX[*]} ${MPIRUN[*]} -np $p $BIN ${args[*]}" >> "$OUT/$tag.txt"
    "${PREFIX[@]}" "${MPIRUN[@]}" -np "$p" "$BIN" "${args[@]}" >> "$OUT/$tag.txt" 2>&1
    echo "# uptime after: $(uptime)" >> "$OUT/$tag.txt"
    echo "done $tag: $(uptime | sed 's/.*load/load/')"
  done
done
