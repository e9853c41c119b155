#!/usr/bin/env bash
# Installs CUDA from NVIDIA's apt repository for Debian 12 (Debian's own nvidia-cuda-toolkit is
# 11.x, too old for sm_90a and C++20 in nvcc): the compiler and libraries df11d builds against, or
# only the shared libraries its binaries load at run time (the container image's runtime stage).
# The GPU driver is not installed: on Kubernetes it comes from the node (the NVIDIA container
# toolkit mounts libcuda.so.1 into the container).
# Usage: tools/install-cuda.sh build|runtime [VERSION]   (VERSION: 13.0, the default)
#   build:   nvcc, the CUDA runtime, cuBLAS and CUB/Thrust headers, under /usr/local/cuda-VERSION
#   runtime: the packages listed in deploy/cuda-runtime-packages.txt ({V} replaced by 13-0)
# Run as root. Needs to reach developer.download.nvidia.com.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
mode="${1:-}"
version="${2:-13.0}"
v="${version/./-}"  # NVIDIA's package names spell 13.0 as 13-0

case "$mode" in
  build)
    packages=(cuda-nvcc-$v cuda-cudart-dev-$v cuda-cccl-$v cuda-driver-dev-$v libcublas-dev-$v) ;;
  runtime)
    mapfile -t packages < <(sed -e 's/#.*//' -e "s/{V}/$v/g" "$root/deploy/cuda-runtime-packages.txt" |
                            tr -s ' \t' '\n' | grep -v '^$' || true) ;;
  *)
    echo "usage: tools/install-cuda.sh build|runtime [VERSION]" >&2
    exit 2 ;;
esac
if [ "$(id -u)" -ne 0 ]; then
  echo "install-cuda.sh: run as root" >&2
  exit 1
fi
[ ${#packages[@]} -eq 0 ] && { echo "install-cuda.sh: no CUDA package to install"; exit 0; }

export DEBIAN_FRONTEND=noninteractive
if ! dpkg-query -W -f='${Status}' cuda-keyring 2>/dev/null | grep -q "install ok installed"; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends ca-certificates curl
  keyring=$(mktemp --suffix=.deb)
  # NVIDIA names the repositories of 64-bit ARM servers (GH200) sbsa.
  case "$(dpkg --print-architecture)" in
    amd64) arch=x86_64 ;;
    arm64) arch=sbsa ;;
    *) echo "install-cuda.sh: no CUDA repository for $(dpkg --print-architecture)" >&2; exit 1 ;;
  esac
  curl -fsSL -o "$keyring" \
    "https://developer.download.nvidia.com/compute/cuda/repos/debian12/$arch/cuda-keyring_1.1-1_all.deb"
  dpkg -i "$keyring"
  rm -f "$keyring"
fi
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${packages[@]}"
echo "install-cuda.sh: installed ${packages[*]}"
