#!/usr/bin/env bash
# The external suites' collectives (MPICH coll tests, OSU -c) through libccoll_mpi.so on the
# network lab: four emulated hosts (network namespaces, 1 Gbit/s links), one rank per host, with
# and without the library (ring mode: MPI messages between hosts). Run from the repository root
# as root, after building build-perf; MPICH and OSU sources as in ../mpi-dropin-2026-11-28.md.
set -euo pipefail
out=${1:-/tmp/ccoll-ext-lab}
scripts/netlab down >/dev/null 2>&1 || true
scripts/netlab up --hosts 4 --rate 1gbit
trap 'scripts/netlab down' EXIT
printf '#!/bin/bash\nexec %s/scripts/netlab run --timeout 600 -- "$@"\n' "$PWD" >/tmp/labexec
chmod +x /tmp/labexec
tests/mpi_lib/run_external.sh --lib build-perf/lib/libccoll_mpi.so \
  --mpich /tmp/mpich-src/test/mpi --osu /tmp/osu-7.4 --work "$out" \
  --np "2 3 4" --algos "ring auto" --mpiexec /tmp/labexec --functions collectives
