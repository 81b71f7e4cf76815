#!/usr/bin/env python3
"""ab.sh's outputs: per case and size, the time per call (us) of each build, as the median and
range over the passes, and after / before (the medians' ratio).
  summarize.py OUT"""
import glob
import os
import re
import statistics
import sys

rows = {}  # (case, size) -> build -> [times]
for path in glob.glob(os.path.join(sys.argv[1], "*.txt")):
    m = re.match(r"(.*)-(before|after)-(\d+)\.txt$", os.path.basename(path))
    if not m:
        continue
    case, build = m.group(1), m.group(2)
    for line in open(path):
        f = line.split()
        if len(f) >= 8 and f[0].isdigit() and not line.startswith("#"):
            rows.setdefault((case, int(f[0])), {}).setdefault(build, []).append(float(f[4]))
print("| case | size (B) | before (us) | after (us) | after / before |")
print("| --- | --- | --- | --- | --- |")
for (case, size) in sorted(rows):
    b = rows[(case, size)]
    if "before" not in b or "after" not in b:
        continue
    mb, ma = statistics.median(b["before"]), statistics.median(b["after"])
    rng = lambda v: f"{min(v):.2f}-{max(v):.2f}" if len(v) > 1 else f"{v[0]:.2f}"
    print(f"| {case} | {size} | {rng(b['before'])} | {rng(b['after'])} | {ma / mb:.2f} |")
