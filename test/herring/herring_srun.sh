#!/bin/bash
# As herring_mpirun.sh, under srun --mpi=pmix -n 8 inside a private Slurm
# (test/slurm/slurm_harness.sh), LD_PRELOAD given through --export; rails
# planned from SLURM_LOCALID.
# Exit 77 when Slurm/munge are not installed or we are not root.
set -u
. "$(cd "$(dirname "$0")" && pwd)/herring_env.sh"
n=8
out=$tmp/out
"$src/test/slurm/slurm_harness.sh" -t 100 -- \
    srun --mpi=pmix -n $n -O \
    --export="ALL,LD_PRELOAD=$preload,LD_LIBRARY_PATH=$LD_LIBRARY_PATH,P2P_LOG_LEVEL=info" \
    "$app" job $n >"$out" 2>&1
rc=$?
if [ $rc = 77 ]; then
    cat "$out"; exit 77
fi
ok=$(grep -c '^herring_app OK rank' "$out")
if [ $rc = 0 ] && [ "$ok" = $n ] && rails_ranks_ok "$out" $n SLURM_LOCALID/; then
    echo "PASS: srun --mpi=pmix -n $n herring_app job ($ok ranks OK)"
    exit 0
fi
echo "FAIL: srun --mpi=pmix -n $n herring_app job (rc $rc, $ok of $n ranks OK):"
cat "$out"
exit 1
