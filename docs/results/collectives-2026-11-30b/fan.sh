#!/usr/bin/env bash
# fan.c on the hetero lab (4 hosts, 1gbit, the slow host at 250mbit) with the hosts' TCP set to
# each congestion control in turn, twice: fan.sh OUT_DIR [B] [REPS]   (root: network namespaces)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
out=$1 bytes=${2:-4194304} reps=${3:-8}
mkdir -p "$out"
mpicc -O2 -o "$out/fan" "$here/fan.c" || exit 1
trap 'scripts/netlab down >/dev/null 2>&1 || true' EXIT
for round in 1 2; do
  for cc in bbr reno; do
    scripts/netlab down >/dev/null 2>&1 || true
    scripts/netlab up --hosts 4 --scenario hetero --rate 1gbit --cc "$cc" >/dev/null 2>&1
    scripts/netlab status | head -1 >"$out/fan-$cc-$round.txt"
    scripts/netlab run --timeout 300 -- -np 4 "$out/fan" "$bytes" "$reps" >>"$out/fan-$cc-$round.txt" 2>&1
    echo "$cc round $round rc=$?"
  done
done
