#!/bin/sh
# ccoll with registered windows against Gloo and MPICH (docs/results/shm-window-2026-11-25.md):
# P = 2 and 4, 8 B..16 MiB by 8 and 64 MiB, ccoll's `auto` (per-size choice; calls above 64 KiB
# in the window go direct) timed in alternating blocks with the peer in the same processes.
#
#   docs/results/shm-window-2026-11-25/peers.sh OPENMPI_BUILD MPICH_BUILD [OUT_DIR]
#
# OPENMPI_BUILD: ccoll_perf with Open MPI and Gloo (the default build); MPICH_BUILD: ccoll_perf
# configured with -DMPI_CXX_COMPILER=/usr/bin/mpicxx.mpich -DMPI_C_COMPILER=/usr/bin/mpicc.mpich
# -DMPIEXEC_EXECUTABLE=/usr/bin/mpiexec.mpich (docs/results/peers-gloo-mpich.md).
set -eu
script_dir=$(cd "$(dirname "$0")" && pwd)
ompi_build=${1:?Open MPI build directory}
mpich_build=${2:?MPICH build directory}
here=${3:-$script_dir}
mkdir -p "$here"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run() {  # run LOG CMD...: the command and its output into LOG, bounded in time
  log=$1
  shift
  { echo "# command: $*"; echo "# date: $(date -u '+%F %T') UTC; load: $(cut -d' ' -f1-3 /proc/loadavg)"; } >"$here/$log"
  timeout 600 "$@" >>"$here/$log" 2>&1 || echo "# exit status $?" >>"$here/$log"
}
for p in 2 4; do
  for sweep in "-b 8 -e 16M -f 8" "-b 64M -e 64M -f 1"; do
    tag=$(echo "$sweep" | cut -d' ' -f2)
    # shellcheck disable=SC2086
    run "gloo-p$p-$tag.txt" mpirun --oversubscribe -np $p "$ompi_build/benchmarks/ccoll_perf" \
      --transport shm --window 1 --peer gloo -a auto $sweep -n 20 -w 5 -r 3 -m 0 \
      --json "$here/gloo-p$p-$tag.json"
    # shellcheck disable=SC2086
    run "mpich-p$p-$tag.txt" mpiexec.mpich -n $p "$mpich_build/benchmarks/ccoll_perf" \
      --transport shm --window 1 --peer mpi -a auto $sweep -n 20 -w 5 -r 3 -m 0 \
      --json "$here/mpich-p$p-$tag.json"
  done
done
