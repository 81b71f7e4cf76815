#!/usr/bin/env python3
"""Rules from 128 KiB to 64 MiB for the five collectives at P = 2, 3, 4 from tune_large.sh's
repeated `ccoll_perf --tune` runs: per size, each candidate's median time over the passes; only
candidates within TOL of the fastest may be chosen; among the choices with the fewest rule changes
over the sizes, the one with the least total time (the rule of algo/tuning.hpp's derive_rules,
on medians instead of one run's times).
  derive_large.py TUNE_DIR [TOL]   (TOL default 0.05)"""
import collections
import glob
import json
import statistics
import sys

out = sys.argv[1]
tol = float(sys.argv[2]) if len(sys.argv) > 2 else 0.05
samples = collections.defaultdict(lambda: collections.defaultdict(lambda: collections.defaultdict(list)))
wrong = 0
for path in sorted(glob.glob(f"{out}/*-pass*.json")):
    if "/table-" in path:
        continue
    for r in json.load(open(path))["results"]:
        if r.get("wrong", 0) > 0:
            wrong += r["wrong"]
            continue
        samples[(r["collective"], r["nranks"])][r["size"]][r["algo"]].append(r["time_us"])


def fmt(b):
    for unit, s in (("M", 20), ("K", 10)):
        if b >= 1 << s and b % (1 << s) == 0:
            return f"{b >> s}{unit}"
    return str(b)


def choose(by_size):
    sizes = sorted(by_size)
    best = {}
    for s in sizes:
        c = by_size[s]
        fastest = min(c.values())
        nxt = {}
        for name, t in c.items():
            if t > fastest * (1 + tol):
                continue
            options = [(ch + (path[-1] != name), tot + t, path + [name]) for ch, tot, path in best.values()]
            nxt[name] = min(options, key=lambda o: (o[0], o[1])) if options else (0, t, [name])
        best = nxt
    return sizes, min(best.values(), key=lambda o: (o[0], o[1]))[2]


for (coll, p), raw in sorted(samples.items()):
    by_size = {s: {a: statistics.median(ts) for a, ts in c.items()} for s, c in raw.items()}
    reps = max(len(ts) for c in raw.values() for ts in c.values())
    print(f"\n## {coll}, P = {p} ({reps} passes)")
    sizes, wins = choose(by_size)
    rules = []
    for size, win in zip(sizes, wins):
        if rules and rules[-1][0] == win:
            rules[-1][1] = size
        else:
            rules.append([win, size])
        cands = by_size[size]
        row = "  ".join(f"{c} {cands[c]:.1f}" for c in sorted(cands))
        print(f"  {fmt(size):>9}: {win:<14} {cands[win] / min(cands.values()):.3f}  {row}")
    print("  rules:", ", ".join(f"{a} <= {fmt(m)}" for a, m in rules))
print(f"\nwrong elements (their results left out): {wrong}")
