#!/bin/bash
# Run the multi-process scenarios of test/mp/mp_rank under one PMIx launcher,
# one after the other, each bounded by a timeout (run by mp_launchers.sh;
# for srun inside one private Slurm started by slurm_harness.sh).
#
#   mp_loop.sh srun|mpirun MP_RANK OUTDIR
#
# Environment: MP_RANKS (default 4), MP_TIMEOUT (seconds per run, default 90).
# Every rank runs with P2P_BOOTSTRAP=pmix (a rank that cannot use PMIx fails)
# and P2P_LOG_LEVEL=info; a run passes when the launcher exits 0, every rank
# printed "<scenario> ok" and logged "pmix bootstrap: rank", and no rank
# printed FAIL. Prints one PASS/FAIL line per run (with the output of a
# failed run); exits 1 if any run failed.
set -u
[ $# = 3 ] || { echo "usage: $0 srun|mpirun MP_RANK OUTDIR" >&2; exit 2; }
launcher=$1 prog=$2 outdir=$3
n=${MP_RANKS:-4}
limit=${MP_TIMEOUT:-90}

# transport | scenario and arguments (UCX over loopback only for tcp).
runs=(
    "shm,self|alltoall"
    "shm,self|unexpected"
    "shm,self|shuffle"
    "shm,self|batch 32"
    "shm,self|truncate"
    "shm,self|threads 8 6"
    "shm,self|shutdown"
    "tcp|alltoall 1048579"
)

launch() { # tls, then the mp_rank arguments
    local tls=$1
    shift
    export UCX_TLS=$tls UCX_NET_DEVICES=lo P2P_BOOTSTRAP=pmix \
        P2P_LOG_LEVEL=info P2P_PEER_TIMEOUT_MS=2000
    [ "$tls" = tcp ] || unset UCX_NET_DEVICES
    case "$launcher" in
    srun) # srun exports the whole environment to the tasks.
        timeout -k 5 "$limit" srun --mpi=pmix -n "$n" -O "$prog" "$@" ;;
    mpirun)
        local x=(-x UCX_TLS -x P2P_BOOTSTRAP -x P2P_LOG_LEVEL -x P2P_PEER_TIMEOUT_MS)
        [ "$tls" = tcp ] && x+=(-x UCX_NET_DEVICES)
        timeout -k 5 "$limit" mpirun -np "$n" --allow-run-as-root --oversubscribe \
            "${x[@]}" "$prog" "$@" ;;
    *) echo "mp_loop: unknown launcher $launcher" >&2; return 2 ;;
    esac
}

count() { grep -c -- "$1" "$2"; }

failed=0
for spec in "${runs[@]}"; do
    tls=${spec%%|*}
    args=${spec#*|}
    scen=${args%% *}
    label="$launcher -n $n, UCX_TLS=$tls: mp_rank $args"
    out=$outdir/$launcher.$scen.${tls%%,*}.log
    t0=$(date +%s%N)
    # shellcheck disable=SC2086
    (launch "$tls" $args) >"$out" 2>&1
    rc=$?
    ms=$((($(date +%s%N) - t0) / 1000000))
    ok=$(count "$scen ok" "$out")
    pmix=$(count "pmix bootstrap: rank" "$out")
    bad=$(count "FAIL" "$out")
    if [ $rc = 0 ] && [ "$ok" = "$n" ] && [ "$pmix" = "$n" ] && [ "$bad" = 0 ]; then
        echo "PASS: $label ($((ms / 1000)).$((ms % 1000 / 100)) s)"
    else
        [ $rc = 124 ] && echo "mp_loop: timed out after $limit s"
        echo "FAIL: $label (rc $rc; '$scen ok' from $ok of $n ranks; PMIx" \
            "bootstrap on $pmix of $n); output:"
        grep -v '\] info: ' "$out" | tail -n 60
        failed=1
    fi
done
exit $failed
