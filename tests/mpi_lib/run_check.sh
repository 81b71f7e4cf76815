#!/usr/bin/env bash
# tests/mpi_lib/run_check.sh: runs the check program under mpiexec with libccoll_mpi.so and checks
# the report the library prints at MPI_Finalize.
#
#   run_check.sh MPIEXEC NP EXPECT LIB|- PROGRAM [NAME=VALUE ...]
#
# EXPECT is the program's --expect (served, disabled, settings, absent). LIB is put in front of MPI
# with LD_PRELOAD on the ranks only (not on mpiexec itself); "-" loads nothing (a program linked
# with the library, or the run without it). NAME=VALUE pairs are set on every rank, except
# CCOLL_MPI_HOST=rank%K: each rank names host (rank mod K), so that mpi-hybrid sees K emulated
# hosts and mixes shared-memory and message links; RANK<R>:NAME=VALUE sets NAME on rank R only (a
# setting that differs across the ranks). REPORT=MPI_<Name> (not set on the ranks) says
# which function's report line to check (default MPI_Allreduce); SERVED_BY=NAME (repeatable, not
# set on the ranks) requires every rank's report of that function to list "served by NAME" with
# at least one call. Every rank reports
# (CCOLL_MPI_REPORT=all), and each rank's report line must agree with EXPECT.
set -euo pipefail
if [[ $# -lt 5 ]]; then
  sed -n '2,10p' "$0" >&2
  exit 2
fi
mpiexec=$1 np=$2 expect=$3 lib=$4 program=$5
shift 5

launcher=()
if "$mpiexec" --version 2>&1 | grep -qiE "open ?mpi|openrte|open-mpi"; then
  launcher=("$mpiexec" -n "$np" --oversubscribe)
  [[ $(id -u) == 0 ]] && launcher+=(--allow-run-as-root)
  setenv() { launcher+=(-x "$1=$2"); }
else  # MPICH's Hydra and its relatives
  launcher=("$mpiexec" -n "$np")
  setenv() { launcher+=(-genv "$1" "$2"); }
fi
setenv CCOLL_MPI_REPORT all
[[ $lib != - ]] && setenv LD_PRELOAD "$lib"
per_rank=""  # shell statements run by each rank's wrapper before the program
function=MPI_Allreduce
served_by=()
for kv in "$@"; do
  if [[ $kv =~ ^REPORT=(MPI_[A-Za-z_]+)$ ]]; then
    function=${BASH_REMATCH[1]}
  elif [[ $kv =~ ^SERVED_BY=(.+)$ ]]; then
    served_by+=("${BASH_REMATCH[1]}")
  elif [[ $kv =~ ^CCOLL_MPI_HOST=rank%([0-9]+)$ ]]; then
    # shellcheck disable=SC2016  # expanded by the rank's shell
    per_rank+='export CCOLL_MPI_HOST=host$((r % '"${BASH_REMATCH[1]}"')); '
  elif [[ $kv =~ ^RANK([0-9]+):([A-Za-z_][A-Za-z0-9_]*)=(.*)$ ]]; then
    per_rank+='[ "$r" = '"${BASH_REMATCH[1]}"' ] && export '"${BASH_REMATCH[2]}='${BASH_REMATCH[3]}'; "
  else
    setenv "${kv%%=*}" "${kv#*=}"
  fi
done

wrapper=()
if [[ -n $per_rank ]]; then
  # shellcheck disable=SC2016  # expanded by the rank's shell
  wrapper=(sh -c 'r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}; '"$per_rank"'exec "$0" "$@"')
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "+ ${launcher[*]} ${wrapper[*]} $program --expect $expect" >&2
status=0
"${launcher[@]}" "${wrapper[@]}" "$program" --expect "$expect" 2>"$log" || status=$?
cat "$log" >&2
if [[ $status != 0 ]]; then
  echo "run_check: exit status $status" >&2
  exit 1
fi

fail() {
  echo "run_check: $*" >&2
  exit 1
}
# "[ccoll_mpi] rank R: MPI_Allreduce calls N: served by ccoll S (...), passed to MPI M"
summary=$(grep -E "^\[ccoll_mpi\] rank [0-9]+: $function calls" "$log" || true)
lines=$(printf '%s' "$summary" | grep -c . || true)
if [[ $expect == absent ]]; then
  [[ $lines == 0 ]] || fail "a report without the library"
  exit 0
fi
[[ $lines == "$np" ]] || fail "expected a report from each of $np ranks, found $lines"
while read -r line; do
  served=$(sed -E 's/.*served by ccoll ([0-9]+).*/\1/' <<<"$line")
  case $expect in
    served) [[ $served -gt 0 ]] || fail "no call served: $line" ;;
    *) [[ $served == 0 ]] || fail "calls served with --expect $expect: $line" ;;
  esac
done <<<"$summary"
# A function's per-algorithm lines follow its summary line among the lines of the same rank (the
# ranks' reports interleave), up to that rank's next summary.
for name in "${served_by[@]}"; do
  n=$(awk -v f="$function" -v a="$name" '
    /^\[ccoll_mpi\] rank [0-9]+:/ { r = $3 }
    / calls [0-9]+: served by ccoll / { on[r] = index($0, ": " f " calls ") > 0 }
    on[r] && index($0, "   served by " a ": ") > 0 { split($0, w, ": "); if (w[3] + 0 > 0) ++n }
    END { print n + 0 }' "$log")
  [[ $n == "$np" ]] || fail "$function: $n of $np ranks report calls served by $name"
done
case $expect in
  disabled) grep -q 'passed to MPI, disabled' "$log" || fail "no 'disabled' line in the report" ;;
  settings) grep -q '^ccoll_mpi: CCOLL_MPI_' "$log" || fail "the bad setting was not named" ;;
esac
echo "run_check: report of $np ranks agrees with --expect $expect" >&2
