#!/usr/bin/env python3
"""Rules up to 64 KiB for reduce-scatter, all-gather, broadcast and reduce at P = 2, 3, 4 that serve
both hosts the VM has run on: the AMD host's medians (collectives-2026-11-30/derived.txt, three
`--tune` runs) and the Intel host's (auto-small-2026-12-01/runs/, three verify.sh runs, the
median per candidate). A candidate's score at a size is its worse ratio to the fastest candidate
over the two hosts; those within TOL of 1 (or, where none is, within 2% of the best score) may be
chosen, at P >= 3 only the one-hop plans where one of them may (derive.py of
collectives-2026-11-30); among the choices with the fewest rule changes, the least summed score.
Broadcasts and reduces of at most 96 bytes (runtime::kFastBoxPayload) take the fast boxes whatever
the plan, so every plan is allowed there and none is counted behind. It prints the rules and, for
the table's current rules and the derived ones, the sizes at which the choice is more than 10%
behind the fastest on either host.
  derive_two_hosts.py [TOL]   (TOL default 0.05)"""
import json
import os
import re
import statistics
import sys

tol = float(sys.argv[1]) if len(sys.argv) > 1 else 0.05
here = os.path.dirname(os.path.abspath(__file__))
results = os.path.dirname(here)


def parse_size(text):
    return int(text[:-1]) * 1024 if text.endswith("K") else int(text)


amd = {}
current_rules = {}
section = None
for line in open(os.path.join(results, "collectives-2026-11-30", "derived.txt")):
    m = re.match(r"## (\w+), P = (\d+)", line)
    if m:
        section = (m.group(1), int(m.group(2)))
        amd[section] = {}
        continue
    m = re.match(r"\s+(\d+K?): (\S+)\s+([\d.]+)\s+(.*)", line)
    if m and section:
        toks = m.group(4).split()
        amd[section][parse_size(m.group(1))] = {
            toks[i]: float(toks[i + 1]) for i in range(0, len(toks), 2)}

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

# The table's current rules up to 64 KiB (include/ccoll/algo/by_size.hpp), as (name, max bytes).
current = {
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


def rule_choice(rules, size):
    for name, max_bytes in rules:
        if size <= max_bytes:
            return name
    return None


def ratios(section, size, name):
    i, a = intel[section][size], amd[section][size]
    return i[name] / min(i.values()), a[name] / min(a.values())


def boxed(section, size):
    return section[0] in ("broadcast", "reduce") and size <= 96


def derive(section, sizes):
    p = section[1]
    best = {}
    for s in sizes:
        names = [n for n in amd[section][s] if n in intel[section][s]]
        score = {n: 0.0 if boxed(section, s) else max(ratios(section, s, n)) for n in names}
        lowest = min(score.values())
        allowed = {n for n in names if score[n] <= max(1 + tol, lowest * 1.02)}
        if p >= 3 and allowed & {"direct", "direct+ll"} and not boxed(section, s):
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
        if boxed(section, s):
            continue
        ri, ra = ratios(section, s, n)
        if ri > 1.10 or ra > 1.10:
            out.append(f"{s} {n} ({ri:.2f}/{ra:.2f})")
    return out


total = {"current": 0, "derived": 0, "sizes": 0}
for section in sorted(current):
    sizes = sorted(s for s in intel[section] if s in amd[section])
    wins = derive(section, sizes)
    rules = []
    for s, w in zip(sizes, wins):
        if rules and rules[-1][0] == w:
            rules[-1][1] = s
        else:
            rules.append([w, s])
    cur = behind(section, [(s, rule_choice(current[section], s)) for s in sizes])
    new = behind(section, list(zip(sizes, wins)))
    total["current"] += len(cur)
    total["derived"] += len(new)
    total["sizes"] += len(sizes)
    print(f"\n## {section[0]}, P = {section[1]} ({len(sizes)} sizes)")
    print("  current:", ", ".join(f"{n} <= {m}" for n, m in current[section]))
    print("    more than 10% behind on a host (intel/amd):", "; ".join(cur) or "none")
    print("  derived:", ", ".join(f"{n} <= {m}" for n, m in rules))
    print("    more than 10% behind on a host (intel/amd):", "; ".join(new) or "none")
print(f"\nsizes more than 10% behind on either host: current {total['current']}, derived "
      f"{total['derived']}, of {total['sizes']}")
