#!/bin/bash
# UCX 1.13's tcp crash on a keepalive to a closed endpoint (README, Peer
# failure): RUNS runs of `mp_rank comm-churn` (3 ranks, 30 communicators
# each created, used and destroyed) over UCX_TLS=tcp with UCP keepalive
# rounds every 10 ms and the close handshake off (P2P_CLOSE_HANDSHAKE=off:
# every endpoint closes at destroy), then RUNS with it on (the default),
# then RUNS with it off and keepalive off. Each line says whether a rank
# died of a segmentation fault inside libuct.
#   usage: test/ucx/tcp_ep_check.sh [RUNS]     (default 5; from the build tree)
# What happens: a peer's keepalive (UCP's EP_CHECK message) names an
# endpoint this rank closed already. UCP answers it over a temporary
# endpoint created inside the message handler; that endpoint takes over the
# tcp connection the message came on, with the messages after it still
# unparsed, and uct_tcp's parser then frees the buffer it lost (NULL):
# SIGSEGV at libuct.so.0+0x21650 (1.13.1-1, uct_tcp_ep_progress_am_rx).
# UCX 1.14 fixed the parser (openucx/ucx 3dd0828: it stops when the buffer
# has moved to a new endpoint).
set -uo pipefail
runs=${1:-5}
top=${P2P_TOP_BUILDDIR:-.}
p2prun=$top/tools/p2prun/p2prun
rank=$top/test/mp/mp_rank
[ -x "$p2prun" ] && [ -x "$rank" ] || {
    echo "build first (make && make test/mp/mp_rank), run from the build tree" >&2
    exit 2
}
for mode in 10ms:off 10ms:on inf:off; do
    ka=${mode%:*} hs=${mode#*:}
    crashed=0
    for i in $(seq 1 "$runs"); do
        out=$(timeout 200 "$p2prun" -n 3 --timeout 90 -x UCX_TLS=tcp -x UCX_NET_DEVICES=lo \
              -x P2P_PEER_TIMEOUT_MS=2000 -x UCX_KEEPALIVE_INTERVAL=$ka \
              -x P2P_CLOSE_HANDSHAKE=$hs -- "$rank" comm-churn 30 2>&1)
        rc=$?
        if grep -q 'Caught signal 11' <<<"$out" && grep -q 'libuct' <<<"$out"; then
            crashed=$((crashed + 1))
            echo "keepalive $ka, handshake $hs, run $i: a rank died of SIGSEGV in libuct (status $rc)"
        else
            echo "keepalive $ka, handshake $hs, run $i: status $rc, no crash"
        fi
    done
    echo "keepalive $ka, handshake $hs: $crashed of $runs runs crashed"
done
