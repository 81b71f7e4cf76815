#!/usr/bin/env python3
"""mpi_large.sh's JSON files: per rank count and size, the busbw of auto, ring and direct, each over
Open MPI's MPI_Allreduce timed in alternating blocks with it, and Open MPI's range.
  summarize_mpi.py OUT_DIR/allreduce-p*-mpi.json"""
import json,sys,collections
for path in sys.argv[1:]:
    d=json.load(open(path))
    ours=collections.defaultdict(dict); mpi=collections.defaultdict(dict)
    for r in d['results']:
        if r['algo']=='MPI_Allreduce': mpi[r['size']][r['paired_with']]=r['busbw_GBps']
        else: ours[r['size']][r['algo']]=r['busbw_GBps']
    p=d['results'][0]['nranks']
    for s in sorted(ours):
        print(f"| {p} | {s>>20}M | " + " | ".join(f"{ours[s][a]:.2f} ({ours[s][a]/mpi[s][a]:.2f}x)" for a in ('auto','ring','direct')) + f" | {min(mpi[s].values()):.2f}-{max(mpi[s].values()):.2f} |")
