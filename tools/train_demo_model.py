#!/usr/bin/env python3
"""Trains the small demo model in models/demo/ from scratch, offline, and stores it DF11-compressed.

The model is a Qwen3ForCausalLM of about 4.2M parameters with its own byte-level BPE tokenizer
(vocab 4096, the Qwen2 pre-tokenizer), trained on the sources and docstrings of the Python
standard library of the interpreter that runs this script (sysconfig.get_paths()["stdlib"]),
so it needs no download and no GPU. It is a toy that writes Python-looking text; it exists so
that the daemon, the CLI and the docs have a real model with a real tokenizer to serve.

Steps (all deterministic: seeded, sorted file lists, single-threaded by default):
  1. Corpus: every *.py file under the stdlib, in sorted order, skipping site-packages, test
     suites (test/, tests/, idle_test/ directories and test_*.py files), files that are not UTF-8,
     the generated charmap tables of encodings/ and the build-machine specific
     _sysconfigdata_*.py. Every 50th file (2%) is held out for validation.
  2. Tokenizer: BPE trained with `tokenizers` on the training files, configured like Qwen2's
     tokenizer.json (NFC; Split(Qwen2 regex, Isolated) + ByteLevel(use_regex=false); ByteLevel
     decoder; no post-processor) plus the special tokens <|endoftext|>, <|im_start|>, <|im_end|>
     at the end of the vocab. This is the subset daemon/runtime/text/tokenizer/tokenizer.h supports.
  3. Model: trained in fp32 on non-overlapping 256-token windows of the token stream (documents
     separated by <|endoftext|>), shuffled with a seeded generator; AdamW with linear warmup and
     cosine decay. The training text is encoded in pieces cut after random spaces, so that
     prompts ending in a space ("def ") see token boundaries the model knows (cut_pieces).
     Validation loss over every held-out window (encoded whole) at the end.
  4. Saves the model in bfloat16 with save_pretrained (safetensors), tokenizer.json,
     tokenizer_config.json (ChatML chat template) and generation_config.json to a temporary
     directory, runs `df11 compress` from it into --out and `df11 verify --against` it to prove
     the DF11 copy decodes to exactly those BF16 tensors.
  5. Samples from the BF16 model with transformers (greedy and temperature 0.8) and writes them,
     with the losses and sizes, into --out/README.md.

Run from the repository root (about 20 minutes on one CPU thread; --threads N to use more):
    python3 -m venv .venv-fixtures
    .venv-fixtures/bin/pip install -r tools/requirements-fixtures.txt
    .venv-fixtures/bin/python tools/train_demo_model.py --out models/demo
Exact versions used for the committed models/demo/ (see tools/requirements-fixtures.txt):
Python 3.11.7 (its standard library is the corpus: another Python version trains another model),
torch 2.15.0 (run on the CPU), transformers 5.23.0, tokenizers 0.23.3, safetensors 0.8.0,
numpy 2.4.6, on Linux x86_64. Bit-identical weights need the same versions, the same thread count
and the same CPU kernel paths; anything else trains an equivalent but different model.
"""

import argparse
import hashlib
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import numpy as np
import tokenizers
import torch
import transformers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
from tokenizers import pre_tokenizers, trainers

# Pre-tokenizer pattern of the released Qwen2 / 2.5 / 3 tokenizer.json files.
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
                 r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
VOCAB_SIZE = 4096  # BPE vocab plus the special tokens
VALIDATION_EVERY = 50  # every 50th file of the sorted list is held out (2%)
# One prompt-boundary cut (see cut_pieces) per this many characters of training text.
CUT_EVERY_CHARS = 400
TEST_DIRS = {"test", "tests", "idle_test"}

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")

SAMPLE_PROMPTS = ["def ", "import os\n", '"""Return the']
SAMPLE_NEW_TOKENS = 64
# (prompt, mode) of the samples shown in README.md.
README_SAMPLES = [("def ", "greedy"), ("def ", "temperature 0.8"),
                  ("import os\n", "temperature 0.8"), ('"""Return the', "temperature 0.8")]


def log(msg):
    print(msg, flush=True)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--out", required=True, type=Path,
                   help="output directory (must not exist or be empty), e.g. models/demo")
    p.add_argument("--df11", default="build/tools/df11", help="the df11 CLI")
    p.add_argument("--threads", type=int, default=1, help="CPU threads for torch and tokenizers")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=1400, help="optimizer steps")
    p.add_argument("--batch", type=int, default=8, help="sequences per step")
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--lr", type=float, default=2e-3, help="peak learning rate")
    p.add_argument("--warmup", type=int, default=100, help="linear warmup steps")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--eval-every", type=int, default=250,
                   help="steps between validation estimates (on the first --eval-windows)")
    p.add_argument("--eval-windows", type=int, default=32)
    p.add_argument("--bf16-out", type=Path, default=None,
                   help="also keep the BF16 model (before compression) in this directory")
    return p.parse_args()


# ----------------------------------------------------------------------------------------------
# Corpus


def corpus_files(stdlib):
    """Sorted (relative path, text) of the stdlib sources used for training and validation."""
    files = []
    for path in sorted(stdlib.rglob("*.py")):
        rel = path.relative_to(stdlib)
        parts = rel.parts
        if "site-packages" in parts or "dist-packages" in parts or "__pycache__" in parts:
            continue
        if TEST_DIRS.intersection(parts[:-1]) or rel.name.startswith("test_"):
            continue
        if rel.name.startswith("_sysconfigdata_") or parts[0].startswith("config-"):
            continue  # facts about the machine that built this Python, not library code
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if parts[0] == "encodings" and re.search(r"^decoding_(map|table) *=", text, re.M):
            continue  # 256-entry character tables, not prose or code worth imitating
        if text.strip():
            files.append((rel.as_posix(), text))
    return files


# ----------------------------------------------------------------------------------------------
# Tokenizer


def train_tokenizer(texts):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE - len(SPECIAL_TOKENS), min_frequency=2,
                                  show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIAL_TOKENS])
    if tok.get_vocab_size(with_added_tokens=True) != VOCAB_SIZE:
        sys.exit(f"tokenizer has {tok.get_vocab_size(with_added_tokens=True)} tokens, "
                 f"expected {VOCAB_SIZE}")
    return tok


def check_tokenizer_json(tok_json):
    """Fails unless tokenizer.json stays within what daemon/runtime/text/tokenizer/tokenizer.h reads."""
    model = tok_json["model"]
    assert model["type"] == "BPE" and model["dropout"] is None and not model["byte_fallback"]
    assert model["unk_token"] is None
    assert model.get("continuing_subword_prefix") in (None, "")
    assert model.get("end_of_word_suffix") in (None, "")
    assert tok_json["normalizer"] == {"type": "NFC"}
    pre = tok_json["pre_tokenizer"]["pretokenizers"]
    assert [p["type"] for p in pre] == ["Split", "ByteLevel"]
    assert pre[0]["pattern"] == {"Regex": QWEN2_PATTERN}
    assert pre[0]["behavior"] == "Isolated" and pre[0]["invert"] is False
    assert pre[1]["add_prefix_space"] is False and pre[1]["use_regex"] is False
    assert tok_json["decoder"]["type"] == "ByteLevel"
    assert tok_json["post_processor"] is None
    assert [(t["content"], t["special"]) for t in tok_json["added_tokens"]] == \
        [(s, True) for s in SPECIAL_TOKENS]


def tokenizer_config(tok):
    added = {}
    for s in SPECIAL_TOKENS:
        added[str(tok.token_to_id(s))] = {
            "content": s, "lstrip": False, "normalized": False, "rstrip": False,
            "single_word": False, "special": True}
    return {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": added,
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "bos_token": None,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|endoftext|>",
        "errors": "replace",
        "model_max_length": 2048,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": None,
    }


def cut_pieces(texts, rng):
    """Each text split at about len/CUT_EVERY_CHARS random points that follow a space and precede
    a non-space character, such as "def |main" or "    |return".

    Encoding the pieces separately gives the tokens a prompt that ends in a space gets: the
    Qwen2 regex makes the space of " main" part of the word token, so "def " alone ends in a
    lone " " token that whole-text encoding only produces before digits and aligned columns.
    Without these cuts the model answers "def " with numbers.
    """
    pieces = []
    for text in texts:
        spots = [m.start() for m in re.finditer(r"(?<= )(?=\S)", text)]
        k = min(len(spots), len(text) // CUT_EVERY_CHARS)
        cuts = sorted(rng.sample(spots, k))
        bounds = [0] + cuts + [len(text)]
        pieces.append([text[a:b] for a, b in zip(bounds, bounds[1:])])
    return pieces


def token_stream(tok, docs, eos_id):
    """All documents as one int64 stream, each followed by <|endoftext|>. A document is a list
    of pieces encoded separately and concatenated."""
    flat = [p for pieces in docs for p in pieces]
    encodings = iter(tok.encode_batch(flat, add_special_tokens=False))
    ids = []
    for pieces in docs:
        for _ in pieces:
            ids.extend(next(encodings).ids)
        ids.append(eos_id)
    return torch.tensor(ids, dtype=torch.int64)


# ----------------------------------------------------------------------------------------------
# Model and training


def model_config(args, tok):
    eos = tok.token_to_id("<|endoftext|>")
    return transformers.Qwen3Config(
        vocab_size=VOCAB_SIZE, hidden_size=256, intermediate_size=768,
        num_hidden_layers=args.layers, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
        hidden_act="silu", max_position_embeddings=2048, initializer_range=0.02,
        rms_norm_eps=1e-6, use_cache=True, tie_word_embeddings=True,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        attention_bias=False, attention_dropout=0.0,
        bos_token_id=None, eos_token_id=eos, pad_token_id=eos)


def windows(stream, seq_len):
    """Non-overlapping [n, seq_len + 1] windows (adjacent windows share one token)."""
    n = (len(stream) - 1) // seq_len
    idx = torch.arange(n).unsqueeze(1) * seq_len + torch.arange(seq_len + 1).unsqueeze(0)
    return stream[idx]


def lr_at(step, args):
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    progress = (step - args.warmup) / max(1, args.steps - args.warmup)
    return args.lr * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress)))


def batch_loss(model, x):
    logits = model(input_ids=x[:, :-1]).logits
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)),
                                             x[:, 1:].reshape(-1))


@torch.no_grad()
def evaluate(model, data, batch):
    model.eval()
    total, count = 0.0, 0
    for i in range(0, len(data), batch):
        x = data[i:i + batch]
        total += batch_loss(model, x).item() * x[:, 1:].numel()
        count += x[:, 1:].numel()
    model.train()
    return total / count


def train(args, config, train_windows, val_windows):
    torch.manual_seed(args.seed)
    model = transformers.Qwen3ForCausalLM(config)
    model.train()
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    gen = torch.Generator().manual_seed(args.seed)
    order, pos = torch.randperm(len(train_windows), generator=gen), 0
    start, tokens, train_loss = time.time(), 0, float("nan")
    log_every = 10
    running = []
    for step in range(args.steps):
        if pos + args.batch > len(order):  # next epoch
            order, pos = torch.randperm(len(train_windows), generator=gen), 0
        x = train_windows[order[pos:pos + args.batch]]
        pos += args.batch
        for group in opt.param_groups:
            group["lr"] = lr_at(step, args)
        loss = batch_loss(model, x)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        tokens += x[:, 1:].numel()
        running.append(loss.item())
        if (step + 1) % log_every == 0 or step + 1 == args.steps:
            train_loss = sum(running) / len(running)
            running = []
            elapsed = time.time() - start
            log(f"step {step + 1:5d}/{args.steps}  loss {train_loss:.4f}  "
                f"lr {lr_at(step, args):.2e}  {tokens / elapsed:7.0f} tok/s  {elapsed:6.0f}s")
        if args.eval_every and (step + 1) % args.eval_every == 0 and step + 1 < args.steps:
            val = evaluate(model, val_windows[:args.eval_windows], args.batch)
            log(f"step {step + 1:5d}  validation loss (first {args.eval_windows} windows) "
                f"{val:.4f}")
    return model, train_loss, time.time() - start


# ----------------------------------------------------------------------------------------------
# Saving, compression, sampling


def save_bf16(model, tok, tok_cfg, directory):
    eos, im_end = tok.token_to_id("<|endoftext|>"), tok.token_to_id("<|im_end|>")
    model.generation_config = transformers.GenerationConfig(
        bos_token_id=None, eos_token_id=[eos, im_end], pad_token_id=eos, do_sample=True,
        temperature=0.8, top_p=0.95, top_k=50)
    model.to(torch.bfloat16).save_pretrained(directory)  # safetensors (the only format in v5)
    tok.save(str(directory / "tokenizer.json"))
    (directory / "tokenizer_config.json").write_text(json.dumps(tok_cfg, indent=2) + "\n")


def run(cmd):
    log("$ " + " ".join(str(c) for c in cmd))
    subprocess.run([str(c) for c in cmd], check=True)


def dir_bytes(directory, suffix=""):
    return sum(p.stat().st_size for p in directory.iterdir() if p.name.endswith(suffix))


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def samples(bf16_dir, seed):
    tok = transformers.AutoTokenizer.from_pretrained(bf16_dir)
    model = transformers.AutoModelForCausalLM.from_pretrained(bf16_dir, dtype=torch.bfloat16)
    model.eval()
    out = []
    for prompt in SAMPLE_PROMPTS:
        ids = tok(prompt, return_tensors="pt").input_ids
        for mode in ("greedy", "temperature 0.8"):
            kwargs = ({"do_sample": False} if mode == "greedy" else
                      {"do_sample": True, "temperature": 0.8, "top_p": 0.95, "top_k": 50})
            torch.manual_seed(seed)
            gen = model.generate(ids, max_new_tokens=SAMPLE_NEW_TOKENS,
                                 **kwargs)
            text = tok.decode(gen[0, ids.shape[1]:], skip_special_tokens=False)
            out.append((prompt, mode, text))
            log(f"--- {mode} {prompt!r}\n{prompt}{text}")
    return out


def readme(facts, sample_list):
    """The model card, from the run's facts and samples (no machine-specific paths)."""

    def block(prompt, mode):
        text = next(t for p, m, t in sample_list if p == prompt and m == mode)
        shown = prompt.replace("\n", "\\n")
        return (f"`{shown}`, {mode}, {SAMPLE_NEW_TOKENS} new tokens:\n\n"
                f"```text\n{prompt}{text}\n```\n")

    f = facts
    weights = (f"{f['df11_weight_bytes']:,} bytes of safetensors, "
               f"{100 * f['df11_weight_bytes'] / f['bf16_weight_bytes']:.1f}% of the "
               f"{f['bf16_weight_bytes']:,} BF16 bytes")
    data = (f"{f['train_files']} training files ({f['train_tokens']:,} tokens), "
            f"{f['val_files']} validation files ({f['val_tokens']:,} tokens, every "
            f"{VALIDATION_EVERY}th file)")
    schedule = (f"{f['steps']} steps of {f['batch']} x {f['seq_len']} tokens "
                f"({f['tokens_seen']:,} tokens, {f['epochs']:.2f} epochs), fp32")
    optimizer = (f"AdamW, betas (0.9, 0.95), peak learning rate {f['lr']:g}, {f['warmup']} "
                 f"warmup steps, cosine decay to 10%, weight decay 0.1, gradient clipping 1.0")
    ppl = math.exp(f["val_loss"])
    samples_md = "\n".join(block(p, m) for p, m in README_SAMPLES)
    return f"""# demo: a toy Qwen3 model that writes Python-looking text

A {f['params'] / 1e6:.1f}M-parameter `Qwen3ForCausalLM` trained from scratch on the sources of
the Python {f['python']} standard library, stored DFloat11-compressed. It exists so that df11d,
`df11ctl` and the docs have a real model with a real tokenizer to load and serve, with no download.
It is a toy: it continues code and docstrings in the style of the standard library, with plausible
names and syntax but little meaning. Do not use it for anything else.

Made by `tools/train_demo_model.py`, which is deterministic (seeded, sorted inputs, one CPU thread):
rerun it with the versions listed there to rebuild this directory.

## Model

| | |
|---|---|
| architecture | `Qwen3ForCausalLM`: {f['layers']} layers, hidden 256, MLP 768 (SiLU) |
| attention | 4 query heads, 2 KV heads, head_dim 64, QK RMSNorm, RoPE theta 10000 |
| embeddings | vocab {VOCAB_SIZE}, input and output embeddings tied |
| context | trained on {f['seq_len']}-token windows; max_position_embeddings 2048 |
| parameters | {f['params']:,} |
| weights | BF16, DF11-compressed: {weights} |

The decoder layers are DF11-coded (`model_layers_*.safetensors`); the tied embedding matrix and
the norms stay BF16 in `model.safetensors`.

Tokenizer: byte-level BPE trained with `tokenizers` on the training files and shaped like Qwen2's
(NFC; Split with the Qwen2 regex + ByteLevel; ByteLevel decoder; no BOS). Special tokens:
`<|endoftext|>` (id {f['eos_id']}; separates documents, ends generation), `<|im_start|>` and
`<|im_end|>` (ids {f['eos_id'] + 1} and {f['eos_id'] + 2}) for the ChatML `chat_template`.
The model never saw a chat: the template is there so that the chat path can be exercised.

## Training

| | |
|---|---|
| corpus | `*.py` files of the Python {f['python']} standard library: {data} |
| left out | site-packages, test suites, files that are not UTF-8, codec tables (`encodings/`) |
| schedule | {schedule}, seed {f['seed']} |
| optimizer | {optimizer} |
| final training loss | {f['train_loss']:.3f} (mean of the last 10 steps) |
| validation loss | {f['val_loss']:.3f} (perplexity {ppl:.1f}), every held-out window |

Documents are separated by `<|endoftext|>`. The training text is encoded in pieces, cut after
about one random space per {CUT_EVERY_CHARS} characters, so that prompts that end in a space (such
as `def `) end in token boundaries the model has seen. `df11 verify --against` the BF16 model
proves that every tensor decodes to exactly the BF16 bytes.

## Samples

From the BF16 model with transformers (the DF11 weights decode to the same tensors), with
`torch.manual_seed({f['seed']})` before each; sampling uses top_p 0.95 and top_k 50 as
`generation_config.json` does. Greedy decoding soon repeats itself, as small models do; sampled
text is more varied but no more meaningful.

{samples_md}
## Licence

Trained on the Python standard library sources, copyright the Python Software Foundation and
distributed under the PSF License Agreement (PSF-2.0). This model and its tokenizer are derived
from them and are distributed under the same terms.
"""


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(args.threads)
    if args.threads == 1:
        os.environ["TOKENIZERS_PARALLELISM"] = "false"
    else:
        os.environ["RAYON_NUM_THREADS"] = str(args.threads)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True)
    if args.out.exists() and any(args.out.iterdir()):
        sys.exit(f"{args.out} is not empty; remove it first")
    df11 = Path(args.df11)
    if not df11.is_file():
        sys.exit(f"{df11}: no df11 CLI (build it, or pass --df11)")
    log(f"python {sys.version.split()[0]}, torch {torch.__version__}, transformers "
        f"{transformers.__version__}, tokenizers {tokenizers.__version__}, threads {args.threads}")
    t0 = time.time()

    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = corpus_files(stdlib)
    val_files = [f for i, f in enumerate(files) if i % VALIDATION_EVERY == VALIDATION_EVERY // 2]
    train_files = [f for i, f in enumerate(files) if i % VALIDATION_EVERY != VALIDATION_EVERY // 2]
    log(f"corpus: {len(train_files)} training files ({sum(len(t) for _, t in train_files):,} "
        f"chars), {len(val_files)} validation files "
        f"({sum(len(t) for _, t in val_files):,} chars)")

    tok = train_tokenizer([t for _, t in train_files])
    tok_json = json.loads(tok.to_str())
    check_tokenizer_json(tok_json)
    eos_id = tok.token_to_id("<|endoftext|>")
    # Training text gets prompt-boundary cuts; validation text is encoded whole.
    train_docs = cut_pieces([t for _, t in train_files], random.Random(args.seed))
    train_stream = token_stream(tok, train_docs, eos_id)
    val_stream = token_stream(tok, [[t] for _, t in val_files], eos_id)
    log(f"tokenizer: vocab {tok.get_vocab_size(with_added_tokens=True)}, "
        f"{len(train_stream):,} training tokens, {len(val_stream):,} validation tokens "
        f"({time.time() - t0:.0f}s)")
    train_windows = windows(train_stream, args.seq_len)
    val_windows = windows(val_stream, args.seq_len)

    config = model_config(args, tok)
    model, train_loss, train_s = train(args, config, train_windows, val_windows)
    val_loss = evaluate(model, val_windows, args.batch)
    params = sum(p.numel() for p in model.parameters())
    log(f"trained {params:,} parameters in {train_s:.0f}s: train loss {train_loss:.4f}, "
        f"validation loss {val_loss:.4f} ({len(val_windows)} windows)")

    with tempfile.TemporaryDirectory(prefix="demo-bf16-") as tmp:
        bf16_dir = Path(tmp) / "bf16"
        bf16_dir.mkdir()
        save_bf16(model, tok, tokenizer_config(tok), bf16_dir)
        if args.bf16_out:
            shutil.copytree(bf16_dir, args.bf16_out, dirs_exist_ok=True)
        sample_list = samples(bf16_dir, args.seed)
        run([df11, "compress", bf16_dir, args.out, "--threads", args.threads])
        run([df11, "verify", args.out, "--against", bf16_dir, "--threads", args.threads])
        facts = {
            "python": sys.version.split()[0], "params": params, "layers": args.layers,
            "seq_len": args.seq_len, "steps": args.steps, "batch": args.batch, "lr": args.lr,
            "warmup": args.warmup, "seed": args.seed, "eos_id": eos_id,
            "train_files": len(train_files), "val_files": len(val_files),
            "train_tokens": len(train_stream), "val_tokens": len(val_stream),
            "tokens_seen": args.steps * args.batch * args.seq_len,
            "epochs": args.steps * args.batch / len(train_windows),
            "train_loss": train_loss, "val_loss": val_loss,
            "bf16_weight_bytes": dir_bytes(bf16_dir, ".safetensors"),
            "df11_weight_bytes": dir_bytes(args.out, ".safetensors"),
        }
        log("facts: " + json.dumps(facts, sort_keys=True))
        (args.out / "README.md").write_text(readme(facts, sample_list))
        for p in sorted(bf16_dir.iterdir()):
            log(f"bf16 {p.name:32s} {p.stat().st_size:10,d}  {sha256(p)[:16]}")
    for p in sorted(args.out.iterdir()):
        log(f"df11 {p.name:32s} {p.stat().st_size:10,d}  {sha256(p)[:16]}")
    log(f"{args.out}: {dir_bytes(args.out):,} bytes; total {time.time() - t0:.0f}s")


if __name__ == "__main__":
    main()
