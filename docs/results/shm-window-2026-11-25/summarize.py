#!/usr/bin/env python3
"""Tables of docs/results/shm-window-2026-11-25.md from run.sh's JSON: per P, size and buffer
placement (staged: private buffers; window: a registered window), the best ccoll algorithm's
busbw and % of the memory-bandwidth bound, and its speed-up over MPI_Allreduce timed in
alternating blocks with it in the same run; medians over the repetitions (min-max in brackets).
"% bound" uses the B measured in the same run; "% max-B bound" the largest B of the whole series
(docs/benchmark.md: on a shared host a low B flatters the bound)."""
import glob
import json
import os
import re
import statistics
import sys


def best_rows(path):
    """{size: (busbw, pct_of_bound, speedup over the MPI rows paired with it, algo)}."""
    with open(path) as f:
        data = json.load(f)
    best_rows.max_b = max(getattr(best_rows, "max_b", 0.0), data.get("bound_membw_GBps") or 0.0)
    ours, mpi = {}, {}
    for r in data["results"]:
        if r["transport"] == "mpi":
            mpi[(r["paired_with"], r["size"])] = r["time_us"]
        elif r["wrong"] == 0:
            ours.setdefault(r["size"], []).append(r)
    best = {}
    for size, rows in ours.items():
        r = max(rows, key=lambda x: x["busbw_GBps"])
        peer = mpi.get((r["algo"], size))
        best[size] = (r["busbw_GBps"], r.get("pct_of_bound"),
                      peer / r["time_us"] if peer else None, r["algo"])
    return best


def fmt(values, spec):
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    med = statistics.median(values)
    if len(values) == 1:
        return format(med, spec)
    return f"{format(med, spec)} [{format(min(values), spec)}-{format(max(values), spec)}]"


def main(folder):
    runs = {}
    for path in sorted(glob.glob(os.path.join(folder, "p*-w*-r*.json"))):
        m = re.match(r"p(\d+)-w(\d)-r(\d+)\.json", os.path.basename(path))
        runs.setdefault((int(m[1]), int(m[2])), []).append(best_rows(path))
    max_b = getattr(best_rows, "max_b", 0.0)
    print(f"largest B of the series: {max_b:.2f} GB/s")
    for p in sorted({k[0] for k in runs}):
        bound = max_b * (p - 1) / p / p
        print(f"\nP = {p} (max-B bound: busbw {bound:.2f} GB/s)\n")
        print("| size | staged busbw | staged % bound | staged % max-B bound | staged / MPI | "
              "window busbw | window % bound | window % max-B bound | window / MPI | "
              "window / staged |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        staged, window = runs.get((p, 0), []), runs.get((p, 1), [])
        sizes = sorted({s for run in staged + window for s in run})
        for s in sizes:
            st = [run[s] for run in staged if s in run]
            wi = [run[s] for run in window if s in run]
            gain = [w[0] / t[0] for w, t in zip(wi, st)]
            print(f"| {s >> 20} MiB | {fmt([x[0] for x in st], '.2f')} | "
                  f"{fmt([x[1] for x in st], '.1f')} | "
                  f"{fmt([100 * x[0] / bound for x in st], '.1f')} | "
                  f"{fmt([x[2] for x in st], '.2f')}x | "
                  f"{fmt([x[0] for x in wi], '.2f')} | {fmt([x[1] for x in wi], '.1f')} | "
                  f"{fmt([100 * x[0] / bound for x in wi], '.1f')} | "
                  f"{fmt([x[2] for x in wi], '.2f')}x | {fmt(gain, '.2f')}x |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)))
