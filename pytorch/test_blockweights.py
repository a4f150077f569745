"""Tests of blockweights.py: the safetensors file read and written with the standard
library (a round trip, the format's bytes by hand), the block's shape from its tensors,
and each malformed file refused in one line naming what is wrong."""

from __future__ import annotations

import json
import struct
import tempfile
import unittest
from pathlib import Path

from blockweights import NAMES, BlockShape, load, read_header, read_shape, to_bytes
from errors import Failure
from testkit import torch_or_skip, write_weights


def raw_file(entries: dict, data: bytes) -> bytes:
    header = json.dumps(entries).encode()
    return struct.pack("<Q", len(header)) + header + data


class Format(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.d = Path(self.dir.name)

    def tearDown(self):
        self.dir.cleanup()

    def test_a_file_written_by_hand_reads_back(self):
        torch = torch_or_skip()
        # One 2 x 2 tensor, [1, 2, 3, -0.5], in the format's own bytes.
        data = struct.pack("<4f", 1.0, 2.0, 3.0, -0.5)
        entry = {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}
        path = self.d / "one.safetensors"
        path.write_bytes(raw_file({"__metadata__": {"seed": "7"}, "t": entry}, data))
        header, start = read_header(path)
        self.assertEqual(header["t"], entry)
        self.assertEqual(header["__metadata__"], {"seed": "7"})
        self.assertEqual(start, path.stat().st_size - 16)
        # What to_bytes writes parses the same way, with its header padded to 8 bytes.
        blob = to_bytes(torch, {"t": torch.tensor([[1.0, 2.0], [3.0, -0.5]])}, {"seed": 7})
        (n,) = struct.unpack("<Q", blob[:8])
        self.assertEqual(n % 8, 0)
        self.assertEqual(blob[-16:], data)
        self.assertEqual(json.loads(blob[8 : 8 + n])["t"], entry)

    def test_the_shape_comes_from_the_tensors_and_every_tensor_round_trips(self):
        torch = torch_or_skip()
        path = self.d / "w.safetensors"
        made = write_weights(torch, path, batch=2, seq=5, hidden=24, heads=3, mlp=40)
        shape, meta = read_shape(path)
        want = BlockShape(batch=2, seq=5, hidden=24, heads=3, kv_heads=3, head_dim=8, mlp=40)
        self.assertEqual(shape, want)
        self.assertEqual(meta, {})
        loaded = load(torch, path)
        self.assertEqual(list(loaded), NAMES)
        for name in NAMES:
            self.assertTrue(torch.equal(loaded[name], made[name]), name)
            self.assertEqual(loaded[name].dtype, torch.float32)
        # Grouped-query: the key/value heads come from the cache, the query heads from
        # hidden / head_dim, and K and V are kv_heads x head_dim wide.
        gqa = self.d / "gqa.safetensors"
        write_weights(torch, gqa, batch=1, seq=3, hidden=32, heads=8, kv_heads=2, mlp=16)
        shape, _ = read_shape(gqa)
        self.assertEqual((shape.heads, shape.kv_heads, shape.head_dim), (8, 2, 4))
        self.assertEqual(load(torch, gqa)["wk"].shape, (8, 32))

    def refused(self, blob: bytes, says: str):
        path = self.d / "bad.safetensors"
        path.write_bytes(blob)
        with self.assertRaises(Failure) as caught:
            read_shape(path)
        line = str(caught.exception)
        self.assertIn(says, line)
        self.assertEqual(len(line.splitlines()), 1, line)

    def test_malformed_files_are_refused_in_one_line(self):
        torch = torch_or_skip()
        good = self.d / "good.safetensors"
        tensors = write_weights(torch, good)
        self.refused(b"1234", says="shorter than 8 bytes")
        self.refused(struct.pack("<Q", 1 << 40), says="a header of")
        self.refused(struct.pack("<Q", 3) + b"[1]", says="not a JSON object")
        # Truncated: the last tensor's bytes are not all there.
        self.refused(good.read_bytes()[:-4], says="truncated?")
        # A tensor missing, a tensor in another dtype, a tensor of the wrong shape.
        self.refused(
            to_bytes(torch, {k: v for k, v in tensors.items() if k != "wo"}), "no tensor wo"
        )
        entry = {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]}
        self.refused(raw_file({"wq": entry}, b"\0" * 4), says="wq is F16")
        wrong = dict(tensors, w_up=torch.zeros(96, 63))
        self.refused(to_bytes(torch, wrong), says="w_up has shape [96, 63]")
        # Grouped-query files that disagree with themselves: K's rows not the cache's
        # heads, or key/value heads that do not divide the query heads.
        wrong = dict(tensors, wk=torch.zeros(32, 64))
        self.refused(to_bytes(torch, wrong), says="wk has shape [32, 64], the block's shape")
        cache = torch.zeros(1, 3, 12, 16)
        three = {**tensors, "k_cache": cache, "v_cache": cache}
        self.refused(to_bytes(torch, three), says="kv_heads 3 does not divide heads 4")
        # An odd head size: hidden 6 in 2 heads of 3.
        odd = self.d / "odd.safetensors"
        write_weights(torch, odd, hidden=6, heads=2, mlp=4)
        self.refused(odd.read_bytes(), says="head_dim 3 is odd")
        with self.assertRaises(Failure) as caught:
            read_shape(self.d / "missing.safetensors")
        self.assertIn("cannot read", str(caught.exception))


if __name__ == "__main__":
    unittest.main()
