#!/usr/bin/env bash
# The figures of docs/results/collectives-2026-11-30b.md (the script of collectives-2026-11-29c.md,
# run on the lab with its hosts' TCP set to reno): reduce-scatter and all-gather through the
# equal-share forest (forest/equal_share.hpp) against the ring on the network lab
# (docs/netlab.md: network namespaces on this VM, links shaped with tbf), with Open MPI's
# MPI_Reduce_scatter_block / MPI_Allgather in the same processes (--peer mpi, alternating
# blocks), fp32, and the simulator's prediction of each plan on the lab's own topology.
#   racks:  2 racks of 2 hosts x 2 ranks, hosts at RATE, the racks joined by a RATE/4 uplink;
#   hetero: 4 hosts of 1 rank, one at RATE/4 (a star: the forest's bound is the ring's there).
#
#   run.sh BUILD OUT_DIR          (root: the lab needs network namespaces)
# MPIARGS: mpirun options before -np (e.g. "--mca btl_tcp_eager_limit 4194304").
# COLLECTIVES and ALGOS choose others (collectives-2026-11-29d.md: broadcast and reduce, root 0).
set -uo pipefail
cd "$(dirname "$0")/../../.."
build=$1 out=$2
perf=$build/benchmarks/ccoll_perf ccoll=$build/tools/ccoll
RATE=${RATE:-1gbit} SIZE=${SIZE:-16M} ITERS=${ITERS:-3}
COLLECTIVES=${COLLECTIVES:-reduce_scatter all_gather} ALGOS=${ALGOS:-ring,forest}
mkdir -p "$out"
trap 'scripts/netlab down >/dev/null 2>&1 || true' EXIT
lab() {  # name ranks, then netlab up options
  local name=$1 np=$2
  shift 2
  scripts/netlab down >/dev/null 2>&1 || true
  scripts/netlab up --rate "$RATE" "$@"
  scripts/netlab status >"$out/$name.lab.txt"
  scripts/netlab topology >"$out/$name.topology.json"
  for c in $COLLECTIVES; do
    "$ccoll" simulate --topology "$out/$name.topology.json" --collective "$c" --algo "$ALGOS" \
      --bytes "$SIZE" >"$out/$name-$c.sim.txt" 2>&1
    echo "sim $name $c rc=$?"
    # shellcheck disable=SC2086  # MPIARGS: mpirun options, word-split on purpose
    scripts/netlab run --timeout 1200 -- ${MPIARGS:-} -np "$np" "$perf" --transport mpi-hybrid \
      --topology "$out/$name.topology.json" -C "$c" -a "$ALGOS" --peer mpi -b "$SIZE" \
      -e "$SIZE" -n "$ITERS" -w 1 -r 2 -m 0 --timeout 600000 --json "$out/$name-$c.json" \
      >"$out/$name-$c.txt" 2>&1
    echo "run $name $c rc=$?"
  done
}
lab racks 8 --hosts 4 --ranks-per-host 2 --scenario racks
lab hetero 4 --hosts 4 --scenario hetero
