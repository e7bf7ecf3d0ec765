#!/bin/bash
# Measure wireup time (bootstrap create + p2p_comm_create) of tools/demo/p2p_demo
# under mpirun, srun --mpi=pmix and p2prun (tcp/env bootstrap), from the info
# log lines the library writes. Not part of make check (numbers, not checks).
#
#   wireup_times.sh mpirun|p2prun|srun RANKS [REPEATS]
#
# srun needs a Slurm: run it inside the private one, e.g.
#   test/slurm/slurm_harness.sh -t 300 -- test/slurm/wireup_times.sh srun 4 3
# Prints one line per run with the maximum over ranks (ms) of:
#   boot  the bootstrap's own part ("pmix bootstrap: ... wireup X ms"; for
#         tcp/env rank 0's "all N ranks joined in X ms")
#   comm  "comm N: rank r of n ready in X ms" (the worker address allgather)
#   setup p2p_demo's own "setup X ms": p2p_context_create +
#         p2p_bootstrap_create + p2p_comm_create, i.e. init to ready; the
#         maximum over ranks is when the whole job is ready
#         (start-up skew between ranks lands in boot for tcp/env, whose
#         rank 0 waits for every rank to connect, and in comm for PMIx,
#         whose first fence waits for the slowest rank)
#   wall  the launcher command from start to exit (process start-up, UCX
#         context, wireup, one 8-byte all-to-all, teardown)
set -u
[ $# -ge 2 ] || { echo "usage: $0 mpirun|p2prun|srun RANKS [REPEATS]" >&2; exit 2; }
launcher=$1 n=$2 reps=${3:-3}
here=$(cd "$(dirname "$0")" && pwd)
# The build tree: P2P_TOP_BUILDDIR, else the current directory when it is
# one (a VPATH build), else the source tree.
build=${P2P_TOP_BUILDDIR:-}
[ -n "$build" ] || { [ -f libucxp2p.la ] && build=$(pwd); }
[ -n "$build" ] || build=$(cd "$here/../.." && pwd)
demo=$build/tools/demo/p2p_demo
[ -x "$demo" ] || { echo "wireup_times: $demo not built" >&2; exit 1; }
args=(-s 8 -t 1 -i 1)
export P2P_LOG_LEVEL=info UCX_TLS=${UCX_TLS:-shm,self}
out=$(mktemp /tmp/wireup_times.XXXXXX)
trap 'rm -f "$out"' EXIT

max_of() { # sed expression extracting the number; prints the max or "-"
    sed -n "$1" "$out" | sort -g | tail -n 1 | grep . || echo -
}

for i in $(seq "$reps"); do
    t0=$(date +%s%N)
    case "$launcher" in
    mpirun)
        timeout -k 5 120 mpirun -np "$n" --allow-run-as-root --oversubscribe \
            -x P2P_LOG_LEVEL -x UCX_TLS "$demo" "${args[@]}" >"$out" 2>&1 ;;
    srun)
        timeout -k 5 120 srun --mpi=pmix -n "$n" -O "$demo" "${args[@]}" >"$out" 2>&1 ;;
    p2prun)
        timeout -k 5 120 "$build/tools/p2prun/p2prun" -n "$n" --timeout 100 \
            -- "$demo" "${args[@]}" >"$out" 2>&1 ;;
    *) echo "unknown launcher $launcher" >&2; exit 2 ;;
    esac
    rc=$?
    wall=$((($(date +%s%N) - t0) / 1000000))
    boot=$(max_of 's/.*pmix bootstrap: .*wireup \([0-9.]*\) ms.*/\1/p; s/.*all [0-9]* ranks joined in \([0-9.]*\) ms.*/\1/p')
    comm=$(max_of 's/.*comm [0-9]*: rank [0-9]* of [0-9]* ready in \([0-9.]*\) ms.*/\1/p')
    setup=$(max_of 's/.*payload verified; setup \([0-9.]*\) ms.*/\1/p')
    echo "$launcher n=$n run $i: rc $rc boot $boot ms, comm $comm ms, setup $setup ms, wall $wall ms"
    [ $rc = 0 ] || tail -n 20 "$out"
done
