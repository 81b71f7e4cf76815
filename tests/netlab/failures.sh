#!/usr/bin/env bash
# Failure injection on the network lab (docs/mpi.md, "Failures"): a host's link is cut, or every
# rank of a host is killed, in the middle of a stream of 16 MiB allreduces over transport::Mpi.
# Passes when every surviving rank reports a ccoll::Error (ccoll_perf prints "rank R: ...") within
# its deadline (--timeout, here 3 s) plus a margin, nothing hangs (every command is bounded), and
# the lab leaves nothing behind.
#
#   tests/netlab/failures.sh [build/benchmarks/ccoll_perf]       # needs root and scripts/netlab
set -euo pipefail
cd "$(dirname "$0")/../.."
PERF=${1:-build/benchmarks/ccoll_perf}
LOG=${CCOLL_FAILURES_LOG:-/tmp/ccoll-netlab-failures}
mkdir -p "$LOG"
trap 'scripts/netlab down >/dev/null 2>&1 || true' EXIT
fail=0

# scenario <name> <action: cut|kill> <transport>
scenario() {
  local name=$1 action=$2 transport=$3 t0 t1 out="$LOG/$1.txt"
  scripts/netlab down >/dev/null 2>&1 || true
  scripts/netlab up --hosts 3 --rate 1gbit >/dev/null 2>&1
  t0=$(date +%s.%N)
  # Open MPI ends the whole job when a process dies unless recovery is on: with it, the
  # survivors keep running and must find out by themselves.
  scripts/netlab run --timeout 40 -- -np 3 --enable-recovery "$PERF" --transport "$transport" \
    -a ring -b 16M -e 16M -n 100000 -w 0 -c 0 -m 0 --timeout 3000 >"$out" 2>&1 &
  local run=$!
  sleep 4
  local t_fail
  t_fail=$(date +%s.%N)
  scripts/netlab "$action" h2 >/dev/null 2>&1
  wait "$run" || true
  t1=$(date +%s.%N)
  local reported
  reported=$(grep -c "ccoll_perf: rank [01]:" "$out" || true)
  echo "$name: $action h2 at +$(awk -v a="$t0" -v b="$t_fail" 'BEGIN{printf "%.1f", b-a}') s;" \
    "survivors reporting an error: $reported of 2; run ended +$(awk -v a="$t_fail" -v b="$t1" 'BEGIN{printf "%.1f", b-a}') s after the failure"
  grep "ccoll_perf: rank" "$out" | sed 's/^/    /' | head -4
  [[ $reported -eq 2 ]] || fail=1
}

scenario cut-mpi cut mpi
scenario kill-mpi kill mpi
scripts/netlab down >/dev/null
left=$(ip netns list | grep -c ccoll-lab || true)
echo "namespaces left after down: $left"
[[ $left -eq 0 ]] || fail=1
exit $fail
