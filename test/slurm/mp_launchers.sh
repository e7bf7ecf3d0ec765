#!/bin/bash
# The multi-process scenarios of test/mp/mp_rank (alltoall, unexpected,
# shuffle, batch, truncate, threads, shutdown over UCX_TLS=shm,self, and
# alltoall over tcp) with 4 ranks under both PMIx launchers (make check):
#   1. mpirun -np 4 --allow-run-as-root --oversubscribe (OpenMPI)
#   2. srun --mpi=pmix -n 4 inside ONE private Slurm (slurm_harness.sh runs
#      mp_loop.sh, which loops over the scenarios)
# Every rank is forced onto the PMIx bootstrap (P2P_BOOTSTRAP=pmix) and must
# log it. Exit 77 (skip) only when not root or a launcher is not installed;
# a Slurm that cannot start is a failure (the harness prints its logs).
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=${P2P_TOP_BUILDDIR:-$(cd "$here/../.." && pwd)}
prog=$build/test/mp/mp_rank
[ -x "$prog" ] || { echo "mp_launchers: $prog not built" >&2; exit 99; }
if [ "$(id -u)" != 0 ]; then
    echo "mp_launchers: SKIP: must run as root (Slurm daemons; mpirun as root)"
    exit 77
fi
for tool in mpirun srun slurmctld slurmd munged; do
    if ! command -v "$tool" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$tool" ]; then
        echo "mp_launchers: SKIP: $tool not installed (apt-get install openmpi-bin slurm-wlm munge)"
        exit 77
    fi
done

# Strip launcher variables we may have inherited (make check under srun).
. "$here/../launcher_env.sh"
unset_launcher_vars tcp

outdir=$(mktemp -d /tmp/mp_launchers.XXXXXX) || exit 99
trap 'rm -rf "$outdir"' EXIT
failed=0

"$here/mp_loop.sh" mpirun "$prog" "$outdir" || failed=1

# One Slurm for every srun run: 8 runs of at most MP_TIMEOUT (90) s each.
"$here/slurm_harness.sh" -t 600 -- "$here/mp_loop.sh" srun "$prog" "$outdir"
rc=$?
case $rc in
0) ;;
1) failed=1 ;;
*) echo "FAIL: srun runs: slurm_harness.sh exited $rc"; failed=1 ;;
esac
exit $failed
