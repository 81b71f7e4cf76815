#!/usr/bin/env python3
"""Summarises peers_gloo_mpich.sh: per peer library, P and transport, a markdown table of ccoll's
busbw per algorithm and size with its ratio to the peer timed in alternating blocks with it, and
the load averages each run printed.   usage: summarize_peers.py DIR"""
import json
import pathlib
import sys

d = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/peers")
runs = {}  # (peer, p, transport) -> list of reports
for f in sorted(d.glob("*.json")):
    parts = f.stem.split("-")  # LIB-pP-TRANSPORT-sN, TRANSPORT may hold a dash (mpi-hybrid)
    lib, p, transport = parts[0], parts[1], "-".join(parts[2:-1])
    runs.setdefault((lib, int(p[1:]), transport), []).append(json.loads(f.read_text()))


def size_name(b):
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return f"{b >> shift} {unit}"
    return f"{b} B"


names = {"ompi": "Open MPI 4.1.4 MPI_Allreduce", "mpich": "MPICH 4.0.2 MPI_Allreduce",
         "gloo": "Gloo (Debian 0.0~git20220518) gloo::allreduce, ring"}
for (lib, p, transport), reports in sorted(runs.items(), key=lambda kv: (kv[0][1], kv[0][0], kv[0][2])):
    cells, peer, algos = {}, {}, []
    for rep in reports:
        for r in rep["results"]:
            if "paired_with" in r:
                peer.setdefault(r["size"], {})[r["paired_with"]] = r["busbw_GBps"]
                continue
            if r["algo"] not in algos:
                algos.append(r["algo"])
            cells[(r["size"], r["algo"])] = r
    loads = "; ".join(rep["machine"]["load_average"] for rep in reports)
    print(f"\n#### P = {p}, ccoll `--transport {transport}` vs {names[lib]}\n")
    print(f"Load averages at the start of the runs: {loads}.\n")
    print("| size | " + " | ".join(f"{a} busbw | {lib} busbw | ratio" for a in algos) + " |")
    print("|---:|" + "---:|---:|---:|" * len(algos))
    for size in sorted({s for s, _ in cells}):
        row = [size_name(size)]
        for a in algos:
            r = cells.get((size, a))
            if r is None:
                row += ["", "", ""]
                continue
            pb = peer.get(size, {}).get(a, 0)
            ratio = r["busbw_GBps"] / pb if pb > 0 else float("nan")
            wrong = "" if r["wrong"] == 0 and r.get("peer_wrong", 0) == 0 else " (WRONG)"
            row += [f"{r['busbw_GBps']:.3g}", f"{pb:.3g}", f"{ratio:.3g}x{wrong}"]
        print("| " + " | ".join(row) + " |")
