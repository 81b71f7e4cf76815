#!/usr/bin/env python3
"""Summarises the JSON files of issue2_shm_vs_mpi.sh: per (P, size, algorithm) the median and
range over runs of busbw, of the ratio to MPI measured in the same run, and of % of the memory
bound, as a markdown table. Usage: summarize_issue2.py DIR [DIR ...]"""
import glob
import json
import os
import statistics
import sys
from collections import defaultdict


def main():
    rows = defaultdict(lambda: {"busbw": [], "ratio": [], "pct": []})
    loads = []
    for d in sys.argv[1:]:
        for path in sorted(glob.glob(os.path.join(d, "*.json"))):
            with open(path) as f:
                j = json.load(f)
            loads.append(j["machine"]["load_average"])
            for r in j["results"]:
                key = (r["nranks"], r["size"], r["algo"])
                rows[key]["busbw"].append(r["busbw_GBps"])
                if "ratio_to_peer" in r:
                    rows[key]["ratio"].append(r["ratio_to_peer"])
                if "pct_of_bound" in r:
                    rows[key]["pct"].append(r["pct_of_bound"])

    def fmt(v, unit=""):
        if not v:
            return "n/a"
        return "%.2f%s (%.2f..%.2f)" % (statistics.median(v), unit, min(v), max(v))

    print("| P | size | algorithm | runs | busbw GB/s median (min..max) | ratio to MPI | % of bound |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    order = {"MPI_Allreduce": 0, "ring": 1, "dbtree": 2, "tree": 3, "tree-overlap": 4}
    for key in sorted(rows, key=lambda k: (k[0], k[1], order.get(k[2], 9))):
        p, size, algo = key
        v = rows[key]
        print("| %d | %d MiB | %s | %d | %s | %s | %s |" % (
            p, size >> 20, algo, len(v["busbw"]), fmt(v["busbw"]), fmt(v["ratio"], "x"),
            fmt(v["pct"], "%")))
    print()
    print("load averages at the end of the runs: " + "; ".join(loads))


if __name__ == "__main__":
    main()
