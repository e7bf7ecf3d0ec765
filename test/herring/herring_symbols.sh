#!/bin/bash
# libucxp2p_herring.so exports exactly libucxp2p_herring.symbols (nm -D: a
# missing symbol and an unexpected export both fail), links libucxp2p.so
# dynamically (no private copy of ucxp2p or UCX inside), and loads with
# dlopen(RTLD_NOW) from a plain old-string-ABI program.
set -u
. "$(cd "$(dirname "$0")" && pwd)/herring_env.sh"
failed=0

nm -D --defined-only "$shim" | awk 'NF == 3 && $2 != "A" { print $3 }' | sort >"$tmp/actual"
grep -v '^$' "$symbols" | sort >"$tmp/expected"
missing=$(comm -23 "$tmp/expected" "$tmp/actual")
extra=$(comm -13 "$tmp/expected" "$tmp/actual")
if [ -z "$missing" ] && [ -z "$extra" ] && [ -s "$tmp/expected" ]; then
    echo "PASS: exports = libucxp2p_herring.symbols ($(wc -l <"$tmp/expected") symbols)"
else
    echo "FAIL: exported symbols differ from $symbols"
    [ -n "$missing" ] && echo "missing:" && echo "$missing"
    [ -n "$extra" ] && echo "unexpected:" && echo "$extra"
    failed=1
fi

# Dynamic link to libucxp2p.so; no ucxp2p/UCX code compiled in.
if readelf -d "$shim" | grep -q 'NEEDED.*\[libucxp2p\.so'; then
    echo "PASS: NEEDED libucxp2p.so"
else
    echo "FAIL: libucxp2p.so is not a NEEDED library:"; readelf -d "$shim"; failed=1
fi
inside=$(nm "$shim" 2>/dev/null | awk '$2 ~ /^[TtWw]$/ && $3 ~ /^(ucp_|uct_|ucs_|p2p_)/ { print $3 }' | head -5)
if [ -z "$inside" ]; then
    echo "PASS: no ucxp2p/UCX code inside the shim"
else
    echo "FAIL: the shim defines ucxp2p/UCX functions itself: $inside"; failed=1
fi

# dlopen(RTLD_NOW) from a plain program; old-ABI GetRDMADevices on a fake
# sysfs tree.
mkdir -p "$tmp/ib/mlx5_1" "$tmp/ib/mlx5_0"
# (Leak checking is off for this ABI check: after dlclose, LeakSanitizer can
# no longer attribute, or suppress, one-time allocations of the unloaded
# UCX/hwloc code. The multi-rank herring tests run with leak checking.)
if ASAN_OPTIONS="detect_leaks=0:${ASAN_OPTIONS-}" LD_PRELOAD=$san_rt P2P_HERRING_SYSFS_ROOT=$tmp/ib \
    timeout 60 "$dlopen_prog" "$shim" "$symbols" mlx5_0,mlx5_1; then
    echo "PASS: dlopen RTLD_NOW, old-ABI herringP2PGetRDMADevices"
else
    echo "FAIL: herring_dlopen"; failed=1
fi
# herringLocalDevice reads the local rank as the core's rail planner does
# (p2p_local_rank_query), so that the GPU and its NICs agree: torchrun's
# LOCAL_RANK inside an mpirun task before OMPI's, P2P_LOCAL_RANK first.
# (No GPU: the device is the local rank; see herring_env.sh.)
for case in "2 LOCAL_RANK=2 LOCAL_WORLD_SIZE=4 OMPI_COMM_WORLD_LOCAL_RANK=5 OMPI_COMM_WORLD_LOCAL_SIZE=8" \
            "3 P2P_LOCAL_RANK=3 P2P_LOCAL_WORLD_SIZE=4 LOCAL_RANK=1 LOCAL_WORLD_SIZE=4"; do
    set -- $case
    want=$1; shift
    if env ASAN_OPTIONS="detect_leaks=0:${ASAN_OPTIONS-}" LD_PRELOAD=$san_rt \
        P2P_HERRING_SYSFS_ROOT=$tmp/ib "$@" \
        timeout 60 "$dlopen_prog" "$shim" "$symbols" mlx5_0,mlx5_1 "$want" >/dev/null; then
        echo "PASS: herringLocalDevice $want with $*"
    else
        echo "FAIL: herringLocalDevice with $* (want $want)"; failed=1
    fi
done
exit $failed
