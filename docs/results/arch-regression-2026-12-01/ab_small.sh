#!/usr/bin/env bash
# ab.sh's comparison at 8 B - 64 KiB, where a per-step cost would show, with more iterations:
# allreduce ring and ring+ll, P = 2 and 3 (PS), the builds alternating, three passes (PASSES).
#   ab_small.sh OLD_PERF NEW_PERF OUT_DIR
set -euo pipefail
old=$1 new=$2 out=$3
mkdir -p "$out"
common=(--transport shm -b 8 -e 64K -f 4 -n 5000 -w 200 -r 5 -m 0)
for pass in $(seq "${PASSES:-3}"); do
  for p in ${PS:-2 3}; do
    for build in old new; do
      perf=$old
      [[ $build == new ]] && perf=$new
      stdbuf -oL "$perf" "${common[@]}" -t "$p" -a ring,ring+ll \
        >"$out/small-allreduce-p$p-$build-$pass.txt"
    done
  done
done
