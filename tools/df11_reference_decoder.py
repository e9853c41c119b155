#!/usr/bin/env python3
"""An independent DF11 decoder: a DFloat11 model folder back to a BF16 one, in plain Python.

It is written from the format's description (the official package's LUT walk, one symbol at a
time, sequentially) and shares no code with df11d's decoders, so that it can check them and feed
transformers the weights the golden fixtures are made from (tools/make_demo_goldens.py) without
trusting the code under test. It needs only the standard library, and is slow (about a second per
million weights): it is meant for small models.

    python3 tools/df11_reference_decoder.py models/demo /tmp/demo-bf16

The output folder holds config.json without dfloat11_config, one model.safetensors with every
tensor (the decoded weights under their original names and shapes, the others as stored), and
copies of the folder's other small files (tokenizer, generation config, chat template).
"""

import argparse
import json
import re
import shutil
import struct
import sys
from pathlib import Path

SMALL_FILES = ("tokenizer.json", "tokenizer_config.json", "generation_config.json",
               "special_tokens_map.json", "chat_template.jinja", "chat_template.json")


class CorruptError(Exception):
    pass


def read_safetensors(path):
    """{name: (dtype, shape, bytes)} and the file's metadata."""
    data = Path(path).read_bytes()
    (header_len,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + header_len])
    base = 8 + header_len
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        tensors[name] = (info["dtype"], info["shape"], data[base + begin:base + end])
    return tensors, header.get("__metadata__")


def write_safetensors(path, tensors):
    """Writes {name: (dtype, shape, bytes)} in name order, each tensor 8-byte aligned."""
    header, offset, parts = {}, 0, []
    for name in sorted(tensors):
        dtype, shape, raw = tensors[name]
        pad = (-offset) % 8
        if pad:
            parts.append(b"\0" * pad)
            offset += pad
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        parts.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((-len(text)) % 8)
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(text)))
        out.write(text)
        for part in parts:
            out.write(part)


def decode_unit(luts, encoded_exponent, sign_mantissa):
    """The unit's BF16 weights as little-endian bytes.

    luts: n_luts rows of 256 bytes, the decode rows then the code-length row. Each symbol is read
    MSB-first: the first byte of the remaining bits indexes row 0; a value of 240 or more points
    to row 256 - value, indexed by the next byte (at most four lookups); a value below 240 is the
    exponent, and the length row says how many bits its code took.
    """
    if len(luts) % 256 or not 2 <= len(luts) // 256 <= 18:
        raise CorruptError(f"luts: {len(luts)} bytes is not 2 to 18 rows of 256")
    rows = len(luts) // 256
    lengths = luts[256 * (rows - 1):]
    stream = bytes(encoded_exponent) + b"\0" * 8  # bits past the stream read as zero
    out = bytearray(2 * len(sign_mantissa))
    try:
        _, bits, pos = _walk(luts, rows, lengths, stream, sign_mantissa, out)
    except IndexError:
        raise CorruptError("the codes run past the end of the stream") from None
    used_bits = 8 * pos - bits
    if used_bits > 8 * len(encoded_exponent):
        raise CorruptError(f"the codes take {used_bits} bits; the stream has "
                           f"{8 * len(encoded_exponent)}")
    return out


def _walk(luts, rows, lengths, stream, sign_mantissa, out):
    """Decodes every element into `out`; the final window, its bit count and stream position."""
    window, bits, pos = 0, 0, 0  # `bits` valid bits in `window`, the next one the highest
    for i in range(len(sign_mantissa)):
        while bits <= 32:
            window = (window << 8) | stream[pos]
            pos += 1
            bits += 8
        value = luts[(window >> (bits - 8)) & 0xFF]
        level = 1
        while value >= 240:
            if level == 4:
                raise CorruptError(f"element {i}: a code longer than 32 bits")
            row = 256 - value
            if row >= rows - 1:
                raise CorruptError(f"element {i}: a pointer to row {row} of {rows - 1}")
            value = luts[256 * row + ((window >> (bits - 8 * (level + 1))) & 0xFF)]
            level += 1
        length = lengths[value]
        if length == 0:
            raise CorruptError(f"element {i}: exponent {value} has no code length")
        bits -= length
        window &= (1 << bits) - 1
        sm = sign_mantissa[i]
        weight = ((sm & 0x80) << 8) | (value << 7) | (sm & 0x7F)
        out[2 * i] = weight & 0xFF
        out[2 * i + 1] = weight >> 8
    return window, bits, pos


def in_features(config, attribute):
    """The input width of a unit part (`self_attn.q_proj`, `lm_head`, ...)."""
    config = config.get("text_config", config)  # multimodal configs (Gemma 3) nest the text model
    hidden = config["hidden_size"]
    head_dim = config.get("head_dim") or hidden // config["num_attention_heads"]
    leaf = attribute.rsplit(".", 1)[-1]
    widths = {"q_proj": hidden, "k_proj": hidden, "v_proj": hidden, "qkv_proj": hidden,
              "gate_proj": hidden, "up_proj": hidden, "gate_up_proj": hidden,
              "o_proj": config["num_attention_heads"] * head_dim,
              "down_proj": config["intermediate_size"], "embed_tokens": hidden, "lm_head": hidden}
    if leaf not in widths:
        raise CorruptError(f"no known input width for {attribute}")
    return widths[leaf]


def decode_model(source, out_dir):
    """Decodes DF11 folder `source` into BF16 folder `out_dir`; returns the number of units."""
    source, out_dir = Path(source), Path(out_dir)
    config = json.loads((source / "config.json").read_text())
    patterns = config["dfloat11_config"]["pattern_dict"]
    tensors = {}
    for path in sorted(source.glob("*.safetensors")):
        tensors.update(read_safetensors(path)[0])
    units = sorted({name[:-len(".encoded_exponent")] for name in tensors
                    if name.endswith(".encoded_exponent")})
    weights = {}
    for unit in units:
        parts = next((p for pattern, p in patterns.items() if re.fullmatch(pattern, unit)), None)
        if parts is None:
            raise CorruptError(f"{unit}: no pattern of dfloat11_config matches it")
        fields = {f: tensors.pop(f"{unit}.{f}") for f in
                  ("luts", "encoded_exponent", "sign_mantissa", "split_positions",
                   "output_positions", "gaps")}
        raw = decode_unit(fields["luts"][2], fields["encoded_exponent"][2],
                          fields["sign_mantissa"][2])
        split_raw = fields["split_positions"][2]
        splits = list(struct.unpack(f"<{len(split_raw) // 8}q", split_raw))
        names = [f"{unit}.{p}.weight" for p in parts] if parts else [f"{unit}.weight"]
        if len(splits) != len(names) - 1:
            raise CorruptError(f"{unit}: {len(splits)} split positions for {len(names)} weights")
        bounds = [0] + splits + [len(raw) // 2]
        for k, name in enumerate(names):
            piece = raw[2 * bounds[k]:2 * bounds[k + 1]]
            width = in_features(config, parts[k] if parts else unit)
            rows, rest = divmod(len(piece) // 2, width)
            if rest:
                raise CorruptError(f"{name}: {len(piece) // 2} weights are not rows of {width}")
            weights[name] = ("BF16", [rows, width], bytes(piece))
    tensors.update(weights)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_safetensors(out_dir / "model.safetensors", tensors)
    del config["dfloat11_config"]
    (out_dir / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    for name in SMALL_FILES:
        if (source / name).exists():
            shutil.copyfile(source / name, out_dir / name)
    return len(units)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("source", help="a DF11 model folder")
    parser.add_argument("out", help="the BF16 folder to write")
    args = parser.parse_args()
    try:
        units = decode_model(args.source, args.out)
    except (CorruptError, KeyError, OSError, ValueError, struct.error) as e:
        print(f"df11_reference_decoder: {e}", file=sys.stderr)
        return 1
    print(f"{units} units decoded into {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
