#!/usr/bin/env python3
"""Rules up to 64 KiB for reduce-scatter, all-gather, broadcast and reduce at P = 2, 3, 4 that serve
both hosts the VM has run on: the AMD host's three `--tune` runs (collectives-2026-11-30/tune/,
each candidate's median, as that page's derive.py takes it) and the Intel host's three verify.sh
runs (auto-small-2026-12-01/runs/, each candidate's median). A candidate's score at a size is its
worse ratio to the fastest candidate over the two hosts. Candidates scoring at most 1 + TOL may be
chosen; where none does, those within 2% of the best score. At P >= 3 only the one-hop plans may
be chosen where one of them may (derive.py of collectives-2026-11-30). Among the choices with the
fewest rule changes, the least summed score wins. Broadcasts and reduces of at most 96 bytes take
the fast boxes on host threads and shared memory whatever the plan, so the Intel runs (which have
the boxes) say nothing about the plans there; the AMD runs predate the boxes, and those sizes are
scored by them alone: their rules serve the transports without boxes (MPI). It prints the rules
and, for the table's rules before this page and the derived ones, the sizes at which the choice is
more than 10% behind the fastest on either host (on the AMD host only, at the boxed sizes).
  derive_two_hosts.py [TOL]   (TOL default 0.08: below the 10% that auto is held to)"""
import collections
import glob
import json
import os
import re
import statistics
import sys

tol = float(sys.argv[1]) if len(sys.argv) > 1 else 0.08
here = os.path.dirname(os.path.abspath(__file__))
results = os.path.dirname(here)


amd_samples = collections.defaultdict(
    lambda: collections.defaultdict(lambda: collections.defaultdict(list)))
for path in sorted(glob.glob(os.path.join(results, "collectives-2026-11-30", "tune", "*.json"))):
    for r in json.load(open(path))["results"]:
        if r.get("wrong", 0) == 0:
            amd_samples[(r["collective"], r["nranks"])][r["size"]][r["algo"]].append(r["time_us"])
amd = {section: {size: {a: statistics.median(t) for a, t in c.items()} for size, c in by.items()}
       for section, by in amd_samples.items()}

runs = [json.load(open(os.path.join(results, "auto-small-2026-12-01", "runs", f"run-{r}.json")))
        for r in "BCD"]
intel = {}
for key in runs[0]:
    m = re.match(r"(\w+)-p(\d)$", key)
    if not m:
        continue
    section = (m.group(1), int(m.group(2)))
    intel[section] = {
        int(s): {a: statistics.median(r[key][s][a] for r in runs) for a in c if a != "auto"}
        for s, c in runs[0][key].items()}

# The table's rules up to 64 KiB before this page (include/ccoll/algo/by_size.hpp at a80bdaf), as
# (name, max bytes).
before = {
    ("reduce_scatter", 2): [("ring+ll", 16384), ("direct", 65536)],
    ("reduce_scatter", 3): [("direct+ll", 65532)],
    ("reduce_scatter", 4): [("direct+ll", 65536)],
    ("all_gather", 2): [("direct+ll", 8192), ("direct", 65536)],
    ("all_gather", 3): [("direct+ll", 16380), ("ring", 65532)],
    ("all_gather", 4): [("direct+ll", 65536)],
    ("broadcast", 2): [("direct+ll", 512), ("ring", 65536)],
    ("broadcast", 3): [("direct", 8192), ("ring", 32768), ("dbtree", 65536)],
    ("broadcast", 4): [("direct+ll", 8), ("direct", 2048), ("ring", 65536)],
    ("reduce", 2): [("direct+ll", 2048), ("direct", 16384), ("tree+ll", 65536)],
    ("reduce", 3): [("direct", 8192), ("ring", 32768), ("direct", 65536)],
    ("reduce", 4): [("tree+ll", 8), ("direct", 65536)],
}


def boxed(section, size):
    return section[0] in ("broadcast", "reduce") and size <= 96


def rule_choice(rules, size):
    for name, max_bytes in rules:
        if size <= max_bytes:
            return name
    return None


def ratios(section, size, name):
    """(Intel, AMD) ratio of `name` to the fastest; Intel's is 1 at the boxed sizes."""
    i, a = intel[section][size], amd[section][size]
    return (1.0 if boxed(section, size) else i[name] / min(i.values()), a[name] / min(a.values()))


def derive(section, sizes):
    p = section[1]
    best = {}
    for s in sizes:
        names = [n for n in amd[section][s] if n in intel[section][s]]
        score = {n: max(ratios(section, s, n)) for n in names}
        lowest = min(score.values())
        allowed = {n for n in names if score[n] <= (1 + tol if lowest <= 1 + tol else lowest * 1.02)}
        if p >= 3 and allowed & {"direct", "direct+ll"}:
            allowed &= {"direct", "direct+ll"}
        nxt = {}
        for n in allowed:
            options = [(ch + (path[-1] != n), tot + score[n], path + [n])
                       for ch, tot, path in best.values()]
            nxt[n] = min(options, key=lambda o: (o[0], o[1])) if options else (0, score[n], [n])
        best = nxt
    return min(best.values(), key=lambda o: (o[0], o[1]))[2]


def behind(section, choices):
    out = []
    for s, n in choices:
        ri, ra = ratios(section, s, n)
        if ri > 1.10 or ra > 1.10:
            out.append(f"{s} {n} ({ri:.2f}/{ra:.2f})")
    return out


total = {"before": 0, "derived": 0, "sizes": 0}
for section in sorted(before):
    sizes = sorted(s for s in intel[section] if s in amd[section])
    wins = derive(section, sizes)
    rules = []
    for s, w in zip(sizes, wins):
        if rules and rules[-1][0] == w:
            rules[-1][1] = s
        else:
            rules.append([w, s])
    old = behind(section, [(s, rule_choice(before[section], s)) for s in sizes])
    new = behind(section, list(zip(sizes, wins)))
    total["before"] += len(old)
    total["derived"] += len(new)
    total["sizes"] += len(sizes)
    print(f"\n## {section[0]}, P = {section[1]} ({len(sizes)} sizes)")
    print("  before:", ", ".join(f"{n} <= {m}" for n, m in before[section]))
    print("    more than 10% behind on a host (intel/amd):", "; ".join(old) or "none")
    print("  derived:", ", ".join(f"{n} <= {m}" for n, m in rules))
    print("    more than 10% behind on a host (intel/amd):", "; ".join(new) or "none")
print(f"\nsizes more than 10% behind on either host: before {total['before']}, derived "
      f"{total['derived']}, of {total['sizes']}")
