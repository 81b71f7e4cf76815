#!/usr/bin/env python3
"""Summarises the JSON files of issue2_shm_vs_mpi.sh as markdown tables.

Per (P, size, algorithm): the median and range over runs of busbw, of the ratio to MPI measured in
the same run, of % of the 2PN memory bound with the B measured in the same run, of % of the
strictest 2PN bound (the largest B measured in any of the runs: on a shared machine a disturbed
STREAM run underestimates B and flatters the in-run percentage), and of % of the staged bound
(docs/benchmark.md: every staged message written to and read from memory, same-run B).
Then, per (P, size), the targets of issue 2 item 9 for the best ccoll algorithm (by median busbw).

Usage: summarize_issue2.py DIR [DIR ...]"""
import glob
import json
import os
import re
import statistics
import sys
from collections import defaultdict


def bound_busbw(b_gbps, p):
    return b_gbps * (p - 1) / (p * p)  # docs/benchmark.md: busbw <= B(P-1)/P^2


def staged_bound_busbw(b_gbps, p):
    # docs/benchmark.md, "Through memory": traffic P(2N + 4(P-1)N/P) instead of 2PN.
    return bound_busbw(b_gbps, p) * p / (3.0 * p - 2.0)


def fmt(v, unit=""):
    if not v:
        return "n/a"
    return "%.2f%s (%.2f..%.2f)" % (statistics.median(v), unit, min(v), max(v))


def main():
    runs = []
    handoffs = []
    for d in sys.argv[1:]:
        for path in sorted(glob.glob(os.path.join(d, "*.json"))):
            with open(path) as f:
                runs.append(json.load(f))
        for path in sorted(glob.glob(os.path.join(d, "*.handoff.txt"))):
            with open(path) as f:
                cached = streamed = None
                for line in f:
                    m = re.match(r"\s*\d+KiB\s+(cached|streamed)\s+\S+\s+\S+\s+(\S+)", line)
                    if m and m.group(1) == "cached":
                        cached = float(m.group(2))
                    elif m:
                        streamed = float(m.group(2))
                if cached is not None and streamed is not None:
                    handoffs.append((os.path.basename(path), cached, streamed))
    if not runs:
        sys.exit("no JSON files in " + " ".join(sys.argv[1:]))
    b_max = max(j["bound_membw_GBps"] for j in runs)
    rows = defaultdict(lambda: {"busbw": [], "ratio": [], "pct": [], "pct_max": [], "staged": []})
    for j in runs:
        b = j["bound_membw_GBps"]
        for r in j["results"]:
            key = (r["nranks"], r["size"], r["algo"])
            v = rows[key]
            v["busbw"].append(r["busbw_GBps"])
            if "ratio_to_peer" in r:
                v["ratio"].append(r["ratio_to_peer"])
            if "pct_of_bound" in r:
                v["pct"].append(r["pct_of_bound"])
            v["pct_max"].append(100.0 * r["busbw_GBps"] / bound_busbw(b_max, r["nranks"]))
            if b > 0:
                v["staged"].append(100.0 * r["busbw_GBps"] / staged_bound_busbw(b, r["nranks"]))

    print("Median over runs (min..max). Ratio: ccoll busbw / MPI busbw in the same run. "
          "%% of bound: the 2PN bound B(P-1)/P^2 with the B measured in the same run; strictest: "
          "with B = %.2f GB/s, the largest measured in any run; staged: the through-memory bound "
          "B(P-1)/P^2 * P/(3P-2), same-run B." % b_max)
    print()
    print("| P | size | algorithm | runs | busbw (GB/s) | ratio to MPI | % of bound (same run) "
          "| % of strictest bound | % of staged bound |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    order = {"MPI_Allreduce": 0, "ring": 1, "dbtree": 2, "tree": 3, "tree-overlap": 4, "direct": 5}
    for key in sorted(rows, key=lambda k: (k[0], k[1], order.get(k[2], 9))):
        p, size, algo = key
        v = rows[key]
        print("| %d | %d MiB | %s | %d | %s | %s | %s | %s | %s |" % (
            p, size >> 20, algo, len(v["busbw"]), fmt(v["busbw"]), fmt(v["ratio"], "x"),
            fmt(v["pct"], "%"), fmt(v["pct_max"], "%"), fmt(v["staged"], "%")))

    print()
    print("Targets (issue 2 item 9) for the best ccoll algorithm per cell, by median busbw: "
          "ratio >= 3x, % of the 2PN bound >= 60%.")
    print()
    print("| P | size | best algorithm | busbw | MPI busbw | ratio | >= 3x? | % of bound | >= 60%? "
          "| % of staged bound |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    cells = sorted({(k[0], k[1]) for k in rows})
    for p, size in cells:
        algos = [k for k in rows if k[0] == p and k[1] == size and k[2] != "MPI_Allreduce"]
        if not algos:
            continue
        best = max(algos, key=lambda k: statistics.median(rows[k]["busbw"]))
        v = rows[best]
        mpi = rows.get((p, size, "MPI_Allreduce"), {"busbw": []})["busbw"]
        ratio = statistics.median(v["ratio"]) if v["ratio"] else float("nan")
        pct = statistics.median(v["pct"]) if v["pct"] else float("nan")
        staged = statistics.median(v["staged"]) if v["staged"] else float("nan")
        print("| %d | %d MiB | %s | %.2f | %s | %.2fx | %s | %.1f%% | %s | %.1f%% |" % (
            p, size >> 20, best[2], statistics.median(v["busbw"]),
            "%.2f" % statistics.median(mpi) if mpi else "n/a", ratio,
            "yes" if ratio >= 3 else "no", pct, "yes" if pct >= 60 else "no", staged))
    print()
    print("B per run (GB/s): " + ", ".join("%.2f" % j["bound_membw_GBps"] for j in runs))
    print()
    print("load average at the end of each run: " +
          "; ".join(j["machine"]["load_average"] for j in runs))
    if handoffs:
        print()
        print("CPU 0 -> CPU 1 slot handoff before each run, 64 KiB messages, end-to-end GB/s "
              "(cached / streamed): " +
              "; ".join("%s %.1f / %.1f" % (n.split(".")[0], c, s) for n, c, s in handoffs))


if __name__ == "__main__":
    main()
