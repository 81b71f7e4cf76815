#!/usr/bin/env python3
"""Summary of run.sh's logs (docs/results/shm-large-2026-11-24.md): the targets table (busbw
against the memory-bandwidth bound B(P-1)/P^2 and against the staged ceiling P/(3P-2) of it,
docs/benchmark.md), the P = 4 ring variants, the handoff costs and the profile's shares."""
import json
import os
import re
import sys



def collective_shares(script_path):
    """Samples of `perf script` output whose call chain is inside the collective (run_steps, the
    communicator's run, its control plane), by the category of the leaf frame."""
    rules = [("copy+reduce", r"stream_copy|element_loop|memmove|memcpy|_pass|fold_"),
             ("waits+scheduler", r"yield|schedule|finish_task_switch|nanosleep|hrtimer|_raw_spin|"
              r"clock_gettime|run_steps|try_step|Backoff|syscall|futex|switch|pick_next|"
              r"update_curr|enqueue|dequeue|psi_|rcu|tick|irq|timer|vdso|check_peers|wait")]
    counts, block = {}, []

    def flush():
        if len(block) < 2 or not re.search(r"run_steps|Communicator<|AreaControlPlane",
                                           " ".join(block[1:])):
            return
        cat = next((c for c, rx in rules if re.search(rx, block[1])), "other")
        counts[cat] = counts.get(cat, 0) + 1

    with open(script_path, errors="replace") as f:
        for line in f:
            if line.strip():
                block.append(line)
            else:
                flush()
                block = []
    flush()
    total = sum(counts.values()) or 1
    return "".join(f"  {c:18s} {100.0 * n / total:5.1f}%  ({n} samples)\n"
                   for c, n in sorted(counts.items(), key=lambda kv: -kv[1]))


if len(sys.argv) > 2 and sys.argv[1] == "--shares":
    sys.stdout.write(collective_shares(sys.argv[2]))
    sys.exit(0)

here = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))


def load(name):
    path = os.path.join(here, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def mib(size):
    return f"{size >> 20} MiB"


bounds = {}
print("## Targets: the best algorithm per cell (>= 60% of the 2PN bound)")
print("| P | size | best | busbw (GB/s) | MPI busbw | ratio | % of bound | >= 60%? |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for p in (2, 4):
    d = load(f"p{p}.json")
    if d is None:
        continue
    rows = [r for r in d["results"] if r.get("transport") == "shm"]
    for size in sorted({r["size"] for r in rows}):
        r = max((r for r in rows if r["size"] == size), key=lambda r: r["busbw_GBps"])
        pct = r.get("pct_of_bound")
        verdict = "-" if pct is None else ("yes" if pct >= 60 else f"no ({pct - 60:+.0f} points)")
        print(f"| {p} | {mib(size)} | {r['algo']} | {r['busbw_GBps']:.2f} | "
              f"{r.get('peer_busbw_GBps', float('nan')):.2f} | {r.get('ratio_to_peer', float('nan')):.2f}x | "
              f"{pct if pct is not None else float('nan'):.1f}% | {verdict} |")
print("\n## Every algorithm")
print("| P | size | algorithm | busbw (GB/s) | MPI busbw | ratio | % of 2PN bound | staged ceiling | >= 60%? |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for p in (2, 4):
    d = load(f"p{p}.json")
    if d is None:
        continue
    bounds[p] = d.get("bound_membw_GBps")
    ceiling = 100.0 * p / (3 * p - 2)
    rows = [r for r in d["results"] if r.get("transport") == "shm"]
    for size in sorted({r["size"] for r in rows}):
        for r in sorted((r for r in rows if r["size"] == size), key=lambda r: -r["busbw_GBps"]):
            pct = r.get("pct_of_bound")
            verdict = "-" if pct is None else ("yes" if pct >= 60 else f"no ({pct - 60:+.0f} points)")
            print(f"| {p} | {mib(size)} | {r['algo']} | {r['busbw_GBps']:.2f} | "
                  f"{r.get('peer_busbw_GBps', float('nan')):.2f} | {r.get('ratio_to_peer', float('nan')):.2f}x | "
                  f"{pct if pct is not None else float('nan'):.1f}% | {ceiling:.0f}% | {verdict} |")
for p, b in bounds.items():
    print(f"\nP = {p}: B = {b} GB/s, bound busbw = {b * (p - 1) / p / p:.2f} GB/s")

print("\n## P = 4 ring variants (busbw GB/s, % of the bound of p4.json's B)")
b4 = bounds.get(4)
for variant in ("streamed-1M", "cached-1M", "cached-256K", "streamed-4M",
                "pinned-neighbours-streamed", "pinned-neighbours-cached", "pinned-apart"):
    d = load(f"p4-ring-{variant}.json")
    if d is None:
        continue
    cells = []
    for r in d["results"]:
        pct = f" ({100 * r['busbw_GBps'] / (b4 * 3 / 16):.0f}%)" if b4 else ""
        cells.append(f"{mib(r['size'])}: {r['busbw_GBps']:.2f}{pct}")
    print(f"  {variant:26s} " + ", ".join(cells))

for name in ("handoff.txt", "slot_handoff.txt"):
    path = os.path.join(here, name)
    if os.path.exists(path):
        print(f"\n## {name}")
        with open(path) as f:
            print("".join(l for l in f if not l.startswith("# command") and not l.startswith("# date")))

path = os.path.join(here, "p4-ring.shares.txt")
if os.path.exists(path):
    print("## P = 4 ring, 64 MiB: where the collective's CPU time goes (cpu-clock samples)")
    with open(path) as f:
        print(f.read(), end="")
