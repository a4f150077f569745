"""transformers on the real model file still gives the fixture
tests/fixtures/generate-reference.json: its tokenizer's ids and decoding for a handful of
prompts (chat template included); its fp32 greedy answer is held by test_program.py,
whose transformers peer's answer must be the fixture's, as the twin's must. The Rust side
holds Candle's tokenizer and fp32 answer to the same fixture (tests/generate_model.rs),
so Candle, transformers and the twin agree with the fixture between them. Without the file
this skips, unless CI is set: CI fetches it (`just model`), and there a missing file is a
failure."""

from __future__ import annotations

import json
import unittest

from common.testkit import ROOT, torch_or_skip
from generate.test_program import model_or_skip

FIXTURE = ROOT / "tests" / "fixtures" / "generate-reference.json"


class Transformers(unittest.TestCase):
    def test_transformers_still_gives_the_fixture(self):
        path = model_or_skip()
        torch_or_skip()
        import transformers

        from generate import reference

        want = json.loads(FIXTURE.read_text(encoding="utf-8"))
        self.assertEqual(want["transformers"], transformers.__version__)
        got = reference.tokens(path)
        self.assertEqual(got["chat"], want["chat"])
        self.assertEqual(got["plain"], want["plain"])
        # Decoding gives the text back, special tokens included.
        for c in got["chat"]:
            self.assertEqual(c["decoded"], c["formatted"])


if __name__ == "__main__":
    unittest.main()
