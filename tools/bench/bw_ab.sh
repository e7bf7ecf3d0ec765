#!/bin/bash
# Bandwidth at one message size: built trees (each optionally with extra
# environment) against ucx_perftest tag_bw, plain and with -e (peer error
# handling, as ucxp2p's endpoints have), alternated in rounds so that each
# round's points are taken within the same minute; prints every round and
# the medians. This machine's speed drifts between phases: compare within
# rounds and medians of the same invocation, never across invocations.
#
#   tools/bench/bw_ab.sh [-n ROUNDS] [-t TLS] [-s SIZE] [-m MSGS] [-x LANES] [-p POOL] TREE[+VAR=VAL...]...
#
# TREE: a configured and built ucxp2p tree. +VAR=VAL: environment for that
# entry only (e.g. . .+UCX_MAX_EAGER_RAILS=1 compares the default with one
# setting). SIZE in bytes (default 524288), MSGS per point (default 4096,
# window 64 everywhere). Server/rank 0 on core 0, client/rank 1 on core 1.
# -x LANES (tcp): also plain loopback sockets receiving straight into the
# destination buffer (tools/bench/tcp_micro.c, built into /tmp), over 1 and
# over LANES connections: what a tcp path without UCX's copy out of its
# receive segments could reach.
# -p POOL: the trees' p2p_perftest rotate through a buffer pool of POOL
# bytes (its -p), as an application's distinct tensors do; ucx_perftest has
# no pool (its columns stay on one reused buffer).
set -euo pipefail
rounds=5 tls=tcp,self size=524288 msgs=4096 lanes=0 pool=0
while getopts "n:t:s:m:x:p:" o; do
    case $o in
    n) rounds=$OPTARG ;;
    t) tls=$OPTARG ;;
    s) size=$OPTARG ;;
    m) msgs=$OPTARG ;;
    x) lanes=$OPTARG ;;
    p) pool=$OPTARG ;;
    *) sed -n '2,21p' "$0"; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { sed -n '2,21p' "$0"; exit 2; }
# p2p_perftest's bw iteration is one window of 64: -m must be whole windows,
# or the two tools would time different message counts.
[[ $size =~ ^[0-9]+$ && $msgs =~ ^[0-9]+$ && $msgs -ge 64 && $((msgs % 64)) -eq 0 ]] ||
    { echo "bw_ab: -s must be bytes and -m a multiple of 64" >&2; exit 2; }
[[ $lanes =~ ^[0-8]$ ]] || { echo "bw_ab: -x takes 1 to 8 lanes" >&2; exit 2; }
[[ $pool =~ ^[0-9]+[KMG]?$ ]] || { echo "bw_ab: -p takes bytes (K, M, G allowed)" >&2; exit 2; }
top=$(cd "$(dirname "$0")/../.." && pwd)
p2prun=$top/tools/p2prun/p2prun
[ -x "$p2prun" ] || { echo "bw_ab: build $top first (no $p2prun)" >&2; exit 1; }
for spec in "$@"; do
    t=${spec%%+*}
    [ -x "$t/tools/perftest/.libs/p2p_perftest" ] ||
        { echo "bw_ab: $t is not a built ucxp2p tree" >&2; exit 1; }
done
ncpu=$(nproc)

ucx_bw() {  # [-e] -> MiB/s (ucx_perftest's "MB/s" are MiB/s)
    local port=$((20000 + RANDOM % 10000)) v envs=(UCX_TLS="$tls")
    # -e: shared memory offers peer error handling only when asked to (as
    # ucxp2p's context asks); the plain column runs UCX's defaults
    [ "${1:-}" != -e ] || envs+=(UCX_MM_ERROR_HANDLING=y)
    env "${envs[@]}" taskset -c 0 ucx_perftest -t tag_bw -s "$size" -n "$msgs" -w $((msgs / 10)) \
        -O 64 -p $port "$@" >/dev/null 2>&1 &
    sleep 0.5
    v=$(env "${envs[@]}" taskset -c $((1 % ncpu)) ucx_perftest 127.0.0.1 -t tag_bw -s "$size" \
        -n "$msgs" -w $((msgs / 10)) -O 64 -p $port -v "$@" 2>&1 |
        grep -E '^ *[0-9]' | tail -1 | awk -F, '{print $6}')
    wait || true
    echo "${v:-0}"
}
p2p_bw() {  # TREE[+VAR=VAL...] -> MiB/s
    local t=${1%%+*} envs=()
    [ "$t" = "$1" ] || IFS=+ read -r -a envs <<<"${1#*+}"
    local err; err=$(mktemp /tmp/bw_ab.XXXXXX)
    if ! env UCX_TLS="$tls" "${envs[@]}" "$p2prun" -n 2 --no-prefix -- \
        env LD_LIBRARY_PATH="$(cd "$t" && pwd)/.libs" sh -c \
        "exec taskset -c \$((RANK % $ncpu)) \"\$0\" \"\$@\"" \
        "$t/tools/perftest/.libs/p2p_perftest" -t bw -s "$size" -n $((msgs / 64)) \
        -w 2 -W 64 -p "$pool" -q --csv 2>"$err" >"$err.out"; then
        { echo "bw_ab: p2p_perftest failed for $1:"; tail -5 "$err"; } >&2
        rm -f "$err" "$err.out"
        exit 1
    fi
    tail -1 "$err.out" | cut -d, -f13
    rm -f "$err" "$err.out"
}
micro=""
if [ "$lanes" -gt 0 ]; then
    micro=$(mktemp /tmp/tcp_micro.XXXXXX)
    trap 'rm -f "$micro"' EXIT
    cc -O2 -o "$micro" "$top/tools/bench/tcp_micro.c"
fi
sock_bw() {  # LANES -> MiB/s
    local port=$((30000 + RANDOM % 10000)) v
    timeout 120 taskset -c 0 "$micro" s "$size" "$msgs" $port "$1" >"$micro.out" &
    sleep 0.2
    timeout 120 taskset -c $((1 % ncpu)) "$micro" c "$size" "$msgs" $port "$1" >/dev/null || true
    wait || true
    v=$(cat "$micro.out"); rm -f "$micro.out"
    echo "${v:-0}"
}
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

labels=(ucx_perftest ucx_perftest_-e)
[ "$lanes" -eq 0 ] || labels+=(socket_1_lane "socket_${lanes}_lanes")
labels+=("$@")
declare -A got
for r in $(seq "$rounds"); do
    line="round $r:"
    vals=("$(ucx_bw)" "$(ucx_bw -e)")
    [ "$lanes" -eq 0 ] || vals+=("$(sock_bw 1)" "$(sock_bw "$lanes")")
    for spec in "$@"; do vals+=("$(p2p_bw "$spec")"); done
    for i in "${!labels[@]}"; do
        got[$i]="${got[$i]:-} ${vals[$i]}"
        line+="  ${labels[$i]} ${vals[$i]}"
    done
    echo "$line"
done
echo "medians (MiB/s, $size B, UCX_TLS=$tls, $rounds rounds, ucxp2p pool $pool):"
for i in "${!labels[@]}"; do
    # shellcheck disable=SC2086
    m=$(median ${got[$i]})
    # shellcheck disable=SC2086
    u=$(median ${got[0]}) e=$(median ${got[1]})
    printf '  %-28s %10s  %5.2fx ucx_perftest  %5.2fx -e\n' "${labels[$i]}" "$m" \
        "$(echo "$m $u" | awk '{print ($2 > 0 ? $1 / $2 : 0)}')" \
        "$(echo "$m $e" | awk '{print ($2 > 0 ? $1 / $2 : 0)}')"
done
