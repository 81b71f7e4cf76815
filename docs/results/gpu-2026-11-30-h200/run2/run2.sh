#!/bin/bash
# Second validation call: gpu_validate all sanitize2 tune within 300 s, then trees by channel count.
set -u
mkdir -p "$OUT" /tmp/gv/logs
( while sleep 5; do cp /tmp/gv/gpu-logs.tgz /tmp/gv/summary.txt "$OUT/" 2>/dev/null; done ) &
OUT=/tmp/gv TOTAL_S=300 build-gpu-pack/gpu_validate all sanitize2 tune
P=build-gpu-pack/benchmarks/ccoll_perf
export CUDA_MODULE_LOADING=EAGER
for ch in 4 16 0; do
  echo "=== trees, --nchannels $ch"
  timeout --signal=INT --kill-after=2 22 stdbuf -oL $P --transport cuda-virtual -t 8 \
    -a dbtree,tree,tree-overlap,ring --nchannels $ch -b 64M -e 256M -f 4 -n 3 -r 1 -m 0 \
    > /tmp/gv/logs/trees_ch$ch.log 2>&1
  echo "rc=$?"; grep -E "^# (allreduce|launch)|^ +[0-9]+ " /tmp/gv/logs/trees_ch$ch.log | cut -c1-110
done
tar czf "$OUT/gpu-logs.tgz" -C /tmp/gv logs summary.txt; cp /tmp/gv/summary.txt "$OUT/"
