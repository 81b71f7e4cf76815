#!/usr/bin/env python3
"""Tables of docs/results/collectives-2026-11-29.md from the JSON of run.sh: per collective, P,
size and window mode (w1: buffers in a registered window, w0: staged), ccoll's fastest plan,
Open MPI's best time in the blocks that alternated with it (the lowest over all plans' blocks),
and the ratio (> 1: ccoll faster).
usage: summarize.py DIR"""
import collections
import json
import sys

d = sys.argv[1]
rows = collections.OrderedDict()
for kind, ps in (("bw", (2, 4)), ("lat", (2, 3, 4))):
    for c in ("all_gather", "reduce_scatter"):
        for p in ps:
            for w in (1, 0):
                name = f"{d}/{kind}-{c}-p{p}-w{w}.json"
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
                    rows[(kind, c, p, size, w)] = (t, algo, bus, peer.get(size), wrong)
for kind in ("bw", "lat"):
    print(f"\n## {kind}\n")
    print("| collective | P | size (B) | window | ccoll us (plan) | Open MPI us | ratio | busbw ccoll GB/s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for (k, c, p, size, w), (t, algo, bus, pt, wrong) in rows.items():
        if k != kind:
            continue
        ratio = f"{pt / t:.2f}x" if pt else "-"
        mode = "yes" if w else "no"
        print(f"| {c} | {p} | {size} | {mode} | {t:.2f} ({algo}) | {pt:.2f} | {ratio} | {bus:.2f} |"
              + (f" wrong {wrong}" if wrong else ""))
