#!/usr/bin/env bash
# Installs the dependencies, builds df11d and passes every test, in the configurations CI runs:
#   build/       CUDA code compiled when nvcc is present (GPU test programs skip, exit status
#                77, without a device): every target, every test
#   build-cpu/   -DDF11_CUDA=OFF: every target, every test
#   build-asan/  AddressSanitizer + UBSan: the codec and runtime tests and what they need
#   build-tsan/  ThreadSanitizer: the tests labelled tsan (the registry and scheduler under
#                concurrent loads, requests and unloads; a node and its HTTP front end under
#                concurrent traffic; the thread pool, timer and HTTP listener) and what they need
#   build-fuzz/  every target with clang (which checks the thread-safety annotations), and a
#                short run of each libFuzzer target
# A configuration that runs some of the tests builds only their targets. The configurations share one
# Python venv (.venv-test) and one ccache, which may reuse an object across build folders.
# Usage: tools/test.sh [--quick]   (--quick: the first configuration only)
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/install-deps.sh
# FlashInfer's headers for the CUDA build's attention, when there is a CUDA compiler.
if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || [ -x /usr/local/cuda-13/bin/nvcc ]; then
  bash tools/install-flashinfer.sh
fi
jobs=$(nproc)
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/df11-ccache}"
# Paths under the repository are hashed relative to it and the build folder is left out of the
# hash, so a file compiled with the same flags in two configurations is compiled once.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
venv="$PWD/.venv-test"
bash tools/install-test-python.sh "$venv"

# configure_build_test DIR LABEL BUILD CMAKE_ARGS...: LABEL selects the tests ("" all); BUILD is
# "all" or "tested" (only the selected tests' programs).
configure_build_test() {
  local dir=$1 label=$2 build=$3; shift 3
  echo "== $dir: $*"
  # The Python tests (hub interop, openai SDK, manifests) are registered when the venv exists.
  cmake -S . -B "$dir" -G Ninja -DDF11_HUB_PYTHON="$venv/bin/python3" -DDF11_WERROR=ON "$@" \
    >/dev/null
  local select=()
  [ -n "$label" ] && select=(-L "$label")
  if [ "$build" = tested ]; then
    # The selected tests' programs; tests that are not programs of their own (Python, a second
    # run of a program) name no target.
    local targets
    targets=$(comm -12 \
      <(ctest --test-dir "$dir" -N "${select[@]}" | sed -nE 's/^\s*Test\s+#[0-9]+: (\S+)$/\1/p' | sort) \
      <(ninja -C "$dir" -t targets all | sed -nE 's/^([A-Za-z0-9_]+): .*/\1/p' | sort))
    # shellcheck disable=SC2086
    cmake --build "$dir" -j"$jobs" --target $targets
  else
    cmake --build "$dir" -j"$jobs"
  fi
  # --no-tests=error: a label that matches no test fails; then no test outside the gpu label,
  # nor any of its cases, may have skipped (tools/check_skips.py reads ctest's JUnit report and
  # GoogleTest's XML report of each program).
  rm -rf "$dir/gtest-xml"
  GTEST_OUTPUT="xml:$PWD/$dir/gtest-xml/" ctest --test-dir "$dir" --output-on-failure \
    -j"$jobs" --no-tests=error --output-junit junit.xml "${select[@]}"
  python3 tools/check_skips.py "$dir/junit.xml" "$dir"
}

configure_build_test build "" all -DDF11_CUDA=AUTO
[ "${1:-}" = "--quick" ] && exit 0
configure_build_test build-cpu "" all -DDF11_CUDA=OFF
configure_build_test build-asan 'codec|runtime' tested -DDF11_CUDA=OFF \
  -DDF11_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=Debug
# Debian's Abseil is not instrumented: cmake/tsan/ annotates its locks and suppresses the rest.
export TSAN_OPTIONS="halt_on_error=1 suppressions=$PWD/cmake/tsan/suppressions.txt"
configure_build_test build-tsan tsan tested -DDF11_CUDA=OFF -DDF11_SANITIZE=thread \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo
unset TSAN_OPTIONS
# Every target: the clang build is also the one that checks the thread-safety annotations.
configure_build_test build-fuzz fuzz all -DDF11_CUDA=OFF -DDF11_FUZZ=ON \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++
