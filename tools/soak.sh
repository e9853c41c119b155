#!/usr/bin/env bash
# Runs `df11 soak` against a fresh df11d on loopback ports: makes M small synthetic DF11 models
# (df11 synth + df11 compress, the demo model's tokenizer), starts df11d with all of them in its
# catalog, nothing preloaded, and a memory budget that holds about half of them (so requests load
# and evict models as they go, and are refused with RESOURCE_EXHAUSTED when the resident ones are
# all busy), runs the soak with its gRPC and HTTP listeners and its pid, stops
# the daemon (its exit status and log are checked) and prints the soak's report.
# Usage: tools/soak.sh [--duration D] [--streams N] [--models M] [--json]
#                      [--build-dir DIR] [--no-build]
#   --build-dir DIR   where df11d and df11 are built (default build/)
#   --no-build        use the binaries already there (the CI test does)
set -euo pipefail
cd "$(dirname "$0")/.."

duration=60s streams=64 models=6 json="" build_dir=build build=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --duration) duration="$2"; shift 2 ;;
    --streams) streams="$2"; shift 2 ;;
    --models) models="$2"; shift 2 ;;
    --json) json=--json; shift ;;
    --build-dir) build_dir="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "soak.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$models" =~ ^[1-9][0-9]*$ ]] || { echo "soak.sh: --models must be a positive number" >&2; exit 2; }

if [[ $build = 1 ]]; then
  export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/df11-ccache}"
  cmake -S . -B "$build_dir" -G Ninja -DDF11_CUDA=AUTO >/dev/null
  cmake --build "$build_dir" -j"$(nproc)" --target df11d df11 >&2
fi
df11d="$build_dir/daemon/df11d" df11="$build_dir/tools/df11"

work="$(mktemp -d)"
daemon=""
cleanup() {
  [[ -n "$daemon" ]] && kill -KILL "$daemon" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

archs=(qwen3 llama qwen2)
catalog=""
for ((i = 0; i < models; i++)); do
  { "$df11" synth "$work/bf16-$i" --arch "${archs[i % 3]}" --layers 2 --hidden 128 \
      --intermediate 256 --heads 4 --kv-heads 2 --vocab 4096 --seed "$((i + 1))" &&
    "$df11" compress "$work/bf16-$i" "$work/models/soak-$i"; } >"$work/make.log" 2>&1 ||
    { cat "$work/make.log" >&2; exit 1; }
  cp models/demo/tokenizer.json models/demo/tokenizer_config.json "$work/models/soak-$i/"
  rm -rf "$work/bf16-$i"
  catalog+="  - {source: \"$work/models/soak-$i\", name: soak-$i, keep_alive: 0s}"$'\n'
done
one=$(du -cb "$work"/models/soak-0/*.safetensors | tail -1 | cut -f1)
# Half the models, and room for the decode scratch and the KV caches of the streams beside them.
budget=$(( (models + 1) / 2 * one + 8 * 1024 * 1024 ))
cat >"$work/config.yaml" <<YAML
listen: {grpc: "127.0.0.1:0", http: "127.0.0.1:0"}
preload: []
catalog:
$catalog
model_roots: ["$work/models"]
memory: {budget: $budget, eviction: lru, keep_alive: 0s}
limits: {queue_size: 1024}
YAML
"$df11d" --config "$work/config.yaml" --port-file "$work/ports.json" >"$work/df11d.log" 2>&1 &
daemon=$!
for _ in $(seq 600); do
  [[ -s "$work/ports.json" ]] && break
  kill -0 "$daemon" 2>/dev/null || { cat "$work/df11d.log" >&2; exit 1; }
  sleep 0.1
done
port="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["grpc"])' "$work/ports.json")"
http="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["http"])' "$work/ports.json")"
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
status=0
"$df11" soak --addr "127.0.0.1:$port" --http "127.0.0.1:$http" --daemon-pid "$daemon" \
  --duration "$duration" --streams "$streams" --models "$models" $json || status=$?
kill -TERM "$daemon"
daemon_status=0
wait "$daemon" || daemon_status=$?
daemon=""
if [[ $daemon_status != 0 ]]; then
  echo "soak.sh: df11d exited with status $daemon_status; its log:" >&2
  tail -50 "$work/df11d.log" >&2
  exit 1
fi
exit "$status"
