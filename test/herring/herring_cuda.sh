#!/bin/bash
# An SMDDP application's GPU tensors through the preloaded shim
# (herring_cuda.cc): two ranks under p2prun exchange cudaMalloc'd tensors,
# and with P2P_CUDA_STAGING=off device memory is refused (NULL) where UCX
# has no CUDA. SKIP (77) where no GPU can be used (CI, this VM).
set -u
cvd_set=${CUDA_VISIBLE_DEVICES+yes}
cvd=${CUDA_VISIBLE_DEVICES-}
. "$(cd "$(dirname "$0")" && pwd)/herring_env.sh"
# herring_env.sh hides the GPUs (the other herring tests expect none).
if [ "$cvd_set" = yes ]; then export CUDA_VISIBLE_DEVICES=$cvd; else unset CUDA_VISIBLE_DEVICES; fi
prog=$build/test/herring/herring_cuda
[ -x "$prog" ] || { echo "herring_cuda.sh: $prog not built" >&2; exit 99; }
"$prog" probe
rc=$?
if [ $rc = 77 ]; then
    echo "SKIP: no usable GPU"
    exit 77
fi
[ $rc = 0 ] || { echo "FAIL: herring_cuda probe (rc $rc)"; exit 1; }
out=$tmp/out
timeout -k 5 120 "$build/tools/p2prun/p2prun" -n 2 -- \
    env LD_PRELOAD="$preload" "$prog" xfer >"$out" 2>&1
rc=$?
if [ $rc = 0 ] && [ "$(grep -c 'herring_cuda OK rank' "$out")" = 2 ]; then
    echo "PASS: device tensors of 8 B, 64 KiB and 4 MiB between 2 ranks through the shim"
else
    echo "FAIL: herring_cuda xfer (rc $rc):"; cat "$out"; exit 1
fi
if ! command -v ucx_info >/dev/null; then
    echo "SKIP: refused device memory (no ucx_info to tell whether UCX moves CUDA memory)"
elif ucx_info -d 2>/dev/null | grep -q 'cuda_copy'; then
    echo "SKIP: refused device memory (this UCX moves CUDA memory itself)"
else
    LD_PRELOAD="$preload" P2P_CUDA_STAGING=off timeout -k 5 60 "$prog" refused >"$out" 2>&1
    rc=$?
    if [ $rc = 0 ] && grep -q 'herring_cuda OK rank 0' "$out"; then
        echo "PASS: P2P_CUDA_STAGING=off: herringP2PRegisterMemory of device memory returns NULL"
    else
        echo "FAIL: herring_cuda refused (rc $rc):"; cat "$out"; exit 1
    fi
fi
exit 0
