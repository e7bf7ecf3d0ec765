# Sourced by the herring_*.sh tests: paths of the built shim and programs,
# a clean launcher-free environment, LD_LIBRARY_PATH for the uninstalled
# libucxp2p.so the shim needs (libtool gives uninstalled libraries no usable
# rpath). Sets: here src build shim preload app dlopen_prog symbols tmp.
here=$(cd "$(dirname "$0")" && pwd)
src=${P2P_TOP_SRCDIR:-$(cd "$here/../.." && pwd)}
build=${P2P_TOP_BUILDDIR:-$src}
shim=$build/plugins/herring/.libs/libucxp2p_herring.so
app=$build/test/herring/herring_app
dlopen_prog=$build/test/herring/herring_dlopen
symbols=$src/plugins/herring/libucxp2p_herring.symbols
for f in "$shim" "$app" "$dlopen_prog"; do
    [ -e "$f" ] || { echo "$(basename "$0"): $f not built" >&2; exit 99; }
done
# In a sanitizer build (configure --enable-sanitizers) the shim needs its
# runtime loaded first: preload it ahead of the shim. Colon-separated.
preload=$shim
for rt in libasan libtsan libubsan; do
    if readelf -d "$shim" 2>/dev/null | grep -q "NEEDED.*\[$rt\.so"; then
        preload=$(${CXX:-c++} -print-file-name=$rt.so):$preload
    fi
done
export LD_LIBRARY_PATH=$build/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# Inherited launcher variables (make check run under srun/mpirun) would make
# the single-process runs try PMIx or TCP.
for v in $(env | sed -n 's/^\(PMIX_[A-Z0-9_]*\|OMPI_[A-Z0-9_]*\|SLURM_[A-Z0-9_]*\)=.*/\1/p'); do
    unset "$v"
done
unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT P2P_BOOTSTRAP \
    MPI_LOCALRANKID SMDATAPARALLEL_DEVICE_NAME
tmp=$(mktemp -d /tmp/herring_test.XXXXXX) || exit 99
trap 'rm -rf "$tmp"' EXIT
