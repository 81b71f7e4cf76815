#!/usr/bin/env bash
# The runs of docs/results/peers-gloo-mpich.md: ccoll against Gloo (--peer gloo, Open MPI's mpirun)
# and against two MPI libraries (--peer mpi with Open MPI, then with MPICH, alternating), on this
# host only, P = 2 and 4. Each configuration runs the sweep 8 B..64 MiB by 8 and the pair of sizes
# 64 KiB and 64 MiB. Outputs (text and JSON) go to $OUT (default /tmp/peers); $EXTRA is added to
# every ccoll_perf command line (e.g. EXTRA="-r 3": best of 3 alternating blocks).
#   usage: peers_gloo_mpich.sh OPENMPI_BUILD MPICH_BUILD
set -uo pipefail
OMPI_BUILD=${1:?Open MPI build directory}
MPICH_BUILD=${2:?MPICH build directory}
OUT=${OUT:-/tmp/peers}
mkdir -p "$OUT"
ompi=(mpirun --allow-run-as-root --oversubscribe)
mpich=(mpiexec.mpich)
sweeps=("-b 8 -e 64M -f 8" "-b 64K -e 64M -f 1024")
run() {  # name, launcher..., -- ccoll_perf args
  local name=$1
  shift
  echo "== $name: $*"
  # shellcheck disable=SC2068
  timeout 900 $@ ${EXTRA:-} --json "$OUT/$name.json" >"$OUT/$name.txt" 2>&1
  echo "rc=$?" >>"$OUT/$name.txt"
  tail -1 "$OUT/$name.txt"
}
for p in 2 4; do
  for s in 0 1; do
    for t in mpi-hybrid mpi; do
      run "mpich-p$p-$t-s$s" "${mpich[@]}" -n "$p" "$MPICH_BUILD/benchmarks/ccoll_perf" \
        --transport "$t" --peer mpi -a ring,dbtree,tree-overlap ${sweeps[$s]}
      run "ompi-p$p-$t-s$s" "${ompi[@]}" -np "$p" "$OMPI_BUILD/benchmarks/ccoll_perf" \
        --transport "$t" --peer mpi -a ring,dbtree,tree-overlap ${sweeps[$s]}
    done
    for t in mpi-hybrid shm; do
      run "gloo-p$p-$t-s$s" "${ompi[@]}" -np "$p" "$OMPI_BUILD/benchmarks/ccoll_perf" \
        --transport "$t" --peer gloo -a ring,dbtree ${sweeps[$s]}
    done
  done
done
