#!/usr/bin/env python3
"""Summarises compare_builds.sh: median shm busbw per (P, algorithm, size) of each build, and the
ratio after/before, as a Markdown table."""
import csv
import glob
import os
import statistics
import sys
from collections import defaultdict

out = sys.argv[1]
busbw = defaultdict(list)  # (which, p, algo, bytes) -> [GB/s]
for path in glob.glob(os.path.join(out, "*.csv")):
    which = os.path.basename(path).split("-")[0]
    with open(path) as f:
        for row in csv.DictReader(f):
            if int(row["wrong"]) != 0:
                sys.exit(f"{path}: {row['algo']} {row['size_bytes']} B had wrong results")
            key = (which, int(row["nranks"]), row["algo"], int(row["size_bytes"]))
            busbw[key].append(float(row["busbw_GBps"]))
print("| P | algo | size | before busbw GB/s | after busbw GB/s | after/before | runs |")
print("|---|---|---|---|---|---|---|")
for p, algo, size in sorted({k[1:] for k in busbw}):
    b = busbw[("before", p, algo, size)]
    a = busbw[("after", p, algo, size)]
    if not a or not b:
        continue
    mb, ma = statistics.median(b), statistics.median(a)
    print(f"| {p} | {algo} | {size >> 20} MiB | {mb:.2f} | {ma:.2f} | {ma / mb:.3f} | {len(a)} |")
