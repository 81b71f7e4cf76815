#!/usr/bin/env python3
"""auto against the fastest other candidate of the same interleaved run (verify.sh's JSON): per
collective and P, the sizes at which auto is within 10% of it, the worst ratio and the median.
  summarize_verify.py OUT_DIR"""
import glob
import json
import os
import statistics
import sys

print("| collective | P | sizes | auto within 10% of the best | worst auto / best (size, best) | median |")
print("| --- | --- | --- | --- | --- | --- |")
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    res = json.load(open(path))["results"]
    wrong = sum(r.get("wrong", 0) for r in res)
    by_size = {}
    for r in res:
        by_size.setdefault(r["size"], {})[r["algo"]] = r["time_us"]
    ratios = []
    for size, c in sorted(by_size.items()):
        others = {a: t for a, t in c.items() if a != "auto"}
        best = min(others, key=others.get)
        ratios.append((c["auto"] / others[best], size, best))
    within = sum(1 for x in ratios if x[0] <= 1.10)
    worst = max(ratios)
    name = os.path.basename(path)[: -len(".json")]
    coll, p = name.rsplit("-p", 1)
    sizes = sorted(by_size)
    print(f"| {coll} | {p} | {sizes[0]}-{sizes[-1]} | {within} of {len(ratios)} | "
          f"{worst[0]:.2f} ({worst[1]}, {worst[2]}) | {statistics.median(x[0] for x in ratios):.2f} |"
          + (f" wrong: {wrong}" if wrong else ""))
