#!/bin/bash
# Builds and runs test/ucx/mm_wedge.c (README, Peer failure): RUNS runs with
# the victim killed inside a shared-memory send, then RUNS with it killed
# between two UCX calls. Each run prints how many of the good sender's
# messages arrived, of how many it sent, and whether any came out of order.
#   usage: test/ucx/mm_wedge.sh [RUNS]     (default 3)
set -euo pipefail
runs=${1:-3}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O1 -Wall -o "$work/mm_wedge" "$here/mm_wedge.c" -lucp -lucs
# ucxp2p's settings: shared memory with peer-failure support.
export UCX_TLS=${UCX_TLS:-shm,self} UCX_MM_ERROR_HANDLING=${UCX_MM_ERROR_HANDLING:-y}
export UCX_KEEPALIVE_INTERVAL=${UCX_KEEPALIVE_INTERVAL:-300ms}
for where in inside outside; do
    for i in $(seq 1 "$runs"); do
        d=$(mktemp -d "$work/run.XXXXXX")
        {
            "$work/mm_wedge" recv "$d" > "$d/recv.out" 2>&1 & r=$!
            "$work/mm_wedge" good "$d" > "$d/good.out" 2>&1 & g=$!
            "$work/mm_wedge" victim "$d" "$where" > "$d/victim.out" 2>&1 & v=$!
            wait $r || true; wait $g || true; wait $v || true
        } 2>/dev/null  # the victim's "Killed"
        got=$(sed -n 's/^recv end: \([0-9]*\) from good/\1/p' "$d/recv.out")
        sent=$(sed -n 's/^good sent \([0-9]*\).*/\1/p' "$d/good.out")
        gaps=$(grep -c "was due" "$d/recv.out" || true)
        echo "victim killed $where: recv got ${got:-?} of the ${sent:-?} messages good sent" \
             "($gaps out of order or missing)"
    done
done
