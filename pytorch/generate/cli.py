"""The command line of pytorch/generate, as experiments/generate.rs: `twin` or `hf` (the
peer to run) or `reference` (the tests' fixture), then the Rust program's flags where they
apply, with its bounds and defaults; each refusal one `error:` line on stderr, and
common.cli's exit codes (0 every row ran, 1 the run failed and wrote no file, 2 a refused
command line, 3 the file was written but some rows failed, 130 interrupted)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from common.cli import Parser, add_device_and_counts, bounded, finish, import_torch
from common.precisions import parse_dtypes
from common.timing import Plan
from generate.gguffile import DEFAULT_PROMPT

# The float rows (Candle's float path); the quantized rows have no peer here.
PEER_DTYPES = ["fp32", "tf32", "fp16", "bf16"]
QUANTIZED = [
    "stored",
    "q4_0",
    "q4_1",
    "q5_0",
    "q5_1",
    "q8_0",
    "q2_k",
    "q3_k",
    "q4_k",
    "q5_k",
    "q6_k",
]
# experiments/generate.rs's defaults: 10 timed and 2 warm-up runs on a GPU, 3 and 1 on
# the CPU; 128 new tokens and pp512 on a GPU (llama-bench's tg128, pp512), 32 and 64 on
# the CPU.
GPU_PLAN, CPU_PLAN = Plan(warmup=2, iters=10), Plan(warmup=1, iters=3)
GPU_TOKENS, CPU_TOKENS = (128, 512), (32, 64)
MAX_TOKENS = 65536


def peer_dtypes(text: str):
    """`--dtypes` as Candle's names: the float ones; a quantized one is refused."""
    for raw in text.split(","):
        if raw.strip().lower() in QUANTIZED:
            raise argparse.ArgumentTypeError(
                f"{raw.strip()}: the PyTorch peers run the float rows (fp32, tf32 on a GPU, "
                "fp16, bf16); Candle's quantized rows have no peer here"
            )
    precisions = parse_dtypes(text)
    other = next((p for p in precisions if p.name not in PEER_DTYPES), None)
    if other is not None:
        raise argparse.ArgumentTypeError(
            f"{other.name}: generate runs fp32, tf32 (on a GPU), fp16 and bf16"
        )
    return precisions


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = Parser(
        prog="pytorch/generate",
        allow_abbrev=False,
        description="candle-lab's generate with PyTorch: the same GGUF model per precision "
        "(its answer, pp and tg tokens/s, the bound) in the twin (eager PyTorch on the "
        "gguf package's weights) or in transformers; or the tests' fixture.",
    )
    p.add_argument(
        "what",
        choices=["twin", "hf", "reference"],
        help="twin: the eager PyTorch model; hf: transformers' own; reference: "
        "write the fixture the tests share (--write FILE)",
    )
    add_device_and_counts(p, GPU_PLAN, CPU_PLAN, "test")
    p.add_argument(
        "--model",
        type=Path,
        metavar="FILE",
        help="a Llama-architecture GGUF file (default: the one `just model` fetches)",
    )
    p.add_argument(
        "--dtypes",
        type=peer_dtypes,
        default=None,
        help="fp32, tf32 (CUDA: allow_tf32), fp16, bf16 (default: fp32, tf32 on a "
        "GPU, fp16, bf16)",
    )
    p.add_argument(
        "--prompt",
        default=DEFAULT_PROMPT,
        metavar="TEXT",
        help="the user's message, formatted with the file's chat template",
    )
    p.add_argument(
        "--tokens",
        type=bounded(1, MAX_TOKENS),
        default=None,
        metavar="N",
        help="new tokens of the answer and of a tg test (default: 128 on a GPU, 32 on the CPU)",
    )
    p.add_argument(
        "--pp-tokens",
        type=bounded(1, MAX_TOKENS),
        default=None,
        metavar="N",
        help="tokens of a pp test (default: 512 on a GPU, 64 on the CPU)",
    )
    p.add_argument(
        "--seed",
        type=bounded(0, (1 << 64) - 1),
        default=42,
        help="seed of the parts' random inputs (default 42)",
    )
    p.add_argument(
        "--output",
        type=Path,
        metavar="FILE",
        help="write the JSON result to FILE, or to standard output for - (the "
        "tables then go to stderr)",
    )
    p.add_argument("--write", type=Path, metavar="FILE", help="reference: the fixture to write")
    p.add_argument(
        "--skip-host-memory-check",
        action="store_true",
        help="do not check host memory before allocating (for machines whose "
        "memory grows on demand)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="check every flag and the model file as a run would, import torch, "
        "print the plan and exit: no device is opened, no file is written",
    )
    args = p.parse_args(argv)
    if args.what == "reference" and args.write is None:
        p.error("reference: needs --write FILE (the fixture to write)")
    if args.what != "reference" and args.write is not None:
        p.error(f"--write: only reference writes a fixture; {args.what} writes --output")
    return args


def main(argv: list[str] | None = None) -> int:
    """Exit codes: see the module's docstring."""
    args = parse_args(argv)
    # transformers' GGUF loader draws a tqdm bar over the file's tensors on every load
    # (tqdm itself, not its logging's): off unless the environment says otherwise. tqdm
    # reads this when it is first imported, which torch and transformers do after here.
    os.environ.setdefault("TQDM_DISABLE", "1")

    def run() -> tuple[list[str], int]:
        torch = import_torch()
        from generate.experiment import experiment

        return experiment(torch, args)

    return finish(run)
