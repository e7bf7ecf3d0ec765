#!/bin/bash
# Build test/slurm/mpi_coexist.cc with mpicxx against the public API
# (libtool links libucxp2p.la) and run it under mpirun -np 4 in both orders:
# MPI_Init before ucxp2p (context, PMIx bootstrap, communicator), and after,
# with MPI over its default pml and over pml ucx.
# Exit 77 (skip) when mpicxx/mpirun are not installed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=${P2P_TOP_BUILDDIR:-$src}
n=4
for tool in mpicxx mpirun; do
    command -v $tool >/dev/null 2>&1 || { echo "mpi_coexist: SKIP: $tool not installed"; exit 77; }
done
[ -f "$build/libucxp2p.la" ] || { echo "mpi_coexist: $build/libucxp2p.la not built" >&2; exit 99; }

tmp=$(mktemp -d /tmp/mpi_coexist.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 99
# shellcheck disable=SC2086
timeout 300 mpicxx -std=c++17 -Wall -Wextra -Werror -Wno-unused-parameter ${P2P_SAN_FLAGS-} \
    -I"$src/include" \
    -DOMPI_SKIP_MPICXX=1 -DMPICH_SKIP_MPICXX=1 \
    -c "$here/mpi_coexist.cc" -o mpi_coexist.o || { echo "FAIL: compile"; exit 1; }
timeout 120 "$build/libtool" --quiet --tag=CXX --mode=link mpicxx -pthread ${P2P_SAN_FLAGS-} \
    -o mpi_coexist mpi_coexist.o "$build/libucxp2p.la" || { echo "FAIL: link"; exit 1; }

# MPI over its default pml (Debian disables pml ucx in
# /etc/openmpi/openmpi-mca-params.conf), then over pml ucx: MPI and ucxp2p
# each with their own UCX context in one process.
ucx_mca="--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any"
failed=0
for pml in default ucx; do
    mca=
    [ $pml = ucx ] && mca=$ucx_mca
    for order in mpi-first p2p-first; do
        log=out.$pml.$order
        # shellcheck disable=SC2086
        timeout -k 5 60 mpirun -np $n --allow-run-as-root --oversubscribe $mca \
            ./mpi_coexist $order >$log 2>&1
        rc=$?
        ok=$(grep -c '^mpi_coexist OK rank' $log)
        label="mpirun -np $n (pml $pml) mpi_coexist $order"
        if [ $rc = 0 ] && [ "$ok" = $n ]; then
            echo "PASS: $label"
        else
            echo "FAIL: $label (rc $rc, $ok of $n OK):"
            cat $log
            failed=1
        fi
    done
done
exit $failed
