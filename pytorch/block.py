#!/usr/bin/env python3
"""The PyTorch twin of candle-lab's `block` experiment (experiments/block.rs): one decoder
block (RMSNorm, Q/K/V/O projections, rotary embedding, causal attention, residual adds,
RMSNorm, a SwiGLU MLP) in plain eager PyTorch, on the same weights and inputs Candle's
`block --save-weights FILE` wrote (`--weights FILE`, safetensors), per precision, in
prefill and decode: end to end, each op class timed alone, the speedup over fp32 beside
the matmul-only speedup and Amdahl's prediction, decode's bandwidth against a device
copy, PyTorch's single-kernel RMSNorm and softmax against the composed math, and the
output against an f64 run. Written as result schema 2.2's `block` body, so `compare`
sets Candle and PyTorch side by side per phase and precision.

This file is the entry point only; the program is in flat modules beside it: blockcli
(flags, exit codes), blockdryrun (the plan of --dry-run), blockexperiment (the run: checks,
device, files, tables), blockrun (rows per phase and precision), blockmodel (the block),
blockparts (op classes, fused against composed), blockformulas, blockweights (the
safetensors file), blocktable; and the matmul reference's timing, stats, memory, devices,
environment, precisions, results, table and errors.

Run it through `just pytorch-block ...` or `"$(scripts/pytorch-env.sh)" pytorch/block.py`.
"""

import sys

from blockcli import main

if __name__ == "__main__":
    sys.exit(main())
