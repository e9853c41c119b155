#!/usr/bin/env python3
"""The independent DF11 decoder (tools/df11_reference_decoder.py), checked both ways:
- on the official encoder's fixtures (tests/data/official): every tensor of each decoded model
  equals the BF16 original the official package compressed (names, dtypes, shapes, bytes);
- on the demo model (models/demo): it gives the very tensors `df11 decompress` gives ($DF11_TOOL),
  so the demo goldens that transformers computes on its output hold for df11d's decoder too.
"""

import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import df11_reference_decoder as ref  # noqa: E402


def model_tensors(folder):
    tensors = {}
    for path in sorted(Path(folder).glob("*.safetensors")):
        tensors.update(ref.read_safetensors(path)[0])
    return tensors


class ReferenceDecoderTest(unittest.TestCase):
    def test_official_fixtures_decode_to_their_originals(self):
        official = ROOT / "tests" / "data" / "official"
        models = sorted(p.name for p in official.glob("tiny_*") if not p.name.endswith("_df11"))
        self.assertGreaterEqual(len(models), 5)
        for model in models:
            with self.subTest(model=model), tempfile.TemporaryDirectory() as out:
                units = ref.decode_model(official / f"{model}_df11", out)
                self.assertGreater(units, 0)
                decoded, original = model_tensors(out), model_tensors(official / model)
                self.assertEqual(sorted(decoded), sorted(original))
                for name, tensor in original.items():
                    self.assertEqual(decoded[name], tensor, name)

    def test_demo_model_decodes_as_df11_decompress_does(self):
        tool = os.environ["DF11_TOOL"]
        with tempfile.TemporaryDirectory() as tmp:
            ours, theirs = Path(tmp) / "df11", Path(tmp) / "reference"
            subprocess.run([tool, "decompress", str(ROOT / "models" / "demo"), str(ours)],
                           check=True, capture_output=True)
            self.assertEqual(ref.decode_model(ROOT / "models" / "demo", theirs), 4)
            decoded, expected = model_tensors(theirs), model_tensors(ours)
            self.assertEqual(sorted(decoded), sorted(expected))
            for name, tensor in expected.items():
                self.assertEqual(decoded[name], tensor, name)

    def test_corrupt_codes_are_refused(self):
        # A length row that gives exponent 0 no code: the walk stops instead of looping.
        luts = bytes(256) + bytes(256)
        with self.assertRaises(ref.CorruptError):
            ref.decode_unit(luts, b"\x00", b"\x00")
        # A pointer to a row that does not exist.
        luts = bytes([255] * 256) + bytes(256)
        with self.assertRaises(ref.CorruptError):
            ref.decode_unit(luts, b"\x00", b"\x00")
        # 8-bit codes for 20 weights in a 1-byte stream: the walk runs past its end.
        luts = bytes(256) + bytes([8]) + bytes(255)
        with self.assertRaises(ref.CorruptError):
            ref.decode_unit(luts, b"\x00", bytes(20))


if __name__ == "__main__":
    unittest.main()
