#!/usr/bin/env bash
# Concurrent shared-memory jobs in separate PID namespaces, started the way containers start them
# (`unshare -p -f --mount-proc`): every job completes on its own and never meets the other. Pids
# repeat across namespaces (each job's first process is pid 1, and two started in the same clock
# tick share their start time too), so a session named after a pid would join the two jobs
# (transport/session.hpp). Each of PAIRS rounds starts two jobs of one kind at the same moment:
#   perf:    ccoll_perf --transport shm forks its 2 ranks (every algorithm: a session each);
#   example: example_allreduce_shm forks its 2 ranks;
#   derived: a shell starts 2 ranks of example_allreduce_shm with only CCOLL_RANK / CCOLL_SIZE set,
#            so they derive their session from their parent, the shell, pid 1 of its namespace.
# Usage: tests/containers/pid_namespaces.sh [BUILD_DIR] [PAIRS]   (default: build, 12)
#   CCOLL_PIDNS_KINDS: the kinds to run (default: perf example derived)
# Needs root (or user namespaces) to make PID namespaces; exits 77 (skipped) without.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
pairs=${2:-12}
perf="$build/benchmarks/ccoll_perf"
example="$build/examples/example_allreduce_shm"
read -r -a kinds <<<"${CCOLL_PIDNS_KINDS:-perf example derived}"
for kind in "${kinds[@]}"; do
  case $kind in
    perf) exe=$perf ;;
    example | derived) exe=$example ;;
    *) echo "unknown kind '$kind' (perf, example, derived)"; exit 1 ;;
  esac
  [ -x "$exe" ] || { echo "missing $exe (build ccoll_perf and example_allreduce_shm first)"; exit 1; }
done
command -v unshare >/dev/null || { echo "skipped: no unshare"; exit 77; }
unshare -p -f --mount-proc true 2>/dev/null ||
  { echo "skipped: cannot create PID namespaces here (needs root)"; exit 77; }
# Nothing from a launcher may name the session: the jobs must tell themselves apart.
unset CCOLL_SESSION PMIX_NAMESPACE OMPI_MCA_ess_base_jobid SLURM_JOB_ID CCOLL_RANK CCOLL_SIZE \
  OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE PMI_RANK PMI_SIZE PMIX_RANK

work=$(mktemp -d /tmp/ccoll-pidns.XXXXXX)
trap 'rm -rf "$work"' EXIT

# job KIND LOG: one job in a PID namespace of its own, started when the gate opens.
job() {
  local kind=$1 log=$2
  read -r _ <"$work/gate"  # one line each: the round writes both when the jobs are ready
  case $kind in
    perf)
      timeout 120 unshare -p -f --mount-proc "$perf" --transport shm -t 2 -b 4K -e 64K -f 4 \
        -n 5 -w 2 -m 0 ;;
    example)
      timeout 120 unshare -p -f --mount-proc "$example" ;;
    derived)
      # shellcheck disable=SC2016  # expanded by the shell inside the namespace
      timeout 120 unshare -p -f --mount-proc sh -c \
        'CCOLL_SIZE=2 CCOLL_RANK=0 "$0" & r0=$!; CCOLL_SIZE=2 CCOLL_RANK=1 "$0"; r1=$?
         wait "$r0"; r0=$?; exit $((r0 | r1))' "$example" ;;
  esac >"$log" 2>&1
}

failed=0
for kind in "${kinds[@]}"; do
  bad=0
  for ((i = 0; i < pairs; i++)); do
    rm -f "$work/gate"
    mkfifo "$work/gate"
    exec 3<>"$work/gate"  # held open: a job that reaches the gate late still finds its line
    job "$kind" "$work/$kind.$i.a" 3>&- & a=$!
    job "$kind" "$work/$kind.$i.b" 3>&- & b=$!
    sleep 0.05
    printf 'go\ngo\n' >&3  # both jobs start at once
    for p in $a $b; do
      if ! wait "$p"; then
        bad=$((bad + 1))
        log="$work/$kind.$i.$([ "$p" = "$a" ] && echo a || echo b)"
        echo "$kind round $i: a job failed:"; tail -n 5 "$log" | sed 's/^/  | /'
      fi
    done
    exec 3>&-
  done
  echo "$kind: $((2 * pairs - bad)) of $((2 * pairs)) jobs passed ($pairs pairs in separate PID namespaces)"
  failed=$((failed + bad))
done
[ "$failed" -eq 0 ] || { echo "FAILED: $failed jobs"; exit 1; }
echo "all jobs passed"
