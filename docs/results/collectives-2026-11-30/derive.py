#!/usr/bin/env python3
"""Rules up to 64 KiB for reduce-scatter, all-gather, broadcast and reduce at P = 2, 3, 4 from
tune.sh's repeated `ccoll_perf --tune` runs: per size, each candidate's median time over the
repetitions; only candidates within TOL of the fastest may be chosen, and of those only the
one-hop plans (direct, direct+ll) where one of them is, at P >= 3 (at P = 2 every plan is one hop): forked processes on two vCPUs overlap a
chain's hops, which a real run between busy ranks does not (an mpirun of the same binary measured
the chain at P = 4 up to 1.4x the one-hop broadcast at 64 B-4 KiB, run3/); among the choices with
the fewest rule changes over the sizes, the one with the least total time (the rule of
auto-tuning-2026-11-28/derive.py).
  derive.py TUNE_DIR [TOL]   (TOL default 0.05)"""
import collections
import glob
import json
import statistics
import sys

out = sys.argv[1]
tol = float(sys.argv[2]) if len(sys.argv) > 2 else 0.05
samples = collections.defaultdict(lambda: collections.defaultdict(lambda: collections.defaultdict(list)))
for path in sorted(glob.glob(f"{out}/*.json")):
    for r in json.load(open(path))["results"]:
        if r.get("wrong", 0) > 0:
            continue
        samples[(r["collective"], r["nranks"])][r["size"]][r["algo"]].append(r["time_us"])


def fmt(b):
    for unit, s in (("M", 20), ("K", 10)):
        if b >= 1 << s and b % (1 << s) == 0:
            return f"{b >> s}{unit}"
    return str(b)


def choose(by_size, p):
    sizes = sorted(by_size)
    best = {}
    for s in sizes:
        c = by_size[s]
        fastest = min(c.values())
        allowed = {n for n, t in c.items() if t <= fastest * (1 + tol)}
        if p >= 3 and allowed & {"direct", "direct+ll"}:
            allowed &= {"direct", "direct+ll"}
        nxt = {}
        for name, t in c.items():
            if name not in allowed:
                continue
            options = [(ch + (p[-1] != name), tot + t, p + [name]) for ch, tot, p in best.values()]
            nxt[name] = min(options, key=lambda o: (o[0], o[1])) if options else (0, t, [name])
        best = nxt
    return sizes, min(best.values(), key=lambda o: (o[0], o[1]))[2]


for (coll, p), raw in sorted(samples.items()):
    by_size = {s: {a: statistics.median(ts) for a, ts in c.items()} for s, c in raw.items()}
    print(f"\n## {coll}, P = {p} ({len(next(iter(next(iter(raw.values())).values())))} repetitions)")
    sizes, wins = choose(by_size, p)
    rules = []
    for size, win in zip(sizes, wins):
        if rules and rules[-1][0] == win:
            rules[-1][1] = size
        else:
            rules.append([win, size])
        cands = by_size[size]
        row = "  ".join(f"{c} {cands[c]:.2f}" for c in sorted(cands))
        print(f"  {fmt(size):>6}: {win:<12} {cands[win] / min(cands.values()):.3f}  {row}")
    print("  rules:", ", ".join(f"{a} <= {fmt(m)}" for a, m in rules))
