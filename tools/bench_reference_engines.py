#!/usr/bin/env python3
"""The outside references for `df11 engine-bench --device cuda:0`: Hugging Face `transformers`
with BF16 weights and the official `dfloat11` package with the same weights compressed, decoding
the same random prompt on the same GPU.

For each engine and each --batch size: one prefill of --prompt-tokens random tokens per sequence
(batched), then --tokens greedy decode steps of the whole batch, each step timed after
torch.cuda.synchronize(). Prints one JSON object: per engine and batch, the median decode step in
ms, decode tokens/s (all sequences), and the prefill in s. With --out FILE the object goes to
FILE instead, rewritten after each engine, so that a run stopped in the second keeps the first.

    # on the GPU machine (transformers, torch; the dfloat11 wheel and its dahuffman dependency
    # carried as wheels when missing):
    python3 tools/bench_reference_engines.py --bf16 M --df11 M-df11 --batch 1,8,64,256

M-df11 is what `df11 compress M M-df11` writes: the official layout, which dfloat11 loads with
DFloat11Model.from_pretrained. --device cpu runs the transformers part on the CPU (for trying the
script on a tiny model; dfloat11 needs a GPU).
"""

import argparse
import json
import os
import statistics
import sys
import time


def decode_steps(model, batch, prompt_tokens, tokens, vocab, device, torch):
    """Prefill seconds and each decode step's seconds for `batch` sequences."""
    generator = torch.Generator().manual_seed(1)
    prompt = torch.randint(0, vocab, (batch, prompt_tokens), generator=generator).to(device)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    with torch.no_grad():
        sync()
        start = time.perf_counter()
        out = model(prompt, use_cache=True)
        sync()
        prefill = time.perf_counter() - start
        cache = out.past_key_values
        next_tokens = out.logits[:, -1].argmax(-1, keepdim=True)
        steps = []
        for _ in range(tokens):
            start = time.perf_counter()
            out = model(next_tokens, past_key_values=cache, use_cache=True)
            next_tokens = out.logits[:, -1].argmax(-1, keepdim=True)
            sync()
            steps.append(time.perf_counter() - start)
            cache = out.past_key_values
    return prefill, steps


def run(name, model, args, vocab, torch):
    rows = {}
    for batch in args.batch:
        prefill, steps = decode_steps(model, batch, args.prompt_tokens, args.tokens, vocab,
                                      args.device, torch)
        step = statistics.median(steps)
        rows[str(batch)] = {"decode_step_ms": step * 1e3,
                            "decode_tokens_per_second": batch / step,
                            "prefill_seconds": prefill}
        print(f"{name} batch {batch}: {step * 1e3:.2f} ms per step", file=sys.stderr, flush=True)
    return rows


def save(result, path):
    """Writes the results so far to `path` (none: nothing until the end)."""
    if path:
        with open(path + ".tmp", "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")
        os.replace(path + ".tmp", path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bf16", required=True, help="the BF16 model directory")
    parser.add_argument("--df11", help="the same model compressed (df11 compress); needs a GPU")
    parser.add_argument("--batch", default="1", help="comma-separated batch sizes")
    parser.add_argument("--prompt-tokens", type=int, default=512)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--out", help="write the JSON here, after each engine")
    args = parser.parse_args()
    args.batch = [int(b) for b in args.batch.split(",")]

    import torch
    import transformers

    result = {"prompt_tokens": args.prompt_tokens, "decode_tokens": args.tokens,
              "transformers": transformers.__version__, "torch": torch.__version__,
              "engines": {}}
    if args.device.startswith("cuda"):
        result["gpu"] = torch.cuda.get_device_name(torch.device(args.device))
    model = transformers.AutoModelForCausalLM.from_pretrained(
        args.bf16, dtype=torch.bfloat16).to(args.device).eval()
    vocab = model.config.get_text_config().vocab_size
    result["engines"]["transformers-bf16"] = run("transformers-bf16", model, args, vocab, torch)
    save(result, args.out)
    del model
    if args.df11:
        if not args.device.startswith("cuda"):
            raise SystemExit("--df11: the dfloat11 package decodes on a GPU only")
        import dfloat11

        result["dfloat11"] = getattr(dfloat11, "__version__", "unknown")
        model = dfloat11.DFloat11Model.from_pretrained(args.df11, device=args.device).eval()
        result["engines"]["dfloat11"] = run("dfloat11", model, args, vocab, torch)
        base = result["engines"]["transformers-bf16"]
        result["dfloat11_vs_bf16"] = {
            b: row["decode_tokens_per_second"] / base[b]["decode_tokens_per_second"]
            for b, row in result["engines"]["dfloat11"].items()}
    save(result, args.out)
    if not args.out:
        print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
