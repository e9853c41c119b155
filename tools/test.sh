#!/usr/bin/env bash
# Installs the dependencies, builds df11d and passes every test, in the configurations CI runs:
#   build/       CUDA code compiled when nvcc is present (GPU test programs skip, exit status
#                77, without a device)
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
  # --no-tests=error: a label that matches no test fails; then no test outside the gpu label
  # may have skipped (tools/check_skips.py reads ctest's JUnit report).
  local select=()
  [ -n "$label" ] && select=(-L "$label")
  ctest --test-dir "$dir" --output-on-failure -j"$jobs" --no-tests=error \
    --output-junit junit.xml "${select[@]}"
  python3 tools/check_skips.py "$dir/junit.xml" "$dir"
}

configure_build_test build "" -DDF11_CUDA=AUTO
[ "${1:-}" = "--quick" ] && exit 0
configure_build_test build-cpu "" -DDF11_CUDA=OFF
configure_build_test build-asan 'codec|runtime' -DDF11_CUDA=OFF -DDF11_SANITIZE=address,undefined \
  -DCMAKE_BUILD_TYPE=Debug
configure_build_test build-fuzz fuzz -DDF11_CUDA=OFF -DDF11_FUZZ=ON \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++
