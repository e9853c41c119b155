#!/usr/bin/env bash
# Installs the dependencies, builds df11d and passes every test, in the configurations CI runs:
#   build/       CUDA code compiled when nvcc is present (GPU tests skip without a device)
#   build-cpu/   -DDF11_CUDA=OFF
#   build-asan/  AddressSanitizer + UBSan, codec and runtime tests
#   build-fuzz/  libFuzzer targets (clang), a short run of each
# Usage: tools/test.sh [--quick]   (--quick: the first configuration only)
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/install-deps.sh
jobs=$(nproc)
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/df11-ccache}"

configure_build_test() {
  local dir=$1 label=$2; shift 2
  echo "== $dir: $*"
  # Before configuring: the hub interop test is registered only when its venv exists.
  bash tools/install-test-python.sh "$dir/venv-hub"
  cmake -S . -B "$dir" -G Ninja "$@" >/dev/null
  cmake --build "$dir" -j"$jobs"
  if [ -n "$label" ]; then
    ctest --test-dir "$dir" --output-on-failure -j"$jobs" -L "$label"
  else
    ctest --test-dir "$dir" --output-on-failure -j"$jobs"
  fi
}

configure_build_test build "" -DDF11_CUDA=AUTO
[ "${1:-}" = "--quick" ] && exit 0
configure_build_test build-cpu "" -DDF11_CUDA=OFF
configure_build_test build-asan 'codec|runtime' -DDF11_CUDA=OFF -DDF11_SANITIZE=address,undefined \
  -DCMAKE_BUILD_TYPE=Debug
configure_build_test build-fuzz fuzz -DDF11_CUDA=OFF -DDF11_FUZZ=ON \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++
