#!/bin/bash
# The shim next to MPI: herring_mpi_app (MPI_Init before herringP2PInitialize,
# MPI calls between herring calls) built with mpicxx against the vendor
# header and the stub libsmddpcpp.so, run by mpirun -np 4 with the shim
# preloaded. Exit 77 when mpicxx/mpirun are not installed.
set -u
. "$(cd "$(dirname "$0")" && pwd)/herring_env.sh"
n=4
for tool in mpicxx mpirun; do
    command -v $tool >/dev/null 2>&1 || { echo "herring_mpi: SKIP: $tool not installed"; exit 77; }
done
stub=$build/test/herring/.libs/libsmddpcpp.so
timeout 300 mpicxx -std=c++17 -Wall -Wextra -DOMPI_SKIP_MPICXX=1 -DMPICH_SKIP_MPICXX=1 \
    "$here/herring_mpi_app.cc" -o "$tmp/herring_mpi_app" "$stub" \
    -Wl,-rpath,"$(dirname "$stub")" || { echo "FAIL: build herring_mpi_app"; exit 1; }
out=$tmp/out
timeout -k 5 100 mpirun -np $n --allow-run-as-root --oversubscribe \
    -x LD_PRELOAD="$preload" -x LD_LIBRARY_PATH -x P2P_LOG_LEVEL=error \
    "$tmp/herring_mpi_app" >"$out" 2>&1
rc=$?
ok=$(grep -c '^herring_mpi_app OK rank' "$out")
if [ $rc = 0 ] && [ "$ok" = $n ]; then
    echo "PASS: mpirun -np $n herring_mpi_app (MPI and the shim together, $ok ranks OK)"
    exit 0
fi
echo "FAIL: mpirun -np $n herring_mpi_app (rc $rc, $ok of $n ranks OK):"
cat "$out"
exit 1
