#!/bin/sh
# Large messages at P = 2 and 4 and handoffs between oversubscribed ranks, on the shared-memory
# transport (docs/results/shm-large-2026-11-24.md). Run on a quiet machine:
#
#   docs/results/shm-large-2026-11-24/run.sh [BUILD_DIR [OUT_DIR]]   (default: build; 4 min at load 8, less quiet)
#
# BUILD_DIR must hold ccoll_perf, bench_oversubscribed_handoff and bench_slot_handoff
# (cmake --build BUILD_DIR --target ccoll_perf bench_oversubscribed_handoff bench_slot_handoff).
# Raw logs and JSON go to OUT_DIR (default: next to this script); the summary table is printed at
# the end.
set -eu
script_dir=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
here=${2:-$script_dir}
mkdir -p "$here"
perf_bin=$build/benchmarks/ccoll_perf
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run() {  # run LOG CMD...: the command and its output into LOG, bounded in time
  log=$1
  shift
  { echo "# command: $*"; echo "# date: $(date -u '+%F %T') UTC; load: $(cut -d' ' -f1-3 /proc/loadavg)"; } >"$here/$log"
  timeout 150 "$@" >>"$here/$log" 2>&1 || echo "# exit status $?" >>"$here/$log"
}
{
  echo "# $(date -u '+%F %T') UTC, host $(hostname)"
  grep -m1 'model name' /proc/cpuinfo
  echo "# cores: $(nproc); load: $(cut -d' ' -f1-3 /proc/loadavg); kernel $(uname -r)"
  git -C "$here" rev-parse --short HEAD 2>/dev/null | sed 's/^/# commit /' || true
} >"$here/environment.txt"

# 1. One handoff between two processes, same core and two cores, each kind of wait.
run handoff.txt "$build/benchmarks/bench_oversubscribed_handoff" 0.3
# 2. The slot copy between two cores, cached against streamed stores.
run slot_handoff.txt "$build/benchmarks/bench_slot_handoff" 256 1024
# 3. The targets: ccoll and Open MPI on the same processes, alternating blocks per size.
for p in 2 4; do
  run "p$p.txt" mpirun --oversubscribe -np $p "$perf_bin" --transport shm --peer mpi \
    -a ring,direct,dbtree -b 16M -e 64M -f 4 -n 10 -w 3 -r 3 --json "$here/p$p.json"
done
# 4. Why P = 4 stays where it is: the ring with each kind of slot store and slot size, then with
#    the ranks pinned so that ring neighbours share a core (0,1 | 2,3) or never do (0,2 | 1,3).
p4ring() {  # p4ring NAME [ccoll_perf flags...]
  name=$1
  shift
  run "p4-ring-$name.txt" mpirun --oversubscribe -np 4 "$perf_bin" --transport shm -a ring \
    -b 16M -e 64M -f 4 -n 10 -w 3 -r 3 -m 0 --json "$here/p4-ring-$name.json" "$@"
}
p4ring streamed-1M --slot_stores streamed
p4ring cached-1M --slot_stores cached
p4ring cached-256K --slot_stores cached --slot_bytes 256K
p4ring streamed-4M --slot_stores streamed --slot_bytes 4M
pinned() {  # pinned NAME CPU-EXPRESSION [ccoll_perf flags...]: each rank pinned by taskset
  name=$1
  cpu=$2
  shift 2
  run "p4-ring-pinned-$name.txt" mpirun --oversubscribe -np 4 sh -c \
    "exec taskset -c $cpu \"\$0\" \"\$@\"" "$perf_bin" --transport shm -a ring -b 16M -e 64M -f 4 \
    -n 10 -w 3 -r 3 -m 0 --json "$here/p4-ring-pinned-$name.json" "$@"
}
pinned neighbours-streamed '$((OMPI_COMM_WORLD_RANK / 2))' --slot_stores streamed
pinned neighbours-cached '$((OMPI_COMM_WORLD_RANK / 2))' --slot_stores cached
pinned apart '$((OMPI_COMM_WORLD_RANK % 2))'
# 5. Where the time goes at P = 4 (perf, cpu-clock samples of the ranks), if perf is installed.
if command -v perf >/dev/null 2>&1; then
  perf record -q -e cpu-clock -F 1000 -g -o "$here/p4-ring.perf.data" -- mpirun --oversubscribe \
    -np 4 "$perf_bin" --transport shm -a ring -b 64M -e 64M -n 20 -w 2 -c 0 -m 0 \
    >"$here/p4-ring.perf.txt" 2>&1 || true
  perf report -i "$here/p4-ring.perf.data" --no-children --sort symbol --stdio -g none 2>/dev/null |
    grep '%' | sed 's/ *- *- *$//' | head -30 >"$here/p4-ring.profile.txt" || true
  perf script -i "$here/p4-ring.perf.data" >"$here/p4-ring.perf.script" 2>/dev/null || true
  python3 "$script_dir/summarize.py" --shares "$here/p4-ring.perf.script" >"$here/p4-ring.shares.txt" || true
  rm -f "$here/p4-ring.perf.script"
  rm -f "$here/p4-ring.perf.data"
fi
python3 "$script_dir/summarize.py" "$here"
