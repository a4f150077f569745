#!/usr/bin/env python3
"""The PyTorch reference: candle-lab's `matmul` and `cpu_vs_gpu` measurements run with
PyTorch, written as result schema 2.6, so that `compare` can set Candle and PyTorch
side by side on the same machine. Same flags, defaults, timing model, memory and
accuracy rules as experiments/matmul.rs and experiments/cpu_vs_gpu.rs (their
library: src/bench/square/mod.rs, src/clock/mod.rs, src/stats.rs); where PyTorch cannot do
what Candle does, it says so instead of writing a look-alike number.

The entry point only; the program is this package's modules: cli (its flags: the
Experiment common.runner runs), dryrun (the plan of --dry-run), experiments (the two
measurements), rows (one row per
precision); and the twins' shared pieces in pytorch/common/ (timing, memory, stats,
formulas, precisions, peaks, devices, environment, results, table, errors).

Run it as `just pytorch ...` (which finds or makes a Python with torch), or
`"$(scripts/pytorch-env.sh)" pytorch/matmul ...`.
"""

import os
import sys

# Run as `python pytorch/matmul`, Python puts this folder first on the path; the twins'
# packages (matmul, common) are imported from the folder above it.
sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from matmul.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
