#!/bin/sh
# Simple against packed LowLatency per size (docs/results/small-messages-2026-11-28.md): P = 2, 3
# and 4 processes on shared memory, `auto`'s algorithms with every plan forced into one protocol,
# 4 B..64 KiB, MPI_Allreduce (Open MPI) timed in alternating blocks in the same processes; the
# protocols alternate run by run, REPS times.
#
#   docs/results/small-messages-2026-11-28/protocols.sh BUILD [OUT_DIR [REPS]]
set -eu
script_dir=$(cd "$(dirname "$0")" && pwd)
build=${1:?build directory}
here=${2:-$script_dir}
reps=${3:-3}
mkdir -p "$here"
# shellcheck source=run_logged.sh
. "$script_dir/run_logged.sh"
rep=1
while [ "$rep" -le "$reps" ]; do
  for p in 2 3 4; do
    iters=20000
    [ "$p" -gt 2 ] && iters=5000
    for pr in ll simple; do
      run "proto-p$p-$pr-r$rep.txt" mpirun --oversubscribe -np "$p" "$build/benchmarks/ccoll_perf" \
        --transport shm --peer mpi -a auto --protocol "$pr" -b 4 -e 64K -f 2 -n "$iters" \
        -w $((iters / 10)) -r 3 -m 0 --json "$here/proto-p$p-$pr-r$rep.json"
    done
  done
  rep=$((rep + 1))
done
