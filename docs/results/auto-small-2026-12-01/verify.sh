#!/usr/bin/env bash
# auto (the default table) against every registered algorithm that plans the collective, in both
# protocols, in the same run (interleaved: every candidate once per round at each size), 8 B to
# 64 KiB, forked shared-memory processes, P = 2, 3, 4: allreduce staged and in a registered window,
# reduce-scatter, all-gather, broadcast and reduce staged.
#   docs/results/auto-small-2026-12-01/verify.sh BUILD_DIR OUT_DIR
# With SKIP_ALLREDUCE=1, only the other four collectives (auto-small-2026-12-01b.md).
set -euo pipefail
build=$1 out=$2
mkdir -p "$out"
perf="$build/benchmarks/ccoll_perf"
common=(--transport shm -f 2 -n 10 -w 3 -r 5 -m 0 --interleave 1 -b 8 -e 64K)
both() {  # every name, and its LowLatency form
  local out_list="" a
  for a in "$@"; do out_list+=",$a,$a+ll"; done
  echo "auto$out_list"
}
for p in 2 3 4; do
  if [[ ${SKIP_ALLREDUCE:-0} != 1 ]]; then
    ar=$(both oneshot recdoubling ring dbtree tree direct)
    stdbuf -oL "$perf" "${common[@]}" -t "$p" -a "$ar" \
      --json "$out/allreduce-p$p-staged.json" >"$out/allreduce-p$p-staged.txt"
    stdbuf -oL "$perf" "${common[@]}" -t "$p" -a "$ar" --window 1 \
      --json "$out/allreduce-p$p-window.json" >"$out/allreduce-p$p-window.txt"
  fi
  for c in reduce_scatter all_gather broadcast reduce; do
    algos=$(both ring direct)
    [[ $c == broadcast || $c == reduce ]] && algos=$(both ring direct tree dbtree)
    stdbuf -oL "$perf" "${common[@]}" -t "$p" -C "$c" -a "$algos" \
      --json "$out/$c-p$p.json" >"$out/$c-p$p.txt"
  done
done
