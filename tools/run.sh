#!/usr/bin/env bash
# Installs the dependencies, builds df11d and df11ctl, and runs the daemon in the foreground on its
# embedded default configuration (configs/default.yaml): the ModelHost gRPC API on 127.0.0.1:7411,
# Prometheus /metrics on 127.0.0.1:7412, and the demo model (models/demo) preloaded as "demo".
# Ctrl-C (or SIGTERM) drains and stops it. Extra arguments go to df11d (see df11d --help).
# Usage: tools/run.sh [DF11D_ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/install-deps.sh
# FlashInfer's headers for the CUDA build's attention, when there is a CUDA compiler.
if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || [ -x /usr/local/cuda-13/bin/nvcc ]; then
  bash tools/install-flashinfer.sh
fi
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/df11-ccache}"
cmake -S . -B build -G Ninja -DDF11_CUDA=AUTO >/dev/null
cmake --build build -j"$(nproc)" --target df11d df11ctl df11
echo "df11d: try 'build/client/df11ctl generate demo --prompt \"def \"' in another terminal" >&2
exec build/daemon/df11d "$@"
