"""Tests of blockparts.py's same-work rule (docs/block.md): every role a timed part reads is
its own allocation (never a view or a shallow copy of another), each part reads as many
distinct inputs as the block's calls of its class do (recorded with a TorchFunctionMode
while the part runs: a part that fed two calls one tensor where the block has two would
read fewer), and the parts see the block's grouped-query shapes."""

from __future__ import annotations

import tempfile
import unittest
from pathlib import Path

import blockparts
from blockmodel import DECODE, PREFILL, Block
from blockparts import Shapes, time_parts
from timing import Plan
from blockweights import load, read_shape
from testkit import torch_or_skip, write_weights


class SameWork(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.torch = torch = torch_or_skip()
        cls.dir = tempfile.TemporaryDirectory()
        path = Path(cls.dir.name) / "w.safetensors"
        write_weights(torch, path, seq=6, hidden=32, heads=4, kv_heads=2, mlp=40)
        shape, _ = read_shape(path)
        cls.block = Block(torch, load(torch, path), shape, torch.float32, torch.device("cpu"))

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def test_every_role_is_its_own_allocation(self):
        for phase in (PREFILL, DECODE):
            sh = Shapes(self.torch, self.block, phase, self.torch.float32)
            roles = vars(sh)
            storages = {name: t.untyped_storage().data_ptr() for name, t in roles.items()}
            self.assertEqual(len(set(storages.values())), len(roles), (phase, storages))
            # Q has the query heads, the new K and the cache the key/value heads.
            self.assertEqual(sh.q.shape[1], 4)
            self.assertEqual((sh.k.shape[1], sh.keys.shape[1]), (2, 2))
            context = 7 if phase == DECODE else 6
            self.assertEqual(sh.keys.shape[2], context)

    def test_each_part_reads_as_many_inputs_as_the_block_s_calls(self):
        torch = self.torch
        # Distinct inputs per part in one block call: linear reads the normed x (Q, K, V),
        # the attention's output (O), the normed h1 (gate, up) and the activation (down);
        # element-wise the scores, gate and up, x and O's output, h1 and down's output, the
        # three projections and the attention output by head (decode: the new K and V and
        # the cache they are written into).
        want = {
            PREFILL: [4, 4, 2, 1, 2, 11],
            DECODE: [4, 4, 2, 1, 2, 15],
        }
        for phase, counts in want.items():
            made = []

            class Recorded(Shapes):
                def __init__(self, *args):
                    super().__init__(*args)
                    made.append(self)

            reads = []

            class Reads(torch.overrides.TorchFunctionMode):
                def __torch_function__(self, func, types, args=(), kwargs=None):
                    for a in [*args, *(kwargs or {}).values()]:
                        if isinstance(a, torch.Tensor):
                            reads[-1].add(a.untyped_storage().data_ptr())
                    return func(*args, **(kwargs or {}))

            class OneCall:
                def time(self, plan, work):
                    reads.append(set())
                    with Reads():
                        work()
                    return [1.0], []

            aux = self.block.aux(phase, torch.float32)
            orig = blockparts.Shapes
            blockparts.Shapes = Recorded
            try:
                time_parts(torch, OneCall(), self.block, phase, aux, torch.float32, Plan(0, 1))
            finally:
                blockparts.Shapes = orig
            roles = {t.untyped_storage().data_ptr() for t in vars(made[0]).values()}
            self.assertEqual([len(r & roles) for r in reads], counts, phase)


if __name__ == "__main__":
    unittest.main()
