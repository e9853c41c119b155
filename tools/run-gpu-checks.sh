#!/usr/bin/env bash
# Every GPU check of df11d in one run, from an unpacked gpu-bundle (tools/gpu-bundle.sh); prints a
# table last. Needs a CUDA GPU and driver; nothing else from the network or the distribution.
#
#   bash run-gpu-checks.sh [--only tests|sanitizer|gemv|forward|bench] [--work DIR]
#
#   tests      every gpu-labelled test program: the CUDA devices, the decoders (the DF11 one with
#              the codec's corpus, the interleaved one, the tiled one and its fused product), the
#              forward pass's operations against their reference, the CUDA backend (placement,
#              accounting, bit-exact decode, 10,000 load/unload cycles, the forward pass against
#              transformers' goldens, tiled against decoded projections) and df11d on the GPU
#   sanitizer  compute-sanitizer memcheck on the decoders, the forward operations and the
#              backend, racecheck on the DF11 decoder and the tiled kernels (shared memory)
#   gemv       df11 gemv-bench: the fused decode + product against cuBLAS on Qwen3-8B's shapes,
#              1, 2, 4 and 8 columns
#   forward    df11 engine-bench --device cuda:0 on a Qwen3-8B-shaped model (DF11 against BF16,
#              batch 1, 2, 4, 8, 64, 256; at batch 1 and 8 also DF11 with fused_max_rows 0),
#              and tools/bench_reference_engines.py (transformers, dfloat11)
#   bench      df11 gpu-bench (both decoders against a device copy); a Qwen3-8B-shaped model made
#              with df11 synth + compress, then df11 gpu-load-bench on it (load against the
#              host-to-device copy in DF11's layout and with tiled projections, per-layer decode,
#              models per budget, DF11 and BF16)
# Logs and JSON go to $OUT when set (a device tool's output folder), else DIR/results.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
only=all
work=${TMPDIR:-/tmp}/df11-gpu-checks
while [[ $# -gt 0 ]]; do
  case $1 in
    --only) only=$2; shift 2;;
    --work) work=$2; shift 2;;
    *) sed -n 2,20p "$0"; exit 2;;
  esac
done
out=${OUT:-$work/results}
mkdir -p "$work" "$out"
# cuBLAS is not in the bundle: the machine's CUDA toolkit's, else the one PyTorch's wheels carry.
cublas=""
for dir in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
           "$(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null)"; do
  if [[ -n $dir && -e $dir/libcublas.so.13 ]]; then cublas=$dir; break; fi
done
[[ -n $cublas ]] || echo "run-gpu-checks: no libcublas.so.13 found; programs that need it will not start" >&2
export LD_LIBRARY_PATH=$here/lib${cublas:+:$cublas} DF11_TEST_DATA=$here/data DF11_TOOL=$here/bin/df11 \
       DF11D_BINARY=$here/bin/df11d DF11CTL_BINARY=$here/bin/df11ctl DF11_DEMO_DIR=$here/demo
bin=$here/bin
rows=()  # "check|result|detail"

# run NAME COMMAND...: the command's output in $out/NAME.log; a row with its gtest summary.
run() {
  local name=$1; shift
  local start=$SECONDS
  "$@" > "$out/$name.log" 2>&1
  local rc=$?
  local detail
  # gtest's counts (passed, skipped, failed) and compute-sanitizer's summary.
  detail=$(grep -E '^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ tests?|ERROR SUMMARY' "$out/$name.log" |
           sed -E 's/^\[ *([A-Z]+) *\] ([0-9]+) tests?.*/\2 \1/' | tr '\n' ' ')
  rows+=("$name|$([[ $rc == 0 ]] && echo ok || echo "FAILED ($rc)")|$((SECONDS - start)) s ${detail}")
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$out/gpu.txt" 2>/dev/null
gpu=$(head -1 "$out/gpu.txt")

if [[ $only == all || $only == tests ]]; then
  run cuda_devices_test "$bin/cuda_devices_test"
  run gpu_decoder_test "$bin/gpu_decoder_test"
  run gpu_interleaved_test "$bin/gpu_interleaved_test"
  run gpu_tiled_test "$bin/gpu_tiled_test"
  run decoder_equivalence_gpu env DF11_REQUIRE_GPU=1 "$bin/decoder_equivalence_test"
  run forward_ops_gpu_test "$bin/forward_ops_gpu_test"
  run cuda_backend_gpu_test "$bin/cuda_backend_gpu_test"
  run daemon_gpu_test "$bin/daemon_gpu_test"
fi

if [[ $only == all || $only == sanitizer ]]; then
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  # The long stress cases are left to the plain runs above.
  run memcheck_decoder "$cs" --tool memcheck --error-exitcode 1 \
    "$bin/gpu_decoder_test" --gtest_filter=-*RandomStress*
  run racecheck_decoder "$cs" --tool racecheck --error-exitcode 1 \
    "$bin/gpu_decoder_test" --gtest_filter=*SeveralUnits*
  run memcheck_interleaved "$cs" --tool memcheck --error-exitcode 1 \
    "$bin/gpu_interleaved_test" --gtest_filter=-*RandomStress*
  # CreateRefusesBudgetsThatDoNotFit asks cudaMalloc for more than the GPU has, on purpose, and
  # memcheck reports the refusal as an API error.
  run memcheck_backend "$cs" --tool memcheck --error-exitcode 1 \
    "$bin/cuda_backend_gpu_test" --gtest_filter=-*ManyLoadUnloadCycles*:*CreateRefusesBudgets*
  run memcheck_forward_ops "$cs" --tool memcheck --error-exitcode 1 "$bin/forward_ops_gpu_test"
  run memcheck_tiled "$cs" --tool memcheck --error-exitcode 1 "$bin/gpu_tiled_test" \
    --gtest_filter=*Bias*:*DataLoss*:*Refuses*:*SeveralMatrices*:*RowRanges*
  run racecheck_tiled "$cs" --tool racecheck --error-exitcode 1 "$bin/gpu_tiled_test" \
    --gtest_filter=*Bias*:*SeveralMatrices*
fi

if [[ $only == all || $only == gemv ]]; then
  run gemv_bench sh -c "'$bin/df11' gemv-bench --json > '$out/gemv_bench.json'"
fi

# Qwen3-8B's shapes with random weights: 36 layers, hidden 4096, MLP 12288, 32 heads of 128,
# 8 KV heads, vocabulary 151936, untied head.
m=$work/qwen3-8b-shaped
make_8b_model() {
  if [[ ! -f $m-df11/config.json ]]; then
    rm -rf "$m" "$m-df11"
    run make_8b_model sh -c "'$bin/df11' synth '$m' --arch qwen3 --layers 36 --hidden 4096 \
      --intermediate 12288 --heads 32 --kv-heads 8 --head-dim 128 --vocab 151936 --shards && \
      '$bin/df11' compress '$m' '$m-df11'"
  fi
}

if [[ $only == all || $only == forward ]]; then
  make_8b_model
  # The official package's pure-Python wheels (dfloat11, dahuffman, a setuptools with
  # pkg_resources), carried in $DF11_WHEELS (default ./.whl) when the machine lacks them.
  wheels=${DF11_WHEELS:-$PWD/.whl}
  if ! python3 -c 'import dfloat11' 2>/dev/null && compgen -G "$wheels/*.whl" > /dev/null; then
    python3 -m pip install --quiet --no-index --no-deps --target "$work/pylib" "$wheels"/*.whl &&
      export PYTHONPATH=$work/pylib${PYTHONPATH:+:$PYTHONPATH}
  fi
  # The engine on the GPU, DF11 against BF16 in one run (prompt 512; 256 tokens up to batch 8,
  # 64 at 64 and 256, whose KV caches take 7 and 29 GB); DF11 with every step decoding into
  # scratch (fused_max_rows 0) at batch 1 and 8; then transformers and the official dfloat11
  # package on the same weights.
  for b in 1 2 4 8 64 256; do
    tokens=$(( b <= 8 ? 256 : 64 ))
    run "engine_bench_b$b" sh -c "'$bin/df11' engine-bench --df11 '$m-df11' --bf16 '$m' \
      --device cuda:0 --kv-cache 40GiB --prompt-tokens 512 --tokens $tokens --batch $b --runs 1 \
      --json > '$out/engine_bench_b$b.json'"
  done
  for b in 1 8; do
    run "engine_bench_decoded_b$b" sh -c "'$bin/df11' engine-bench --df11 '$m-df11' \
      --device cuda:0 --kv-cache 40GiB --prompt-tokens 512 --tokens 256 --batch $b --runs 1 \
      --fused-max-rows 0 --json > '$out/engine_bench_decoded_b$b.json'"
  done
  run reference_engines sh -c "python3 '$here/tools/bench_reference_engines.py' --bf16 '$m' \
    --df11 '$m-df11' --batch 1,8 --prompt-tokens 512 --tokens 64 > '$out/reference_engines.json'"
fi

if [[ $only == all || $only == bench ]]; then
  run gpu_bench sh -c "'$bin/df11' gpu-bench --json > '$out/gpu_bench.json'"
  make_8b_model
  run gpu_load_bench sh -c "'$bin/df11' gpu-load-bench '$m-df11' --bf16 '$m' --runs 3 --json \
    --fused-max-rows 0 > '$out/gpu_load_bench.json'"
  # The same load with the projections re-encoded as tiled matrices (df11d's default).
  run gpu_load_bench_tiled sh -c "'$bin/df11' gpu-load-bench '$m-df11' --runs 1 --no-density \
    --json > '$out/gpu_load_bench_tiled.json'"
  # The most models the GPU holds: nearly all of it, a small KV pool.
  run gpu_load_bench_97 sh -c "'$bin/df11' gpu-load-bench '$m-df11' --bf16 '$m' --runs 1 \
    --budget 97% --kv-cache 1GiB --fused-max-rows 0 --json > '$out/gpu_load_bench_97.json'"
fi

printf '\n%s\n' "${gpu:-GPU unknown}"
printf '%-26s %-12s %s\n' CHECK RESULT DETAIL
for r in "${rows[@]}"; do
  IFS='|' read -r c res d <<< "$r"
  printf '%-26s %-12s %s\n' "$c" "$res" "$d"
done
if [[ -s $out/gemv_bench.json ]]; then
  python3 - "$out/gemv_bench.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for l in r.get("layer", []):
    print(f"gemv layer, {l['columns']} columns: fused/cuBLAS {l.get('separate_fused_vs_cublas', 0):.2f}x"
          f" (target >= {1.15 if l['columns'] == 1 else 1.0 if l['columns'] == 4 else 0}),"
          f" shared-input launches {l.get('shared_input_fused_vs_cublas', 0):.2f}x")
PY
fi
for f in "$out"/engine_bench_b*.json "$out"/engine_bench_decoded_b*.json; do
  [[ -s $f ]] || continue
  python3 - "$f" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
c = r["configs"]
if "bf16" in c:
    print(f"engine batch {r['batch']}: decode tok/s bf16 {c['bf16']['decode_tokens_per_second']:.1f},"
          f" df11 {c['df11']['decode_tokens_per_second']:.1f}"
          f" ({r['ratios']['df11']['decode_vs_bf16']:.2f}x)")
else:
    print(f"engine batch {r['batch']}, fused_max_rows {r['fused_max_rows']}:"
          f" decode tok/s df11 {c['df11']['decode_tokens_per_second']:.1f}")
PY
done
for f in "$out/gpu_load_bench.json" "$out/gpu_load_bench_tiled.json" "$out/gpu_load_bench_97.json"; do
  [[ -s $f ]] || continue
  python3 - "$f" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
m = r["model"]
print(f"load (fused_max_rows {r.get('fused_max_rows', 0)}) {m['file_bytes']/1e9:.2f} GB in"
      f" {r['load_seconds']:.3f} s = {r['load_gbps']:.1f} GB/s; H2D copy {r['copy_h2d_gbps']:.1f}"
      f" GB/s; ratio {r['load_vs_copy']:.2f} (target >= 0.80 in DF11's layout)")
print(f"decode {m['layers']} layers: {r['decode_layers_gbps']:.0f} GB/s of BF16")
if "density" in r:
    print(f"density in {r['budget_bytes']/2**30:.1f} GiB (KV pool {r['kv_pool_bytes']/2**30:.1f} GiB):"
          f" {r['density']['models']} DF11 models of {m['resident_bytes']/2**30:.2f} GiB" +
          (f", {r['density_bf16']['models']} BF16" if 'density_bf16' in r else ""))
PY
done
