#!/bin/bash
# mpirun -np 8 with LD_PRELOAD=libucxp2p_herring.so (exported to the ranks
# only, so it wins over the stub libsmddpcpp.so the program is linked with):
# vendor demo, all-to-all with payload checks, late receives, truncation,
# Shutdown with pending receives; the core planned every rank's rails from
# its OMPI_COMM_WORLD_LOCAL_RANK. Exit 77 when mpirun is not installed.
set -u
. "$(cd "$(dirname "$0")" && pwd)/herring_env.sh"
n=8
command -v mpirun >/dev/null 2>&1 || { echo "herring_mpirun: SKIP: mpirun not installed"; exit 77; }
out=$tmp/out
timeout -k 5 100 mpirun -np $n --allow-run-as-root --oversubscribe \
    -x LD_PRELOAD="$preload" -x LD_LIBRARY_PATH -x P2P_LOG_LEVEL=info \
    "$app" job $n >"$out" 2>&1
rc=$?
ok=$(grep -c '^herring_app OK rank' "$out")
if [ $rc = 0 ] && [ "$ok" = $n ] && rails_ranks_ok "$out" $n OMPI_COMM_WORLD_LOCAL_RANK/; then
    echo "PASS: mpirun -np $n herring_app job ($ok ranks OK)"
    exit 0
fi
echo "FAIL: mpirun -np $n herring_app job (rc $rc, $ok of $n ranks OK):"
cat "$out"
exit 1
