#!/usr/bin/env bash
# Installs the dependencies, builds df11d and runs its main job on the embedded default: text
# generation with the demo model (models/demo, a small Qwen3 model stored DF11-compressed) on the
# CPU engine, streamed to the terminal. The daemon takes this place once it exists.
# Usage: tools/run.sh [PROMPT]      (default prompt: "def ")
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/install-deps.sh
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/df11-ccache}"
cmake -S . -B build -G Ninja -DDF11_CUDA=AUTO >/dev/null
cmake --build build -j"$(nproc)" --target df11
exec build/tools/df11 generate models/demo --prompt "${1:-def }" --max-tokens 96
