#!/usr/bin/env bash
# tests/mpi_lib/busbw.sh: MPI_Allreduce bus bandwidth with and without libccoll_mpi.so, measured
# by OSU's osu_allreduce (built by run_external.sh --osu).
#
#   busbw.sh --lib LIB --osu-bin PATH/osu_allreduce [--bytes 16777216] [--np "2 4"] [--reps 3]
#            [--modes "without auto ring dbtree ring@mpi"] [--iters 30]
#
# A mode is "without" (Open MPI's own MPI_Allreduce) or a CCOLL_MPI_ALGO value, optionally with
# @TRANSPORT for CCOLL_MPI_TRANSPORT (default mpi-hybrid).
# For each NP the modes run in turn, --reps times round (without, auto, ring, ..., without, auto,
# ...), so that every mode sees the same drift of a shared machine. One line per run, then the
# median per (NP, mode): busbw = bytes / time x 2 (P-1) / P, the per-rank traffic of an allreduce
# (nccl-tests' definition, docs/benchmark.md), and its ratio to Open MPI's own ("without").
set -uo pipefail
lib="" osu="" bytes=16777216 nps="2 4" reps=3 modes="without auto ring dbtree ring@mpi" iters=30
while [[ $# -gt 0 ]]; do
  case $1 in
    --lib) lib=$(realpath "$2"); shift 2 ;;
    --osu-bin) osu=$(realpath "$2"); shift 2 ;;
    --bytes) bytes=$2; shift 2 ;;
    --np) nps=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    *) sed -n '2,15p' "$0"; exit 2 ;;
  esac
done
[[ -f $lib && -x $osu ]] || { sed -n '2,15p' "$0"; exit 2; }
launcher=(mpiexec --oversubscribe)
[[ $(id -u) == 0 ]] && launcher+=(--allow-run-as-root)

declare -A results
for np in $nps; do
  for ((r = 1; r <= reps; ++r)); do
    for mode in $modes; do
      env=()
      if [[ $mode != without ]]; then
        env=(-x LD_PRELOAD="$lib" -x CCOLL_MPI_ALGO="${mode%@*}")
        [[ $mode == *@* ]] && env+=(-x CCOLL_MPI_TRANSPORT="${mode#*@}")
      fi
      us=$("${launcher[@]}" -n "$np" "${env[@]}" "$osu" -T mpi_float -m "$bytes:$bytes" -i "$iters" \
        -x 5 2>/dev/null | awk -v b="$bytes" '$1 == b { print $2 }')
      [[ -n $us ]] || { echo "np=$np $mode: no result"; continue; }
      bw=$(awk -v b="$bytes" -v t="$us" -v p="$np" 'BEGIN { printf "%.2f", b / (t * 1e3) * 2 * (p - 1) / p }')
      results[$np.$mode]+="$bw "
      printf 'np=%s rep=%s %-8s %10.1f us  busbw %6s GB/s\n' "$np" "$r" "$mode" "$us" "$bw"
    done
  done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo "== median busbw over $reps runs, $bytes bytes, MPI_FLOAT sum"
for np in $nps; do
  base=$(median <<<"${results[$np.without]:-}")
  for mode in $modes; do
    m=$(median <<<"${results[$np.$mode]:-}")
    printf 'np=%s %-8s %6s GB/s  %s  (runs: %s)\n' "$np" "$mode" "$m" \
      "$(awk -v a="$m" -v b="$base" 'BEGIN { if (b > 0) printf "%.2fx Open MPI", a / b }')" "${results[$np.$mode]:-}"
  done
done
