#!/usr/bin/env python3
"""verify.sh's JSON files: per collective, rank count and placement, auto's time over the fastest
registered algorithm's in the same run, per size; and auto's busbw over Open MPI's from 1 MiB.
  summarize.py OUT_DIR   (OUT_DIR of verify.sh)"""
import glob, json, os, sys, collections

out = sys.argv[1]

def fmt(b):
    for unit, s in (("G", 30), ("M", 20), ("K", 10)):
        if b >= 1 << s and b % (1 << s) == 0:
            return f"{b >> s}{unit}"
    return str(b)

print("| collective | P | buffers | sizes | auto within 10% of the best | worst auto / best (size, best) | median |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for path in sorted(glob.glob(f"{out}/*.json")):
    name = os.path.basename(path)[:-5]
    if name.endswith("-mpi"):
        continue
    d = json.load(open(path))
    if "results" not in d:  # the tuning table
        continue
    by_size = collections.defaultdict(dict)
    wrong = 0
    for r in d["results"]:
        wrong += max(0, r.get("wrong", 0))
        by_size[r["size"]][r["algo"]] = r["time_us"]
    ratios = []
    for size, t in sorted(by_size.items()):
        others = {a: v for a, v in t.items() if a != "auto"}
        best = min(others, key=others.get)
        ratios.append((t["auto"] / others[best], size, best))
    within = sum(1 for r, _, _ in ratios if r <= 1.10)
    worst = max(ratios)
    med = sorted(r for r, _, _ in ratios)[len(ratios) // 2]
    coll = d["results"][0]["collective"]
    p = d["results"][0]["nranks"]
    placement = "windowed" if d["options"].get("window") else "staged"
    print(f"| {coll} | {p} | {placement} | {fmt(min(by_size))}-{fmt(max(by_size))} | {within} of {len(ratios)}"
          f"{'' if wrong == 0 else f' ({wrong} WRONG)'} | {worst[0]:.2f} ({fmt(worst[1])}, {worst[2]}) | {med:.2f} |")

print()
print("| P | size | auto busbw | Open MPI busbw | ratio |")
print("| --- | --- | --- | --- | --- |")
for path in sorted(glob.glob(f"{out}/*-mpi.json")):
    d = json.load(open(path))
    for r in d["results"]:
        if r["algo"] != "auto":
            continue
        print(f"| {r['nranks']} | {fmt(r['size'])} | {r['busbw_GBps']:.2f} | {r['peer_busbw_GBps']:.2f} | "
              f"{r['busbw_GBps'] / r['peer_busbw_GBps']:.2f}x |")
