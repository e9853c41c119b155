#!/usr/bin/env bash
# Installs everything df11d needs to build and test on Debian 12, from Debian's packages.
# Run as root (or through sudo). Safe to run again: it does nothing when every package is there.
# CUDA 13 (nvcc, cuBLAS, NCCL) is optional: the build detects it and compiles the GPU code when present.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  clang libclang-rt-14-dev           # libFuzzer, sanitizers with clang
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  libabsl-dev libyaml-cpp-dev libcurl4-openssl-dev nlohmann-json3-dev libpcre2-dev libutf8proc-dev
  prometheus-cpp-dev libcpp-httplib-dev libboost-dev libopenblas-dev libssl-dev zlib1g-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-venv
  prometheus                         # promtool, which checks /metrics in the tests
)
# Nothing to do (and no network needed) when every package is already installed.
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then
    exec sudo -E bash "$0" "$@"
  fi
  echo "install-deps.sh: run as root (or install sudo) to install: ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
