"""Tests of blockformulas.py against the hand values of src/bench/formulas.rs's tests
(the same numbers, so the two ports cannot drift apart unnoticed)."""

from __future__ import annotations

import unittest

from blockformulas import (
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

LLAMA_7B = BlockDims(batch=1, seq=2048, hidden=4096, kv_width=4096, mlp=11008)


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
        d = BlockDims(batch=2, seq=3, hidden=4, kv_width=4, mlp=6)
        self.assertEqual(d.params(), 144)
        # Prefill: 6 tokens; 2*6*(64 + 72) + 4*6*3*4.
        self.assertEqual(block_flops(d, False), 1632.0 + 288.0)
        # Decode: 2 tokens, 4 keys; 2*2*136 + 4*2*4*4.
        self.assertEqual(block_flops(d, True), 544.0 + 128.0)
        # Prefill at f32: (144 + 2*6*4 + 2*2*3*4) * 4.
        self.assertEqual(block_bytes(d, False, 4), (144 + 48 + 48) * 4)
        self.assertEqual(block_bytes(d, True, 2), (144 + 16 + 64) * 2)

    def test_grouped_query_attention_counts_as_its_models_do(self):
        # Llama-3-8B (Meta's config.json: hidden 4096, 32 heads, 8 KV heads of 128, MLP
        # 14336, 32 layers, vocabulary 128256, untied embeddings): 8,030,261,248 parameters.
        l3 = BlockDims(batch=1, seq=8192, hidden=4096, kv_width=8 * 128, mlp=14336)
        self.assertEqual(32 * l3.params() + 2 * 128_256 * 4096 + 4096, 8_030_261_248)
        # SmolLM2-135M (hidden 576, 9 heads, 3 KV heads of 64, MLP 1536, 30 layers,
        # vocabulary 49152, tied embeddings): 134,515,008.
        smol = BlockDims(batch=1, seq=2048, hidden=576, kv_width=3 * 64, mlp=1536)
        self.assertEqual(smol.params(), 3_540_096)
        self.assertEqual(30 * smol.params() + 49_152 * 576 + 576, 134_515_008)
        # The tiny block by hand with K/V 2 wide: 2*16 + 2*2*4 + 3*24 + 8 = 128 weights.
        d = BlockDims(batch=2, seq=3, hidden=4, kv_width=2, mlp=6)
        self.assertEqual(d.params(), 128)
        self.assertEqual(block_flops(d, False), 2.0 * 6 * 120 + 4.0 * 6 * 3 * 4)
        self.assertEqual(block_flops(d, True), 2.0 * 2 * 120 + 4.0 * 2 * 4 * 4)
        self.assertEqual(block_bytes(d, False, 4), (128 + 2 * 6 * 4 + 2 * 6 * 2) * 4)
        self.assertEqual(block_bytes(d, True, 2), (128 + 2 * 2 * 4 + 2 * 2 * 4 * 2) * 2)

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
        # A row's ceiling copy has the row's footprint: two buffers of half its bytes.
        row = block_bytes(LLAMA_7B, True, 2)
        self.assertEqual(copy_bytes(row), row // 2)
        self.assertEqual(copy_bytes(1), 1)


if __name__ == "__main__":
    unittest.main()
