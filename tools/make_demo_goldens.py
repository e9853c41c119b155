#!/usr/bin/env python3
"""Golden generations of Hugging Face `transformers` for the demo model (models/demo/).

The demo model is stored DF11-compressed. This script decodes it with the independent decoder
tools/df11_reference_decoder.py (plain Python, none of df11d's code; tests/tools/
reference_decoder_test.py checks it against the official encoder's fixtures) into a temporary
BF16 directory, loads that with transformers in float32, and
records, for a few text prompts: the prompt's token ids (tokenizer.encode with special tokens),
the chat-rendered prompt of one message (apply_chat_template, add_generation_prompt) and its ids,
and 24 greedy tokens with their decoded text. `df11 generate --temperature 0` must reproduce them
(tests/tools/df11_cli_test.cc): same prompt ids, same tokens, same text.

    .venv-fixtures/bin/python tools/make_demo_goldens.py

Deterministic: re-running writes the same tests/data/demo/goldens.json.
"""

import argparse
import json
import tempfile
from pathlib import Path

import torch
import transformers

from df11_reference_decoder import decode_model

PROMPTS = ["def ", "import os\n", '"""Return the', "class Parser:\n    def __init__(self"]
CHAT_PROMPT = "Write a function that adds two numbers."
GREEDY_TOKENS = 24


def greedy(model, ids):
    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), max_new_tokens=GREEDY_TOKENS, do_sample=False,
                             min_new_tokens=GREEDY_TOKENS, pad_token_id=0)
    return out[0, len(ids):].tolist()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="models/demo")
    parser.add_argument("--out", default="tests/data/demo/goldens.json")
    args = parser.parse_args()
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        bf16 = Path(tmp) / "bf16"
        decode_model(args.model, bf16)
        model = transformers.AutoModelForCausalLM.from_pretrained(bf16, dtype=torch.float32)
        model.eval()
        model.generation_config.eos_token_id = None  # always GREEDY_TOKENS tokens (--ignore-eos)
        tok = transformers.AutoTokenizer.from_pretrained(args.model)
        cases = []
        for prompt in PROMPTS:
            ids = tok.encode(prompt, add_special_tokens=True)
            tokens = greedy(model, ids)
            cases.append({"prompt": prompt, "chat": False, "prompt_ids": ids, "greedy": tokens,
                          "text": tok.decode(tokens, skip_special_tokens=True)})
        messages = [{"role": "user", "content": CHAT_PROMPT}]
        rendered = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ids = tok.encode(rendered, add_special_tokens=False)
        tokens = greedy(model, ids)
        cases.append({"prompt": CHAT_PROMPT, "chat": True, "rendered": rendered, "prompt_ids": ids,
                      "greedy": tokens, "text": tok.decode(tokens, skip_special_tokens=True)})
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"transformers": transformers.__version__,
                               "torch": torch.__version__.split("+")[0],
                               "greedy_tokens": GREEDY_TOKENS, "cases": cases},
                              indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
