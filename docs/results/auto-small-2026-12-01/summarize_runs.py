#!/usr/bin/env python3
"""verify.sh's runs, each reduced to one file of times (--reduce RUN_DIR OUT.json: per output file
of the run, per size, each candidate's time in us; checks that no result was wrong). Then, over
the reduced runs: per collective, P and buffer placement, the sizes at which auto is within 10%
of the fastest other candidate by the median over the runs of auto's ratio to that run's
fastest, the worst such median, and the sizes at which auto was more than 10% behind in every run.
  summarize_runs.py --reduce RUN_DIR OUT.json
  summarize_runs.py RUN.json [RUN.json ...]"""
import glob
import json
import os
import statistics
import sys

if sys.argv[1] == "--reduce":
    times = {}
    for path in sorted(glob.glob(os.path.join(sys.argv[2], "*.json"))):
        name = os.path.basename(path)[: -len(".json")]
        for r in json.load(open(path))["results"]:
            assert r.get("wrong", 0) == 0, (path, r)
            times.setdefault(name, {}).setdefault(str(r["size"]), {})[r["algo"]] = r["time_us"]
    json.dump(times, open(sys.argv[3], "w"), indent=0, sort_keys=True)
    sys.exit(0)

ratios = {}  # (name, size) -> [ratio]
for run in sys.argv[1:]:
    for name, by_size in json.load(open(run)).items():
        for size, c in by_size.items():
            others = {a: t for a, t in c.items() if a != "auto"}
            ratios.setdefault((name, int(size)), []).append(c["auto"] / min(others.values()))
print(f"runs: {len(sys.argv) - 1}")
print("| collective | P | auto within 10% (median over runs) | worst median (size) | behind in every run |")
print("| --- | --- | --- | --- | --- |")
total = within_total = 0
for name in sorted({n for n, _ in ratios}):
    sizes = sorted(s for n, s in ratios if n == name)
    med = {s: statistics.median(ratios[(name, s)]) for s in sizes}
    within = sum(1 for s in sizes if med[s] <= 1.10)
    always = [s for s in sizes if all(r > 1.10 for r in ratios[(name, s)])]
    worst = max(sizes, key=lambda s: med[s])
    coll, p = name.rsplit("-p", 1)
    total += len(sizes)
    within_total += within
    print(f"| {coll} | {p} | {within} of {len(sizes)} | {med[worst]:.2f} ({worst}) | "
          f"{', '.join(map(str, always)) or 'none'} |")
print(f"\nall: {within_total} of {total}")
