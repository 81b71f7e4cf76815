#!/usr/bin/env python3
"""verify_large.sh's JSON files: per collective, rank count, placement and size, auto's time over
the fastest other registered algorithm's in the same interleaved run, one ratio per pass, and
their median over the passes; auto's choice (staged) from `ccoll plan --algo auto`.
  summarize_large.py OUT_DIR [BUILD_DIR]"""
import collections, glob, json, os, re, statistics, subprocess, sys

out = sys.argv[1]
build = sys.argv[2] if len(sys.argv) > 2 else "build-perf"


def fmt(b):
    for unit, s in (("G", 30), ("M", 20), ("K", 10)):
        if b >= 1 << s and b % (1 << s) == 0:
            return f"{b >> s}{unit}"
    return str(b)


def choice(coll, p, size):
    try:
        text = subprocess.run([f"{build}/tools/ccoll", "plan", "--topology", f"uniform:{p}", "--algo",
                               "auto", "--bytes", str(size), "--collective", coll],
                              capture_output=True, text=True, timeout=60).stdout
        return text.split()[0] if text else "?"
    except Exception:  # noqa: BLE001: a missing tool leaves the column empty
        return "?"


# (collective, P, placement) -> size -> pass -> {algo: time}
runs = collections.defaultdict(lambda: collections.defaultdict(dict))
wrong = 0
for path in sorted(glob.glob(f"{out}/*-pass*.json")):
    m = re.match(r"(.+)-p(\d+)-(staged|window)-pass(\d+)\.json", os.path.basename(path))
    d = json.load(open(path))
    key = (m.group(1), int(m.group(2)), "windowed" if m.group(3) == "window" else "staged")
    for r in d["results"]:
        wrong += max(0, r.get("wrong", 0))
        runs[key][r["size"]].setdefault(int(m.group(4)), {})[r["algo"]] = r["time_us"]

print("| collective | P | buffers | sizes | auto within 10% of the best (median over passes) "
      "| worst median auto / best (size, auto's plan, fastest other) | median |")
print("| --- | --- | --- | --- | --- | --- | --- |")
details = []
for key in sorted(runs):
    coll, p, placement = key
    meds = []
    for size, passes in sorted(runs[key].items()):
        ratios, bests = [], []
        for t in passes.values():
            others = {a: v for a, v in t.items() if a != "auto"}
            best = min(others, key=others.get)
            ratios.append(t["auto"] / others[best])
            bests.append(best)
        med = statistics.median(ratios)
        common = collections.Counter(bests).most_common(1)[0][0]
        meds.append((med, size, common, ratios))
    within = sum(1 for r, *_ in meds if r <= 1.10)
    worst = max(meds)
    pick = choice(coll, p, worst[1]) if placement == "staged" else "-"
    overall = statistics.median(r for r, *_ in meds)
    print(f"| {coll} | {p} | {placement} | {fmt(min(runs[key]))}-{fmt(max(runs[key]))} | "
          f"{within} of {len(meds)} | {worst[0]:.2f} ({fmt(worst[1])}, {pick}, {worst[2]}) | "
          f"{overall:.2f} |")
    for med, size, best, ratios in meds:
        if med > 1.10:
            details.append((coll, p, placement, size, med, best, ratios))

print()
print("Sizes whose median is above 1.10, with every pass's ratio:")
print()
print("| collective | P | buffers | size | auto's plan | fastest other (most passes) | median | per pass |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for coll, p, placement, size, med, best, ratios in details:
    pick = choice(coll, p, size) if placement == "staged" else "-"
    print(f"| {coll} | {p} | {placement} | {fmt(size)} | {pick} | {best} | {med:.2f} | "
          f"{', '.join(f'{r:.2f}' for r in ratios)} |")
print()
print(f"wrong elements in every result: {wrong}")
