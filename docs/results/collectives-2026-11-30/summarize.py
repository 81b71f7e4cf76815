#!/usr/bin/env python3
"""Tables of docs/results/collectives-2026-11-30.md from run.sh's JSON: per group and size, the
fastest ccoll plan's time of each build (median over the passes), `auto`'s time after (where it
ran), Open MPI's time in the same runs (median of each run's best block), and the ratios.

    summarize.py OUT_DIR
"""
import glob
import json
import os
import statistics
import sys


def best(path, size):
    """(ccoll's fastest plan time, its plan, Open MPI's time, auto's time or None) at `size`."""
    res = json.load(open(path))["results"]
    mine = [r for r in res if r["size"] == size and r["transport"] != "mpi"]
    peer = [r for r in res if r["size"] == size and r["transport"] == "mpi"]
    if not mine or not peer:
        return None
    top = min(mine, key=lambda r: r["time_us"])
    auto = [r["time_us"] for r in mine if r["algo"] == "auto"]
    return top["time_us"], top["algo"], min(r["time_us"] for r in peer), (auto[0] if auto else None)


def main(out):
    groups = {}
    for f in glob.glob(os.path.join(out, "*.json")):
        name = os.path.basename(f)[: -len(".json")]
        stem, build = name.rsplit("-", 1)
        group, _pass = stem.rsplit("-", 1)
        groups.setdefault(group, {}).setdefault(build, []).append(f)
    print("| group | size (B) | before us | after us | after / before | Open MPI us | Open MPI / after | auto after us | Open MPI / auto | plans after |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for group in sorted(groups):
        files = groups[group]
        sizes = sorted({r["size"] for r in json.load(open(files["after"][0]))["results"]})
        for size in sizes:
            rows = {b: [x for x in (best(f, size) for f in files.get(b, [])) if x] for b in ("before", "after")}
            if not rows["before"] or not rows["after"]:
                continue
            tb = statistics.median(x[0] for x in rows["before"])
            ta = statistics.median(x[0] for x in rows["after"])
            tm = statistics.median(x[2] for x in rows["after"])
            plans = ",".join(sorted({x[1] for x in rows["after"]}))
            autos = [x[3] for x in rows["after"] if x[3] is not None]
            auto = f"{statistics.median(autos):.3f} | {tm / statistics.median(autos):.2f}x" if autos else "- | -"
            print(f"| {group} | {size} | {tb:.3f} | {ta:.3f} | {ta / tb:.2f} | {tm:.3f} | {tm / ta:.2f}x | {auto} | {plans} |")


if __name__ == "__main__":
    main(sys.argv[1])
