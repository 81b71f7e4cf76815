#!/usr/bin/env bash
# Two builds of ccoll_perf, alternating case by case: BEFORE (spin_ns fixed at 20 us) and AFTER
# (the spin learned from the waits: sync::WaitPolicy::learned_spin_ns), on forked shared-memory
# processes and host threads, with both ranks free to use both cores and with both on one core
# (taskset -c 0). Each case's output goes to OUT/<case>-<build>-<pass>.txt.
#   docs/results/adaptive-spin-2026-12-01/ab.sh BEFORE_PERF AFTER_PERF OUT [PASSES]
set -uo pipefail
before=$1 after=$2 out=$3 passes=${4:-3}
mkdir -p "$out"
common=(-n 200 -w 10 -r 3 -m 0)
run() {  # case name, cpu list, then ccoll_perf's arguments
  local name=$1 cpus=$2 pass=$3 build perf
  shift 3
  for build in before after; do
    perf=$before
    [ "$build" = after ] && perf=$after
    timeout 300 taskset -c "$cpus" "$perf" "$@" "${common[@]}" >"$out/$name-$build-$pass.txt" 2>&1
    echo "rc=$?" >>"$out/$name-$build-$pass.txt"
  done
}
for pass in $(seq 1 "$passes"); do
  for cpus in 0,1 0; do
    tag=two-cores
    [ "$cpus" = 0 ] && tag=one-core
    run "shm-p2-allreduce-ring-$tag" "$cpus" "$pass" --transport shm -t 2 -a ring -b 8 -e 1M -f 8
    run "shm-p2-broadcast-auto-$tag" "$cpus" "$pass" --transport shm -t 2 -C broadcast -a auto -b 8 -e 4K -f 8
    run "threads-p2-allreduce-auto-$tag" "$cpus" "$pass" --transport threads -t 2 -a auto -b 8 -e 64K -f 8
  done
  # More ranks than cores: no spinning in either build (a control).
  run "shm-p4-allreduce-ring-two-cores" 0,1 "$pass" --transport shm -t 4 -a ring -b 8 -e 1M -f 8
  # Large messages, where the waits are for the peer's copies.
  run "shm-p2-allreduce-ring-large-two-cores" 0,1 "$pass" --transport shm -t 2 -a ring -b 4M -e 16M -f 2 -n 20 -w 3
done
echo "done: $out"
