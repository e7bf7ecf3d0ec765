#!/bin/bash
# Run one command inside a private single-node Slurm cluster on localhost.
#
#   slurm_harness.sh [-t SECONDS] -- COMMAND [ARGS...]
#
# Starts munged (as user munge, on a private socket), slurmctld -D and
# slurmd -D -N localhost with a configuration generated into a temporary
# directory, waits (bounded) until the node is idle, runs COMMAND with
# SLURM_CONF pointing at that cluster (e.g. `srun --mpi=pmix -n 4 prog`),
# then cancels any leftover job and stops the daemons by PID on every exit
# path. Exit status: COMMAND's; 124 when it ran past -t (default 120 s);
# 77 (skip) when Slurm/munge are not installed or we are not root; 99 when
# the cluster could not start (the daemon logs are printed).
#
# Environment: SLURM_HARNESS_KEEP=1 keeps the temporary directory;
# SLURM_HARNESS_START_TIMEOUT (seconds, default 30) bounds the start.
set -u

cmd_timeout=120
while [ $# -gt 0 ]; do
    case "$1" in
    -t) cmd_timeout="$2"; shift 2 ;;
    --) shift; break ;;
    *) echo "usage: $0 [-t SECONDS] -- COMMAND [ARGS...]" >&2; exit 2 ;;
    esac
done
[ $# -gt 0 ] || { echo "usage: $0 [-t SECONDS] -- COMMAND [ARGS...]" >&2; exit 2; }
start_timeout=${SLURM_HARNESS_START_TIMEOUT:-30}

say() { echo "slurm_harness: $*" >&2; }

for tool in munged slurmctld slurmd srun sinfo scancel squeue setpriv; do
    if ! command -v "$tool" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$tool" ]; then
        say "SKIP: $tool not installed (apt-get install slurm-wlm munge)"
        exit 77
    fi
done
if [ "$(id -u)" != 0 ]; then
    say "SKIP: must run as root (munged runs as user munge, slurmd as root)"
    exit 77
fi
if ! id munge >/dev/null 2>&1 || [ ! -r /etc/munge/munge.key ]; then
    say "SKIP: no munge user or /etc/munge/munge.key (install munge)"
    exit 77
fi
PATH=$PATH:/usr/sbin

dir=$(mktemp -d /tmp/ucxp2p-slurm.XXXXXX) || exit 99
chmod 755 "$dir"
munge_pid= ctld_pid= slurmd_pid=

print_logs() {
    for f in "$dir"/munge/munged.log "$dir"/slurmctld.log "$dir"/slurmd.log; do
        [ -f "$f" ] || continue
        echo "----- $f (last 40 lines)" >&2
        tail -n 40 "$f" >&2
    done
}

stop_pid() { # name pid: TERM, wait up to 5 s, then KILL
    local name=$1 pid=$2 i
    [ -n "$pid" ] || return 0
    kill -TERM "$pid" 2>/dev/null || return 0
    for i in $(seq 50); do
        kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null; return 0; }
        sleep 0.1
    done
    say "$name (pid $pid) ignored TERM, killing"
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
}

cleanup() {
    local rc=$?
    trap - EXIT INT TERM HUP
    if [ -n "$ctld_pid" ] && kill -0 "$ctld_pid" 2>/dev/null; then
        # Leftover jobs (a timed-out srun): cancel them so their slurmstepd
        # processes exit before slurmd goes away.
        local jobs
        jobs=$(timeout 5 squeue -h -o %i 2>/dev/null)
        if [ -n "$jobs" ]; then
            say "cancelling leftover jobs: $jobs"
            timeout 5 scancel -s KILL $jobs 2>/dev/null
            timeout 5 scancel $jobs 2>/dev/null
            sleep 1
        fi
    fi
    stop_pid slurmd "$slurmd_pid"
    stop_pid slurmctld "$ctld_pid"
    stop_pid munged "$munge_pid"
    if [ "${SLURM_HARNESS_KEEP:-0}" = 1 ]; then
        say "kept $dir"
    else
        rm -rf "$dir"
    fi
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

fail_start() {
    say "FAIL: $*"
    print_logs
    exit 99
}

port_free() { ! ss -Hltn "sport = :$1" 2>/dev/null | grep -q .; }
pick_port() { # first free port >= $1 not equal to $2
    local p=$1
    while [ "$p" -lt $(($1 + 200)) ]; do
        if [ "$p" != "${2:-}" ] && port_free "$p"; then echo "$p"; return; fi
        p=$((p + 1))
    done
    echo "$1"
}
# Two harnesses started together (make -j2 check runs four scripts that use
# one) could pick the same free ports before either daemon binds them: hold
# a lock from the pick until the cluster is up (the daemons are listening).
exec 9>"${TMPDIR:-/tmp}/ucxp2p-slurm-harness.lock"
flock -w $((start_timeout * 4)) 9 || say "no port lock after $((start_timeout * 4)) s; going on"
ctld_port=$(pick_port 16817)
slurmd_port=$(pick_port 16818 "$ctld_port")

# munged on a private socket, as user munge.
mkdir -p "$dir/munge" && chown munge:munge "$dir/munge" && chmod 755 "$dir/munge"
socket=$dir/munge/munge.socket
setpriv --reuid=munge --regid=munge --init-groups \
    munged -F --socket="$socket" --key-file=/etc/munge/munge.key \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" \
    --seed-file="$dir/munge/munged.seed" >"$dir/munge/stdout.log" 2>&1 9>&- &
munge_pid=$!
for i in $(seq 50); do
    [ -S "$socket" ] && break
    kill -0 "$munge_pid" 2>/dev/null || { cat "$dir/munge/stdout.log" >&2; fail_start "munged exited"; }
    sleep 0.1
done
[ -S "$socket" ] || fail_start "munged did not create $socket in 5 s"

ncpu=$(nproc)
mkdir -p "$dir/state" "$dir/spool" "$dir/tmpfs"
cat >"$dir/slurm.conf" <<EOF
ClusterName=ucxp2p$$
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$socket
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
TmpFS=$dir/tmpfs
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
ReturnToService=2
FirstJobId=$(( ($$ % 50000) * 10 + 1 ))
KillWait=2
InactiveLimit=0
NodeName=localhost CPUs=$ncpu RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
export SLURM_CONF=$dir/slurm.conf

slurmctld -D -i -f "$SLURM_CONF" >"$dir/slurmctld.stdout" 2>&1 9>&- &
ctld_pid=$!
slurmd -D -N localhost -f "$SLURM_CONF" >"$dir/slurmd.stdout" 2>&1 9>&- &
slurmd_pid=$!

deadline=$((SECONDS + start_timeout))
state=
while [ $SECONDS -lt $deadline ]; do
    kill -0 "$ctld_pid" 2>/dev/null || { cat "$dir/slurmctld.stdout" >&2; fail_start "slurmctld exited"; }
    kill -0 "$slurmd_pid" 2>/dev/null || { cat "$dir/slurmd.stdout" >&2; fail_start "slurmd exited"; }
    state=$(timeout 5 sinfo -h -n localhost -o %t 2>/dev/null)
    [ "$state" = idle ] && break
    sleep 0.3
done
[ "$state" = idle ] || fail_start "node not idle after ${start_timeout} s (state '$state')"
say "cluster up in $dir (ports $ctld_port/$slurmd_port, $ncpu cpus)"
flock -u 9
exec 9>&-

timeout -k 5 "$cmd_timeout" "$@"
rc=$?
[ $rc = 124 ] && say "command timed out after ${cmd_timeout} s: $*"
exit $rc
