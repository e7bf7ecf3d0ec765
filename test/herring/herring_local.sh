#!/bin/bash
# One process, no launcher (auto bootstrap -> single), the shim preloaded
# over the aborting stub libsmddpcpp.so: calls before Initialize, error
# mapping, self transfers, truncation, Shutdown and calls after it.
set -u
. "$(cd "$(dirname "$0")" && pwd)/herring_env.sh"
mkdir -p "$tmp/ib/rdmap16s27" "$tmp/ib/mlx5_0"
out=$tmp/out
LD_PRELOAD=$preload LOCAL_RANK=3 P2P_HERRING_SYSFS_ROOT=$tmp/ib P2P_LOG_LEVEL=error \
    timeout -k 5 60 "$app" single mlx5_0,rdmap16s27 >"$out" 2>&1
rc=$?
if [ $rc = 0 ] && grep -q '^herring_app OK rank 0' "$out"; then
    echo "PASS: herring_app single (preloaded shim, stub never called)"
else
    echo "FAIL: herring_app single (rc $rc):"; cat "$out"; exit 1
fi
# SMDATAPARALLEL_DEVICE_NAME reaches UCX through ucxp2p's own rail plan,
# applied to the UCP config of the context the shim creates (its debug log
# line "rails: set UCX_NET_DEVICES=..." is printed only once ucp_config_modify
# accepted it) -- on a machine with RDMA NICs, described by hwloc XML. The
# environment stays untouched (herring_app compares it around Initialize).
xml=$src/test/topo/fixtures/nogpu_mlx4.xml
run_planned() {
    env LD_PRELOAD="$preload" HWLOC_XMLFILE="$xml" HWLOC_THISSYSTEM=1 \
        SMDATAPARALLEL_DEVICE_NAME=mlx5_2 P2P_HERRING_SYSFS_ROOT="$tmp/ib" \
        P2P_LOG_LEVEL=debug UCX_WARN_UNUSED_ENV_VARS=n "$@" \
        timeout -k 5 60 "$app" single mlx5_0,rdmap16s27 >"$out" 2>&1
}
fail_planned() {
    echo "FAIL: $1 (rc $rc):"; grep -E 'rails:|herring|FAIL' "$out"; exit 1
}
if [ $have_hwloc = no ]; then
    echo "SKIP: rail plan checks (libucxp2p.so built without hwloc)"
else
    run_planned
    rc=$?
    [ $rc = 0 ] && grep -q '^herring_app OK rank 0' "$out" &&
        grep -q 'rails: local rank 0 of 1 .*SMDATAPARALLEL_DEVICE_NAME=mlx5_2' "$out" &&
        grep -q 'rails: set UCX_NET_DEVICES=mlx5_2:1 ' "$out" ||
        fail_planned "SMDATAPARALLEL_DEVICE_NAME through the core's rail plan"
    echo "PASS: SMDATAPARALLEL_DEVICE_NAME=mlx5_2 -> UCX_NET_DEVICES=mlx5_2:1 on the shim's context"
    # A UCX_NET_DEVICES the user set wins over the plan.
    run_planned UCX_NET_DEVICES=all
    rc=$?
    [ $rc = 0 ] && grep -q '^herring_app OK rank 0' "$out" &&
        grep -q 'rails: local rank 0 of 1' "$out" &&
        ! grep -q 'rails: set UCX_NET_DEVICES=' "$out" ||
        fail_planned "user UCX_NET_DEVICES=all with SMDATAPARALLEL_DEVICE_NAME"
    echo "PASS: the user's UCX_NET_DEVICES=all is kept"
    # A device this machine does not have: herringP2PInitialize (void, like
    # the vendor's) fails; at the default log level the planner's error names
    # the variable and the value and the shim says Initialize failed (once per
    # attempt); every later call answers at once (RDMA_READ_FAIL, NULL mr);
    # a retry with a real device works; or Shutdown and a clean exit.
    plan_err="rail plan: SMDATAPARALLEL_DEVICE_NAME names 'mlx5_9', which is not an rdma device"
    init_err='herring\] error: initialize: herringP2PInitialize failed'
    for retry in mlx5_2 -; do
        env -u P2P_LOG_LEVEL LD_PRELOAD="$preload" HWLOC_XMLFILE="$xml" HWLOC_THISSYSTEM=1 \
            SMDATAPARALLEL_DEVICE_NAME=mlx5_9 P2P_HERRING_SYSFS_ROOT="$tmp/ib" \
            UCX_WARN_UNUSED_ENV_VARS=n \
            timeout -k 5 30 "$app" initfail $retry >"$out" 2>&1
        rc=$?
        [ $rc = 0 ] && grep -q '^herring_app OK rank 0' "$out" &&
            [ "$(grep -c "error: $plan_err" "$out")" = 2 ] &&
            [ "$(grep -c "$init_err" "$out")" = 2 ] &&
            grep -q 'tensor 10: called after a failed herringP2PInitialize' "$out" || {
            echo "FAIL: SMDATAPARALLEL_DEVICE_NAME=mlx5_9, then $retry (rc $rc):"
            cat "$out"
            exit 1
        }
    done
    echo "PASS: SMDATAPARALLEL_DEVICE_NAME=mlx5_9 (no such device): Initialize fails, logged;" \
        "calls complete with RDMA_READ_FAIL; retry with mlx5_2 works; Shutdown, clean exit"
fi
# A completion thread blocked in herringP2PReadCompletion while the main
# thread calls herringP2PShutdown gets the cancelled receives (RDMA_SHUTDOWN,
# their own contexts), then the sentinel -- no made-up entry.
for delay in 0 30; do
    LD_PRELOAD=$preload P2P_HERRING_SYSFS_ROOT=$tmp/ib \
        timeout -k 5 30 "$app" shutdown-race $delay >"$out" 2>&1
    rc=$?
    [ $rc = 0 ] && grep -q '^herring_app OK rank 0' "$out" || {
        echo "FAIL: Shutdown under a blocked ReadCompletion, ${delay} ms (rc $rc):"
        cat "$out"
        exit 1
    }
done
echo "PASS: Shutdown while another thread waits in herringP2PReadCompletion"
# Threads in both completion calls while another posts, also when the
# environment asks ucxp2p for P2P_THREAD_MODE=serialized (one call at a
# time): the shim keeps the core in thread mode multi.
for tm in multi serialized; do
    LD_PRELOAD=$preload P2P_HERRING_SYSFS_ROOT=$tmp/ib P2P_THREAD_MODE=$tm \
        timeout -k 5 60 "$app" threads 5000 >"$out" 2>&1
    rc=$?
    [ $rc = 0 ] && grep -q '^herring_app OK rank 0' "$out" || {
        echo "FAIL: threaded completion calls, P2P_THREAD_MODE=$tm (rc $rc):"
        tail -20 "$out"
        exit 1
    }
done
echo "PASS: completion threads beside a posting thread (P2P_THREAD_MODE multi and serialized)"
# A 2-rank job under p2prun whose launcher variables leave the core's
# planner without a local rank and size: the shim hands it the tcp
# bootstrap's (computed from host names) in p2p_config_t, and
# herringLocalDevice stays the launcher's local rank after Initialize
# (herring_app job checks it). bootstrap_local_ranks WHAT VAR...: VARs unset.
p2prun=$build/tools/p2prun/p2prun
bootstrap_local_ranks() {
    local what=$1 unset=() v
    shift
    for v in "$@"; do unset+=(-u "$v"); done
    timeout -k 5 90 "$p2prun" -n 2 -x P2P_LOG_LEVEL=info -- \
        env "${unset[@]}" LD_PRELOAD="$preload" "$app" job 2 >"$out" 2>&1
    rc=$?
    if [ $rc = 0 ] && [ "$(grep -c 'herring_app OK rank' "$out")" = 2 ] &&
       rails_ranks_ok "$out" 2 p2p_config_t; then
        echo "PASS: $what: the shim passes the bootstrap's local ranks to the rail plan"
    else
        echo "FAIL: $what (rc $rc):"; cat "$out"; exit 1
    fi
}
# torchrun-style without any local-rank variable.
bootstrap_local_ranks "tcp bootstrap without LOCAL_RANK" \
    LOCAL_RANK LOCAL_WORLD_SIZE P2P_LOCAL_RANK P2P_LOCAL_WORLD_SIZE
# A launcher that sets LOCAL_RANK alone (the planner ignores a rank without
# its size).
bootstrap_local_ranks "LOCAL_RANK without LOCAL_WORLD_SIZE" \
    LOCAL_WORLD_SIZE P2P_LOCAL_RANK P2P_LOCAL_WORLD_SIZE
# A post that throws (allocation failure) must not keep Shutdown waiting.
LD_PRELOAD=$preload P2P_LOG_LEVEL=error timeout -k 5 90 "$edge" oom-post >"$out" 2>&1
rc=$?
if [ $rc = 0 ] && grep -q '^herring_edge OK rank 0' "$out"; then
    echo "PASS: Shutdown returns after posts that failed to allocate ($(grep -o '[0-9]* of 40' "$out") queued)"
else
    echo "FAIL: herring_edge oom-post (rc $rc):"; cat "$out"; exit 1
fi
# Allocation failures while the shim moves the core's entries to its own
# queue: a rejected post loses no other operation's entry, and a Shutdown
# that cannot allocate still ends the completion calls.
for t in oom-drain oom-shutdown; do
    LD_PRELOAD=$preload P2P_LOG_LEVEL=error timeout -k 5 90 "$edge" $t >"$out" 2>&1
    rc=$?
    if [ $rc = 0 ] && grep -q '^herring_edge OK rank 0' "$out"; then
        echo "PASS: herring_edge $t ($(grep -o '[0-9]* + [0-9]* of [0-9]*' "$out"))"
    else
        echo "FAIL: herring_edge $t (rc $rc):"; cat "$out"; exit 1
    fi
done
# 4000 rejected calls at the default log level: warnings in bursts of 10
# per call site (the core's rule), not one line per call.
env -u P2P_LOG_LEVEL LD_PRELOAD="$preload" timeout -k 5 90 "$edge" storm >"$out" 2>"$out.err"
rc=$?
lines=$(grep -c 'herring\] warn: ' "$out.err")
if [ $rc = 0 ] && grep -q '^herring_edge OK rank 0' "$out" && [ "$lines" -ge 1 ] &&
   [ "$lines" -le 20 ] && grep -q 'more like this muted' "$out.err"; then
    echo "PASS: 4000 rejected calls logged $lines warnings"
else
    echo "FAIL: herring_edge storm (rc $rc, $lines warnings):"; head -30 "$out" "$out.err"
    exit 1
fi
rm -f "$out.err"
# Without the preload the stub must abort: proves the test can fail.
(timeout -k 5 30 "$app" single -; exit $?) >"$out" 2>&1
rc=$?
if [ $rc != 0 ] && grep -q 'smddp stub: .* called' "$out"; then
    echo "PASS: without LD_PRELOAD the stub library aborts (rc $rc)"
else
    echo "FAIL: herring_app ran without the shim (rc $rc):"; cat "$out"; exit 1
fi
exit 0
