#!/usr/bin/env bash
# Traces the slow host h3 of the hetero lab (its eth0 tx and rx byte counters every 5 ms) during one
# ccoll_perf run on it: trace.sh OUT "ccoll_perf args" (CC: the hosts' TCP, via sysctl). Bucketed
# by trace_summary.py.
set -uo pipefail
cd "$(dirname "$0")/../../.."
out=$1; args=$2
mkdir -p $out
trap 'scripts/netlab down >/dev/null 2>&1 || true' EXIT
scripts/netlab down >/dev/null 2>&1 || true
scripts/netlab up --rate ${RATE:-1gbit} --hosts 4 --scenario hetero >/dev/null 2>&1
[[ -z ${CC:-} ]] || for h in 0 1 2 3; do ip netns exec ccoll-lab-h$h sysctl -q -w net.ipv4.tcp_congestion_control=$CC; done
scripts/netlab topology >"$out/topo.json"
ip netns exec ccoll-lab-h3 bash -c 'for i in $(seq 1 4000); do read t < /sys/class/net/eth0/statistics/tx_bytes; read x < /sys/class/net/eth0/statistics/rx_bytes; echo "$(date +%s.%N) $t $x"; sleep 0.005; done' > $out/h3.trace &
tp=$!
scripts/netlab run --timeout 600 -- -np 4 ${BUILD:-build-perf}/benchmarks/ccoll_perf --transport mpi-hybrid \
    --topology "$out/topo.json" -b 16M -e 16M -m 0 --timeout 600000 $args > $out/run.txt 2>&1
kill $tp 2>/dev/null
grep -E '^\s+[0-9]+ ' $out/run.txt
