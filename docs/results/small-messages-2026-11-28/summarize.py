#!/usr/bin/env python3
"""Tables of docs/results/small-messages-2026-11-28.md from the JSON of protocols.sh and
acceptance.sh: per P and size, ccoll's time per call and its speed-up over MPI_Allreduce timed in
alternating blocks with it in the same run (peer time / ccoll time: above 1, ccoll is faster);
the peer is Open MPI's MPI_Allreduce in the runs named auto, ll and simple, MPICH's in those named
mpich and Gloo's allreduce (TCP over loopback) in those named gloo;
medians over the repetitions, [min-max] in brackets.

  summarize.py DIR PREFIX   (PREFIX: proto or accept)"""
import glob
import json
import os
import re
import statistics
import sys


def load(path):
    """{size: (ccoll time, speed-up)} of one run."""
    with open(path) as f:
        data = json.load(f)
    mpi, ours = {}, {}
    for r in data["results"]:
        if r["transport"] in ("mpi", "gloo"):
            mpi[r["size"]] = r["time_us"]
        elif r["wrong"] == 0:
            ours[r["size"]] = r["time_us"]
    return {s: (t, mpi[s] / t if s in mpi else None) for s, t in ours.items()}


def cell(values, spec):
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    med = statistics.median(values)
    return f"{med:{spec}} [{min(values):{spec}}-{max(values):{spec}}]"


def size_text(b):
    for unit, n in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= n and b % n == 0:
            return f"{b // n} {unit}"
    return f"{b} B"


def main():
    here, prefix = sys.argv[1], sys.argv[2]
    runs = {}  # (p, variant) -> [run]
    for path in sorted(glob.glob(os.path.join(here, prefix + "-*.json"))):
        m = re.match(prefix + r"-p(\d+)-(\w+)-r(\d+)\.json", os.path.basename(path))
        if m:
            runs.setdefault((int(m.group(1)), m.group(2)), []).append(load(path))
    for p in sorted({k[0] for k in runs}):
        variants = sorted(v for (q, v) in runs if q == p)
        sizes = sorted({s for v in variants for run in runs[(p, v)] for s in run})
        print(f"\n### P = {p} ({len(runs[(p, variants[0])])} runs)\n")
        peer = {"mpich": "MPICH", "gloo": "Gloo"}
        head = "| size |" + "".join(
            f" {v}: ccoll (us) | vs {peer.get(v, 'Open MPI')} |" for v in variants)
        print(head)
        print("|" + " --- |" * (1 + 2 * len(variants)))
        for s in sizes:
            row = f"| {size_text(s)} |"
            for v in variants:
                vals = [run[s] for run in runs[(p, v)] if s in run]
                row += f" {cell([t for t, _ in vals], '.3f')} | {cell([x for _, x in vals], '.2f')}x |"
            print(row)


if __name__ == "__main__":
    main()
