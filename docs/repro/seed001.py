#!/usr/bin/python3
"""Reproduction of seed 001 (topology-adaptive forests): runs `ccoll simulate` on the clusters of
its Sec. VI and writes the tables and plots of docs/repro-seed001.md into docs/repro/seed001/
(results.csv, tables.md, PNG plots).

Usage (from the repository root, after `cmake --build build --target ccoll_cli`):
    docs/repro/seed001.py [--build build] [--out DIR] [--no-run] [--model physical|pairwise]
                          [--machines 2,4,8] [--max-gpus N] [--fig5-gbps 10,25,40,100]
                          [--no-fig6] [--resume]
--model physical (default, docs/repro/seed001/): the cluster presets, one NIC per machine on a
ToR switch. --model pairwise (docs/repro/seed001-pairwise/): seed 001's own abstraction, one edge
per pair of workers (`cluster:...:pairwise`).
"""
import argparse
import collections
import csv
import json
import os
import subprocess
import sys
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

BYTES = "1.33e9"  # seed 001 Sec. VI-A: 1.33 GB, about BERT-large
BASELINES = ["ring", "dbtree", "hdbtree", "ps", "blink"]
OURS = ["forest", "forest-overlap"]
ALGOS = BASELINES + OURS
FIELDS = ["experiment", "topology", "active", "algo", "nactive", "nranks", "time_s", "bound_s",
          "planning_s", "wall_s"]


def simulate(exe, topology, active, algos, overlap):
    cmd = [exe, "simulate", "--topology", topology, "--algo", ",".join(algos), "--bytes", BYTES,
           "--json"]
    if active:
        cmd += ["--active", ",".join(active)]
    if overlap:
        cmd.append("--overlap")
    t0 = time.time()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    wall = time.time() - t0
    rows = []
    for j in json.loads(out):
        algo = j["algorithm"] + ("-overlap" if overlap else "")
        rows.append({
            "algo": algo,
            "nactive": len(j["active"]),
            "nranks": j["plan"]["nranks"],
            "time_s": j["predicted"]["time_s"],
            "bound_s": j["forest"]["bandwidth_only_time_s"] if "forest" in j else "",
            "planning_s": j["forest"]["planning_s"] if "forest" in j else "",
            "wall_s": wall,
        })
    return rows


def machines_active(counts):
    """Active GPU ids: counts[m] GPUs 0..n-1 of machine m, or letters (A..H) per machine."""
    ids = []
    for m, c in enumerate(counts):
        if isinstance(c, str):
            ids += ["m%d.gpu%d" % (m, "ABCDEFGH".index(x)) for x in DGX_PICK[c]]
        else:
            ids += ["m%d.gpu%d" % (m, g) for g in range(c)]
    return ids


# Seed 001 Sec. VI-C: "2G" = workers A and G, "3G" = A, B, G, "4H" = A, B, G, H; a number n = the
# first n workers.
DGX_PICK = {"2G": "AG", "3G": "ABG", "4H": "ABGH"}

FIG5 = [(1, 1, 1, 1), (2, 2, 2, 2), (3, 3, 3, 3), (4, 4, 4, 4), (1, 2, 3, 4), (4, 1, 1, 1),
        (4, 4, 1, 1), (2, 1, 1, 0), (1, 1, 0, 0)]
FIG6 = [("2G",) * 8, ("3G",) * 8, ("4H",) * 8, (2,) * 8, (4,) * 8, (8,) * 8,
        (1, 2, 3, 4, 5, 6, 7, 8), ("2G", "3G", "4H", 2, 3, 4, 6, 8), (1,) * 8]


def label(pattern):
    return "(" + ",".join(str(x) for x in pattern) + ")"


def experiments(a):
    out = []
    sfx = ":pairwise" if a.model == "pairwise" else ""
    for M in a.machines:
        for G in [g for g in [4, 8] if M * g <= a.max_gpus]:
            for intra in ["pcie", "nvlink"]:
                for gbps in [10, 25, 40, 100]:
                    out.append(("fig4", "cluster:%dx%d:%s:%d%s" % (M, G, intra, gbps, sfx), "all",
                                None))
    for intra in ["pcie", "nvlink"]:
        for gbps in a.fig5_gbps:
            for p in FIG5:
                out.append(("fig5", "cluster:4x4:%s:%d%s" % (intra, gbps, sfx), label(p),
                            machines_active(p)))
    if a.fig6:
        for p in FIG6:
            out.append(("fig6", "cluster:8x8:nvlink:100" + sfx, label(p), machines_active(p)))
    return out


def run(a):
    exe = os.path.join(a.build, "tools", "ccoll")
    path = os.path.join(a.out, "results.csv")
    done = set()
    if a.resume and os.path.exists(path):
        with open(path) as f:
            rows = list(csv.DictReader(f))
        algos = collections.defaultdict(set)
        for r in rows:
            algos[(r["experiment"], r["topology"], r["active"])].add(r["algo"])
        done = {k for k, v in algos.items() if set(ALGOS) <= v}
        rows = [r for r in rows if (r["experiment"], r["topology"], r["active"]) in done]
    else:
        rows = []
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        for r in rows:
            w.writerow(r)
        for exp, topo, act_label, active in experiments(a):
            if (exp, topo, act_label) in done:
                continue
            rows = simulate(exe, topo, active, BASELINES + ["forest"], False)
            rows += simulate(exe, topo, active, ["forest"], True)
            for r in rows:
                r.update({"experiment": exp, "topology": topo, "active": act_label})
                w.writerow(r)
            f.flush()
            best = min((r for r in rows if r["algo"] in BASELINES), key=lambda r: r["time_s"])
            ours = min((r for r in rows if r["algo"] in OURS), key=lambda r: r["time_s"])
            print("%s %s %s: best baseline %s %.4g s, forest %.4g s (x%.2f)" % (
                exp, topo, act_label, best["algo"], best["time_s"], ours["time_s"],
                best["time_s"] / ours["time_s"]), flush=True)


def load(a):
    data = collections.defaultdict(dict)
    with open(os.path.join(a.out, "results.csv")) as f:
        for r in csv.DictReader(f):
            data[(r["experiment"], r["topology"], r["active"])][r["algo"]] = r
    return data


def t(cell):
    return float(cell["time_s"])


def summary(cells):
    best = min(BASELINES, key=lambda al: t(cells[al]))
    ours = min(OURS, key=lambda al: t(cells[al]))
    return best, ours, t(cells[best]) / t(cells[ours])


def suffix(data):
    return ":pairwise" if any(":pairwise" in k[1] for k in data) else ""


def tables(a, data):
    sfx = suffix(data)
    md = ["<!-- generated by docs/repro/seed001.py; do not edit -->\n"]
    fig4 = {k[1]: v for k, v in data.items() if k[0] == "fig4"}
    if fig4:
        md.append("### All workers active (Fig. 4): simulated time in seconds, 1.33 GB\n\n")
        md.append("| cluster | Gbps | " + " | ".join(ALGOS) +
                  " | forest bound | best baseline | forest speedup |\n")
        md.append("|" + " --- |" * (len(ALGOS) + 5) + "\n")
        for topo in fig4:
            cells = fig4[topo]
            best, ours, x = summary(cells)
            _, shape, intra, gbps = topo.split(":")[:4]
            md.append("| %s %s | %s | %s | %.3f | %s | **%.2f** |\n" % (
                shape, intra, gbps, " | ".join("%.3f" % t(cells[al]) for al in ALGOS),
                float(cells["forest"]["bound_s"]), best, x))
        md.append("\nForest speedup over the best baseline, by inter-machine bandwidth "
                  "(largest and mean over the clusters):\n\n| Gbps | largest | mean | at |\n"
                  "| --- | --- | --- | --- |\n")
        by_bw = collections.defaultdict(list)
        for topo, cells in fig4.items():
            by_bw[int(topo.split(":")[3])].append((summary(cells)[2], topo))
        for bw in sorted(by_bw):
            xs = by_bw[bw]
            top = max(xs)
            md.append("| %d | %.2f | %.2f | %s |\n" % (bw, top[0], sum(x for x, _ in xs) / len(xs),
                                                      top[1]))
    for exp, title in [("fig5", "Partial active workers on 4 machines x 4 GPUs (Fig. 5)"),
                       ("fig6", "Partial active workers on 8 DGX-1 machines, 100 Gbps (Fig. 6)")]:
        rows = {k: v for k, v in data.items() if k[0] == exp}
        if not rows:
            continue
        md.append("\n### %s: simulated time in seconds\n\n" % title)
        md.append("| cluster | active per machine | " + " | ".join(ALGOS) +
                  " | best baseline | forest speedup |\n")
        md.append("|" + " --- |" * (len(ALGOS) + 4) + "\n")
        for (_, topo, act), cells in rows.items():
            best, ours, x = summary(cells)
            md.append("| %s | %s | %s | %s | **%.2f** |\n" % (
                topo.replace("cluster:", ""), act,
                " | ".join("%.3f" % t(cells[al]) for al in ALGOS), best, x))
        xs = [summary(c)[2] for c in rows.values()]
        md.append("\nLargest forest speedup over the best baseline: **%.2f**; smallest: %.2f.\n" % (
            max(xs), min(xs)))
    fig7 = {k: v for k, v in data.items() if k[0] == "fig5" and ":nvlink:" not in k[1]}
    if fig7:
        md.append("\n### Overlap vs no overlap (Fig. 7): forest phased / forest overlapped, "
                  "4 x 4 PCIe, simulated (planner's bandwidth-only bound in brackets)\n\n"
                  "| active | " +
                  " | ".join("%s Gbps" % g for g in [10, 25, 40, 100]) + " |\n|" + " --- |" * 5 +
                  "\n")
        for p in FIG5:
            cells = []
            for g in [10, 25, 40, 100]:
                c = data.get(("fig5", "cluster:4x4:pcie:%d%s" % (g, sfx), label(p)))
                cells.append("%.3f (%.3f)" % (
                    t(c["forest"]) / t(c["forest-overlap"]),
                    float(c["forest"]["bound_s"]) / float(c["forest-overlap"]["bound_s"]))
                             if c else "-")
            md.append("| %s | %s |\n" % (label(p), " | ".join(cells)))
    with open(os.path.join(a.out, "tables.md"), "w") as f:
        f.write("".join(md))


def plots(a, data):
    sfx = suffix(data)
    plt.rcParams.update({"font.size": 8})
    colors = dict(zip(ALGOS, ["#1f77b4", "#aec7e8", "#ff7f0e", "#7f7f7f", "#2ca02c", "#d62728",
                              "#9467bd"]))
    fig4 = {k[1]: v for k, v in data.items() if k[0] == "fig4"}
    if fig4:
        fig, axes = plt.subplots(2, 4, figsize=(13, 5.5), dpi=80, sharey="row")
        for i, intra in enumerate(["pcie", "nvlink"]):
            for j, gbps in enumerate([10, 25, 40, 100]):
                ax = axes[i][j]
                topos = [tp for tp in fig4 if ":%s:%d" % (intra, gbps) in tp + ":" and
                         tp.split(":")[2:4] == [intra, str(gbps)]]
                width = 0.8 / len(ALGOS)
                for k, al in enumerate(ALGOS):
                    ax.bar([x + k * width for x in range(len(topos))],
                           [t(fig4[tp][al]) for tp in topos], width, label=al,
                           color=colors[al])
                ax.set_xticks([x + 0.4 - width / 2 for x in range(len(topos))])
                ax.set_xticklabels([tp.split(":")[1] for tp in topos])
                ax.set_yscale("log")
                ax.set_title("%s inside, %d Gbps between" % (intra, gbps))
                ax.grid(True, axis="y", alpha=0.3)
            axes[i][0].set_ylabel("time per allreduce of 1.33 GB (s)")
        axes[0][0].legend(fontsize=7, ncol=2)
        fig.tight_layout()
        fig.savefig(os.path.join(a.out, "fig4_all_active.png"))
        plt.close(fig)
    for exp, topos, name in [("fig5", [x + sfx for x in ["cluster:4x4:pcie:10",
                                                         "cluster:4x4:pcie:100",
                                                         "cluster:4x4:nvlink:10",
                                                         "cluster:4x4:nvlink:100"]],
                              "fig5_partial_4x4.png"),
                             ("fig6", ["cluster:8x8:nvlink:100" + sfx], "fig6_partial_8x8.png")]:
        panels = [tp for tp in topos if any(k[0] == exp and k[1] == tp for k in data)]
        if not panels:
            continue
        fig, axes = plt.subplots(len(panels), 1, figsize=(11, 2.6 * len(panels)), dpi=80,
                                 squeeze=False)
        for ax, tp in zip(axes[:, 0], panels):
            keys = [k for k in data if k[0] == exp and k[1] == tp]
            width = 0.8 / len(ALGOS)
            for k, al in enumerate(ALGOS):
                ax.bar([x + k * width for x in range(len(keys))], [t(data[kk][al]) for kk in keys],
                       width, label=al, color=colors[al])
            ax.set_xticks([x + 0.4 - width / 2 for x in range(len(keys))])
            ax.set_xticklabels([k[2] for k in keys], fontsize=7)
            ax.set_yscale("log")
            ax.set_title(tp.replace("cluster:", "") + ": active workers per machine")
            ax.set_ylabel("time (s)")
            ax.grid(True, axis="y", alpha=0.3)
        axes[0][0].legend(fontsize=7, ncol=4)
        fig.tight_layout()
        fig.savefig(os.path.join(a.out, name))
        plt.close(fig)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", default=None)
    ap.add_argument("--no-run", action="store_true")
    ap.add_argument("--model", choices=["physical", "pairwise"], default="physical")
    ap.add_argument("--machines", default="2,4,8")
    ap.add_argument("--fig5-gbps", default="10,25,40,100")
    ap.add_argument("--no-fig6", dest="fig6", action="store_false")
    ap.add_argument("--max-gpus", type=int, default=64, help="skip Fig. 4 clusters above this")
    ap.add_argument("--resume", action="store_true", help="keep the finished rows of results.csv")
    a = ap.parse_args()
    a.machines = [int(x) for x in a.machines.split(",") if x]
    a.fig5_gbps = [int(x) for x in a.fig5_gbps.split(",") if x]
    if a.out is None:
        a.out = "docs/repro/seed001" + ("-pairwise" if a.model == "pairwise" else "")
    os.makedirs(a.out, exist_ok=True)
    if not a.no_run:
        run(a)
    data = load(a)
    tables(a, data)
    plots(a, data)
    print("wrote %s/results.csv, tables.md and plots" % a.out)


if __name__ == "__main__":
    sys.exit(main())
