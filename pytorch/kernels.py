#!/usr/bin/env python3
"""The PyTorch twin of candle-lab's `kernels` experiment (experiments/kernels.rs): per op
(RMSNorm, RMSNorm with its weight, softmax, SwiGLU's gate, copy, add), shape (the block's,
SmolLM2-135M's, a large memory-bound one) and precision, PyTorch's op and the same math
from primitive ops, each against a copy of the same bytes measured in the same run, with
accuracy against f64. Written as result schema 2.3's `kernels` body, with PyTorch's op in
the place of the suite's kernel, so `compare` sets the two files side by side per op,
case and precision (`just vs-pytorch-kernels`).

This file is the entry point only; the program is kernelscli (flags, the run, exit codes)
and kernelsrun (cases, ops, rows), with the matmul reference's timing, stats, memory,
devices, environment, precisions, results and errors.

Run it through `just pytorch-kernels ...` or `"$(scripts/pytorch-env.sh)" pytorch/kernels.py`.
"""

import sys

from kernelscli import main

if __name__ == "__main__":
    sys.exit(main())
