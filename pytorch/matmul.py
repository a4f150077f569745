#!/usr/bin/env python3
"""The PyTorch reference: candle-lab's `matmul` and `cpu_vs_gpu` measurements run with
PyTorch, written as result schema 2.0, so that `compare` can set Candle and PyTorch
side by side on the same machine. Same flags, defaults, timing model, memory and
accuracy rules as experiments/matmul.rs and experiments/cpu_vs_gpu.rs (their
library: src/bench/matmul.rs, src/clock/mod.rs, src/stats.rs); where PyTorch cannot do
what Candle does, it says so instead of writing a look-alike number.

This file is the entry point only; the program is in the modules beside it (flat files,
as the GPU bundle packs pytorch/*.py at depth 1): cli (flags, exit codes), dryrun (the
plan of --dry-run), experiments (the two measurements), rows (one row per precision),
timing (the clock), memory (does it fit), stats, formulas, precisions, peaks, devices,
environment, results (the JSON file), table (the terminal's), errors.

Run it through `just pytorch ...` (which finds or makes a Python with torch).
"""

import sys

from cli import main

if __name__ == "__main__":
    sys.exit(main())
