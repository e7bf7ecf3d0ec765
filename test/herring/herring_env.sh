# Sourced by the herring_*.sh tests: paths of the built shim and programs,
# a clean launcher-free environment, LD_LIBRARY_PATH for the uninstalled
# libucxp2p.so the shim needs (libtool gives uninstalled libraries no usable
# rpath). Sets: here src build shim preload app edge dlopen_prog symbols tmp
# have_hwloc (yes/no: libucxp2p.so plans rails, i.e. was built with hwloc);
# defines rails_ranks_ok.
here=$(cd "$(dirname "$0")" && pwd)
src=${P2P_TOP_SRCDIR:-$(cd "$here/../.." && pwd)}
build=${P2P_TOP_BUILDDIR:-$src}
shim=$build/plugins/herring/.libs/libucxp2p_herring.so
app=$build/test/herring/herring_app
edge=$build/test/herring/herring_edge
dlopen_prog=$build/test/herring/herring_dlopen
symbols=$src/plugins/herring/libucxp2p_herring.symbols
for f in "$shim" "$app" "$edge" "$dlopen_prog"; do
    [ -e "$f" ] || { echo "$(basename "$0"): $f not built" >&2; exit 99; }
done
# The core plans rails only with hwloc (configure --with-hwloc=guess).
have_hwloc=no
if nm -D "$build/.libs/libucxp2p.so" 2>/dev/null | grep -q ' U hwloc_topology_init$'; then
    have_hwloc=yes
fi
# In a sanitizer build (configure --enable-sanitizers; make check exports
# the flags as P2P_SAN_FLAGS) libucxp2p.so and the shim reference the
# sanitizer runtimes without linking them (libtool drops -fsanitize from
# shared-library links): programs that are not instrumented themselves
# (timeout, mpirun, the plain dlopen test) need the runtimes preloaded ahead
# of the shim. san_rt: colon-separated runtimes, or empty.
san_rt=
case "${P2P_SAN_FLAGS-}" in *address*) san_rt=$(${CXX:-c++} -print-file-name=libasan.so) ;; esac
case "${P2P_SAN_FLAGS-}" in *thread*) san_rt=$(${CXX:-c++} -print-file-name=libtsan.so) ;; esac
case "${P2P_SAN_FLAGS-}" in
    *undefined*) san_rt=${san_rt:+$san_rt:}$(${CXX:-c++} -print-file-name=libubsan.so) ;;
esac
preload=${san_rt:+$san_rt:}$shim
if [ -n "$san_rt" ]; then
    # The runtimes are preloaded rather than first in the link order.
    export ASAN_OPTIONS="verify_asan_link_order=0:${ASAN_OPTIONS-}"
fi
export LD_LIBRARY_PATH=$build/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# Inherited launcher variables (make check run under srun/mpirun) would make
# the single-process runs try PMIx or TCP.
. "$here/../launcher_env.sh"
unset_launcher_vars
unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT P2P_BOOTSTRAP \
    MPI_LOCALRANKID SMDATAPARALLEL_DEVICE_NAME
# The programs expect herringLocalDevice() = local rank, as without a GPU:
# hide any GPU of the machine running the tests (checked on an H100 machine,
# where local rank 3 otherwise maps to device 0).
export CUDA_VISIBLE_DEVICES=
tmp=$(mktemp -d /tmp/herring_test.XXXXXX) || exit 99
trap 'rm -rf "$tmp"' EXIT
# rails_ranks_ok OUT N SOURCE: OUT (a P2P_LOG_LEVEL=info run of N ranks on
# this host) shows the core's rail plan for every local rank 0..N-1, taken
# from the launcher's SOURCE variables -- what the core needs for the
# contexts the shim creates, without the shim exporting anything. True
# without hwloc (no plan to check).
rails_ranks_ok() {
    [ $have_hwloc = no ] && return 0
    local k
    for ((k = 0; k < $2; k++)); do
        if ! grep -q "rails: local rank $k of $2 ($3" "$1"; then
            echo "no rail plan for local rank $k of $2 from $3"
            return 1
        fi
    done
}
