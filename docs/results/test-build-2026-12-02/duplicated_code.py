#!/usr/bin/env python3
"""Object code of the tests' object files that is a copy of a function another object file has too.

  python3 duplicated_code.py BUILD_DIR/tests/CMakeFiles/*/*.o
Every defined symbol of the text and data sections counts (nm -S: T, t, W, V, D, d, R, r, B, b);
a weak one (W, V: inline functions, template instantiations, their guard variables) that
several object files define is one definition compiled once per file, of which the linker keeps
one. Local symbols (t) of the same name in two files are two functions, counted once each.
"""
import collections
import subprocess
import sys

size = {}
copies = collections.Counter()
total = 0
for obj in sys.argv[1:]:
    out = subprocess.run(["nm", "-S", "--size-sort", obj], capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) != 4 or parts[2] not in "TtWVDdRrBb":
            continue
        total += int(parts[1], 16)
        if parts[2] in "WV":
            size[parts[3]] = int(parts[1], 16)
            copies[parts[3]] += 1
duplicated = sum(size[n] * (copies[n] - 1) for n in copies)
print(f"{len(sys.argv) - 1} object files: {total} bytes of symbols, {duplicated} "
      f"({100 * duplicated / total:.0f}%) in weak copies that another object file also has")
top = sorted(copies, key=lambda n: -size[n] * (copies[n] - 1))[:25]
names = subprocess.run(["c++filt"], input="\n".join(top), capture_output=True, text=True).stdout
for n, d in zip(top, names.splitlines()):
    print(f"{size[n] * (copies[n] - 1):8d} {copies[n]:3d}  {d[:150]}")
