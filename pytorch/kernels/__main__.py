#!/usr/bin/env python3
"""The PyTorch twin of candle-lab's `kernels` experiment (experiments/kernels.rs): per op
(RMSNorm, RMSNorm with its weight, softmax, SwiGLU's gate, copy, add), shape (the block's,
SmolLM2-135M's, a large memory-bound one) and precision, PyTorch's op and the same math
from primitive ops, each against a copy of the same bytes measured in the same run, with
accuracy against f64. Written as result schema 2.3's `kernels` body, with PyTorch's op in
the place of the suite's kernel, so `compare` sets the two files side by side per op,
case and precision (`just vs-pytorch-kernels`).

The entry point only; the program is this package's cli (flags, the run, exit codes)
and run (cases, ops, rows), with the twins' shared pieces in pytorch/common/ (timing, stats, memory,
devices, environment, precisions, results and errors.

Run it through `just pytorch-kernels ...` or `"$(scripts/pytorch-env.sh)" pytorch/kernels`.
"""

import os
import sys

# Run as `python pytorch/kernels`, Python puts this folder first on the path; the twins'
# packages (kernels, common, block) are imported from the folder above it.
sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from kernels.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
