#!/usr/bin/env bash
# Issue 2, item 9: ccoll SharedMemory against Open MPI's MPI_Allreduce and against the memory
# bound, fp32 sum, P = 2 and 4, 16 and 64 MiB, repeated REPS times (the machine is shared, so one
# run proves little). Each run puts both libraries in the same mpirun invocation and times them in
# alternating blocks per size (-r 2: MPI, ccoll, MPI, ccoll; the best block of each), so that they
# see the same load; benchmarks/ccoll_perf/summarize_issue2.py aggregates the runs.
#
#   benchmarks/ccoll_perf/issue2_shm_vs_mpi.sh [ccoll_perf binary] [output dir] [reps]
set -euo pipefail
BIN=${1:-build/benchmarks/ccoll_perf}
OUT=${2:-issue2-results}
REPS=${3:-3}
MPIRUN=(mpirun --allow-run-as-root --oversubscribe)
mkdir -p "$OUT"
{
  echo "# date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "# cpu: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores"
  echo "# mpirun: $(mpirun --version | head -1)"
} > "$OUT/environment.txt"
for rep in $(seq 1 "$REPS"); do
  for p in 2 4; do
    tag="p$p-r$rep"
    echo "# uptime before: $(uptime)" > "$OUT/$tag.txt"
    args=(--transport shm --peer mpi -b 16M -e 64M -f 4 -w 2 -r 2 --json "$OUT/$tag.json")
    echo "# command: ${MPIRUN[*]} -np $p $BIN ${args[*]}" >> "$OUT/$tag.txt"
    "${MPIRUN[@]}" -np "$p" "$BIN" "${args[@]}" >> "$OUT/$tag.txt" 2>&1
    echo "# uptime after: $(uptime)" >> "$OUT/$tag.txt"
    echo "done $tag: $(uptime | sed 's/.*load/load/')"
  done
done
