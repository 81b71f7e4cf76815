#!/usr/bin/env bash
# The host interpreter with the operator read at run time (runtime::kOpAtRunTime) against the
# build before it (one instantiation per element type and operator): ccoll_perf on forked
# shared-memory processes, the two builds alternating row group by row group, three passes.
#   ab.sh OLD_PERF NEW_PERF OUT_DIR
set -euo pipefail
old=$1 new=$2 out=$3
mkdir -p "$out"
common=(--transport shm -b 8 -e 64M -f 8 -n 20 -w 5 -r 3 -m 0)
for pass in 1 2 3; do
  for p in 2 4; do
    for build in old new; do
      perf=$old
      [[ $build == new ]] && perf=$new
      stdbuf -oL "$perf" "${common[@]}" -t "$p" -a ring,ring+ll,direct -o sum \
        >"$out/allreduce-sum-p$p-$build-$pass.txt"
      stdbuf -oL "$perf" "${common[@]}" -t "$p" -a ring -o max \
        >"$out/allreduce-max-p$p-$build-$pass.txt"
      stdbuf -oL "$perf" "${common[@]}" -t "$p" -C reduce_scatter -a ring,direct \
        >"$out/reduce_scatter-p$p-$build-$pass.txt"
    done
  done
done
