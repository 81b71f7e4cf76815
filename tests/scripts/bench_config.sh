#!/usr/bin/env bash
# What scripts/bench asks of the build and what scripts/setup turns back on (their dry runs): a
# build directory bench creates leaves MPI and CUDA off unless the arguments (or mpirun, or a GPU)
# ask for them, and notes them in CCOLL_DEFERRED; a later bench that asks turns one on; a whole
# build through scripts/setup turns them all on; a directory configured otherwise keeps its own.
set -euo pipefail
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
# expect NAME WANT GOT
expect() {
  if [ "$2" = "$3" ]; then
    echo "ok   $1"
  else
    echo "FAIL $1"; echo "  want: $2"; echo "  got:  $3"; failures=$((failures + 1))
  fi
}
bench() {  # bench BUILD_DIR ARGS...: the set-up line of a dry run, on a machine without a GPU
  local dir=$1; shift
  env -u OMPI_COMM_WORLD_SIZE -u PMI_SIZE -u PMIX_RANK CCOLL_BUILD_DIR="$dir" CCOLL_BENCH_GPU=0 \
    CCOLL_BENCH_DRY_RUN=1 scripts/bench "$@"
}
cache() {  # cache DIR CUDA MPI DEFERRED: a configured build directory
  mkdir -p "$1"
  printf 'CCOLL_ENABLE_CUDA:STRING=%s\nCCOLL_ENABLE_MPI:STRING=%s\nCCOLL_DEFERRED:STRING=%s\n' \
    "$2" "$3" "$4" >"$1/CMakeCache.txt"
}
lean="-DCCOLL_ENABLE_CUDA=OFF -DCCOLL_ENABLE_MPI=OFF -DCCOLL_DEFERRED=CUDA,MPI"

expect "fresh, no arguments" "scripts/setup $lean ccoll_perf" "$(bench "$tmp/fresh")"
expect "fresh, shm and threads only" "scripts/setup $lean ccoll_perf" \
  "$(bench "$tmp/fresh" --transport shm -t 2 -a ring,direct -b 8 -e 1M)"
for args in "--peer mpi" "--peer=mpi" "--peer gloo" "--transport mpi" "--transport=mpi-hybrid" \
  "--topology measure"; do
  # shellcheck disable=SC2086  # the arguments, split on spaces
  expect "fresh, $args" \
    "scripts/setup -DCCOLL_ENABLE_CUDA=OFF -DCCOLL_DEFERRED=CUDA ccoll_perf" "$(bench "$tmp/fresh" $args)"
done
expect "fresh, under mpirun" "scripts/setup -DCCOLL_ENABLE_CUDA=OFF -DCCOLL_DEFERRED=CUDA ccoll_perf" \
  "$(CCOLL_BUILD_DIR="$tmp/fresh" CCOLL_BENCH_GPU=0 CCOLL_BENCH_DRY_RUN=1 OMPI_COMM_WORLD_SIZE=2 \
    scripts/bench --transport shm)"
expect "fresh, --transport cuda-virtual" \
  "scripts/setup -DCCOLL_ENABLE_MPI=OFF -DCCOLL_DEFERRED=MPI ccoll_perf" \
  "$(bench "$tmp/fresh" --transport cuda-virtual)"
expect "fresh, a GPU present" "scripts/setup -DCCOLL_ENABLE_MPI=OFF -DCCOLL_DEFERRED=MPI ccoll_perf" \
  "$(CCOLL_BUILD_DIR="$tmp/fresh" CCOLL_BENCH_GPU=1 CCOLL_BENCH_DRY_RUN=1 scripts/bench)"

cache "$tmp/lean" OFF OFF CUDA,MPI
expect "lean, no arguments: stays lean" "scripts/setup -DCCOLL_DEFERRED=CUDA,MPI ccoll_perf" \
  "$(bench "$tmp/lean")"
expect "lean, --peer mpi: MPI on" \
  "scripts/setup -DCCOLL_ENABLE_MPI=AUTO -DCCOLL_DEFERRED=CUDA ccoll_perf" \
  "$(bench "$tmp/lean" --transport shm --peer mpi)"
expect "lean, --peer nccl: CUDA on" \
  "scripts/setup -DCCOLL_ENABLE_CUDA=AUTO -DCCOLL_DEFERRED=MPI ccoll_perf" \
  "$(bench "$tmp/lean" --transport cuda-virtual --peer nccl)"

cache "$tmp/whole" AUTO AUTO ""
expect "configured by scripts/test: kept" "scripts/setup -DCCOLL_DEFERRED= ccoll_perf" \
  "$(bench "$tmp/whole")"
cache "$tmp/user" AUTO OFF ""
expect "MPI off by the user: kept off" "scripts/setup -DCCOLL_DEFERRED= ccoll_perf" "$(bench "$tmp/user")"

setup() {  # setup BUILD_DIR ARGS...: the configure options of a dry run
  local dir=$1; shift
  CCOLL_BUILD_DIR="$dir" CCOLL_SETUP_DRY_RUN=1 scripts/setup "$@" | tail -n 1
}
expect "setup of everything after bench: both on" \
  "cmake -DCCOLL_DEFERRED= -DCCOLL_ENABLE_CUDA=AUTO -DCCOLL_ENABLE_MPI=AUTO" "$(setup "$tmp/lean")"
expect "setup of everything, the caller's options last" \
  "cmake -DCCOLL_DEFERRED= -DCCOLL_ENABLE_CUDA=AUTO -DCCOLL_ENABLE_MPI=AUTO -DCCOLL_ENABLE_CUDA=OFF" \
  "$(setup "$tmp/lean" -DCCOLL_ENABLE_CUDA=OFF)"
expect "setup of the fast suite after bench: unchanged" "cmake " "$(setup "$tmp/lean" ccoll_fast_tests)"
expect "setup of everything, nothing deferred" "cmake " "$(setup "$tmp/whole")"

[ "$failures" = 0 ] || { echo "$failures failed"; exit 1; }
echo "all passed"
