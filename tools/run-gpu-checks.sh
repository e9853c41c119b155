#!/usr/bin/env bash
# Every GPU check of df11d in one run, from an unpacked gpu-bundle (tools/gpu-bundle.sh); prints a
# table last and exits 1 when any check failed. Needs a CUDA GPU and driver; nothing else from the
# network or the distribution. Checks run in order of value, so that a short run answers "does it
# generate correctly" first:
#
#   bash run-gpu-checks.sh [--only LIST] [--checks REGEX] [--budget SECONDS] [--work DIR]
#
#   tests      the forward pass's operations against their reference; the CUDA backend (the 8
#              architectures' forward tests against transformers' goldens, hot swaps during
#              generation, placement, accounting, bit-exact decode, load/unload cycles); the demo
#              model's greedy tokens from df11 generate on the GPU against the CPU; df11d on the
#              GPU; the tiled kernels and the lane-stream decoder (decoder v3)
#   decoders   the CUDA devices, the DF11 and interleaved decoders, and the decoder corpus through
#              the kernel
#   sanitizer  compute-sanitizer memcheck on the forward operations, the backend, the tiled kernels
#              and the decoders; racecheck and synccheck on the forward operations and the tiled
#              kernels, racecheck on the DF11 decoder
#   gemv       df11 gemv-bench: the fused decode + product against cuBLAS on Qwen3-8B's shapes
#   forward    df11 engine-bench --device cuda:0 on a Qwen3-8B-shaped model, DF11 against BF16 at
#              batch 1 and 8; tools/bench_reference_engines.py (transformers, dfloat11) at the
#              same batches; DF11 against BF16 at batch 64, 2, 4, 256; DF11 with fused_max_rows 0
#              at batch 1 and 8; the lane-stream layout at batch 1, 8 and 64
#   bench      df11 gpu-bench (the decoders against a device copy); df11 gpu-load-bench on the
#              Qwen3-8B-shaped model (load against the host-to-device copy, per-layer decode,
#              models per budget, DF11 and BF16)
# LIST is a comma-separated list of those (default: all); --checks REGEX runs, of their checks,
# only those whose row name matches REGEX (bash's =~), as a re-run of a few. With --budget, a check that would start
# after SECONDS is reported as not run, and each check is stopped at the budget's end. The
# Qwen3-8B-shaped model (df11 synth + compress) is made in the background from the start when
# forward or bench is asked for. Logs and JSON go to DIR/results; with $OUT set (a device tool's
# output folder) they are also packed into $OUT/gpu-checks.tar.gz and the table is $OUT/table.txt.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
only=all
checks=""
budget=0
work=${TMPDIR:-/tmp}/df11-gpu-checks
while [[ $# -gt 0 ]]; do
  case $1 in
    --only) only=$2; shift 2;;
    --checks) checks=$2; shift 2;;
    --budget) budget=$2; shift 2;;
    --work) work=$2; shift 2;;
    *) sed -n '2,/^[^#]/{/^#/p}' "$0"; exit 2;;
  esac
done
wants() { [[ $only == all || ,$only, == *,$1,* ]]; }
out=$work/results
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
failed=0

# run NAME COMMAND...: the command's output in $out/NAME.log; a row with its gtest summary. Not
# run when the budget is spent; stopped at the budget's end.
run() {
  local name=$1; shift
  [[ -z $checks || $name =~ $checks ]] || return 0
  local limit=0
  if (( budget > 0 )); then
    limit=$(( budget - SECONDS ))
    if (( limit < 5 )); then rows+=("$name|not run|budget spent"); return; fi
  fi
  local start=$SECONDS
  if (( limit > 0 )); then
    timeout -k 5 "$limit" "$@" > "$out/$name.log" 2>&1
  else
    "$@" > "$out/$name.log" 2>&1
  fi
  local rc=$?
  local detail
  # gtest's counts (passed, skipped, failed) and compute-sanitizer's summary.
  detail=$(grep -E '^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ tests?|ERROR SUMMARY' "$out/$name.log" |
           sed -E 's/^\[ *([A-Z]+) *\] ([0-9]+) tests?.*/\2 \1/' | tr '\n' ' ')
  if [[ $rc == 0 ]]; then
    rows+=("$name|ok|$((SECONDS - start)) s ${detail}")
  else
    failed=1
    rows+=("$name|FAILED ($rc)|$((SECONDS - start)) s ${detail}")
  fi
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$out/gpu.txt" 2>/dev/null
gpu=$(head -1 "$out/gpu.txt")

# Qwen3-8B's shapes with random weights: 36 layers, hidden 4096, MLP 12288, 32 heads of 128,
# 8 KV heads, vocabulary 151936, untied head. Made on the CPUs while the GPU runs the tests.
m=$work/qwen3-8b-shaped
model_job=""
if wants forward || wants bench; then
  if [[ ! -f $m-df11/config.json ]]; then
    rm -rf "$m" "$m-df11"
    ( "$bin/df11" synth "$m" --arch qwen3 --layers 36 --hidden 4096 --intermediate 12288 \
        --heads 32 --kv-heads 8 --head-dim 128 --vocab 151936 --shards &&
      "$bin/df11" compress "$m" "$m-df11" ) > "$out/make_8b_model.log" 2>&1 &
    model_job=$!
  fi
fi
# wait_for_model: a row for the background job, once.
wait_for_model() {
  [[ -n $model_job ]] || return 0
  local start=$SECONDS
  if (( budget > 0 && budget - SECONDS < 60 )); then
    kill "$model_job" 2>/dev/null
    rows+=("make_8b_model|not run|budget spent")
    model_job=""
    return 1
  fi
  if wait "$model_job"; then
    rows+=("make_8b_model|ok|waited $((SECONDS - start)) s")
  else
    failed=1
    rows+=("make_8b_model|FAILED|see make_8b_model.log")
  fi
  model_job=""
}

if wants tests; then
  # Does it generate correctly: the operations, the 8 architectures against transformers, the
  # demo model's greedy tokens on the GPU against the CPU, df11d on the GPU.
  run forward_ops_gpu_test "$bin/forward_ops_gpu_test"
  run cuda_backend_gpu_test "$bin/cuda_backend_gpu_test"
  run generate_gpu_vs_cpu sh -c "
    '$bin/df11' generate '$here/demo' --prompt 'def ' --max-tokens 48 --temperature 0 --ignore-eos \
      --json --device cpu > '$out/generate_cpu.json' &&
    '$bin/df11' generate '$here/demo' --prompt 'def ' --max-tokens 48 --temperature 0 --ignore-eos \
      --json --device cuda:0 > '$out/generate_gpu.json' &&
    python3 -c 'import json,sys; a,b=(json.load(open(f))[\"token_ids\"] for f in sys.argv[1:]);
print(\"cpu\",a); print(\"gpu\",b); sys.exit(0 if a==b and len(a)==48 else 1)' \
      '$out/generate_cpu.json' '$out/generate_gpu.json'"
  run daemon_gpu_test "$bin/daemon_gpu_test"
  run gpu_tiled_test "$bin/gpu_tiled_test"
  run gpu_lane_test "$bin/gpu_lane_test"
fi

if wants decoders; then
  run cuda_devices_test "$bin/cuda_devices_test"
  run gpu_decoder_test "$bin/gpu_decoder_test"
  run gpu_interleaved_test "$bin/gpu_interleaved_test"
  run decoder_equivalence_gpu_test "$bin/decoder_equivalence_gpu_test"
fi

if wants sanitizer; then
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  run memcheck_forward_ops "$cs" --tool memcheck --error-exitcode 1 "$bin/forward_ops_gpu_test"
  # racecheck instruments only the project's kernels (df11:: in their mangled names): cuBLAS's
  # split-K kernels report shared-memory hazards of their own (192 in one product on an H200,
  # 2026-11-27). Its cuBLASLt bias kernel stops racecheck with "failed to handle a hardware
  # exception" even uninstrumented (2026-11-28), so the products with a bias are left out.
  run racecheck_forward_ops "$cs" --tool racecheck --error-exitcode 1 \
    --kernel-name kns=df11 "$bin/forward_ops_gpu_test" --gtest_filter=-*LinearWithBias*
  run synccheck_forward_ops "$cs" --tool synccheck --error-exitcode 1 "$bin/forward_ops_gpu_test"
  # CreateRefusesBudgetsThatDoNotFit asks cudaMalloc for more than the GPU has, on purpose, and
  # memcheck reports the refusal as an API error; the long cycles are left to the plain run.
  run memcheck_backend "$cs" --tool memcheck --error-exitcode 1 "$bin/cuda_backend_gpu_test" \
    --gtest_filter=-*ManyLoadUnloadCycles*:*CreateRefusesBudgets*
  run memcheck_lane "$cs" --tool memcheck --error-exitcode 1 "$bin/gpu_lane_test" \
    --gtest_filter=-*RandomStress*
  run memcheck_tiled "$cs" --tool memcheck --error-exitcode 1 "$bin/gpu_tiled_test" \
    --gtest_filter=*Bias*:*DataLoss*:*Refuses*:*SeveralMatrices*:*RowRanges*
  run racecheck_tiled "$cs" --tool racecheck --error-exitcode 1 "$bin/gpu_tiled_test" --gtest_filter=*Bias*:*SeveralMatrices*
  run synccheck_tiled "$cs" --tool synccheck --error-exitcode 1 "$bin/gpu_tiled_test" --gtest_filter=*Bias*:*SeveralMatrices*
  # The long stress cases are left to the plain runs.
  run memcheck_decoder "$cs" --tool memcheck --error-exitcode 1 "$bin/gpu_decoder_test" --gtest_filter=-*RandomStress*
  run racecheck_decoder "$cs" --tool racecheck --error-exitcode 1 "$bin/gpu_decoder_test" --gtest_filter=*SeveralUnits*
  run memcheck_interleaved "$cs" --tool memcheck --error-exitcode 1 "$bin/gpu_interleaved_test" \
    --gtest_filter=-*RandomStress*
fi

if wants gemv; then
  run gemv_bench sh -c "'$bin/df11' gemv-bench --json > '$out/gemv_bench.json'"
fi

if wants forward && wait_for_model; then
  # The official package's pure-Python wheels (dfloat11, dahuffman, a setuptools with
  # pkg_resources), carried in $DF11_WHEELS (default ./.whl) when the machine lacks them.
  wheels=${DF11_WHEELS:-$PWD/.whl}
  if ! python3 -c 'import dfloat11' 2>/dev/null && compgen -G "$wheels/*.whl" > /dev/null; then
    python3 -m pip install --quiet --no-index --no-deps --target "$work/pylib" "$wheels"/*.whl &&
      export PYTHONPATH=$work/pylib${PYTHONPATH:+:$PYTHONPATH}
  fi
  # The engine on the GPU, DF11 against BF16 in one run (prompt 512; 128 tokens up to batch 8,
  # 32 at 64 and 256, whose KV caches take 7 and 29 GB), the batches most asked about first, with
  # transformers and the official dfloat11 package on the same weights right after them; DF11
  # with every step decoding into scratch (fused_max_rows 0) at batch 1 and 8.
  # engine_bench NAME BATCH ARGS...: one run of the engine into $out/NAME.json.
  engine_bench() {
    local name=$1 b=$2
    shift 2
    run "$name" sh -c "'$bin/df11' engine-bench --df11 '$m-df11' --device cuda:0 \
      --kv-cache 40GiB --prompt-tokens 512 --tokens $(( b <= 8 ? 128 : 32 )) --batch $b \
      --runs 1 $* --json > '$out/$name.json'"
  }
  for b in 1 8; do engine_bench "engine_bench_b$b" "$b" --bf16 "'$m'"; done
  run reference_engines sh -c "python3 '$here/tools/bench_reference_engines.py' --bf16 '$m' \
    --df11 '$m-df11' --batch 1,8 --prompt-tokens 512 --tokens 64 --out '$out/reference_engines.json'"
  for b in 64 2 4 256; do engine_bench "engine_bench_b$b" "$b" --bf16 "'$m'"; done
  for b in 1 8; do engine_bench "engine_bench_decoded_b$b" "$b" --fused-max-rows 0; done
  # The lane-stream layout (decoder v3) in the engine: its fused product at batch 1 and 8, its
  # decode into scratch at 64.
  for b in 1 8 64; do engine_bench "engine_bench_lane_b$b" "$b" --gpu-layout lane; done
fi

if wants bench; then
  run gpu_bench sh -c "'$bin/df11' gpu-bench --json > '$out/gpu_bench.json'"
  if wait_for_model; then
    run gpu_load_bench sh -c "'$bin/df11' gpu-load-bench '$m-df11' --bf16 '$m' --runs 3 --json \
      --fused-max-rows 0 > '$out/gpu_load_bench.json'"
    # The same load with the projections re-encoded as tiled matrices (df11d's default).
    run gpu_load_bench_tiled sh -c "'$bin/df11' gpu-load-bench '$m-df11' --runs 1 --no-density \
      --json > '$out/gpu_load_bench_tiled.json'"
    # And every unit in the lane-stream layout (built on the host at load, for now).
    run gpu_load_bench_lane sh -c "'$bin/df11' gpu-load-bench '$m-df11' --runs 1 --no-density \
      --gpu-layout lane --json > '$out/gpu_load_bench_lane.json'"
    # The most models the GPU holds: nearly all of it, a small KV pool.
    run gpu_load_bench_97 sh -c "'$bin/df11' gpu-load-bench '$m-df11' --bf16 '$m' --runs 1 \
      --budget 97% --kv-cache 1GiB --fused-max-rows 0 --json > '$out/gpu_load_bench_97.json'"
  fi
fi
[[ -z $model_job ]] || kill "$model_job" 2>/dev/null

{
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
    print(f"gemv layer, {l['columns']} columns: tiled/cuBLAS {l.get('separate_fused_vs_cublas', 0):.2f}x,"
          f" lane/cuBLAS {l.get('separate_lane_vs_cublas', 0):.2f}x"
          f" (target >= {1.5 if l['columns'] == 1 else 1.1 if l['columns'] == 4 else 1.0}),"
          f" tiled shared-input launches {l.get('shared_input_fused_vs_cublas', 0):.2f}x")
PY
fi
for f in "$out"/engine_bench_b*.json "$out"/engine_bench_decoded_b*.json "$out"/engine_bench_lane_b*.json; do
  [[ -s $f ]] || continue
  python3 - "$f" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
c = r["configs"]
if "device_rates" in r and r["batch"] == 1:
    d = r["device_rates"]
    print(f"device: reads {d['read_gbps']:.0f} GB/s, BF16 products {d['bf16_matmul_tflops']:.0f} TFLOP/s")
if "bf16" in c:
    print(f"engine batch {r['batch']}: decode tok/s bf16 {c['bf16']['decode_tokens_per_second']:.1f},"
          f" df11 {c['df11']['decode_tokens_per_second']:.1f}"
          f" ({r['ratios']['df11']['decode_vs_bf16']:.2f}x)")
else:
    print(f"engine batch {r['batch']}, fused_max_rows {r['fused_max_rows']},"
          f" layout {r.get('gpu_layout', 'tiled')}:"
          f" decode tok/s df11 {c['df11']['decode_tokens_per_second']:.1f}")
for name, d in c.items():
    if "launches_per_step" not in d:
        continue
    top = sorted(d.get("profile_us_per_step", {}).items(), key=lambda kv: -kv[1])[:4]
    print(f"  {name}: {d['launches_per_step']:.0f} launches, {d['event_ops_per_step']:.0f} event ops,"
          f" {d['host_syncs_per_step']:.1f} host waits per step; {d.get('step_us', 0):.0f} us a step,"
          f" {d.get('enqueue_us_per_step', 0):.0f} us of it issuing; profiled"
          f" {d.get('profiled_us_per_step', 0):.0f} us: " + ", ".join(f"{k} {v:.0f}" for k, v in top))
    if "roofline_step_us" in d:
        print(f"    roofline {d['roofline_step_us']:.0f} us: the step reaches"
              f" {100 * d['step_vs_roofline']:.0f}% of it (BF16 target 85%);"
              f" attention {d.get('attention_tflops', 0):.2f} TFLOP/s,"
              f" {100 * d.get('attention_share', 0):.0f}% of the step")
PY
done
if [[ -s $out/reference_engines.json ]]; then
  python3 - "$out/reference_engines.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for engine, rows in r["engines"].items():
    print(f"{engine}: " + ", ".join(f"batch {b} {row['decode_step_ms']:.2f} ms/step"
                                    f" ({row['decode_tokens_per_second']:.1f} tok/s)"
                                    for b, row in rows.items()))
PY
fi
for f in "$out/gpu_load_bench.json" "$out/gpu_load_bench_tiled.json" "$out/gpu_load_bench_lane.json" \
         "$out/gpu_load_bench_97.json"; do
  [[ -s $f ]] || continue
  python3 - "$f" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
m = r["model"]
print(f"load (fused_max_rows {r.get('fused_max_rows', 0)}, {r.get('gpu_layout', 'tiled')})"
      f" {m['file_bytes']/1e9:.2f} GB in"
      f" {r['load_seconds']:.3f} s = {r['load_gbps']:.1f} GB/s; H2D copy {r['copy_h2d_gbps']:.1f}"
      f" GB/s; ratio {r['load_vs_copy']:.2f} (target >= 0.80 in DF11's layout)")
print(f"decode {m['layers']} layers: {r['decode_layers_gbps']:.0f} GB/s of BF16")
if "density" in r:
    print(f"density in {r['budget_bytes']/2**30:.1f} GiB (KV pool {r['kv_pool_bytes']/2**30:.1f} GiB):"
          f" {r['density']['models']} DF11 models of {m['resident_bytes']/2**30:.2f} GiB" +
          (f", {r['density_bf16']['models']} BF16" if 'density_bf16' in r else ""))
PY
done
} 2>&1 | tee "$out/table.txt"
if [[ -n ${OUT:-} ]]; then
  cp "$out/table.txt" "$OUT/table.txt"
  tar -C "$out" -czf "$OUT/gpu-checks.tar.gz" .
fi
exit $failed
