#!/usr/bin/env python3
"""Tables of docs/results/collectives-2026-11-29b.md from the JSON of run.sh: per collective, P,
size and mode (lat: eager = --eager_rooted 4K, default = agreement first; bw: window =
--window 1, staged = --window 0), for each pass, ccoll's fastest plan, Open MPI's best time in the
blocks that alternated with it (the lowest over all plans' blocks), the ratio (> 1: ccoll
faster) and ccoll's busbw.
usage: summarize.py DIR"""
import collections
import json
import sys

d = sys.argv[1]
rows = collections.OrderedDict()
modes = {"lat": (("e4K", "eager"), ("e0", "default")), "bw": (("w1", "window"), ("w0", "staged"))}
for kind, ps in (("bw", (2, 4)), ("lat", (2, 3, 4))):
    for c in ("broadcast", "reduce"):
        for p in ps:
            for tag, mode in modes[kind]:
                for pass_ in (1, 2):
                    name = f"{d}/{kind}-{c}-p{p}-{tag}-{pass_}.json"
                    try:
                        res = json.load(open(name))["results"]
                    except (OSError, ValueError, KeyError):
                        continue
                    best, peer, wrong = {}, {}, 0
                    for r in res:
                        wrong += r.get("wrong", 0)
                        key = r["size"]
                        if r["transport"] == "mpi":
                            if key not in peer or r["time_us"] < peer[key]:
                                peer[key] = r["time_us"]
                        elif key not in best or r["time_us"] < best[key][0]:
                            best[key] = (r["time_us"], r["algo"], r["busbw_GBps"])
                    for size in sorted(best):
                        t, algo, bus = best[size]
                        rows[(kind, c, p, size, mode, pass_)] = (t, algo, bus, peer.get(size), wrong)
for kind in ("bw", "lat"):
    print(f"\n## {kind}\n")
    print("| collective | P | size (B) | mode | pass | ccoll us (plan) | Open MPI us | ratio | busbw GB/s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for (k, c, p, size, mode, pass_), (t, algo, bus, pt, wrong) in rows.items():
        if k != kind:
            continue
        ratio = f"{pt / t:.2f}x" if pt else "-"
        print(f"| {c} | {p} | {size} | {mode} | {pass_} | {t:.2f} ({algo}) | {pt:.2f} | {ratio} | {bus:.2f} |"
              + (f" wrong {wrong}" if wrong else ""))
