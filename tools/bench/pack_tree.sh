#!/bin/bash
# Pack a built tree for a machine that lacks Debian's packages (a GPU
# machine with another image, a cluster node of another distribution): a
# copy of the tree without object files, beside the shared libraries its
# programs load from the system (UCX with its transport modules, hwloc,
# PMIx, the CUDA runtime and what they need; not glibc or libstdc++)
# and ucx_perftest, so that the same checks run there.
#
#   tools/bench/pack_tree.sh OUT          # from a built tree: OUT/tree, OUT/lib, OUT/bin
#   OUT/tree/tools/bench/pack_tree.sh --check OUT   # there: the device checks
#
# --check runs, from OUT (any path: nothing in it depends on where it was
# built), the GPU checks: cuda_test, staging_test, herring_cuda.sh, then
# p2p_perftest bandwidth for host, cuda and cuda-managed memory over shared
# memory and tcp, the staged batch, and mp_test's single-copy, soak and
# tcp-path tests. Where the machine has no GPU, the CUDA steps skip or say
# why. Each step has a time limit; the whole takes ~2 min on 16 cores.
set -uo pipefail

check() {
    local out; out=$(cd "$1" && pwd)
    local t=$out/tree
    [ -x "$t/tools/p2prun/p2prun" ] || { echo "pack_tree: $t is not a packed tree" >&2; exit 2; }
    # Programs carry the build machine's absolute rpaths (libtool's), which
    # do not exist here: every .libs folder holding a shared library (the
    # core, the herring shim, the SMDDP stand-in test/herring/libsmddpcpp).
    local libs; libs=$(find "$t" -path '*/.libs/*.so' -printf '%h\n' | sort -u | paste -sd:)
    export LD_LIBRARY_PATH=$out/lib:$libs:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export PATH=$out/bin:$PATH P2P_TOP_SRCDIR=$t P2P_TOP_BUILDDIR=$t
    cd "$t" || exit 2
    step() { echo "== $(date -u +%H:%M:%S) $*"; }
    local gt='skipped: |^\[  (PASSED|FAILED)  \]|^\[  SKIPPED \] [0-9]+ tests'
    step "$(nproc) cores, kernel $(uname -r)"
    nvidia-smi -L 2>/dev/null || echo "no nvidia-smi"
    step cuda_test;    timeout 120 test/cuda/cuda_test 2>&1 | grep -E "$gt"
    step staging_test; timeout 120 test/staging/staging_test 2>&1 | grep -E "$gt"
    step herring_cuda; timeout 150 bash test/herring/herring_cuda.sh 2>&1 | tail -3
    local tls m
    for tls in shm,self tcp,self; do
        for m in host cuda cuda-managed; do
            step "bw $tls -m $m (64 KiB, 4 MiB)"
            UCX_TLS=$tls timeout 90 tools/p2prun/p2prun -n 2 -- tools/perftest/.libs/p2p_perftest \
                -q -t bw -s 64K,4M -n 100 -m $m --csv 2>&1 | tail -3
        done
    done
    step "batch 16x512K -m cuda"
    timeout 90 tools/p2prun/p2prun -n 2 -- tools/perftest/.libs/p2p_perftest \
        -q -t batch -b 16x512K -n 20 -m cuda --csv 2>&1 | tail -2
    step mp_test
    timeout 240 test/mp/mp_test \
        --gtest_filter='*SingleCopy*:*PostsGoOn*:*Soak*:*Withdraw*:*SharedBuffer*:*TcpBulk*' 2>&1 |
        grep -E "$gt"
    step done
}

case "${1:-}" in
-h|--help) sed -n '2,17p' "$0"; exit 0 ;;
--check) ;;
-*) echo "pack_tree: unknown option $1" >&2; sed -n '2,17p' "$0" >&2; exit 2 ;;
esac
if [ "${1:-}" = --check ]; then
    [ $# = 2 ] || { sed -n '2,17p' "$0"; exit 2; }
    check "$2"
    exit 0
fi
[ $# = 1 ] || { sed -n '2,17p' "$0"; exit 2; }
set -e
top=$(cd "$(dirname "$0")/../.." && pwd)
[ -x "$top/tools/p2prun/p2prun" ] && [ -x "$top/test/cuda/cuda_test" ] ||
    { echo "pack_tree: build $top first (./configure && make && make check TESTS=)" >&2; exit 1; }
out=$1
mkdir -p "$out/tree" "$out/lib/ucx" "$out/bin"
out=$(cd "$out" && pwd)
# The tree without what only building needs (nor hidden top-level folders
# but .libs), its programs without debug information (a third the size).
tar -C "$top" --exclude='./.[!l]*' --exclude='*.o' --exclude='*.lo' --exclude='*.a' \
    --exclude=autom4te.cache --exclude=.deps --exclude="./${out#"$top"/}" -cf - . |
    tar -C "$out/tree" -xf -
find "$out/tree" -type f \( -perm -u+x -o -name '*.so*' \) -exec strip --strip-debug {} + 2>/dev/null || true
# UCX loads its transports from the "ucx" folder beside libucs.
ucs=$(ldconfig -p | awk '/libucs\.so\.0 /{print $NF; exit}')
[ -n "$ucs" ] || { echo "pack_tree: no libucs.so.0 (install UCX)" >&2; exit 1; }
cp -L "$(dirname "$ucs")"/ucx/*.so.0 "$out/lib/ucx/"
cp "$(command -v ucx_perftest)" "$out/bin/" 2>/dev/null || echo "pack_tree: no ucx_perftest to carry"
progs=("$top/test/cuda/cuda_test" "$top/test/mp/mp_test" "$top/tools/perftest/.libs/p2p_perftest"
       "$top"/.libs/libucxp2p.so "$out"/lib/ucx/*.so.0 "$out"/bin/*)
ldd "${progs[@]}" 2>/dev/null | awk '/=> \//{print $3}' | sort -u |
    grep -vE '/(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|ld-linux[^/]*)\.so|/libucxp2p' |
    while read -r lib; do cp -L "$lib" "$out/lib/"; done
echo "pack_tree: $(du -sh "$out" | cut -f1) in $out; run there: tree/tools/bench/pack_tree.sh --check ."
