"""Tests of precisions.py: `--dtypes` names and aliases, and GemmMode's cuBLAS switches set
for one row and restored after (checked on the CPU through torch's own consistency check)."""

from __future__ import annotations

import unittest

from common import precisions
from common.testkit import torch_or_skip


class Names(unittest.TestCase):
    def test_dtype_names_and_aliases(self):
        names = [
            p.name for p in precisions.parse_dtypes("F32, bfloat16,fp16-reduced,f32,tf32,float64")
        ]
        self.assertEqual(names, ["fp32", "bf16", "fp16-reduced", "tf32", "fp64"])


class Modes(unittest.TestCase):
    def test_gemm_switches_are_set_for_one_row_then_restored(self):
        torch = torch_or_skip()
        cublas = torch.backends.cuda.matmul
        switches = precisions.gemm_switches(torch)
        self.assertIn("allow_tf32", switches)
        before = {k: getattr(cublas, k) for k in switches}
        # _get_cublas_allow_tf32 is Context::allowTF32CuBLAS, what every cuBLAS fp32 GEMM
        # asks: it raises when torch's two TF32 settings disagree, so this checks on the
        # CPU that a tf32 row on a GPU will not fail.
        with precisions.GemmMode(torch, precisions.PRECISIONS["tf32"]):
            self.assertTrue(torch._C._get_cublas_allow_tf32())
        with precisions.GemmMode(torch, precisions.PRECISIONS["fp32"]):
            self.assertFalse(torch._C._get_cublas_allow_tf32())
        with precisions.GemmMode(torch, precisions.PRECISIONS["fp16-reduced"]):
            if "allow_fp16_accumulation" in switches:
                self.assertTrue(cublas.allow_fp16_accumulation)
            self.assertFalse(torch._C._get_cublas_allow_tf32())
        self.assertEqual({k: getattr(cublas, k) for k in switches}, before)


if __name__ == "__main__":
    unittest.main()
