#!/usr/bin/env python3
"""Golden outputs of Hugging Face `transformers` for the df11 engine tests.

Builds tiny random causal LMs in the three supported architectures, saves each as a BF16
checkpoint under tests/data/engine/<name>/, reloads it in float32 and records, for a few prompts
(token ids), the next-token logits and 32 greedy tokens, in tests/data/engine/goldens.json. The
engine tests compress each checkpoint with df11 and must reproduce these outputs from the DF11
directory (same greedy tokens, logits within relative L2 1e-3; fp32 compute on both sides).

    python3 -m venv .venv-fixtures
    .venv-fixtures/bin/pip install -r tools/requirements-fixtures.txt
    .venv-fixtures/bin/python tools/make_engine_goldens.py [--out tests/data/engine]

Deterministic: fixed seeds; re-running writes identical files.
"""

import argparse
import json
import os
import shutil

import torch
import transformers

MODELS = {
    # Llama-3 shape: GQA, llama3 RoPE scaling with a short original context so that the
    # scaling changes the low frequencies, untied head.
    "llama3": dict(
        cls="LlamaForCausalLM", config_cls="LlamaConfig",
        config=dict(hidden_size=128, intermediate_size=256, num_hidden_layers=3,
                    num_attention_heads=8, num_key_value_heads=2, vocab_size=320,
                    max_position_embeddings=256, rms_norm_eps=1e-5, tie_word_embeddings=False,
                    rope_theta=500000.0,
                    rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                      high_freq_factor=4.0, original_max_position_embeddings=32),
                    bos_token_id=1, eos_token_id=2)),
    # Qwen2 shape: q/k/v biases, tied embeddings.
    "qwen2": dict(
        cls="Qwen2ForCausalLM", config_cls="Qwen2Config",
        config=dict(hidden_size=96, intermediate_size=192, num_hidden_layers=2,
                    num_attention_heads=6, num_key_value_heads=2, vocab_size=300,
                    max_position_embeddings=256, rms_norm_eps=1e-6, tie_word_embeddings=True,
                    rope_theta=1000000.0, use_sliding_window=False,
                    bos_token_id=1, eos_token_id=2)),
    # Qwen3 shape: q/k norms, head_dim independent of hidden_size / heads, untied.
    "qwen3": dict(
        cls="Qwen3ForCausalLM", config_cls="Qwen3Config",
        config=dict(hidden_size=64, intermediate_size=160, num_hidden_layers=3,
                    num_attention_heads=4, num_key_value_heads=2, head_dim=32, vocab_size=280,
                    max_position_embeddings=256, rms_norm_eps=1e-6, tie_word_embeddings=False,
                    rope_theta=1000000.0, use_sliding_window=False,
                    bos_token_id=1, eos_token_id=2)),
}

PROMPTS = [[5], [3, 17, 42, 7, 99], [11, 250, 12, 13, 14, 15, 16, 200, 201, 3, 4, 5, 6, 7, 8, 9, 10]]
GREEDY_TOKENS = 32


def build(name, spec, out_dir, seed):
    torch.manual_seed(seed)
    config = getattr(transformers, spec["config_cls"])(**spec["config"])
    model = getattr(transformers, spec["cls"])(config)
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if pname.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))   # non-trivial norm weights
            else:
                p.copy_(0.02 * torch.randn_like(p))        # weights and biases
    model = model.to(torch.bfloat16)
    path = os.path.join(out_dir, name)
    shutil.rmtree(path, ignore_errors=True)
    model.save_pretrained(path, safe_serialization=True)
    return path


def goldens(path):
    model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    model.eval()
    cases = []
    with torch.no_grad():
        for prompt in PROMPTS:
            ids = torch.tensor([prompt])
            logits = model(ids).logits[0, -1].tolist()
            tokens = list(prompt)
            generated = []
            for _ in range(GREEDY_TOKENS):  # full recompute: exact greedy decoding
                nxt = int(torch.argmax(model(torch.tensor([tokens])).logits[0, -1]))
                generated.append(nxt)
                tokens.append(nxt)
            cases.append({"prompt": prompt, "next_token_logits": logits, "greedy": generated})
    return cases


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.path.join("tests", "data", "engine"))
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    result = {"transformers": transformers.__version__, "torch": torch.__version__, "models": {}}
    for i, (name, spec) in enumerate(MODELS.items()):
        path = build(name, spec, args.out, seed=1234 + i)
        result["models"][name] = goldens(path)
    with open(os.path.join(args.out, "goldens.json"), "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
