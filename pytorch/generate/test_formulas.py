"""The generate peers' pure parts against hand values, as src/model/cost.rs's tests hold
Candle's: SmolLM2-135M's published parameter count, pp's FLOPs, the bytes a token reads
and the bound; the copy's size; rates from samples; the speedups over fp32 and where an
answer parts from fp32's; what holds a row back; a pp test's ids; llama.cpp's permute
undone."""

from __future__ import annotations

import unittest

from generate.formulas import LlamaDims, copy_bytes, float_bytes, pp_flops, pp_matmul_flops
from generate.formulas import tg_bound_tokens_per_s, weight_bytes_per_token

SMOLLM2 = LlamaDims(
    layers=30,
    hidden=576,
    heads=9,
    kv_heads=3,
    head_dim=64,
    mlp=1536,
    vocab=49152,
    context=4096,
    rope_theta=100000.0,
    rms_eps=1e-5,
    tied=True,
)


def timed(*ms: float) -> dict:
    return {
        "median_ms": sorted(ms)[len(ms) // 2],
        "gpu_median_ms": None,
        "samples_wall_ms": list(ms),
        "samples_gpu_ms": [],
    }


class Formulas(unittest.TestCase):
    def test_smollm2_has_its_published_134_5_million_parameters(self):
        d = SMOLLM2
        self.assertEqual(d.layer_matmul_params(), 2 * 331_776 + 2 * 110_592 + 3 * 884_736)
        self.assertEqual(d.params(), 134_515_008)
        untied = LlamaDims(**{**d.__dict__, "tied": False})
        self.assertEqual(untied.params() - d.params(), 49152 * 576)

    def test_pp_flops_are_two_per_parameter_per_token_plus_attention(self):
        d = SMOLLM2
        self.assertEqual(pp_flops(d, 1), 2.0 * d.token_matmul_params() + 4.0 * 30 * 9 * 64)
        layers = 30 * d.layer_matmul_params()
        self.assertEqual(pp_flops(d, 10), 20.0 * layers + 2.0 * 49152 * 576 + 4.0 * 30 * 576 * 55)
        self.assertEqual(pp_matmul_flops(d, 10), 20.0 * layers + 2.0 * 49152 * 576)

    def test_the_bound_is_bandwidth_over_bytes_per_token(self):
        d = SMOLLM2
        held, per_token = float_bytes(d, 4)
        # fp32: every weight once (the tied head is the embedding), and one embedding row.
        self.assertEqual(held, d.params() * 4)
        self.assertEqual(per_token, (d.token_matmul_params() + 61 * 576 + 576) * 4)
        self.assertEqual(weight_bytes_per_token(d, 1000, 2, 2), 1000 + 61 * 576 * 2 + 576 * 2)
        self.assertAlmostEqual(tg_bound_tokens_per_s(10.0, per_token), 1e10 / per_token)
        # The copy: at least 32 MiB, at most 1 GiB.
        self.assertEqual(copy_bytes(1), 32 << 20)
        self.assertEqual(copy_bytes(per_token), per_token)
        self.assertEqual(copy_bytes(4 << 30), 1 << 30)


class Rows(unittest.TestCase):
    def test_rates_are_the_median_slowest_and_fastest_samples(self):
        from generate.measure import rates

        self.assertEqual(rates(timed(100.0, 200.0, 400.0), 8), (40.0, 20.0, 80.0))

    def test_each_row_against_fp32(self):
        from generate.measure import fill_vs_fp32

        def row(name, ms, ids):
            t = timed(ms, ms, ms)
            return {
                "precision": name,
                "measured": {
                    "matmuls_pp": t,
                    "matmuls_tg": t,
                    "pp": t,
                    "tg": t,
                    "answer": {"token_ids": ids, "differs_from_fp32_at": None},
                },
            }

        rows = [
            row("fp32", 100.0, [1, 2, 3]),
            row("fp16", 50.0, [1, 5, 3]),
            row("bf16", 25.0, [1, 2]),
            {"precision": "tf32", "measured": None},
        ]
        fill_vs_fp32(rows)
        got = [
            (r["measured"]["vs_fp32"]["tg"], r["measured"]["answer"]["differs_from_fp32_at"])
            for r in rows[:3]
        ]
        self.assertEqual(got, [(1.0, None), (2.0, 1), (4.0, 2)])

    def test_what_holds_a_row_back(self):
        from generate.parts import held_back_by

        parts = [
            {"class": "matmuls", "ms_per_token": 30.0},
            {"class": "elementwise", "ms_per_token": 10.0},
        ]
        # 100 MB at 10 GB/s: 10 ms; the matmuls take 30, over twice that.
        self.assertEqual(
            held_back_by(parts, 40.0, 100_000_000, 10.0),
            "matmuls (75% of the token): they read the weights at 33% of copy speed",
        )
        self.assertEqual(
            held_back_by(parts, 40.0, 100_000_000, 2.0), "element-wise (25% of the token)"
        )

    def test_a_pp_test_repeats_the_prompt_to_its_length(self):
        from generate.rows import pp_ids

        self.assertEqual(pp_ids([5, 6, 7], 7), [5, 6, 7, 5, 6, 7, 5])
        self.assertEqual(pp_ids([5, 6, 7], 2), [5, 6])

    def test_reverse_permute_undoes_llama_cpps_permute(self):
        import numpy as np

        from generate.gguffile import reverse_permute

        heads, d, cols = 3, 4, 2
        w = np.arange(heads * d * cols, dtype=np.float32).reshape(heads * d, cols)
        # convert_hf_to_gguf.py's LlamaModel.permute
        permuted = w.reshape(heads, 2, d // 2, cols).swapaxes(1, 2).reshape(w.shape)
        self.assertFalse((permuted == w).all())
        self.assertTrue((reverse_permute(permuted, heads) == w).all())


if __name__ == "__main__":
    unittest.main()
