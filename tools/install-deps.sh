#!/usr/bin/env bash
# Install the Debian 12 packages ucxp2p needs to build, run its tests and its
# benchmarks. Idempotent: when everything is present it only checks and
# returns (no apt-get update). CUDA is optional and not installed here
# (the build uses /usr/local/cuda when it exists).
set -euo pipefail

pkgs=(
  build-essential autoconf automake libtool pkg-config   # build
  libucx-dev ucx-utils                                    # UCX (ucp) + ucx_perftest
  libhwloc-dev hwloc                                      # topology
  libpmix-dev                                             # PMIx bootstrap
  libgtest-dev                                            # make check
  openmpi-bin libopenmpi-dev                              # mpirun tests, MPI baseline
  slurm-wlm munge                                         # srun tests (local Slurm)
  iproute2 procps                                         # namespaces, ps/pgrep in tests
  gnuplot-nox                                             # benchmark plots
  python3                                                 # benchmark runner (tools/bench) and its test
)

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#pkgs[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
