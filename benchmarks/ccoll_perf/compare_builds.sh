#!/usr/bin/env bash
# Two ccoll_perf builds on the same machine in one script: shared-memory busbw of ring and dbtree
# (fp32 sum, 16 and 64 MiB, P = 2 and 4), the two builds alternating run by run so that they see
# the same load; each run keeps the best of -r 3 blocks of -n 20 calls. compare_builds.py prints
# the median busbw of each build over the repetitions and their ratio.
#
#   benchmarks/ccoll_perf/compare_builds.sh BEFORE_BIN AFTER_BIN [output dir] [reps]
set -euo pipefail
BEFORE=$1
AFTER=$2
OUT=${3:-compare-results}
REPS=${4:-3}
mkdir -p "$OUT"
{
  echo "# date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "# cpu: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores"
  echo "# before: $BEFORE"
  echo "# after: $AFTER"
} >"$OUT/environment.txt"
for rep in $(seq 1 "$REPS"); do
  for p in 2 4; do
    # Alternate which build goes first, so neither always runs on a warmer machine.
    if ((rep % 2)); then order=(before after); else order=(after before); fi
    for which in "${order[@]}"; do
      bin=$BEFORE
      [ "$which" = after ] && bin=$AFTER
      "$bin" --transport shm -t "$p" -a ring,dbtree -b 16M -e 64M -f 4 -w 5 -n 20 -r 3 \
        --csv "$OUT/$which-p$p-r$rep.csv" >"$OUT/$which-p$p-r$rep.txt"
    done
  done
done
python3 "$(dirname "$0")/compare_builds.py" "$OUT"
