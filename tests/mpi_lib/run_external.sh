#!/usr/bin/env bash
# tests/mpi_lib/run_external.sh: external MPI test suites with and without libccoll_mpi.so.
#
#   run_external.sh --lib build/lib/libccoll_mpi.so [--mpich DIR] [--osu DIR] [--work DIR]
#                   [--np "2 3 4"] [--algos "auto ring ring@mpi"] [--mpiexec PATH]
#                   [--functions allreduce|collectives]
#
#   --mpich DIR  the test/mpi folder of an MPICH source tree: the MPI_Allreduce tests of coll/
#                (allred*.c and the other tests that check MPI_Allreduce results) are built with
#                mpicc against this host's MPI, as MPICH's test suite allows for any MPI; the
#                configure-generated headers are replaced by the fixed ones written here
#   --osu DIR    an OSU Micro-Benchmarks 7.x source tree: osu_allreduce is configured and built
#                out of tree and run with validation (-c) for MPI_FLOAT and MPI_INT, out of place
#                and in place (-l)
#   --work DIR   where to build and keep logs (default /tmp/ccoll-mpi-external)
#   --functions  allreduce (default): the tests above; collectives: MPICH's tests of
#                MPI_Reduce_scatter(_block), MPI_Allgather, MPI_Bcast and MPI_Reduce and OSU's
#                osu_reduce_scatter, osu_reduce_scatter_block, osu_allgather, osu_bcast and
#                osu_reduce with validation; the report lines of those five functions are summed
#
# Each program runs at every NP without the library, then with it under every mode of --algos: a
# CCOLL_MPI_ALGO value, optionally with @TRANSPORT for CCOLL_MPI_TRANSPORT (ring@mpi). A run passes when it exits 0 and says so (MPICH: "No Errors"; OSU: every size "Pass").
# With the library, rank 0's CCOLL_MPI_REPORT line gives how many calls ccoll served. The last
# lines are a summary per mode: passes, the served and total calls summed over the runs, and the
# runs whose verdict differs from the same run without the library. The exit status is 1 when a
# run fails with the library that passes without it.
# Neither suite's sources are part of this repository; docs/mpi.md says where they come from.
set -uo pipefail

lib="" mpich="" osu="" work=/tmp/ccoll-mpi-external nps="2 3 4" algos="auto ring ring@mpi" functions=allreduce
mpiexec=$(command -v mpiexec || true)
while [[ $# -gt 0 ]]; do
  case $1 in
    --lib) lib=$(realpath "$2"); shift 2 ;;
    --mpich) mpich=$(realpath "$2"); shift 2 ;;
    --osu) osu=$(realpath "$2"); shift 2 ;;
    --work) work=$2; shift 2 ;;
    --np) nps=$2; shift 2 ;;
    --algos) algos=$2; shift 2 ;;
    --mpiexec) mpiexec=$2; shift 2 ;;
    --functions) functions=$2; shift 2 ;;
    -h|--help) sed -n '2,29p' "$0"; exit 0 ;;
    *) echo "run_external: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -n $lib && -f $lib ]] || { echo "run_external: --lib PATH to libccoll_mpi.so is required" >&2; exit 2; }
[[ -n $mpich || -n $osu ]] || { echo "run_external: give --mpich and/or --osu" >&2; exit 2; }
mkdir -p "$work/logs"
launcher=("$mpiexec" --oversubscribe)
[[ $(id -u) == 0 ]] && launcher+=(--allow-run-as-root)

# ---- build -----------------------------------------------------------------------------------
mpich_tests=()  # "name|args"
if [[ -n $mpich ]]; then
  b=$work/mpich
  mkdir -p "$b"
  : >"$b/mtest_mpix.h"  # MPICH's own MPIX renames: none for another MPI
  cat >"$b/mpitestconf.h" <<'CONF'
#define HAVE_STDARG_H 1
#define HAVE_STDLIB_H 1
#define HAVE_STRING_H 1
#define HAVE_UNISTD_H 1
#define HAVE_STDINT_H 1
#define HAVE_INTTYPES_H 1
#define HAVE_SYS_TIME_H 1
#define HAVE_SYS_RESOURCE_H 1
#define HAVE_GETRUSAGE 1
#define HAVE_MPI_INIT_THREAD 1
#define HAVE_MPI_WIN_CREATE 1
#define HAVE_LONG_DOUBLE 1
#define HAVE_LONG_LONG 1
#define HAVE_LONG_LONG_INT 1
#define HAVE_INT64_T 1
#define HAVE_PTHREAD_H 1
#define THREAD_PACKAGE_NAME THREAD_PACKAGE_POSIX
CONF
  rm -rf "$b/dtpools" && cp -r "$mpich/dtpools" "$b/dtpools" && : >"$b/dtpools/dtpoolsconf.h"
  cflags=(-O2 -w -I"$b" -I"$mpich/include" -I"$b/dtpools/include")
  (
    cd "$b" || exit 1
    for f in "$mpich"/util/mtest.c "$mpich"/util/mtest_common.c "$mpich"/util/mtest_single.c \
      "$mpich"/util/run_mpitests.c "$b"/dtpools/src/*.c; do
      mpicc "${cflags[@]}" -c "$f" -o "$(basename "${f%.c}").o" || exit 1
    done
    ar rcs libmtest.a mtest.o mtest_common.o mtest_single.o dtpools*.o
  ) || { echo "run_external: building MPICH's test utilities failed" >&2; exit 1; }
  # name|arguments: coll/testlist.in's MPI_Allreduce entries and the tests that check its results,
  # or those of the other collectives
  if [[ $functions == collectives ]]; then
    tests=("allgather2|" "allgather3|" "bcasttest|" "bcastzerotype|" "coll7|" "coll8|" "coll9|"
      "coll10|" "red3|" "red4|" "red_scat_block|" "red_scat_block2|" "redscat2|" "redscatblk3|"
      "reduce|" "opsum|" "opprod|" "opmax|" "opmin|")
  else
    tests=("allred|-count=10" "allred|-count=100" "allred2|" "allred3|" "allred4|" "allred5|"
      "allred6|" "allredmany|" "allred_float|" "allred_derived|" "coll12|" "coll13|" "longuser|"
      "op_coll|")
  fi
  for t in "${tests[@]}"; do
    name=${t%%|*}
    src=$mpich/coll/$name.c
    extra=()
    grep -q "int main" "$src" || extra=("$b/run_mpitests.o")
    if [[ -x $b/$name ]] || mpicc "${cflags[@]}" "$src" "${extra[@]}" "$b/libmtest.a" -o "$b/$name" -lm; then
      mpich_tests+=("$t")
    else
      echo "run_external: MPICH coll/$name.c does not build here; skipped" >&2
    fi
  done
fi
osu_programs=(osu_allreduce)
[[ $functions == collectives ]] &&
  osu_programs=(osu_reduce_scatter osu_reduce_scatter_block osu_allgather osu_bcast osu_reduce)
osu_dir=""
if [[ -n $osu ]]; then
  b=$work/osu
  mkdir -p "$b"
  [[ -f $b/Makefile ]] || (cd "$b" && "$osu/configure" CC=mpicc CXX=mpicxx >configure.log 2>&1) ||
    { echo "run_external: configuring OSU failed (see $b/configure.log)" >&2; exit 1; }
  for prog in "${osu_programs[@]}"; do
    [[ -x $b/c/mpi/collective/blocking/$prog ]] ||
      make -C "$b/c/mpi/collective/blocking" "$prog" >>"$b/make.log" 2>&1 ||
      { echo "run_external: building $prog failed (see $b/make.log)" >&2; exit 1; }
  done
  osu_dir=$b/c/mpi/collective/blocking
fi
# The report lines summed: MPI_Allreduce's, or the other five functions'.
report_functions="MPI_Allreduce"
[[ $functions == collectives ]] &&
  report_functions="MPI_Reduce_scatter_block|MPI_Reduce_scatter|MPI_Allgather|MPI_Bcast|MPI_Reduce"

# ---- run -------------------------------------------------------------------------------------
declare -A pass total served calls verdict
modes=(without)
for a in $algos; do modes+=("$a"); done

# run MODE NP LOGNAME CHECK PROGRAM ARGS...: one mpiexec, judged by CHECK (mpich|osu)
run() {
  local mode=$1 np=$2 name=$3 check=$4
  shift 4
  local log=$work/logs/$name.np$np.$mode.log env=()
  if [[ $mode != without ]]; then
    env=(-x LD_PRELOAD="$lib" -x CCOLL_MPI_ALGO="${mode%@*}" -x CCOLL_MPI_REPORT=1)
    [[ $mode == *@* ]] && env+=(-x CCOLL_MPI_TRANSPORT="${mode#*@}")
  fi
  timeout 600 "${launcher[@]}" -n "$np" "${env[@]}" "$@" >"$log" 2>&1
  local rc=$? ok=0
  if [[ $rc == 0 ]]; then
    case $check in
      mpich) grep -q "No Errors" "$log" && ok=1 ;;
      osu) grep -qE "[0-9]+ +[0-9.]+ +Pass" "$log" && ! grep -qE " Fail" "$log" && ok=1 ;;
    esac
  fi
  verdict[$name.$np.$mode]=$ok
  total[$mode]=$((${total[$mode]:-0} + 1))
  pass[$mode]=$((${pass[$mode]:-0} + ok))
  local s=0 c=0 line
  while read -r line; do
    [[ -n $line ]] || continue
    c=$((c + $(sed -E 's/.* calls ([0-9]+):.*/\1/' <<<"$line")))
    s=$((s + $(sed -E 's/.*served by ccoll ([0-9]+).*/\1/' <<<"$line")))
  done < <(grep -E "^\[ccoll_mpi\] rank 0: ($report_functions) calls" "$log" || true)
  served[$mode]=$((${served[$mode]:-0} + s))
  calls[$mode]=$((${calls[$mode]:-0} + c))
  printf '%-28s np=%s %-8s %s rc=%s rank-0 calls=%s served=%s\n' "$name" "$np" "$mode" \
    "$([[ $ok == 1 ]] && echo PASS || echo FAIL)" "$rc" "$c" "$s"
}

for np in $nps; do
  for mode in "${modes[@]}"; do
    for t in "${mpich_tests[@]}"; do
      name=${t%%|*} args=${t#*|}
      # shellcheck disable=SC2086  # args are words
      run "$mode" "$np" "mpich-$name${args:+$args}" mpich "$work/mpich/$name" $args
    done
    if [[ -n $osu_dir ]]; then
      for prog in "${osu_programs[@]}"; do
        for type in mpi_float mpi_int; do
          run "$mode" "$np" "$prog-$type" osu "$osu_dir/$prog" -c -T "$type" -m 4:4194304 -i 20 -x 5
          [[ $prog == osu_allreduce ]] &&
            run "$mode" "$np" "$prog-$type-inplace" osu "$osu_dir/$prog" -c -l -T "$type" \
              -m 4:4194304 -i 20 -x 5
        done
      done
    fi
  done
done

echo "== summary (NP: $nps; logs in $work/logs)"
status=0
for mode in "${modes[@]}"; do
  worse=() better=()
  for key in "${!verdict[@]}"; do
    [[ $key == *.$mode && $mode != without ]] || continue
    base=${verdict[${key%.*}.without]:-}
    [[ ${verdict[$key]} == 1 && $base == 0 ]] && better+=("${key%.*}")
    [[ ${verdict[$key]} == 0 && $base == 1 ]] && worse+=("${key%.*}")
  done
  printf '%-8s passed %s of %s runs; rank 0 calls %s, served by ccoll %s' "$mode" \
    "${pass[$mode]:-0}" "${total[$mode]:-0}" "${calls[$mode]:-0}" "${served[$mode]:-0}"
  [[ $mode == without ]] || printf '; failing only with the library: %s; passing only with it: %s' \
    "${#worse[@]}${worse[*]:+ (${worse[*]})}" "${#better[@]}${better[*]:+ (${better[*]})}"
  printf '\n'
  [[ ${#worse[@]} == 0 ]] || status=1
done
exit $status
