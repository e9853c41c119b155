#!/usr/bin/env bash
# Runs `df11 daemon-bench` against a fresh df11d on loopback ports: builds df11d and df11 (in
# build/), starts the daemon with nothing preloaded and MODEL_DIR (default: the demo model) in its
# catalog as bench-catalog, benchmarks it (add --only ...,http,ondemand for the HTTP and on-demand
# scenarios, --only chunked,slow,idle for the front door under attack) and stops the daemon. Extra arguments go to df11 daemon-bench (see df11 daemon-bench --help);
# add --json for machine-readable output.
# Usage: tools/bench-daemon.sh [MODEL_DIR] [DAEMON_BENCH_ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."

model="${1:-models/demo}"
[[ $# -gt 0 ]] && shift
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/df11-ccache}"
cmake -S . -B build -G Ninja -DDF11_CUDA=AUTO >/dev/null
cmake --build build -j"$(nproc)" --target df11d df11 >&2

work="$(mktemp -d)"
source="$(realpath "$model")"
cat >"$work/config.yaml" <<YAML
listen: {grpc: "127.0.0.1:0", http: "127.0.0.1:0"}
preload: []
catalog: [{source: "$source", name: bench-catalog, keep_alive: 0s}]
model_roots: ["$(dirname "$source")"]   # daemon-bench loads the model itself too
limits: {queue_size: 1024}
YAML
build/daemon/df11d --config "$work/config.yaml" --port-file "$work/ports.json" \
  >"$work/df11d.log" 2>&1 &
daemon=$!
trap 'kill -TERM $daemon 2>/dev/null; wait $daemon 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 600); do
  [[ -s "$work/ports.json" ]] && break
  kill -0 $daemon 2>/dev/null || { cat "$work/df11d.log" >&2; exit 1; }
  sleep 0.1
done
port="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["grpc"])' "$work/ports.json")"
http="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["http"])' "$work/ports.json")"
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
build/tools/df11 daemon-bench --addr "127.0.0.1:$port" --http "127.0.0.1:$http" \
  --catalog-model bench-catalog --model "$model" --daemon-pid "$daemon" "$@"
