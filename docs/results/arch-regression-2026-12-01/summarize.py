#!/usr/bin/env python3
"""Median time per call (us) of each build over the passes, and new / old, per file group, algorithm
and size: summarize.py OUT_DIR (ab.sh's output)."""
import collections
import glob
import os
import re
import statistics
import sys

out = sys.argv[1]
times = collections.defaultdict(list)  # (group, algo, size, build) -> [us]
for path in sorted(glob.glob(os.path.join(out, "*.txt"))):
    m = re.match(r"(.+)-(old|new)-(\d+)\.txt$", os.path.basename(path))
    if not m:
        continue
    group, build = m.group(1), m.group(2)
    algo = None
    for line in open(path):
        h = re.match(r"# \S+ (\S+), transport", line)
        if h:
            algo = h.group(1)
            continue
        f = line.split()
        if algo and len(f) == 8 and f[0].isdigit():
            times[(group, algo, int(f[0]), build)].append(float(f[4]))
keys = sorted({k[:3] for k in times})
ratios = []
print(f"{'group':28} {'algo':8} {'bytes':>9} {'old us':>9} {'new us':>9} {'new/old':>7}")
for g, a, s in keys:
    o, n = times.get((g, a, s, "old")), times.get((g, a, s, "new"))
    if not o or not n:
        continue
    mo, mn = statistics.median(o), statistics.median(n)
    ratios.append(mn / mo)
    print(f"{g:28} {a:8} {s:9d} {mo:9.2f} {mn:9.2f} {mn / mo:7.3f}")
print(f"rows {len(ratios)}: new/old median {statistics.median(ratios):.3f}, "
      f"min {min(ratios):.3f}, max {max(ratios):.3f}")
