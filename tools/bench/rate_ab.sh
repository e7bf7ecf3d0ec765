#!/bin/bash
# The 8-byte message rate of one or more built trees against ucx_perftest
# tag_bw, alternated in rounds so that every round compares points taken
# within the same minute (this machine's speed drifts by 3-4x between
# phases: compare within a round, not across rounds).
#
#   tools/bench/rate_ab.sh [-n ROUNDS] [-t TLS] [-a ARGS] [-i] TREE[=OPTS]...
#
# TREE: a configured and built ucxp2p tree (its .libs and
# tools/perftest/.libs are used directly, so a tree may be a copy).
# =OPTS: p2p_perftest options for that entry only, commas for spaces
# (e.g. . .=--threads=serialized compares the thread modes of one tree).
# Each round: ucx_perftest tag_bw (server core 0, client core 1), then
# p2p_perftest -t rate in each TREE (rank r pinned to core r % 2), all with
# window 64 and 128000 timed messages. Prints msg/s and the ratio to the
# round's ucx_perftest.
#
# -a ARGS: more p2p_perftest options (e.g. --post-batch), split on spaces.
# -i: instead, count instructions per message (valgrind callgrind, one rank
# at a time under valgrind, the other native): inclusive instructions of
# perftest::run_rate divided by the messages it moved. Deterministic up to
# the sender's retries when the shared-memory FIFO is full, so a single run
# compares trees where timing cannot. The receiver's count has two regimes:
# receives posted ahead of their messages (~1100 instructions per message at
# 8 B, 2026-11-30) or messages already arrived when their receive is posted
# (found by a probe, ~650); which one a run falls into varies from run to
# run, so -i also prints the share of receives that found their message
# (ucp_tag_msg_recv_nbx calls among all receive calls): compare receivers
# only at similar shares.
set -euo pipefail
rounds=3
tls=shm,self
icount=0
more=""
while getopts "n:t:a:i" o; do
    case $o in
    n) rounds=$OPTARG ;;
    t) tls=$OPTARG ;;
    a) more=$OPTARG ;;
    i) icount=1 ;;
    *) sed -n '2,29p' "$0"; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { sed -n '2,29p' "$0"; exit 2; }
trees=()
for spec in "$@"; do
    t=${spec%%=*}
    [ -x "$t/tools/perftest/.libs/p2p_perftest" ] ||
        { echo "rate_ab: $t is not a built ucxp2p tree" >&2; exit 1; }
    opts=""
    [ "$t" = "$spec" ] || opts="=${spec#*=}"
    trees+=("$(cd "$t" && pwd)$opts")
done
set -- "${trees[@]}"
top=$(cd "$(dirname "$0")/../.." && pwd)
p2prun=$top/tools/p2prun/p2prun
[ -x "$p2prun" ] || { echo "rate_ab: build $top first (no $p2prun)" >&2; exit 1; }
ncpu=$(nproc)
work=$(mktemp -d /tmp/rate_ab.XXXXXX)
trap 'rm -rf "$work"' EXIT

# The per-rank wrapper: pinned; under callgrind for the rank in CG_RANK.
cat >"$work/rank.sh" <<EOF
#!/bin/sh
r=\${RANK:-0}
if [ "\$r" = "\${CG_RANK:-none}" ]; then
    exec taskset -c \$((r % $ncpu)) valgrind -q --tool=callgrind \\
        --callgrind-out-file="\$CG_OUT" "\$@"
fi
exec taskset -c \$((r % $ncpu)) "\$@"
EOF
chmod +x "$work/rank.sh"

# shellcheck disable=SC2206
args=(-t rate -s 8 -n 2000 -w 200 -W 64 -q $more)
tree_of() { echo "${1%%=*}"; }                      # TREE[=OPTS] -> TREE
opts_of() { [ "${1#*=}" = "$1" ] || echo "${1#*=}" | tr ',' ' '; }  # -> OPTS
p2p_rate() {  # TREE[=OPTS] -> msg/s
    local t; t=$(tree_of "$1")
    # shellcheck disable=SC2046
    if ! UCX_TLS=$tls "$p2prun" -n 2 --no-prefix -- env LD_LIBRARY_PATH="$t/.libs" \
        "$work/rank.sh" "$t/tools/perftest/.libs/p2p_perftest" "${args[@]}" \
        $(opts_of "$1") --csv 2>"$work/err" >"$work/out"; then
        { echo "rate_ab: p2p_perftest failed for $1:"; tail -5 "$work/err"; } >&2
        exit 1
    fi
    tail -1 "$work/out" | cut -d, -f14
}
ucx_rate() {  # -> msg/s
    local port=$((20000 + RANDOM % 10000)) v
    UCX_TLS=$tls taskset -c 0 ucx_perftest -t tag_bw -s 8 -n 128000 -w 12800 \
        -O 64 -p $port >/dev/null 2>&1 &
    sleep 0.5
    v=$(UCX_TLS=$tls taskset -c $((1 % ncpu)) ucx_perftest 127.0.0.1 -t tag_bw \
        -s 8 -n 128000 -w 12800 -O 64 -p $port -v 2>&1 |
        grep -E '^ *[0-9]' | tail -1 | awk -F, '{print $8}')
    wait
    echo "${v:-0}"
}
icount_of() {  # TREE[=OPTS] RANK -> instructions per message
    local out=$work/cg.$2.out rr msgs t; t=$(tree_of "$1")
    # shellcheck disable=SC2046
    CG_RANK=$2 CG_OUT=$out UCX_TLS=$tls "$p2prun" -n 2 --no-prefix -- \
        env LD_LIBRARY_PATH="$t/.libs" "$work/rank.sh" \
        "$t/tools/perftest/.libs/p2p_perftest" -t rate -s 8 -n 2000 -w 10 -W 64 -q $more \
        $(opts_of "$1") >/dev/null 2>&1
    rr=$(callgrind_annotate --inclusive=yes "$out" 2>/dev/null |
         grep -m1 'perftest::run_rate' | awk '{gsub(",", "", $1); print $1}')
    msgs=$(( (2000 + 10) * 64 ))  # timed + warm-up iterations, W each
    echo "$(( ${rr:-0} / msgs )) $(arrived_share "$out")"
}
arrived_share() {  # callgrind file -> percent of receives that probed theirs
    python3 - "$1" <<'PY'
import re, sys
lines = open(sys.argv[1], errors="replace").read().splitlines()
names, calls, cur = {}, {}, None
for line in lines:  # names are given once, as fn=(id) name or cfn=(id) name
    m = re.match(r"c?fn=\((\d+)\) (.*)", line)
    if m:
        names[m.group(1)] = m.group(2).strip()
for line in lines:  # a call: cfn=(id), then calls=N
    m = re.match(r"cfn=\((\d+)\)", line)
    if m:
        cur = names.get(m.group(1))
        continue
    m = re.match(r"calls=(\d+)", line)
    if m and cur:
        calls[cur] = calls.get(cur, 0) + int(m.group(1))
        cur = None
found = calls.get("ucp_tag_msg_recv_nbx", 0)
total = found + calls.get("ucp_tag_recv_nbx", 0)
print(round(100.0 * found / total) if total else 0)
PY
}

if [ $icount = 1 ]; then
    command -v valgrind >/dev/null || { echo "rate_ab: -i needs valgrind" >&2; exit 1; }
    for t in "$@"; do
        read -r snd _ <<<"$(icount_of "$t" 0)"
        read -r rcv share <<<"$(icount_of "$t" 1)"
        echo "$t: sender $snd receiver $rcv instructions/message ($share% of receives found their message arrived)"
    done
    exit 0
fi
for k in $(seq "$rounds"); do
    u=$(ucx_rate)
    line="round $k: ucx_perftest $u"
    for t in "$@"; do
        v=$(p2p_rate "$t")
        line+="  $(basename "$(tree_of "$t")")$(opts_of "$t" | sed 's/^./ &/') $v ($(python3 -c "print(round(${v:-0}/max(${u:-0},1),2))")x)"
    done
    echo "$line"
done
