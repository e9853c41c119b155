#!/usr/bin/env bash
# Installs the dependencies, builds df11d and runs its main job on the embedded default: the df11
# demo, which generates a small Qwen3-shaped model and compresses, inspects, verifies and
# decompresses it (the daemon takes this place once it exists).
# Usage: tools/run.sh [DEMO_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/install-deps.sh
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/df11-ccache}"
cmake -S . -B build -G Ninja -DDF11_CUDA=AUTO >/dev/null
cmake --build build -j"$(nproc)" --target df11
exec build/tools/df11 demo "${1:-df11-demo}"
