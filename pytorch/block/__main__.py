#!/usr/bin/env python3
"""The PyTorch twin of candle-lab's `block` experiment (experiments/block.rs): one decoder
block (RMSNorm, Q/K/V/O projections, rotary embedding, causal attention with grouped
key/value heads, residual adds, RMSNorm, a SwiGLU MLP) in plain eager PyTorch, on the same
weights and inputs Candle's `block --save-weights FILE` wrote (`--weights FILE`,
safetensors), per precision, in prefill and decode: end to end, each op class timed alone,
the speedup over fp32 beside the matmul-only speedup and Amdahl's prediction, decode's
bandwidth against a copy of the same footprint, PyTorch's single-kernel RMSNorm and softmax
against the composed math, and the output against an f64 run. Written as result schema
2.3's `block` body, so `compare` sets Candle and PyTorch side by side per phase and
precision.

The entry point only; the program is this package's modules: cli (its flags, checks and
config: the Experiment common.runner runs), dryrun (the plan of --dry-run), experiment
(what must fit, the run, its tables), run (rows per phase and precision), model (the
block), parts (op classes, fused against composed), formulas, weights (the safetensors
file), table; and the twins' shared pieces in pytorch/common/.

Run it as `just pytorch-block ...`, or `"$(scripts/pytorch-env.sh)" pytorch/block ...`.
"""

import os
import sys

# Run as `python pytorch/block`, Python puts this folder first on the path; the twins'
# packages (block, common) are imported from the folder above it.
sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from block.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
