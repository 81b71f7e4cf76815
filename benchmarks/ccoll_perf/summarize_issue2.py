#!/usr/bin/env python3
"""Summarises the JSON files of issue2_shm_vs_mpi.sh as a markdown table: per (P, size, algorithm)
the median and range over runs of busbw, of the ratio to MPI measured in the same run, of % of the
memory bound measured in the same run, and of % of the strictest bound (the largest memory
bandwidth B measured in any of the runs: on a shared machine a disturbed STREAM run underestimates
B and flatters the in-run percentage).

Usage: summarize_issue2.py DIR [DIR ...]"""
import glob
import json
import os
import statistics
import sys
from collections import defaultdict


def bound_busbw(b_gbps, p):
    return b_gbps * (p - 1) / (p * p)  # docs/benchmark.md: busbw <= B(P-1)/P^2


def main():
    runs = []
    for d in sys.argv[1:]:
        for path in sorted(glob.glob(os.path.join(d, "*.json"))):
            with open(path) as f:
                runs.append(json.load(f))
    if not runs:
        sys.exit("no JSON files in " + " ".join(sys.argv[1:]))
    b_max = max(j["bound_membw_GBps"] for j in runs)
    rows = defaultdict(lambda: {"busbw": [], "ratio": [], "pct": [], "pct_max": []})
    for j in runs:
        for r in j["results"]:
            key = (r["nranks"], r["size"], r["algo"])
            v = rows[key]
            v["busbw"].append(r["busbw_GBps"])
            if "ratio_to_peer" in r:
                v["ratio"].append(r["ratio_to_peer"])
            if "pct_of_bound" in r:
                v["pct"].append(r["pct_of_bound"])
            v["pct_max"].append(100.0 * r["busbw_GBps"] / bound_busbw(b_max, r["nranks"]))

    def fmt(v, unit=""):
        if not v:
            return "n/a"
        return "%.2f%s (%.2f..%.2f)" % (statistics.median(v), unit, min(v), max(v))

    print("Median over runs (min..max). Ratio: ccoll busbw / MPI busbw in the same run. "
          "%% of bound: against the B measured in the same run; strictest: against "
          "B = %.2f GB/s, the largest measured in any run." % b_max)
    print()
    print("| P | size | algorithm | runs | busbw (GB/s) | ratio to MPI | % of bound (same run) "
          "| % of strictest bound |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    order = {"MPI_Allreduce": 0, "ring": 1, "dbtree": 2, "tree": 3, "tree-overlap": 4}
    for key in sorted(rows, key=lambda k: (k[0], k[1], order.get(k[2], 9))):
        p, size, algo = key
        v = rows[key]
        print("| %d | %d MiB | %s | %d | %s | %s | %s | %s |" % (
            p, size >> 20, algo, len(v["busbw"]), fmt(v["busbw"]), fmt(v["ratio"], "x"),
            fmt(v["pct"], "%"), fmt(v["pct_max"], "%")))
    print()
    print("B per run (GB/s): " + ", ".join("%.2f" % j["bound_membw_GBps"] for j in runs))
    print()
    print("load average at the end of each run: " +
          "; ".join(j["machine"]["load_average"] for j in runs))


if __name__ == "__main__":
    main()
