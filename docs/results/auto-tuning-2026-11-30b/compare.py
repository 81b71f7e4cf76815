#!/usr/bin/env python3
"""How well a table measured in one run serves another: run.sh's two independent --tune runs A
and B, each of PASSES passes. For every case (collective, P) and size, a table's choice is scored
by the other run's median times: its time over the fastest candidate's (the regret). Scored:
- the tables `ccoll_perf --tune` wrote (each candidate's median over the run's passes), and
- one-pass tables, derived from each single pass of the run (its rows as the pass printed them)
  by the rule of algo/tuning.hpp's derive_rules (within 5% of the fastest, fewest rules, then
  least total time): what `--tune` wrote before it took several passes.
  compare.py OUT_DIR"""
import collections
import json
import re
import statistics
import sys

out = sys.argv[1]
TOL = 0.05
cases = [(c, p) for p in (2, 4) for c in ("allreduce", "broadcast")]


def passes_of(path):
    """Per pass: size -> candidate -> time (us), from the text the passes printed."""
    passes, algo = [], None
    for line in open(path):
        if line.startswith("# --tune: pass "):
            passes.append(collections.defaultdict(dict))
        m = re.match(r"# \w+ (\S+), transport \S+, \d+ ranks; interleaved", line)
        if m:
            algo = m.group(1)
            continue
        f = line.split()
        if passes and algo and len(f) >= 8 and f[0].isdigit() and not line.startswith("#"):
            if int(f[7]) == 0:
                passes[-1][int(f[0])][algo] = float(f[4])
    return passes


def medians(passes):
    times = collections.defaultdict(lambda: collections.defaultdict(list))
    for p in passes:
        for s, c in p.items():
            for a, t in c.items():
                times[s][a].append(t)
    # the tool's median: the middle one, the slower of the middle two for an even count
    return {s: {a: sorted(ts)[len(ts) // 2] for a, ts in c.items()} for s, c in times.items()}


def choose(by_size):
    best = {}
    for s in sorted(by_size):
        c = by_size[s]
        fastest = min(c.values())
        nxt = {}
        for name, t in c.items():
            if t > fastest * (1 + TOL):
                continue
            options = [(ch + (path[-1] != name), tot + t, path + [name]) for ch, tot, path in best.values()]
            nxt[name] = min(options, key=lambda o: (o[0], o[1])) if options else (0, t, [name])
        best = nxt
    return dict(zip(sorted(by_size), min(best.values(), key=lambda o: (o[0], o[1]))[2]))


def table_choice(path, coll, p):
    rules = json.load(open(path))["rules"]
    def pick(size):
        for r in rules:
            if r.get("collective", "allreduce") != coll:
                continue
            if not r.get("min_ranks", 1) <= p <= r.get("max_ranks", 1 << 30):
                continue
            if size <= r.get("max_bytes", 1 << 62):
                return r["algorithm"] + ("+ll" if r.get("protocol") == "ll" else "")
        return None
    return pick


def score(choice, held_out):
    regrets = []
    for s, c in held_out.items():
        regrets.append(c[choice[s]] / min(c.values()))
    return regrets


summary = collections.defaultdict(list)
for coll, p in cases:
    runs = {r: passes_of(f"{out}/{coll}-p{p}-{r}.txt") for r in "AB"}
    print(f"\n## {coll}, P = {p}")
    for r, other in (("A", "B"), ("B", "A")):
        held = medians(runs[other])
        pick = table_choice(f"{out}/table-{coll}-p{p}-{r}.json", coll, p)
        tool = score({s: pick(s) for s in held}, held)
        summary["tool"] += tool
        line = f"  {r}'s table on {other}'s medians: within 10% at {sum(x <= 1.10 for x in tool)}/{len(tool)}, worst {max(tool):.2f}x"
        for k, one in enumerate(runs[r]):
            single = score(choose(one), held)
            summary["one pass"] += single
            line += f"; pass {k + 1} alone: {sum(x <= 1.10 for x in single)}/{len(single)}, worst {max(single):.2f}x"
        print(line)
print("\n## all cases")
for name, regrets in summary.items():
    print(f"  {name}: within 10% at {sum(x <= 1.10 for x in regrets)} of {len(regrets)} sizes, "
          f"within 5% at {sum(x <= 1.05 for x in regrets)}, median regret {statistics.median(regrets):.3f}, "
          f"worst {max(regrets):.2f}x")
