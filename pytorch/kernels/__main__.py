#!/usr/bin/env python3
"""The PyTorch twin of candle-lab's `kernels` experiment (experiments/kernels.rs): per op
(RMSNorm, RMSNorm with its weight, softmax, SwiGLU's gate, copy, add), shape (the block's,
SmolLM2-135M's, one past the caches) and precision, PyTorch's op and the same math from
primitive ops, on Candle's pool's thread count with OpenMP's wait policy set and stated,
timed K calls a sample with the clock's cost subtracted, each against Candle's bandwidth
ladder bound for the row (--bounds, Candle's file of this machine) or, without it, a copy
of the same bytes labelled as not the ladder, with accuracy against f64. Written as the
result schema's `kernels` body, with PyTorch's op in the place of the suite's kernel, so
`compare` sets the two files side by side per op, case and precision (`just
vs-pytorch-kernels`).

The entry point only; the program is this package's cli (its flags: the Experiment
common.runner runs), setup (the plan and the pairing), dryrun, experiment (what must fit,
the run), ops (the ops and their references), run (cases, rows), bounds (--bounds' file) and
table, with the twins' shared pieces in pytorch/common/ (timing, threads, stats, memory,
devices, environment, precisions, results and errors).

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
