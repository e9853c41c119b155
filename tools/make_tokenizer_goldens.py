#!/usr/bin/env python3
"""Builds the tokenizer test fixtures in tests/data/tokenizer/ with Hugging Face `tokenizers`.

Real tokenizer.json files cannot be downloaded in CI (no hub access), so this script TRAINS small
BPE tokenizers (vocab 4000) on text that every Debian machine has offline (the Python 3.11
standard library sources, read in sorted order, plus a fixed multilingual paragraph) and
configures them exactly like the released files. Each corpus ends with 60 seeded random
concatenations of tricky fragments. It writes:

  llama3_like/tokenizer.json   Llama-3.x shape: no normalizer; Split(Llama-3 regex, Isolated) +
                               ByteLevel(use_regex=false); BPE with ignore_merges=true; the Llama-3
                               special tokens; post-processor Sequence[ByteLevel, TemplateProcessing
                               (<|begin_of_text|> $A)]; ByteLevel decoder.
  qwen2_like/tokenizer.json    Qwen2 / 2.5 / 3 shape: NFC normalizer; Split(Qwen2 regex, Isolated)
                               + ByteLevel(use_regex=false); BPE; the Qwen special tokens;
                               ByteLevel post-processor and decoder.
  qwen2_like_string_merges/tokenizer.json
                               The Qwen one with merges spelled as legacy "a b" strings instead of
                               ["a", "b"] pairs (both spellings occur in released files).
  phi4_like/tokenizer.json     Phi-4 shape (tiktoken cl100k, converted): no normalizer;
                               Split(cl100k regex = Llama-3's, behavior Removed, invert true) +
                               ByteLevel(use_regex=false); ChatML special tokens; no BOS; ByteLevel
                               post-processor and decoder. Removed + invert keeps exactly the
                               matches, which for this pattern (it matches all text) is Isolated.
  gemma3_like/tokenizer.json   Gemma 3 shape (SentencePiece converted): normalizer Replace(" " ->
                               "▁"); Split(String " ", MergedWithPrevious); BPE with
                               byte_fallback, fuse_unk, unk <unk>; <pad> <eos> <bos> <unk> <mask>
                               <start_of_turn> <end_of_turn>, then <0x00>..<0xFF>; TemplateProcessing
                               (<bos> $A); decoder Sequence[Replace("▁" -> " "), ByteFallback,
                               Fuse].
  mistral_like/tokenizer.json  Mistral 7B v0.1 / v0.3, Mixtral as transformers' LlamaTokenizer
                               (legacy=false) writes it: no normalizer; Metaspace(prepend_scheme
                               first, split false); the same BPE options; <unk> <s> </s> [INST]
                               [/INST]; TemplateProcessing(<s> $A); decoder Sequence[Replace,
                               ByteFallback, Fuse, Strip(" ", 1, 0)].
  mistral_like_metaspace_decoder/tokenizer.json
                               The Mistral one with a Metaspace decoder, as other converters write.
  llama2_like/tokenizer.json   Llama-2 / older Mistral conversions (legacy=true): normalizer
                               Sequence[Prepend("▁"), Replace(" " -> "▁")]; no
                               pre-tokenizer; <unk> <s> </s>; as Mistral otherwise.
  goldens.json                 For each tokenizer, a corpus of tricky strings with the ids of
                               encode(text, add_special_tokens=True/False) and the text of
                               decode(ids, skip_special_tokens=False/True); plus decode-only cases:
                               byte-level tokens whose bytes are not valid UTF-8 (lossy U+FFFD
                               replacement), or runs of <0xNN> tokens, alone and between words
                               (ByteFallback's all-or-nothing U+FFFD replacement, Strip).

The SentencePiece-shaped vocabularies are trained on "▁"-prefixed words (Metaspace, as
SentencePiece splits on whitespace) with the 150 most frequent characters only, so that most CJK,
emoji, '\t' and a few ASCII letters are not in the vocab and take the byte-fallback path.
The tokenizers also carry added tokens that exercise every AddedToken flag: lstrip/rstrip,
single_word, non-special tokens, and normalized=true tokens that the normalizer changes (NFC's
"Café!", and "foo bar", which Gemma's and Llama-2's normalizers turn into "▁"-spelled forms).

Re-run (from the repository root; versions as in tools/requirements-fixtures.txt, tokenizers
0.23.3 under Python 3.11.7 when these files were made):
    python3 -m venv .venv-fixtures && .venv-fixtures/bin/pip install -r tools/requirements-fixtures.txt
    .venv-fixtures/bin/python tools/make_tokenizer_goldens.py          # writes the files
    .venv-fixtures/bin/python tools/make_tokenizer_goldens.py --check  # verifies they are up to date
The training text is /usr/lib/python3.11/**/*.py of Debian 12 (libpython3.11-minimal and
libpython3.11-stdlib 3.11.2-6+deb12u6 when these files were made): other versions of those files
train other vocabularies, so regenerate the tokenizers and goldens together, never one alone.
The script is deterministic: it trains each tokenizer twice and fails unless both runs give the
same JSON, and --check fails unless the regenerated files equal the committed ones byte for byte.
The C++ tests (tests/runtime/tokenizer/tokenizer_test.cc) demand exact parity with goldens.json.
"""

import argparse
import collections
import json
import os
import random
import sys
from pathlib import Path

import tokenizers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
from tokenizers import pre_tokenizers, processors, trainers

# Pre-tokenizer patterns of the released Llama-3 and Qwen2 tokenizer.json files.
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
                 r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

VOCAB_SIZE = 4000
IGNORE_MERGES_TOKEN = "\u0120zyzzyva"  # "Ġzyzzyva", i.e. " zyzzyva"
GENERATED_CASES = 60
TRAIN_BYTES = 3_000_000
STDLIB = Path("/usr/lib/python3.11")
OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "tokenizer"

# Mixed-script text so that the vocabularies hold some non-Latin merges.
MULTILINGUAL = """
The quick brown fox jumps over the lazy dog. It's 2024 and we'll see; they've said I'm done.
敏捷的棕色狐狸跳过了懒狗。今天天气很好，我们去公园散步吧。中文分词是一个有趣的问题。
素早い茶色の狐がのろまな犬を飛び越える。東京は日本の首都です。
Быстрая коричневая лиса прыгает через ленивую собаку. Привет, мир! Москва — столица России.
الثعلب البني السريع يقفز فوق الكلب الكسول. مرحبا بالعالم! اللغة العربية جميلة.
तेज़ भूरी लोमड़ी आलसी कुत्ते के ऊपर कूदती है। नमस्ते दुनिया! हिन्दी एक सुंदर भाषा है।
빠른 갈색 여우가 게으른 개를 뛰어넘는다. 안녕하세요 세계!
Ελληνικά: η γρήγορη καφέ αλεπού πηδάει πάνω από τον τεμπέλη σκύλο.
Café, naïve, résumé, São Paulo, Zürich, Ångström, façade, jalapeño, crème brûlée.
Emoji: 😀 😂 👍🏽 👩‍💻 🇫🇷 ❤️ 🎉 🤖 — numbers 3.14159, 1,000,000, 2^10=1024.
"""

LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                   "<|end_header_id|>", "<|eot_id|>"]
QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
PHI4_SPECIALS = ["<|endoftext|>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>",
                 "<|im_start|>", "<|im_end|>", "<|im_sep|>", "<|endofprompt|>"]

# SentencePiece-converted vocabularies (Llama-2, Mistral, Gemma) list the special tokens first,
# then one "<0xNN>" token per byte for byte_fallback, then the pieces.
METASPACE = "\u2581"  # "▁"
BYTE_TOKENS = [f"<0x{b:02X}>" for b in range(256)]
GEMMA3_SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<start_of_turn>", "<end_of_turn>"]
GEMMA3_USER_DEFINED = ["<h1>"]  # in the vocab, added as a non-special token (as Gemma's HTML tags)
MISTRAL_SPECIALS = ["<unk>", "<s>", "</s>", "[INST]", "[/INST]"]
LLAMA2_SPECIALS = ["<unk>", "<s>", "</s>"]
# The most frequent characters only, so that rarer ones (most CJK, emoji, '\t', a few ASCII
# letters) are not in the vocabulary and go through byte fallback.
SENTENCEPIECE_ALPHABET = 150
NORMALIZED_ADDED = "foo bar"  # a normalized=true added token with a space in it


def training_text():
    """A few MB of text, read deterministically (sorted paths, fixed byte budget)."""
    files = sorted(p for p in STDLIB.rglob("*.py")
                   if "site-packages" not in p.parts and "dist-packages" not in p.parts)
    chunks, total = [], 0
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        chunks.append(text)
        total += len(text)
        if total >= TRAIN_BYTES:
            break
    chunks.extend([MULTILINGUAL] * 200)
    return chunks


def train(pattern, nfc, chunks):
    tok = Tokenizer(models.BPE())
    if nfc:
        tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=not nfc, use_regex=False),
    ])
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(chunks, trainer)
    return json.loads(tok.to_str())


def added(id_, content, special, normalized=False, lstrip=False, rstrip=False, single_word=False):
    return {"id": id_, "content": content, "single_word": single_word, "lstrip": lstrip,
            "rstrip": rstrip, "normalized": normalized, "special": special}


def make_llama3(chunks):
    trained = train(LLAMA3_PATTERN, nfc=False, chunks=chunks)
    model = trained["model"]
    # A vocab entry that no merge produces, as tiktoken-derived Llama-3 vocabularies have: only
    # ignore_merges=true encodes the pre-token " zyzzyva" as this one token.
    model["vocab"][IGNORE_MERGES_TOKEN] = len(model["vocab"])
    n = len(model["vocab"])
    tokens = [added(n + i, s, True) for i, s in enumerate(LLAMA3_SPECIALS)]
    # Flags that the released Llama-3 files do not use but AddedVocabulary supports.
    tokens.append(added(n + len(tokens), "<|fim_middle|>", True, lstrip=True, rstrip=True))
    tokens.append(added(n + len(tokens), "<|python_tag|>", False))  # non-special
    tokens.append(added(n + len(tokens), "wordtok", False, normalized=True, single_word=True))
    bos = n
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": tokens,
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": LLAMA3_PATTERN}, "behavior": "Isolated",
             "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
             "use_regex": False}]},
        "post_processor": {"type": "Sequence", "processors": [
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False,
             "use_regex": True},
            {"type": "TemplateProcessing",
             "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                        {"Sequence": {"id": "A", "type_id": 0}}],
             "pair": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                      {"Sequence": {"id": "A", "type_id": 0}},
                      {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 1}},
                      {"Sequence": {"id": "B", "type_id": 1}}],
             "special_tokens": {"<|begin_of_text|>": {
                 "id": "<|begin_of_text|>", "ids": [bos], "tokens": ["<|begin_of_text|>"]}}}]},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": True,
                  "vocab": model["vocab"], "merges": model["merges"]},
    }


def make_qwen2(chunks):
    trained = train(QWEN2_PATTERN, nfc=True, chunks=chunks)
    model = trained["model"]
    n = len(model["vocab"])
    tokens = [added(n + i, s, True) for i, s in enumerate(QWEN_SPECIALS)]
    tokens.append(added(n + len(tokens), "<tool_call>", False))  # non-special, as in Qwen2.5
    tokens.append(added(n + len(tokens), "</tool_call>", False))
    tokens.append(added(n + len(tokens), "<|mask|>", True, lstrip=True))
    tokens.append(added(n + len(tokens), "<|sep|>", True, rstrip=True))
    # normalized=true and not NFC: matched (and decoded) as its NFC form "Café!".
    tokens.append(added(n + len(tokens), "Cafe\u0301!", False, normalized=True))
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                  "use_regex": False}
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": tokens,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_PATTERN}, "behavior": "Isolated",
             "invert": False},
            byte_level]},
        "post_processor": byte_level,
        "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": False,
                  "byte_fallback": False, "vocab": model["vocab"], "merges": model["merges"]},
    }


def train_sentencepiece_like(specials, chunks):
    """A BPE vocabulary shaped like a SentencePiece conversion: specials, <0xNN> tokens, pieces.

    Trained with Metaspace(split=True), i.e. on "▁"-prefixed words as SentencePiece trains
    (split_by_whitespace); the files then use each model's own pre-tokenization.
    """
    # The trainer's own limit_alphabet breaks ties between equally frequent characters
    # arbitrarily; choosing the alphabet here (by count, then code point) keeps training
    # deterministic. Given as the initial alphabet, exactly these characters are kept.
    counts = collections.Counter()
    for chunk in chunks:
        counts.update(chunk.replace(" ", METASPACE))
    counts[METASPACE] += 1 << 40  # every word starts with one
    alphabet = sorted(counts, key=lambda c: (-counts[c], ord(c)))[:SENTENCEPIECE_ALPHABET]
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=METASPACE, prepend_scheme="always",
                                                 split=True)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, min_frequency=2, show_progress=False,
                                  special_tokens=specials + BYTE_TOKENS, initial_alphabet=alphabet,
                                  limit_alphabet=SENTENCEPIECE_ALPHABET)
    tok.train_from_iterator(chunks, trainer)
    return json.loads(tok.to_str())["model"]


def template(bos, bos_id):
    """TemplateProcessing that puts `bos` before each sequence (Llama-2, Mistral, Gemma)."""
    return {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": bos, "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": bos, "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": bos, "type_id": 1}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {bos: {"id": bos, "ids": [bos_id], "tokens": [bos]}}}


def sentencepiece_bpe(model):
    return {"type": "BPE", "dropout": None, "unk_token": "<unk>",
            "continuing_subword_prefix": None, "end_of_word_suffix": None, "fuse_unk": True,
            "byte_fallback": True, "ignore_merges": False,
            "vocab": model["vocab"], "merges": model["merges"]}


def replace(pattern, content):
    return {"type": "Replace", "pattern": {"String": pattern}, "content": content}


LLAMA2_DECODER = {"type": "Sequence", "decoders": [
    replace(METASPACE, " "), {"type": "ByteFallback"}, {"type": "Fuse"},
    {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}


def make_gemma3(chunks):
    model = train_sentencepiece_like(GEMMA3_SPECIALS + GEMMA3_USER_DEFINED, chunks)
    vocab = model["vocab"]
    tokens = [added(vocab[s], s, True) for s in GEMMA3_SPECIALS]
    tokens.append(added(vocab["<h1>"], "<h1>", False))
    n = len(vocab)
    # Flags that the released Gemma 3 file does not use but AddedVocabulary supports.
    tokens.append(added(n, "<unused0>", True, lstrip=True))
    tokens.append(added(n + 1, "<unused1>", True, rstrip=True))
    # normalized=true: matched (and decoded) as "foo▁bar", its form after Replace.
    tokens.append(added(n + 2, NORMALIZED_ADDED, False, normalized=True))
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": tokens,
        "normalizer": replace(" ", METASPACE),
        "pre_tokenizer": {"type": "Split", "pattern": {"String": " "},
                          "behavior": "MergedWithPrevious", "invert": False},
        "post_processor": template("<bos>", vocab["<bos>"]),
        "decoder": {"type": "Sequence", "decoders": [
            replace(METASPACE, " "), {"type": "ByteFallback"}, {"type": "Fuse"}]},
        "model": sentencepiece_bpe(model),
    }


def sentencepiece_added_tokens(vocab, specials):
    tokens = [added(vocab[s], s, True) for s in specials]
    # Not in the released files: a normalized=true token with a space, which the Llama-2
    # normalizer turns into "▁foo▁bar".
    tokens.append(added(len(vocab), NORMALIZED_ADDED, False, normalized=True))
    return tokens


def make_mistral(chunks):
    """Mistral 7B v0.1 / v0.3, Mixtral as transformers' LlamaTokenizer (legacy=false) writes it."""
    model = train_sentencepiece_like(MISTRAL_SPECIALS, chunks)
    vocab = model["vocab"]
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": sentencepiece_added_tokens(vocab, MISTRAL_SPECIALS),
        "normalizer": None,
        "pre_tokenizer": {"type": "Metaspace", "replacement": METASPACE,
                          "prepend_scheme": "first", "split": False},
        "post_processor": template("<s>", vocab["<s>"]),
        "decoder": LLAMA2_DECODER,
        "model": sentencepiece_bpe(model),
    }


def metaspace_decoder(tokenizer_json):
    """The same file with the Metaspace decoder that other converters write."""
    out = json.loads(json.dumps(tokenizer_json))
    out["decoder"] = {"type": "Metaspace", "replacement": METASPACE, "prepend_scheme": "first",
                      "split": False}
    return out


def make_llama2(chunks):
    """Llama-2 / older Mistral conversions (legacy=true): Prepend + Replace, no pre-tokenizer."""
    model = train_sentencepiece_like(LLAMA2_SPECIALS, chunks)
    vocab = model["vocab"]
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": sentencepiece_added_tokens(vocab, LLAMA2_SPECIALS),
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": METASPACE}, replace(" ", METASPACE)]},
        "pre_tokenizer": None,
        "post_processor": template("<s>", vocab["<s>"]),
        "decoder": LLAMA2_DECODER,
        "model": sentencepiece_bpe(model),
    }


def make_phi4(chunks):
    """Phi-4 (cl100k): the tiktoken conversion's Split(behavior Removed, invert true)."""
    model = train(LLAMA3_PATTERN, nfc=False, chunks=chunks)["model"]
    n = len(model["vocab"])
    tokens = [added(n + i, s, True) for i, s in enumerate(PHI4_SPECIALS)]
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": tokens,
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": LLAMA3_PATTERN}, "behavior": "Removed",
             "invert": True},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
             "use_regex": False}]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False,
                           "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": model["vocab"], "merges": model["merges"]},
    }


COMMON_CORPUS = [
    "",
    " ",
    "Hello world",
    "hello world!",
    " leading space",
    "trailing space ",
    "trailing spaces   ",
    "   ",
    "\n",
    "\n\n\n",
    "a\r\nb",
    "tabs\tand\t\tmore\ttabs",
    "line one\nline two\n\n  indented\n",
    "mixed \t \n \r\n whitespace  \n",
    "x    y",
    "\u00a0non-breaking\u00a0space and\u3000ideographic\u2009thin",
    "I'm sure it's fine, they'll say we've done what you'd do.",
    "I'M SURE IT'S FINE, THEY'LL SAY WE'VE DONE WHAT YOU'D DO.",
    "It'S MiXeD'Re 'll 'd",
    "don't can't won't shouldn't",
    "'s 't 're 've 'm 'll 'd",
    "rock 'n' roll",
    "1", "12", "123", "1234", "12345", "123456", "1234567", "12345678", "123456789",
    "1234567890", "12345678901", "123456789012",
    "pi is 3.14159265358979 and e is 2.718",
    "phone: +1 (555) 010-9999, year 2024",
    "٣٤٥ arabic-indic digits and ½ ² ⅷ",
    "数字１２３全角",
    "敏捷的棕色狐狸跳过了懒狗。",
    "东京は日本の首都です",
    "Привет, мир! Как дела?",
    "مرحبا بالعالم",
    "नमस्ते दुनिया, यह हिन्दी है।",
    "안녕하세요 세계",
    "mixed: hello мир 世界 عالم दुनिया!",
    "Emoji 😀😂 and 👍🏽 thumbs",
    "👩‍💻👨‍👩‍👧‍👦 ZWJ families",
    "🇫🇷🇯🇵 flags",
    "❤️ heart with VS16",
    "e\u0301 combining acute",
    "Cafe\u0301 vs Caf\u00e9",
    "A\u030a ngstrom \u212b sign",
    "\u1100\u1161\u11a8 conjoining jamo",
    "ﬁ ligature and ＡＢＣ fullwidth",
    "def foo(x):\n    return x ** 2  # square\n",
    "for (int i = 0; i < n; ++i) { sum += a[i]; }",
    "if x == 'y': print(\"z\")",
    "https://example.com/path?q=1&r=2#frag",
    "a.b.c...d---e___f",
    "!!!???...,,,;;;",
    "<html><body>Hi</body></html>",
    "user@example.com",
    "$100.00 €50 £20 ¥1000",
    "camelCaseIdentifier snake_case_identifier SCREAMING_CASE",
    "ends with newline\n",
    "\u200bzero\u200dwidth\ufeff",
    "Ωmega ΣΙΓΜΑ σίγμα",
    # Oniguruma's \s is Unicode White_Space, which U+180E no longer is (PCRE2's \s has it).
    "\u180e", "a\u180eb", "  \u180e", "x\u180e  y", "\u0085x\u2028y \u2029 \u202f\u205f",
    # Case-insensitive contractions fold U+017F LATIN SMALL LETTER LONG S to 's'.
    "it'\u017f", "x'\u017ft", "'\u212a",
    # ignore_merges: " zyzzyva" is a vocab entry that no merge produces.
    "a zyzzyva", "zyzzyva", " zyzzyvas",
]

# Seeded random concatenations of these make the generated cases.
FRAGMENTS = [
    "a", "Z", "word", " word", "  ", " ", "\n", "\r\n", "\t", "'s", "'LL", "'", "7", "42", "9999",
    "2024", ".", "...", "!?", "-", "_", "(", ")", "{", "}", "\"", "é", "e\u0301", "A\u030a", "日本",
    "中文", "мир", "مرحبا", "नमस्ते", "😀", "👍🏽", "👩‍💻", "🇫🇷", "\u00a0", "\u3000", "\u200b",
    "\u180e", "ſ", "İ", "ß", "ﬁ", "½", "٣", "$", "€", "zyzzyva",
]

LLAMA3_EXTRA = [
    "<|begin_of_text|>",
    "<|begin_of_text|>Hello",
    "Hello<|end_of_text|>",
    "<|start_header_id|>user<|end_header_id|>\n\nHi there!<|eot_id|>",
    "<|start_header_id|>assistant<|end_header_id|>\n\n",
    "text <|eot_id|> text",
    "<|eot_id|><|eot_id|>",
    "<|eot_id|",
    "<|begin_of_text|<|eot_id|>>",
    "a <|fim_middle|> b",
    "a   <|fim_middle|>   b",
    "<|fim_middle|>\n\nx",
    "x\t<|fim_middle|>\ty",
    "<|python_tag|>print(1)",
    "say <|python_tag|> now",
    "wordtok alone",
    "a wordtok b",
    "wordtoks glued",
    "xwordtok glued",
    "(wordtok)",
    "wordtok",
    "wordtokwordtok",
]

QWEN_EXTRA = [
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n",
    "<|im_start|>user\nWhat's 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|>",
    "text<|endoftext|>text",
    "<|im_end|><|im_end|>",
    "<|im_end",
    "<tool_call>\n{\"name\": \"f\"}\n</tool_call>",
    "a <tool_call> b",
    "x   <|mask|>   y",
    "x\n<|mask|>",
    "x   <|sep|>   y",
    "<|sep|>\n\n  z",
    "a <|mask|><|sep|> b",
    "Cafe\u0301! normalized token",
    "Caf\u00e9! precomposed",
    "Cafe\u0301 without bang",
    "xCafe\u0301!y",
]


# Whitespace, metaspace and byte-fallback cases for the SentencePiece-shaped tokenizers.
SENTENCEPIECE_EXTRA = [
    "\u2581", "\u2581\u2581", " \u2581", "\u2581already\u2581marked", "a\u2581b c", "\u2581 x",
    "  two leading spaces", " one leading space", "\n leading newline", "\tleading tab",
    "tabs\t\tfall back to bytes", "Just Quite Jazzy @ ^ ~",
    "<0x41> looks like a byte token", "<0x0A>", "<0xZZ> <0x4>",
    "😀", "a😀b", "😀😀😀", "\U0001d518\U0001d52b\U0001d526 fraktur", "\u00a0\u00a0nbsp",
    "end with spaces  ", "x\n\n\ny", "\r\n\r\n",
    "foo bar as an added token", "xfoo bary", "foo  bar", "foo\u2581bar", " foo bar",
    "Foo Bar",
]

GEMMA3_EXTRA = [
    "<bos>", "<bos>Hello", "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n",
    "text <eos> text", "<eos><eos>", "<start_of_turn", "<h1>Title</h1>", " <h1> spaced",
    "a   <unused0>   b", "x\n<unused0>", "a   <unused1>   b", "<unused1>\n\n  z",
    "<unused0><unused1>", " <pad> <mask> <unk>",
]

MISTRAL_EXTRA = [
    "<s>", "<s>Hello", " <s> Hello", "[INST] What is 2+2? [/INST]", "<s>[INST]Hi[/INST]</s>",
    "[INST]x[/INST] answer</s>", "</s></s>", "[INST", " [INST] leading space", "x<s>y",
    "<unk>", "a <unk> b",
]

PHI4_EXTRA = [
    "<|im_start|>user<|im_sep|>Hi there!<|im_end|><|im_start|>assistant<|im_sep|>",
    "<|endoftext|>", "text<|endoftext|>text", "<|fim_prefix|>a<|fim_suffix|>b<|fim_middle|>",
    "<|im_end", "<|endofprompt|> x", "zyzzyva",
]

# Fragments that the SentencePiece-shaped generated cases mix in.
SENTENCEPIECE_FRAGMENTS = ["\u2581", "<0x41>", "\t", "😀", "J", "foo bar", "  "]


def byte_level_chars():
    """The ByteLevel byte -> character table (bytes_char in tokenizers' byte_level.rs)."""
    bs = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def decode_cases(tok):
    """Id sequences whose bytes are not (all) valid UTF-8, one byte-token per byte."""
    table = byte_level_chars()
    byte_strings = [
        b"\xe4\xbd", b"\xff", b"\xc3a", b"\xf0\x9f\x98", b"ok\xe2\x82", b"\x80\x80",
        b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf", b"\xe0\x80\xaf", b"a\xf0\x9fb",
        b"\xe4\xbd\xa0\xe5\xa5", b"\xf0\x9f\x98\x80", b"\xc3\xa9",
    ]
    cases = []
    for bs in byte_strings:
        ids = [tok.token_to_id(table[b]) for b in bs]
        assert all(i is not None for i in ids), bs
        cases.append({"bytes_hex": bs.hex(), "ids": ids,
                      "decoded": tok.decode(ids, skip_special_tokens=False)})
    return cases


def byte_fallback_decode_cases(tok):
    """Runs of <0xNN> tokens, alone and between word tokens (ByteFallback joins a run if it is
    valid UTF-8 and makes every byte of it U+FFFD otherwise; Strip drops one leading space)."""
    byte_strings = [
        b"\xe4\xbd", b"\xff", b"\xc3a", b"\xf0\x9f\x98", b"ok\xe2\x82", b"\x80\x80",
        b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf", b"\xe0\x80\xaf", b"a\xf0\x9fb",
        b"\xe4\xbd\xa0\xe5\xa5", b"\xf0\x9f\x98\x80", b"\xc3\xa9", b"\xe4\xbd\xa0\xff", b" ",
        b"  x", b"\n",
    ]
    words = [tok.token_to_id(METASPACE + "the")]
    assert words[0] is not None
    word_bytes = b" the"
    cases = []
    for bs in byte_strings:
        ids = [tok.token_to_id(f"<0x{b:02X}>") for b in bs]
        assert all(i is not None for i in ids), bs
        for before, after in (([], []), (words, words)):
            all_ids = before + ids + after
            raw = word_bytes * bool(before) + bs + word_bytes * bool(after)
            cases.append({"bytes_hex": raw.hex(), "ids": all_ids,
                          "decoded": tok.decode(all_ids, skip_special_tokens=False)})
    return cases


def generated_corpus(specials):
    rng = random.Random(20240607)
    fragments = FRAGMENTS + specials
    return ["".join(rng.choice(fragments) for _ in range(rng.randint(1, 10)))
            for _ in range(GENERATED_CASES)]


def goldens_for(tok, corpus):
    cases = []
    for text in corpus:
        with_special = tok.encode(text, add_special_tokens=True).ids
        without = tok.encode(text, add_special_tokens=False).ids
        cases.append({
            "text": text,
            "ids_with_special": with_special,
            "ids_without_special": without,
            "decoded": tok.decode(with_special, skip_special_tokens=False),
            "decoded_skip_special": tok.decode(with_special, skip_special_tokens=True),
        })
    return cases


def legacy_merges(tokenizer_json):
    out = json.loads(json.dumps(tokenizer_json))
    merges = out["model"]["merges"]
    for a, b in merges:
        assert " " not in a and " " not in b, (a, b)
    out["model"]["merges"] = [f"{a} {b}" for a, b in merges]
    return out


def dump(obj):
    return json.dumps(obj, ensure_ascii=False, indent=1) + "\n"


def build():
    """Returns {relative path: file text}."""
    chunks = training_text()
    makers = {"llama3_like": make_llama3, "qwen2_like": make_qwen2, "gemma3_like": make_gemma3,
              "mistral_like": make_mistral, "llama2_like": make_llama2, "phi4_like": make_phi4}
    made = {}
    for name, make in makers.items():
        made[name] = make(chunks)
        if make(chunks) != made[name]:
            sys.exit(f"training is not deterministic: two runs gave different {name} tokenizers")
    made["qwen2_like_string_merges"] = legacy_merges(made["qwen2_like"])
    made["mistral_like_metaspace_decoder"] = metaspace_decoder(made["mistral_like"])
    files = {f"{name}/tokenizer.json": dump(tokenizer_json)
             for name, tokenizer_json in made.items()}
    toks = {name: Tokenizer.from_str(files[f"{name}/tokenizer.json"]) for name in made}
    contents = {name: [t["content"] for t in tokenizer_json["added_tokens"]]
                for name, tokenizer_json in made.items()}
    sentencepiece_common = COMMON_CORPUS + SENTENCEPIECE_EXTRA
    corpora = {
        "llama3_like": COMMON_CORPUS + LLAMA3_EXTRA + generated_corpus(contents["llama3_like"]),
        "qwen2_like": COMMON_CORPUS + QWEN_EXTRA + generated_corpus(contents["qwen2_like"]),
        "gemma3_like": sentencepiece_common + GEMMA3_EXTRA +
                       generated_corpus(contents["gemma3_like"] + SENTENCEPIECE_FRAGMENTS),
        "mistral_like": sentencepiece_common + MISTRAL_EXTRA +
                        generated_corpus(contents["mistral_like"] + SENTENCEPIECE_FRAGMENTS),
        "mistral_like_metaspace_decoder": sentencepiece_common + MISTRAL_EXTRA + generated_corpus(
            contents["mistral_like"] + SENTENCEPIECE_FRAGMENTS),
        "llama2_like": sentencepiece_common + MISTRAL_EXTRA +
                       generated_corpus(contents["llama2_like"] + SENTENCEPIECE_FRAGMENTS),
        "phi4_like": COMMON_CORPUS + PHI4_EXTRA + generated_corpus(contents["phi4_like"]),
    }
    goldens = {"generator": "tools/make_tokenizer_goldens.py",
               "tokenizers_version": tokenizers.__version__,
               "tokenizers": {}}
    for name, corpus in corpora.items():
        byte_fallback = made[name]["model"]["byte_fallback"]
        goldens["tokenizers"][name] = {
            "file": f"{name}/tokenizer.json",
            "cases": goldens_for(toks[name], corpus),
            "decode_cases": (byte_fallback_decode_cases if byte_fallback else decode_cases)(
                toks[name]),
        }
    # The string-merges file must tokenize exactly like the pairs file.
    if goldens_for(toks["qwen2_like_string_merges"], corpora["qwen2_like"]) != \
            goldens["tokenizers"]["qwen2_like"]["cases"]:
        sys.exit("merges as strings and as pairs tokenize differently")
    files["goldens.json"] = dump(goldens)
    return files


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="fail unless the committed files equal freshly generated ones")
    args = parser.parse_args()
    files = build()
    if args.check:
        stale = [p for p, text in files.items()
                 if not (OUT / p).exists() or (OUT / p).read_text(encoding="utf-8") != text]
        if stale:
            sys.exit(f"out of date: {', '.join(stale)} (re-run without --check)")
        print(f"{len(files)} files up to date in {OUT}")
        return
    for path, text in files.items():
        (OUT / path).parent.mkdir(parents=True, exist_ok=True)
        (OUT / path).write_text(text, encoding="utf-8")
        print(f"wrote {OUT / path} ({len(text.encode('utf-8'))} bytes)")


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")
    main()
