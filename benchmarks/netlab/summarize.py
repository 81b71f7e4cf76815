#!/usr/bin/env python3
"""Tables of benchmarks/netlab/run_scenarios.sh's JSON files, for docs/results.

    benchmarks/netlab/summarize.py docs/results/netlab-2026-11-23 [scenario ...]

Per scenario and size: every ccoll algorithm's time and busbw, its ratio to the MPI library's
MPI_Allreduce timed in alternating blocks with it (the paired run), and its ratio to ccoll's ring
in the same run; then the best MPI_Allreduce figure of the run and the forest/ring and
tree-overlap/tree-phased ratios the issue asks for.
"""
import json
import pathlib
import sys


def main():
    root = pathlib.Path(sys.argv[1])
    names = sys.argv[2:] or ["homogeneous", "hetero", "hetero8", "racks"]
    for name in names:
        path = root / f"{name}.json"
        if not path.exists():
            continue
        d = json.loads(path.read_text())
        rows = [r for r in d["results"] if r["algo"] != "MPI_Allreduce"]
        peers = [r for r in d["results"] if r["algo"] == "MPI_Allreduce"]
        print(f"### {name}: {rows[0]['nranks']} ranks, transport {rows[0]['transport']}\n")
        print("| size | algorithm | time (ms) | busbw (MB/s) | vs MPI_Allreduce (paired) | vs ring |")
        print("| --- | --- | --- | --- | --- | --- |")
        by = {}
        for r in rows:
            by[(r["size"], r["algo"])] = r
        for r in rows:
            ring = by.get((r["size"], "ring"))
            vs_ring = r["busbw_GBps"] / ring["busbw_GBps"] if ring else float("nan")
            print(f"| {r['size'] >> 20} MiB | {r['algo']} | {r['time_us'] / 1e3:.0f} | "
                  f"{r['busbw_GBps'] * 1e3:.1f} | {r.get('ratio_to_peer', float('nan')):.2f}x | "
                  f"{vs_ring:.2f}x |")
        if peers:
            best = max(peers, key=lambda r: r["busbw_GBps"])
            worst = min(peers, key=lambda r: r["busbw_GBps"])
            print(f"\nMPI_Allreduce over its {len(peers)} paired blocks: busbw "
                  f"{worst['busbw_GBps'] * 1e3:.1f} .. {best['busbw_GBps'] * 1e3:.1f} MB/s.")
        for a, b in [("forest-overlap", "ring"), ("forest", "ring"), ("tree-overlap", "tree")]:
            for size in sorted({r["size"] for r in rows}):
                if (size, a) in by and (size, b) in by:
                    ra, rb = by[(size, a)], by[(size, b)]
                    print(f"- {a} / {b} at {size >> 20} MiB: busbw ratio "
                          f"{ra['busbw_GBps'] / rb['busbw_GBps']:.2f}x")
        print()


if __name__ == "__main__":
    main()
