#!/usr/bin/env python3
"""The table's rules before and after this page's change, scored on runs that neither was derived
from (auto-small-2026-12-01/verify.sh's, reduced by that page's summarize_runs.py --reduce): per
collective and P, at how many sizes each rule set's choice is within 10% of the fastest candidate
(median over the runs of the choice's ratio to that run's fastest), and, as a check that auto
follows the new rules, the same for auto's measured time. Broadcasts and reduces of at most 96
bytes take the fast boxes whatever the plan; they count for auto only.
  compare_rules.py RUN.json [RUN.json ...]"""
import json
import statistics
import sys

before = {
    ("all_gather", 2): [("direct+ll", 8192), ("direct", 65536)],
    ("all_gather", 3): [("direct+ll", 16380), ("ring", 65532)],
    ("broadcast", 2): [("direct+ll", 512), ("ring", 65536)],
    ("broadcast", 3): [("direct", 8192), ("ring", 32768), ("dbtree", 65536)],
    ("broadcast", 4): [("direct+ll", 8), ("direct", 2048), ("ring", 65536)],
    ("reduce", 2): [("direct+ll", 2048), ("direct", 16384), ("tree+ll", 65536)],
}
after = {
    ("all_gather", 2): [("ring+ll", 8192), ("direct", 65536)],
    ("all_gather", 3): [("direct+ll", 32760), ("ring+ll", 65532)],
    ("broadcast", 2): [("tree", 65536)],
    ("broadcast", 3): [("direct", 16384), ("ring", 32768), ("dbtree+ll", 65536)],
    ("broadcast", 4): [("direct+ll", 8192), ("tree+ll", 16384), ("direct", 32768),
                       ("ring+ll", 65536)],
    ("reduce", 2): [("direct+ll", 64), ("direct", 65536)],
}

def choice(rules, size):
    return next(n for n, m in rules if size <= m)


runs = [json.load(open(p)) for p in sys.argv[1:]]
print(f"runs: {len(runs)}")
print("| collective | P | sizes | before: within 10% (worst) | after: within 10% (worst) | "
      "auto: within 10% (worst) |")
print("| --- | --- | --- | --- | --- | --- |")
totals = [0, 0, 0, 0, 0]
for (coll, p) in sorted(before):
    key = f"{coll}-p{p}"
    sizes = sorted(int(s) for s in runs[0][key])
    cols = []
    for pick in (lambda s: choice(before[(coll, p)], s), lambda s: choice(after[(coll, p)], s),
                 lambda s: "auto"):
        meds = {}
        for s in sizes:
            if pick(s) != "auto" and coll in ("broadcast", "reduce") and s <= 96:
                continue
            r = [run[key][str(s)][pick(s)] /
                 min(t for a, t in run[key][str(s)].items() if a != "auto") for run in runs]
            meds[s] = statistics.median(r)
        within = sum(1 for m in meds.values() if m <= 1.10)
        worst = max(meds, key=meds.get)
        cols.append((within, len(meds), meds[worst], worst))
    totals[0] += cols[0][0]
    totals[1] += cols[0][1]
    totals[2] += cols[1][0]
    totals[3] += cols[2][0]
    totals[4] += cols[2][1]
    print(f"| {coll} | {p} | {len(sizes)} | " + " | ".join(
        f"{w} of {n} ({m:.2f} at {s})" for w, n, m, s in cols) + " |")
print(f"\nbefore {totals[0]} of {totals[1]}, after {totals[2]} of {totals[1]} (sizes above the "
      f"boxes for broadcast and reduce); auto {totals[3]} of {totals[4]} (every size)")
