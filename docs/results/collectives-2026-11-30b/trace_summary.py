#!/usr/bin/env python3
"""trace.sh's h3.trace as the slow host's tx and rx rates (Mbit/s) per 50 ms: trace_summary.py FILE"""
import sys

rows = [tuple(float(x) for x in line.split()) for line in open(sys.argv[1]) if line.strip()]
buckets = {}
for prev, cur in zip(rows, rows[1:]):
    b = buckets.setdefault(int((cur[0] - rows[0][0]) / 0.05), [0.0, 0.0, 0.0])
    b[0] += cur[1] - prev[1]
    b[1] += cur[2] - prev[2]
    b[2] += cur[0] - prev[0]
print("t_s tx_Mbit rx_Mbit sum")
for k in sorted(buckets):
    tx, rx, dt = buckets[k]
    if tx + rx > 1000:
        t, r = tx * 8 / dt / 1e6, rx * 8 / dt / 1e6
        print(f"{k * 0.05:.2f} {t:.0f} {r:.0f} {t + r:.0f}")
