#!/usr/bin/env python3
"""Golden outputs of Hugging Face `transformers` for the df11 engine tests.

Builds tiny random causal LMs in the supported architectures, saves each as a BF16
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
import copy
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
    # Mistral shape: a sliding window shorter than the longer prompts, GQA.
    "mistral": dict(
        cls="MistralForCausalLM", config_cls="MistralConfig",
        config=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=3,
                    num_attention_heads=4, num_key_value_heads=1, vocab_size=300,
                    max_position_embeddings=256, rms_norm_eps=1e-5, tie_word_embeddings=False,
                    rope_theta=10000.0, sliding_window=6, bos_token_id=1, eos_token_id=2)),
    # Gemma 2 shape: like Gemma 3 without q/k norms, one RoPE, attention soft-capping (small caps,
    # so that they matter at these weights' scale); eager attention, which applies it.
    "gemma2": dict(
        cls="Gemma2ForCausalLM", config_cls="Gemma2Config", attn_implementation="eager",
        config=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=3,
                    num_attention_heads=4, num_key_value_heads=2, head_dim=16, vocab_size=260,
                    max_position_embeddings=256, rms_norm_eps=1e-6, query_pre_attn_scalar=24,
                    sliding_window=4, rope_theta=10000.0, attn_logit_softcapping=0.05,
                    final_logit_softcapping=0.3, bos_token_id=2, eos_token_id=1,
                    pad_token_id=0)),
    # Gemma 3 text shape: (1 + w) norms, scaled embedding, GeLU-tanh, q/k norms, sandwich
    # norms, sliding (window 5, local RoPE base) and global (linear RoPE scaling) layers,
    # query_pre_attn_scalar other than head_dim, final soft-capping, tied embeddings.
    "gemma3": dict(
        cls="Gemma3ForCausalLM", config_cls="Gemma3TextConfig",
        config=dict(hidden_size=64, intermediate_size=160, num_hidden_layers=4,
                    num_attention_heads=4, num_key_value_heads=2, head_dim=32, vocab_size=290,
                    max_position_embeddings=256, rms_norm_eps=1e-6, query_pre_attn_scalar=24,
                    sliding_window=5,
                    layer_types=["sliding_attention", "sliding_attention", "full_attention",
                                 "sliding_attention"],
                    rope_parameters={
                        "full_attention": {"rope_type": "linear", "factor": 4.0,
                                           "rope_theta": 1000000.0},
                        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
                    final_logit_softcapping=2.0,
                    bos_token_id=2, eos_token_id=1, pad_token_id=0)),
    # Gemma 3 multimodal checkpoint: the text tower is served, the vision tower and projector
    # skipped.
    "gemma3_mm": dict(
        cls="Gemma3ForConditionalGeneration", config_cls="Gemma3Config",
        config=dict(
            text_config=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                             num_attention_heads=2, num_key_value_heads=1, head_dim=32,
                             vocab_size=270, max_position_embeddings=256, sliding_window=4,
                             layer_types=["sliding_attention", "full_attention"],
                             bos_token_id=2, eos_token_id=1, pad_token_id=0),
            vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                               num_attention_heads=2, image_size=28, patch_size=14),
            mm_tokens_per_image=4, boi_token_index=265, eoi_token_index=266,
            image_token_index=267)),
    # Phi-3 / Phi-4 shape: fused qkv_proj and gate_up_proj, LongRoPE (short factors within
    # original_max_position_embeddings, attention factor from max / original), partial rotary.
    "phi3": dict(
        cls="Phi3ForCausalLM", config_cls="Phi3Config",
        config=dict(hidden_size=96, intermediate_size=160, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=2, vocab_size=310,
                    max_position_embeddings=256, original_max_position_embeddings=64,
                    rms_norm_eps=1e-5, tie_word_embeddings=False,
                    rope_parameters=dict(rope_type="longrope", rope_theta=10000.0,
                                         partial_rotary_factor=0.5,
                                         short_factor=[1.0, 1.1, 1.3, 1.7, 2.2, 3.0],
                                         long_factor=[1.0, 1.5, 2.5, 4.0, 6.0, 9.0]),
                    bos_token_id=1, eos_token_id=2, pad_token_id=0)),
    # Heads of 128 and 256, the sizes FlashInfer's decode is built for (the others go to the
    # project's kernel): Qwen3 with 4 query heads per KV head, and Gemma 2 with 2, alternating
    # sliding (the project's kernel) and global layers, soft-capped. Gemma 2's seed is one whose
    # first two greedy tokens lead their runners-up by at least 1 % of the logits' range (the
    # default's led by 0.4 %, a margin a GPU's BF16 activations may cross).
    "qwen3_h128": dict(
        cls="Qwen3ForCausalLM", config_cls="Qwen3Config",
        config=dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=1, head_dim=128, vocab_size=300,
                    max_position_embeddings=256, rms_norm_eps=1e-6, tie_word_embeddings=False,
                    rope_theta=1000000.0, use_sliding_window=False,
                    bos_token_id=1, eos_token_id=2)),
    "gemma2_h256": dict(
        cls="Gemma2ForCausalLM", config_cls="Gemma2Config", attn_implementation="eager",
        config=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                    num_attention_heads=2, num_key_value_heads=1, head_dim=256, vocab_size=270,
                    max_position_embeddings=256, rms_norm_eps=1e-6, query_pre_attn_scalar=256,
                    sliding_window=4, rope_theta=10000.0, attn_logit_softcapping=0.05,
                    final_logit_softcapping=0.3, bos_token_id=2, eos_token_id=1,
                    pad_token_id=0),
        seed=2004),
}

PROMPTS = [[5], [3, 17, 42, 7, 99], [11, 250, 12, 13, 14, 15, 16, 200, 201, 3, 4, 5, 6, 7, 8, 9, 10]]
GREEDY_TOKENS = 32


def build(name, spec, out_dir, seed):
    torch.manual_seed(seed)
    config = getattr(transformers, spec["config_cls"])(**copy.deepcopy(spec["config"]))
    model = getattr(transformers, spec["cls"])(config)
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if pname.endswith("norm.weight"):
                # non-trivial norm weights (Gemma's norms multiply by 1 + weight)
                p.copy_((0.0 if "gemma" in name else 1.0) + 0.1 * torch.randn_like(p))
            else:
                p.copy_(0.02 * torch.randn_like(p))        # weights and biases
    model = model.to(torch.bfloat16)
    path = os.path.join(out_dir, name)
    shutil.rmtree(path, ignore_errors=True)
    model.save_pretrained(path, safe_serialization=True)
    return path


def goldens(path, spec):
    model = transformers.AutoModelForCausalLM.from_pretrained(
        path, dtype=torch.float32, **({"attn_implementation": spec["attn_implementation"]}
                                      if "attn_implementation" in spec else {}))
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
        path = build(name, spec, args.out, seed=spec.get("seed", 1234 + i))
        result["models"][name] = goldens(path, spec)
    with open(os.path.join(args.out, "goldens.json"), "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
