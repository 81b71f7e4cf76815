#!/bin/sh
# The default `auto` (per-size algorithm and protocol) against MPI_Allreduce on one host
# (docs/results/small-messages-2026-11-28.md): P = 2, 3 and 4 processes on shared memory,
# 4 B..64 KiB, the peer timed in alternating blocks in the same processes, REPS runs each:
#   - Open MPI (mpirun, BUILD): accept-p<P>-auto-r<k>.json
#   - MPICH (mpiexec.mpich, MPICH_BUILD; optional): accept-p<P>-mpich-r<k>.json
#   - Gloo over TCP on loopback (BUILD, with Gloo): accept-p<P>-gloo-r<k>.json
#
#   docs/results/small-messages-2026-11-28/acceptance.sh BUILD [OUT_DIR [REPS [MPICH_BUILD]]]
#
# MPICH_BUILD: ccoll_perf configured with -DMPI_CXX_COMPILER=/usr/bin/mpicxx.mpich
# -DMPI_C_COMPILER=/usr/bin/mpicc.mpich -DMPIEXEC_EXECUTABLE=/usr/bin/mpiexec.mpich.
set -eu
script_dir=$(cd "$(dirname "$0")" && pwd)
build=${1:?build directory}
here=${2:-$script_dir}
reps=${3:-3}
mpich_build=${4:-}
mkdir -p "$here"
# shellcheck source=run_logged.sh
. "$script_dir/run_logged.sh"
{
  echo "# $(date -u '+%F %T') UTC, host $(hostname)"
  grep -m1 'model name' /proc/cpuinfo
  echo "# cores: $(nproc); load: $(cut -d' ' -f1-3 /proc/loadavg); kernel $(uname -r)"
  git -C "$script_dir" rev-parse --short HEAD 2>/dev/null | sed 's/^/# commit /' || true
  mpirun --version 2>&1 | head -1
  [ -n "$mpich_build" ] && mpiexec.mpich --version 2>&1 | grep -m1 Version
} >"$here/environment.txt"
rep=1
while [ "$rep" -le "$reps" ]; do
  for p in 2 3 4; do
    iters=20000
    [ "$p" -gt 2 ] && iters=5000
    common="--transport shm -a auto -b 4 -e 64K -f 2 -n $iters -w $((iters / 10)) -r 3 -m 0"
    # shellcheck disable=SC2086
    run "accept-p$p-auto-r$rep.txt" mpirun --oversubscribe -np "$p" \
      "$build/benchmarks/ccoll_perf" $common --peer mpi --json "$here/accept-p$p-auto-r$rep.json"
    if [ -n "$mpich_build" ]; then
      # MPICH's ranks busy-poll: with more ranks than cores a call takes milliseconds, so few
      # calls and sizes there.
      mpich=$common
      [ "$p" -gt 2 ] && mpich="--transport shm -a auto -b 4 -e 64K -f 4 -n 20 -w 2 -r 3 -m 0"
      # shellcheck disable=SC2086
      run "accept-p$p-mpich-r$rep.txt" mpiexec.mpich -n "$p" \
        "$mpich_build/benchmarks/ccoll_perf" $mpich --peer mpi \
        --json "$here/accept-p$p-mpich-r$rep.json"
    fi
    # A Gloo call over loopback TCP takes milliseconds here: fewer calls and sizes.
    # shellcheck disable=SC2086
    run "accept-p$p-gloo-r$rep.txt" mpirun --oversubscribe -np "$p" \
      "$build/benchmarks/ccoll_perf" --transport shm -a auto -b 4 -e 64K -f 4 -n 100 -w 10 -r 3 \
      -m 0 --peer gloo --json "$here/accept-p$p-gloo-r$rep.json"
  done
  rep=$((rep + 1))
done
