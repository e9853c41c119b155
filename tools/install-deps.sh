#!/usr/bin/env bash
# Installs everything df11d needs to build and test on Debian 12, from Debian's packages.
# Run as root (or through sudo). Safe to run again: apt skips what is already installed.
# CUDA 13 (nvcc, cuBLAS, NCCL) is optional: the build detects it and compiles the GPU code when present.
set -euo pipefail

if [ "$(id -u)" -ne 0 ]; then
  exec sudo -E "$0" "$@"
fi

export DEBIAN_FRONTEND=noninteractive
packages=(
  build-essential cmake ninja-build ccache pkg-config git
  clang libclang-rt-14-dev           # libFuzzer, sanitizers with clang
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  libabsl-dev libyaml-cpp-dev libcurl4-openssl-dev nlohmann-json3-dev libpcre2-dev
  prometheus-cpp-dev libcpp-httplib-dev libopenblas-dev libssl-dev zlib1g-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-venv
)
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${packages[@]}"
