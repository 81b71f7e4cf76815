#!/bin/bash
# diagnostic: where does cuda-virtual's bandwidth go at 64 MiB - 1 GiB?
cd "$(dirname "$0")"
O=${OUT:-/tmp}/diag; mkdir -p $O
export CUDA_MODULE_LOADING=EAGER
P=./ccoll_perf
r() { local name=$1; shift; echo "=== $name: $*"; timeout --signal=INT --kill-after=2 40 stdbuf -oL "$@" > $O/$name.log 2>&1; echo "rc=$?"; grep -E "^ +[0-9]+ |launch:|stopped|rror" $O/$name.log | cut -c1-120; tar czf ${OUT:-/tmp}/diag.tgz -C $O . ; }
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu --format=csv
C="--transport cuda-virtual -t 8 -n 3 -r 2 -w 2"
r ring_default $P $C -a ring -b 16M -e 1G -f 2 -m 1
r ring_nocache env CCOLL_DIAG_NOCACHE=1 $P $C -a ring -b 16M -e 1G -f 2 -m 0
r ring_ch8 $P $C -a ring --nchannels 8 -b 64M -e 1G -f 4 -m 0
r ring_ch2 $P $C -a ring --nchannels 2 -b 64M -e 1G -f 4 -m 0
r ring_slots16 $P $C -a ring --nslots 16 -b 64M -e 1G -f 4 -m 0
r dbtree_default $P $C -a dbtree -b 64M -e 256M -f 4 -m 0
r dbtree_nocache env CCOLL_DIAG_NOCACHE=1 $P $C -a dbtree -b 64M -e 256M -f 4 -m 0
r dbtree_ch4 $P $C -a dbtree --nchannels 4 -b 64M -e 256M -f 4 -m 0
r allgather $P $C -C all_gather -a ring -b 16M -e 1G -f 4 -m 0
r reducescatter $P $C -C reduce_scatter -a ring -b 16M -e 1G -f 4 -m 0
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu --format=csv
