#!/bin/sh
# Registered windows against staged plans and Open MPI (docs/results/shm-window-2026-11-25.md):
# P = 2 and 4, 1-64 MiB, the same processes running ccoll and MPI_Allreduce in alternating blocks,
# each configuration run REPS times, staged and windowed runs alternating. Run on a quiet machine:
#
#   docs/results/shm-window-2026-11-25/run.sh [BUILD_DIR [OUT_DIR [REPS [FIRST]]]]
#
# (about 50 s a repetition; FIRST numbers the first repetition, default 1, so a later series adds
# to an earlier one's folder).
#
# BUILD_DIR must hold ccoll_perf built with MPI. Raw logs and JSON go to OUT_DIR (default: next to
# this script); summarize.py OUT_DIR prints the tables.
set -eu
script_dir=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
here=${2:-$script_dir}
reps=${3:-3}
first=${4:-1}
mkdir -p "$here"
perf_bin=$build/benchmarks/ccoll_perf
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run() {  # run LOG CMD...: the command and its output into LOG, bounded in time
  log=$1
  shift
  { echo "# command: $*"; echo "# date: $(date -u '+%F %T') UTC; load: $(cut -d' ' -f1-3 /proc/loadavg)"; } >"$here/$log"
  timeout 300 "$@" >>"$here/$log" 2>&1 || echo "# exit status $?" >>"$here/$log"
}
{
  echo "# $(date -u '+%F %T') UTC, host $(hostname)"
  grep -m1 'model name' /proc/cpuinfo
  echo "# cores: $(nproc); load: $(cut -d' ' -f1-3 /proc/loadavg); kernel $(uname -r)"
  git -C "$script_dir" rev-parse --short HEAD 2>/dev/null | sed 's/^/# commit /' || true
} >"$here/environment.txt"

rep=$first
while [ "$rep" -lt $((first + reps)) ]; do
  for p in 2 4; do
    for window in 0 1; do
      # In a window every algorithm runs the same direct path: one is enough.
      algos=ring,direct,dbtree
      [ "$window" = 1 ] && algos=ring
      run "p$p-w$window-r$rep.txt" mpirun --oversubscribe -np $p "$perf_bin" --transport shm \
        --peer mpi -a $algos --window $window -b 1M -e 64M -f 2 -n 10 -w 3 -r 3 \
        --json "$here/p$p-w$window-r$rep.json"
    done
  done
  rep=$((rep + 1))
done
python3 "$script_dir/summarize.py" "$here"
