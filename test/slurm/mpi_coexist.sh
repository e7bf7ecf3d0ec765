#!/bin/bash
# Build test/slurm/mpi_coexist.cc with mpicxx (libtool links libp2pcore.la
# and its dependencies) and run it under mpirun -np 4 in both orders:
# MPI_Init before the PMIx bootstrap, and after it.
# Exit 77 (skip) when mpicxx/mpirun are not installed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=${P2P_TOP_BUILDDIR:-$src}
n=4
for tool in mpicxx mpirun pkg-config; do
    command -v $tool >/dev/null 2>&1 || { echo "mpi_coexist: SKIP: $tool not installed"; exit 77; }
done
[ -f "$build/libp2pcore.la" ] || { echo "mpi_coexist: $build/libp2pcore.la not built" >&2; exit 99; }

tmp=$(mktemp -d /tmp/mpi_coexist.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 99
# shellcheck disable=SC2046
timeout 300 mpicxx -std=c++17 -Wall -Wextra -Werror -Wno-unused-parameter \
    -I"$src/include" -I"$src/src" -I"$build" $(pkg-config --cflags pmix) \
    -DOMPI_SKIP_MPICXX=1 -DMPICH_SKIP_MPICXX=1 \
    -c "$here/mpi_coexist.cc" -o mpi_coexist.o || { echo "FAIL: compile"; exit 1; }
timeout 120 "$build/libtool" --quiet --tag=CXX --mode=link mpicxx -pthread \
    -o mpi_coexist mpi_coexist.o "$build/libp2pcore.la" || { echo "FAIL: link"; exit 1; }

failed=0
for order in mpi-first p2p-first; do
    timeout -k 5 60 mpirun -np $n --allow-run-as-root --oversubscribe \
        ./mpi_coexist $order >out.$order 2>&1
    rc=$?
    ok=$(grep -c '^mpi_coexist OK rank' out.$order)
    if [ $rc = 0 ] && [ "$ok" = $n ]; then
        echo "PASS: mpirun -np $n mpi_coexist $order"
    else
        echo "FAIL: mpirun -np $n mpi_coexist $order (rc $rc, $ok of $n OK):"
        cat out.$order
        failed=1
    fi
done
exit $failed
