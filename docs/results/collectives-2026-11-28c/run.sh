#!/usr/bin/env bash
# The figures of docs/results/collectives-2026-11-28c.md: ccoll's reduce-scatter, all-gather,
# broadcast and reduce on shared memory against MPICH's and Open MPI's in the same processes
# (ccoll_perf --peer mpi: alternating blocks, best of -r each). For each configuration the MPICH
# run and the Open MPI run follow each other.
#
#   run.sh OPENMPI_BUILD MPICH_BUILD OUT_DIR
#
# OPENMPI_BUILD / MPICH_BUILD: build directories whose benchmarks/ccoll_perf to run, the second
# configured with -DMPI_CXX_COMPILER=/usr/bin/mpicxx.mpich (docs/results/peers-gloo-mpich.md).
set -uo pipefail
ompi=$1/benchmarks/ccoll_perf mpich=$2/benchmarks/ccoll_perf out=$3
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run() {  # name, launcher and args..., then ccoll_perf's path and args
  local name=$1
  shift
  timeout 600 "$@" --json "$out/$name.json" >"$out/$name.txt" 2>&1
  echo "rc=$?" >>"$out/$name.txt"
  echo "$name: $(tail -1 "$out/$name.txt")"
}
for c in reduce_scatter all_gather broadcast reduce; do
  for p in 2 4; do
    for lib in mpich ompi; do
      if [ $lib = mpich ]; then launch=(mpiexec.mpich -n "$p" "$mpich"); else
        launch=(mpirun -np "$p" --oversubscribe --bind-to none "$ompi"); fi
      run "bw-$c-p$p-$lib" "${launch[@]}" --transport shm --peer mpi -C "$c" -b 16M -e 64M -f 4 \
        -n 10 -w 3 -r 3 -m 0
      run "lat-$c-p$p-$lib" "${launch[@]}" --transport shm --peer mpi -C "$c" -b 8 -e 4K -f 8 \
        -n 200 -w 20 -r 3 -m 0
    done
  done
done
echo "done: $out"
