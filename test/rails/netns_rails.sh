#!/bin/bash
# Multi-rail end to end: two network namespaces joined by 4 veth pairs, each
# rate-limited with tc tbf; one rails_bw rank per namespace (UCX_TLS=tcp,
# P2P_RAILS naming the veths) over 1, 2 and 4 rails; then 2 veths named by
# the user in UCX_NET_DEVICES instead (no rail plan: the plan must still let
# rendezvous stripe, see docs/PERFORMANCE-RAILS.md). Asserts that bytes
# flowed on every rail used; prints the aggregate bandwidth against one rail
# (reported, not asserted: the machine is shared).
# Needs root, ip and tc (exit 77 otherwise). Everything it creates is
# removed on every exit path.
# Knobs: RAILS_RATE (tbf rate per veth, default 300mbit), RAILS_BW_COUNT
# (messages, default 64), RAILS_BW_SIZE (bytes, default 4 MiB),
# RAILS_COUNTS (default "1 2 4"), RAILS_NET_DEVICES (default 1: the
# UCX_NET_DEVICES run; 0 skips it).
set -u
BUILD=${P2P_TOP_BUILDDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
BW=$BUILD/test/rails/rails_bw
RATE=${RAILS_RATE:-300mbit}
export RAILS_BW_COUNT=${RAILS_BW_COUNT:-64}
export RAILS_BW_SIZE=${RAILS_BW_SIZE:-4194304}
COUNTS=${RAILS_COUNTS:-1 2 4}
NPAIRS=4

skip() { echo "netns_rails: SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (network namespaces)"
command -v ip >/dev/null && command -v tc >/dev/null || skip "needs ip and tc"
[ -x "$BW" ] || { echo "netns_rails: $BW not built"; exit 1; }

TAG=$$
NS0=p2prl${TAG}a
NS1=p2prl${TAG}b
TMP=$(mktemp -d /tmp/p2p-netns-rails.XXXXXX)
PIDS=""
cleanup() {
    for p in $PIDS; do kill "$p" 2>/dev/null; done
    ip netns del "$NS0" 2>/dev/null
    ip netns del "$NS1" 2>/dev/null   # deleting a namespace removes its veths
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

ip netns add "$NS0" 2>/dev/null && ip netns add "$NS1" 2>/dev/null ||
    skip "cannot create network namespaces here"
ip -n "$NS0" link set lo up && ip -n "$NS1" link set lo up || exit 1
# Rail i is veth pair RAIL[i], named the same at both ends. UCX takes a
# host's devices in /sys/class/net directory order and pairs an endpoint's
# lanes with the peer's devices in that order. Hosts of a cluster list their
# rails alike, but sysfs orders a namespace's entries by a hash that includes
# the namespace, so the same names come out in different orders: UCX then
# paired rail 0 with the peer's rail 2 and so on, the kernel routed each
# lane out of another veth, and some rails carried nothing (a starved rail
# in about 1 of 15 runs; the ep_cfg and connect() lines showed it). So each
# pair is renamed until both namespaces list the rails in the same order.
# The hash is close to linear in the name, so names that differ in one
# character keep their relative order in most pairs of namespaces: a rail can
# need dozens of names (up to 39 in 31 trials with counter names; random
# ones spread better), hence random names and a generous bound. The
# namespaces are private, so the names need no job tag.
rails_order() { ip netns exec "$1" ls -U /sys/class/net | grep '^rl[0-9]*q' | tr '\n' ' '; }
declare -a RAIL
renames=0
for i in $(seq 0 $((NPAIRS - 1))); do
    try=0
    while :; do
        RAIL[$i]=rl${try}q${RANDOM}_$i
        ip link add "${RAIL[$i]}" netns "$NS0" type veth peer name "${RAIL[$i]}" \
            netns "$NS1" || skip "cannot create veth pairs"
        [ "$(rails_order "$NS0")" = "$(rails_order "$NS1")" ] && break
        ip -n "$NS0" link del "${RAIL[$i]}" || exit 1
        try=$((try + 1))
        [ $try -lt 1000 ] || skip "cannot give both namespaces the same device order"
    done
    renames=$((renames + try))
done
for i in $(seq 0 $((NPAIRS - 1))); do
    d=${RAIL[$i]}
    ip -n "$NS0" addr add 10.213.$i.1/24 dev "$d" &&
    ip -n "$NS1" addr add 10.213.$i.2/24 dev "$d" &&
    ip -n "$NS0" link set "$d" up && ip -n "$NS1" link set "$d" up || exit 1
    for ns in "$NS0" "$NS1"; do
        ip netns exec "$ns" tc qdisc add dev "$d" root tbf rate "$RATE" \
            burst 256kb latency 50ms || skip "tc tbf unavailable"
    done
done
echo "netns_rails: rails in sysfs order on both sides ($renames renames): $(rails_order "$NS0")"

# Both ends of every veth must have carrier before UCX looks for devices:
# UCX skips an interface that is not yet running ("device not available").
wait_running() {
    local deadline=$((SECONDS + 10)) i
    while :; do
        local all=1
        for i in $(seq 0 $((NPAIRS - 1))); do
            for ns in "$NS0" "$NS1"; do
                [ "$(ip netns exec "$ns" cat "/sys/class/net/${RAIL[$i]}/operstate" 2>/dev/null)" = up ] || all=0
            done
        done
        [ $all = 1 ] && return 0
        if [ $SECONDS -ge $deadline ]; then
            echo "netns_rails: FAIL: veths not running after 10 s" >&2
            ip -n "$NS0" link show >&2; ip -n "$NS1" link show >&2
            return 1
        fi
        sleep 0.1
    done
}
wait_running || exit 1

tx_bytes() { ip netns exec "$1" cat "/sys/class/net/$2/statistics/tx_bytes"; }

# run N: one transfer over the first N rails; sets MIBS
run() {
    local n=$1 r0="" r1="" i
    for i in $(seq 0 $((n - 1))); do
        r0+="${r0:+,}${RAIL[$i]}"; r1+="${r1:+,}${RAIL[$i]}"
    done
    local -a before
    for i in $(seq 0 $((n - 1))); do before[$i]=$(tx_bytes "$NS0" "${RAIL[$i]}"); done
    local port=$((20000 + (TAG + n * 97 + ${2:+1}0 + ${VIA:+7}0) % 20000))
    # UCX's info log names each endpoint's lanes (ep_cfg lines): printed
    # with the ranks' output when a rail starves.
    local common="UCX_TLS=tcp WORLD_SIZE=2 MASTER_ADDR=10.213.0.1 P2P_MASTER_PORT=$port
        P2P_JOB_TOKEN=netns-rails-$TAG-$n P2P_BOOTSTRAP_TIMEOUT_MS=20000
        UCX_LOG_LEVEL=${UCX_LOG_LEVEL:-info} P2P_LOG_LEVEL=info"
    PIDS=""
    local sel=P2P_RAILS
    [ "${VIA:-}" = net_devices ] && sel=UCX_NET_DEVICES
    ip netns exec "$NS0" env $common RANK=0 $sel="$r0" timeout 50 "$BW" \
        >"$TMP/r0.$n" 2>&1 & PIDS="$!"
    ip netns exec "$NS1" env $common RANK=1 $sel="$r1" timeout 50 "$BW" \
        >"$TMP/r1.$n" 2>&1 & PIDS="$PIDS $!"
    local rc=0 p
    for p in $PIDS; do wait "$p" || rc=1; done
    PIDS=""
    if [ $rc != 0 ]; then
        echo "netns_rails: $n rail(s): a rank failed"; cat "$TMP/r0.$n" "$TMP/r1.$n"
        # Debian's UCX 1.13 tcp transport rarely dereferences a NULL receive
        # buffer in uct_tcp_iface_progress while several tcp lanes connect
        # and carry rendezvous data (1 in 30 four-rail runs here under ASAN
        # with both cores busy; see docs/PERFORMANCE-RAILS.md). That crash
        # (UCX's own signal report naming its tcp progress) gets the one
        # retry; any other failure, or crashing twice, fails.
        if [ "${2:-}" != retry ] &&
            grep -q 'Caught signal 11' "$TMP/r0.$n" "$TMP/r1.$n" &&
            grep -q 'uct_tcp_iface_progress' "$TMP/r0.$n" "$TMP/r1.$n"; then
            echo "netns_rails: WARN: $n rail(s): a rank crashed inside UCX's tcp progress; retrying once"
            run "$n" retry
            return
        fi
        echo "netns_rails: FAIL: $n rail(s): a rank failed"
        exit 1
    fi
    MIBS=$(sed -n 's/.*= \([0-9.]*\) MiB\/s/\1/p' "$TMP/r0.$n")
    [ -n "$MIBS" ] || { echo "netns_rails: FAIL: no result"; cat "$TMP/r0.$n"; exit 1; }
    # With several tcp rails and a UCX older than 1.20 (no route check when
    # pairing lanes) the library says so in its rail log.
    local v
    v=$(sed -n 's/.*UCX  INFO  Version \([0-9]*\.[0-9]*\).*/\1/p' "$TMP/r0.$n" | head -1)
    if [ "$n" -ge 2 ] && [ -n "$v" ] && [ $sel = P2P_RAILS ] &&
        awk -v v="$v" 'BEGIN { split(v, a, "."); exit !(a[1] == 1 && a[2] < 20) }' &&
        ! grep -q "rails: $n tcp rails: UCX $v pairs" "$TMP/r0.$n"; then
        echo "netns_rails: FAIL: $n rail(s): no tcp-rails note with UCX $v"
        cat "$TMP/r0.$n"; exit 1
    fi
    local total=$((RAILS_BW_COUNT * RAILS_BW_SIZE)) line="" starved=""
    for i in $(seq 0 $((n - 1))); do
        local d=$(( $(tx_bytes "$NS0" "${RAIL[$i]}") - before[i] ))
        line+=" rail$i=$((d >> 20))MiB($d B)"
        # Every rail must carry a real share (at least a quarter of even).
        [ $d -ge $((total / n / 4)) ] || starved+=" $i"
    done
    if [ -n "$starved" ]; then
        # Every rail's count and both ranks' output (with UCX's ep_cfg
        # lane lines), for the record. The known cause, rails listed in
        # different orders by the two namespaces, is ruled out above (4 of
        # 14 runs starved beside an ASAN mp_test before, 0 of 14 after);
        # one retry still guards against anything else, and starving twice
        # in a row fails.
        echo "netns_rails: $n rail(s): rail(s)$starved carried less than" \
             "a quarter of an even share:$line"
        cat "$TMP/r0.$n" "$TMP/r1.$n"
        if [ "${2:-}" = retry ]; then
            echo "netns_rails: FAIL: $n rail(s): starved again"; exit 1
        fi
        echo "netns_rails: WARN: $n rail(s): retrying once"
        run "$n" retry
        return
    fi
    echo "netns_rails: $n rail(s)${VIA:+ via $sel}: $MIBS MiB/s;$line"
}

declare -A BWS
for n in $COUNTS; do
    run "$n"
    BWS[$n]=$MIBS
done
if [ -n "${BWS[1]:-}" ]; then
    for n in $COUNTS; do
        awk -v n="$n" -v a="${BWS[$n]}" -v b="${BWS[1]}" \
            'BEGIN { printf "netns_rails: %d rail(s) / 1 rail = %.2fx\n", n, a / b }'
    done
fi
if [ "${RAILS_NET_DEVICES:-1}" = 1 ]; then
    VIA=net_devices run 2
fi
echo "netns_rails: PASS (rate $RATE per veth, $RAILS_BW_COUNT x $RAILS_BW_SIZE bytes)"
