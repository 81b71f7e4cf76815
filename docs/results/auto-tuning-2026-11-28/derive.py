#!/usr/bin/env python3
"""The rules algo/tuning.hpp derives from measure.sh's JSON files: per size, only candidates within
TOL of the fastest may be chosen; among the choices with the fewest rule changes over the sizes,
the one with the least total time. Prints every candidate's time per size beside the choice.
  derive.py OUT_DIR [TOL]   (OUT_DIR of measure.sh; TOL default 0.05)"""
import glob, json, sys, collections

out = sys.argv[1]
tol = float(sys.argv[2]) if len(sys.argv) > 2 else 0.05
times = collections.defaultdict(dict)  # (collective, P) -> {size: {candidate: us}}
for path in sorted(glob.glob(f"{out}/*.json")):
    d = json.load(open(path))
    if "results" not in d:  # the tuning table
        continue
    ll = d["options"].get("protocol") == "ll"
    for r in d["results"]:
        if r.get("wrong", 0) > 0 or r.get("paired_with"):
            continue
        name = r["algo"] + ("+ll" if ll else "")
        times[(r["collective"], r["nranks"])].setdefault(r["size"], {})[name] = r["time_us"]

def fmt(b):
    for unit, s in (("G", 30), ("M", 20), ("K", 10)):
        if b >= 1 << s and b % (1 << s) == 0:
            return f"{b >> s}{unit}"
    return str(b)

def choose(by_size):
    sizes = sorted(by_size)
    best = {}  # candidate -> (changes, total, path)
    for s in sizes:
        c = by_size[s]
        fastest = min(c.values())
        nxt = {}
        for name, t in c.items():
            if t > fastest * (1 + tol):
                continue
            options = [(ch + (p[-1] != name), tot + t, p + [name]) for ch, tot, p in best.values()]
            nxt[name] = min(options, key=lambda o: (o[0], o[1])) if options else (0, t, [name])
        best = nxt
    return sizes, min(best.values(), key=lambda o: (o[0], o[1]))[2]

for (coll, p), by_size in sorted(times.items()):
    print(f"\n## {coll}, P = {p}")
    sizes, wins = choose(by_size)
    rules = []
    for size, win in zip(sizes, wins):
        if rules and rules[-1][0] == win:
            rules[-1][1] = size
        else:
            rules.append([win, size])
        cands = by_size[size]
        row = "  ".join(f"{c} {cands[c]:.2f}" for c in sorted(cands))
        print(f"  {fmt(size):>6}: {win:<16} {cands[win] / min(cands.values()):.3f}  {row}")
    print("  rules:", "".join(f"{a} <= {fmt(m)}, " for a, m in rules[:-1]) + f"{rules[-1][0]} above")
