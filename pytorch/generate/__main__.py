#!/usr/bin/env python3
"""The PyTorch peers of candle-lab's `generate` (experiments/generate.rs), on the same GGUF
file, written as result schema 2.3's `generate` body so that `compare` sets their pp and
tg rows beside Candle's per precision:

  twin  [flags]          the model in eager PyTorch on the weights the gguf package
                         dequantizes (Q and K unpermuted, as Candle's float path): its
                         answer, pp and tg tokens/s as Candle measures them, the bound, the
                         matmuls alone, where a token's time goes
  hf    [flags]          transformers' own GGUF loading and model: its greedy answer
                         (generate()), pp (one forward of --pp-tokens), tg (generate() from
                         one token), its nn.Linear modules alone, the bound
  scaling [flags]        the twin's model as Candle's `scaling` measures one (schema 2.10's
                         `scaling` body): tg and pp at each --depth, pp at each
                         --pp-lengths, --batch sequences in lockstep, each point against
                         min(memory, compute) (--bounds FILE: Candle's scaling file's ladder)
  reference --write FILE the fixture the tests share (transformers' ids and answer)

The entry point only; the program is this package's modules: cli (its flags: the
Experiment common.runner runs), setup (the checked config), experiment (the model opened,
what must fit, the rows), dryrun, measure (one row: the tests), scaling (the scaling
subcommand: its config, points, bounds and body), rows (what each peer runs), twin (the model), parts (the op classes), formulas, gguffile (the
file), hf (transformers), table, reference; and the twins' shared pieces in
pytorch/common/.

Run it as `just pytorch-generate ...` (the twin), `just generate-peers` (Candle, the twin
and transformers, then compare), `just scaling-peers` (Candle's scaling and the twin's,
then compare), or `"$(scripts/pytorch-env.sh)" pytorch/generate ...`.
"""

import os
import sys

# Run as `python pytorch/generate`, Python puts this folder first on the path; the twins'
# packages (generate, common) are imported from the folder above it.
sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from generate.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
