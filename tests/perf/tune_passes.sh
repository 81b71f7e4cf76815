#!/usr/bin/env bash
# ccoll_perf --tune in passes, end to end: a threads run and a shared-memory run with 2 passes
# write one table, a JSON report of the median rows and a CSV; the medians' table and the rules
# are printed once, after the passes; under mpirun, --tune_passes above 1 is refused (exit 2)
# and the default there is one pass.
# Usage: tests/perf/tune_passes.sh CCOLL_PERF [MPIEXEC [MPIEXEC_FLAGS...]]
#   (ctest: perf_tune_passes, label mpi)
set -euo pipefail
perf=$1
mpiexec=${2:-}
mpiexec_flags=("${@:3}")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

for transport in threads shm; do
  out="$dir/$transport.txt"
  "$perf" --transport "$transport" -t 2 -b 8 -e 512 -f 8 -n 2 -w 1 -m 0 -a ring,direct \
    --tune "$dir/$transport-table.json" --tune_passes 2 --json "$dir/$transport.json" \
    --csv "$dir/$transport.csv" >"$out" || fail "$transport: exit status $?"
  [ "$(grep -c '^# --tune: pass [12] of 2, in a fresh process$' "$out")" -eq 2 ] ||
    fail "$transport: two passes, each announced once"
  grep -q "median time per call (us) over 2 passes" "$out" || fail "$transport: no medians' table"
  [ "$(grep -c '^# tuned: allreduce on 2 ranks' "$out")" -eq 1 ] || fail "$transport: rules once"
  grep -q '"rules"' "$dir/$transport-table.json" || fail "$transport: no table written"
  grep -q '"tune_passes": 2' "$dir/$transport.json" || fail "$transport: JSON without tune_passes"
  # 2 candidates x 3 sizes: one median row each, in the JSON and the CSV.
  [ "$(grep -c '"algo": ' "$dir/$transport.json")" -eq 6 ] || fail "$transport: JSON rows"
  [ "$(($(wc -l <"$dir/$transport.csv") - 1))" -eq 6 ] || fail "$transport: CSV rows"
  if grep -q '"wrong": [1-9]' "$dir/$transport.json"; then fail "$transport: wrong results"; fi
  # No pass leaves its report behind.
  if ls "${TMPDIR:-/tmp}"/ccoll_perf_tune.* >/dev/null 2>&1 &&
    grep -l "$dir" "${TMPDIR:-/tmp}"/ccoll_perf_tune.*/* >/dev/null 2>&1; then
    fail "$transport: a pass's report was left in ${TMPDIR:-/tmp}"
  fi
done

if [ -n "$mpiexec" ]; then
  rc=0
  "$mpiexec" -n 2 "${mpiexec_flags[@]}" "$perf" --transport shm -b 8 -e 8 -m 0 -a ring \
    --tune "$dir/mpi-table.json" --tune_passes 2 >"$dir/mpi.txt" 2>&1 || rc=$?
  [ "$rc" -ne 0 ] || fail "mpirun: --tune_passes 2 accepted"
  grep -q "under mpirun the ranks are mpirun's processes" "$dir/mpi.txt" ||
    fail "mpirun: no explanation"
  "$mpiexec" -n 2 "${mpiexec_flags[@]}" "$perf" --transport shm -b 8 -e 8 -m 0 -a ring \
    --tune "$dir/mpi-table.json" --json "$dir/mpi.json" >"$dir/mpi.txt" 2>&1 ||
    fail "mpirun: one pass: exit status $?"
  grep -q '"tune_passes": 1' "$dir/mpi.json" || fail "mpirun: default is not one pass"
fi
echo "perf_tune_passes: ok"
