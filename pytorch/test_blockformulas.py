"""Tests of blockformulas.py against the hand values of src/bench/formulas.rs's tests
(the same numbers, so the two ports cannot drift apart unnoticed)."""

from __future__ import annotations

import unittest

from blockformulas import (
    MIB,
    BlockDims,
    amdahl,
    block_bytes,
    block_flops,
    copy_bytes,
    gb_per_s,
    rms_norm_bytes,
    rope_bytes,
    softmax_bytes,
)

LLAMA_7B = BlockDims(batch=1, seq=2048, hidden=4096, mlp=11008)


class BlockFormulas(unittest.TestCase):
    def test_a_llama_7b_layer_counts_as_its_paper_does(self):
        d = LLAMA_7B
        self.assertEqual(d.params(), 4 * 4096 * 4096 + 3 * 4096 * 11008 + 2 * 4096)
        # 202 million weights a layer: 32 layers are the 6.5 billion beside the embeddings.
        self.assertEqual(d.params() // 1_000_000, 202)
        # Prefill: 2 x params x tokens for the projections, plus 4 x seq^2 x hidden.
        linear = 2.0 * 2048.0 * (d.params() - 2 * 4096)
        self.assertEqual(block_flops(d, False), linear + 4.0 * 2048.0 * 2048.0 * 4096.0)
        # Decode: one token, 2049 keys.
        linear = 2.0 * (d.params() - 2 * 4096)
        self.assertEqual(block_flops(d, True), linear + 4.0 * 2049.0 * 4096.0)
        # Decode reads every weight once a token: at bf16, 404 MB plus the cache.
        self.assertEqual(block_bytes(d, True, 2), (d.params() + 2 * 4096 + 2 * 2049 * 4096) * 2)
        self.assertEqual((d.tokens(False), d.tokens(True)), (2048, 1))
        self.assertEqual((d.context(False), d.context(True)), (2048, 2049))

    def test_a_tiny_block_by_hand(self):
        # batch 2, seq 3, hidden 4, mlp 6: 4*16 + 3*24 + 8 = 144 weights.
        d = BlockDims(batch=2, seq=3, hidden=4, mlp=6)
        self.assertEqual(d.params(), 144)
        # Prefill: 6 tokens; 2*6*(64 + 72) + 4*6*3*4.
        self.assertEqual(block_flops(d, False), 1632.0 + 288.0)
        # Decode: 2 tokens, 4 keys; 2*2*136 + 4*2*4*4.
        self.assertEqual(block_flops(d, True), 544.0 + 128.0)
        # Prefill at f32: (144 + 2*6*4 + 2*2*3*4) * 4.
        self.assertEqual(block_bytes(d, False, 4), (144 + 48 + 48) * 4)
        self.assertEqual(block_bytes(d, True, 2), (144 + 16 + 64) * 2)

    def test_fused_kernels_move_their_tensors_once_and_composed_ops_more(self):
        fused, composed = rms_norm_bytes(4, 8, 4)
        self.assertEqual(fused, (2 * 32 + 8) * 4)
        self.assertEqual(composed, (2 * 32 + (32 + 4) + 6 * 4 + (2 * 32 + 4) + (2 * 32 + 8)) * 4)
        # In bf16 the composed form adds the casts to and from f32.
        f16_fused, f16_composed = rms_norm_bytes(4, 8, 2)
        self.assertEqual(f16_fused, fused // 2)
        casts = 2 * 32 * (2 + 4)
        inner = (2 * 32 + (32 + 4) + 6 * 4 + (2 * 32 + 4)) * 4
        self.assertEqual(f16_composed, casts + inner + (2 * 32 + 8) * 2)
        self.assertEqual(softmax_bytes(2, 10, 2), (2 * 20 * 2, (140 + 8) * 2))
        self.assertEqual(rope_bytes(100, 10, 4), (880, (1000 + 120) * 4))

    def test_amdahl_bounds_the_whole_by_its_part(self):
        self.assertEqual(amdahl(1.0, 4.0), 4.0)
        self.assertEqual(amdahl(0.0, 4.0), 1.0)
        # Half the time 4x faster: 1 / (0.5 + 0.125) = 1.6.
        self.assertAlmostEqual(amdahl(0.5, 4.0), 1.6, places=12)

    def test_rates_and_the_copy_size(self):
        self.assertEqual(gb_per_s(1_000_000_000, 1000.0), 1.0)
        self.assertEqual(gb_per_s(3_000_000, 1.0), 3.0)
        # A tiny block copies the floor, 32 MiB; a 7B layer's decode the 1 GiB cap
        # (808 MB of f32 weights plus its cache: under the cap, so itself).
        self.assertEqual(copy_bytes(BlockDims(1, 12, 64, 96)), 32 * MIB)
        self.assertEqual(copy_bytes(LLAMA_7B), block_bytes(LLAMA_7B, True, 4))
        self.assertEqual(copy_bytes(BlockDims(1, 2048, 8192, 28672)), 1024 * MIB)


if __name__ == "__main__":
    unittest.main()
