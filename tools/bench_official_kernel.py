#!/usr/bin/env python3
"""Times the official DFloat11 GPU decode kernel on the units `df11 gpu-bench` saved.

The official package (dfloat11 0.5.0) decodes with `decode.ptx` through CuPy, launched as its
compress_model check does: one launch per unit, 512 threads per block, shared memory for the
block scan and the output staging. This script launches it the same way on the units written by
`df11 gpu-bench --save-units DIR`, timed the way df11 times its own kernel: enough copies of each
unit resident that the output exceeds 512 MB (past L2), CUDA events, 3 warm-up rounds, the median
of --runs rounds, the output checked against the expected BF16 values once. It prints one JSON
object with GB/s of BF16 output per unit size.

Usage (on a machine with an NVIDIA GPU):
    python3 -m pip install torch cupy-cuda12x safetensors dfloat11==0.5.0
    build/tools/df11 gpu-bench --save-units /tmp/df11-units --json
    python3 tools/bench_official_kernel.py /tmp/df11-units --runs 20
"""

import argparse
import glob
import importlib.util
import json
import math
import os
import re
import statistics


def official_decode_kernel():
    """The `decode` function of the official decode.ptx, loaded without importing dfloat11 (its
    package init also needs accelerate and transformers)."""
    import cupy

    spec = importlib.util.find_spec("dfloat11")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("the dfloat11 package is not installed (pip install dfloat11==0.5.0)")
    ptx = os.path.join(list(spec.submodule_search_locations)[0], "decode.ptx")
    return cupy, cupy.RawModule(path=ptx).get_function("decode")


def bench_unit(path, runs, cupy, decode):
    import torch
    from safetensors.torch import load_file

    t = load_file(path, device="cuda:0")
    expected = t["expected"]
    n_elements = t["unit.sign_mantissa"].numel()
    n_bytes = t["unit.encoded_exponent"].numel()
    n_luts = t["unit.luts"].shape[0]
    positions = t["unit.output_positions"].view(torch.int32)
    blocks = math.ceil(n_bytes / (512 * 8))
    # As compress_model: the scan array, one word, and the largest block's staging.
    widest = int((positions[1:] - positions[:-1]).max().item())
    shared = 512 * 4 + 4 + widest * 2
    copies = max(1, (512 << 20) // (2 * n_elements) + 1)
    units = []
    for _ in range(copies):
        units.append({name: x.clone() for name, x in t.items() if name.startswith("unit.")})
    outs = [torch.empty(n_elements, dtype=torch.bfloat16, device="cuda:0") for _ in range(copies)]

    def launch_all():
        with cupy.cuda.Device(0):
            for u, out in zip(units, outs):
                decode(grid=(blocks,), block=(512,), shared_mem=shared, args=[
                    u["unit.luts"].data_ptr(), u["unit.encoded_exponent"].data_ptr(),
                    u["unit.sign_mantissa"].data_ptr(), u["unit.output_positions"].data_ptr(),
                    u["unit.gaps"].data_ptr(), out.data_ptr(), n_luts, n_bytes, n_elements])

    launch_all()
    torch.cuda.synchronize()
    correct = all(torch.equal(out.view(torch.int16), expected.view(torch.int16)) for out in outs)
    for _ in range(3):
        launch_all()
    times = []
    for _ in range(runs):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        launch_all()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    ms = statistics.median(times)
    return {
        "weights_per_unit": n_elements,
        "units_per_round": copies,
        "official_decode_gbps": round(2 * n_elements * copies / (ms * 1e-3) / 1e9, 1),
        "round_ms": round(ms, 3),
        "shared_mem_bytes": shared,
        "bit_exact": bool(correct),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("units_dir", help="directory written by df11 gpu-bench --save-units")
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    import torch

    cupy, decode = official_decode_kernel()
    files = sorted(glob.glob(os.path.join(args.units_dir, "unit_*M.safetensors")),
                   key=lambda p: int(re.search(r"unit_(\d+)M", p).group(1)))
    if not files:
        raise SystemExit(f"no unit_*M.safetensors in {args.units_dir}")
    results = [bench_unit(f, args.runs, cupy, decode) for f in files]
    print(json.dumps({"gpu": torch.cuda.get_device_name(0), "results": results}))


if __name__ == "__main__":
    main()
