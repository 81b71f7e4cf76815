#!/usr/bin/env bash
# ccoll_perf on the hetero lab (4 hosts, the last at RATE/4) once per argument string, each a run
# of -C C at SIZE over mpi-hybrid: sweep.sh OUT "-a forest" "-a ring --nslots 8" ...
# CC: the hosts' TCP congestion control; MPIARGS: mpirun options. Prints each run's time (us).
set -uo pipefail
cd "$(dirname "$0")/../../.."
out=$1; shift
RATE=${RATE:-1gbit} SIZE=${SIZE:-16M} C=${C:-reduce_scatter}
mkdir -p "$out"
trap 'scripts/netlab down >/dev/null 2>&1 || true' EXIT
scripts/netlab down >/dev/null 2>&1 || true
scripts/netlab up --rate "$RATE" --hosts 4 --scenario hetero --cc "${CC:-default}" >/dev/null
scripts/netlab topology >"$out/topo.json"
i=0
for cfg in "$@"; do
  i=$((i+1))
  # shellcheck disable=SC2086  # MPIARGS and each argument string: word-split on purpose
  scripts/netlab run --timeout 600 -- ${MPIARGS:-} -np 4 ${BUILD:-build-perf}/benchmarks/ccoll_perf --transport mpi-hybrid \
    --topology "$out/topo.json" -C "$C" -b "$SIZE" -e "$SIZE" -n ${ITERS:-3} -w 1 -r 2 -m 0 --timeout 600000 $cfg \
    >"$out/run$i.txt" 2>&1
  echo "$cfg => $(grep -E '^\s+[0-9]+ ' "$out/run$i.txt" | awk '{print $5}' | tr '\n' ' ') rc=$?"
done
