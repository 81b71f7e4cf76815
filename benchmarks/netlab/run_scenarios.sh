#!/usr/bin/env bash
# The multi-host benchmark of docs/mpi.md: ccoll_perf on the network lab (scripts/netlab), one
# scenario after another, every algorithm paired with the MPI library's MPI_Allreduce on the same
# processes, buffers and sizes (alternating blocks). Each scenario's physical topology is the lab's
# own (scripts/netlab topology: what TCP carries over each shaped link as its bandwidth), which the
# forest plans on.
#
#   benchmarks/netlab/run_scenarios.sh [OUT_DIR]        # default docs/results/netlab-<date>
#   SCENARIOS="hetero racks" SIZE=16M ITERS=2 benchmarks/netlab/run_scenarios.sh /tmp/out
#
# Needs root (network namespaces), a build with MPI (build/benchmarks/ccoll_perf) and Open MPI.
# Leaves no lab behind, also when interrupted.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-docs/results/netlab-$(date -u +%F)}
PERF=${PERF:-build/benchmarks/ccoll_perf}
ALGOS=${ALGOS:-ring,dbtree,tree-phased,tree-overlap,forest,forest-overlap,hdbtree}
SIZE=${SIZE:-64M}
ITERS=${ITERS:-3}
RATE=${RATE:-1gbit}
SCENARIOS=${SCENARIOS:-homogeneous hetero hetero8 racks}
TRANSPORT=${TRANSPORT:-mpi-hybrid}
[[ -x $PERF ]] || { echo "no $PERF: build first (scripts/setup)" >&2; exit 1; }
mkdir -p "$OUT"
trap 'scripts/netlab down >/dev/null 2>&1 || true' EXIT

run() {  # run <name> <ranks> <netlab up options...>
  local name=$1 np=$2
  shift 2
  scripts/netlab down >/dev/null 2>&1 || true
  scripts/netlab up --rate "$RATE" "$@"
  scripts/netlab status >"$OUT/$name.lab.txt"
  scripts/netlab topology >"$OUT/$name.topology.json"
  echo "== $name: $np ranks, netlab up --rate $RATE $*" >&2
  scripts/netlab run --timeout 1800 -- -np "$np" "$PERF" --transport "$TRANSPORT" \
    --topology "$OUT/$name.topology.json" -a "$ALGOS" --peer mpi -b "$SIZE" -e "$SIZE" \
    -n "$ITERS" -w 1 -m 0 --timeout 600000 --json "$OUT/$name.json" | tee "$OUT/$name.txt"
}

for s in $SCENARIOS; do
  case $s in
    homogeneous) run homogeneous 4 --hosts 4 --scenario homogeneous ;;
    hetero) run hetero 4 --hosts 4 --scenario hetero ;;
    hetero8) run hetero8 8 --hosts 8 --scenario hetero ;;
    racks) run racks 8 --hosts 4 --ranks-per-host 2 --scenario racks ;;
    *) echo "unknown scenario $s" >&2; exit 2 ;;
  esac
done
