"""The command line of pytorch/generate, as experiments/generate.rs: `twin` or `hf` (the
peer to run), `scaling` (the twin as experiments/scaling.rs measures a model: its --depth,
--pp-lengths, --batch and --bounds) or `reference` (the tests' fixture), then the Rust
program's flags where they apply, with its bounds and defaults (generate.setup's), and the Experiment common.runner
runs (which declares the shared flags and decides the exit codes: 0 every row ran, 1 the
run failed and wrote no file, 2 a refused command line, 3 the file was written but some
rows failed, 130 interrupted)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from common import runner
from common.cli import Parser, add_counts, bounded
from common.precisions import check_dtypes, parse_dtypes
from generate import dryrun, experiment, scaling
from generate.gguffile import DEFAULT_PROMPT
from generate.setup import CPU_PLAN, GPU_PLAN, config

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
MAX_TOKENS = 65536
# The generate body is schema 2.3's (src/schema/mod.rs SCHEMA_VERSION); scaling's, 2.10's.
SCHEMA_VERSION = "2.3"
SCALING_FLAGS = ["depth", "pp_lengths", "batch", "bounds"]


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


def sizes(most: int):
    """A comma-separated list of whole numbers in 0..=most (scaling's axes)."""
    one = bounded(0, most)

    def parse(text: str) -> list[int]:
        return [one(x.strip()) for x in text.split(",")]

    return parse


def add_flags(p: argparse.ArgumentParser) -> None:
    """generate's own flags, beside the runner's shared ones."""
    p.add_argument(
        "what",
        choices=["twin", "hf", "scaling", "reference"],
        help="twin: the eager PyTorch model; hf: transformers' own; scaling: the twin "
        "at context depths, prompt lengths and batches, as Candle's scaling (its runs: 5 "
        "timed and 1 warm-up on a GPU, 3 and 1 on the CPU); reference: write the fixture "
        "the tests share (--write FILE)",
    )
    add_counts(p, GPU_PLAN, CPU_PLAN, "test")
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
    p.add_argument("--write", type=Path, metavar="FILE", help="reference: the fixture to write")
    p.add_argument(
        "--depth",
        type=sizes(1 << 20),
        metavar="N,N",
        help="scaling: tokens in the KV cache before a point's tg and pp tests "
        "(default: 0,512,2048)",
    )
    p.add_argument(
        "--pp-lengths",
        type=sizes(1 << 20),
        metavar="N,N",
        help="scaling: prompt lengths of the prompt axis (default: 64,512,2048 on the CPU; "
        "512,2048,8192 on a GPU)",
    )
    p.add_argument(
        "--batch",
        type=sizes(4096),
        metavar="N,N",
        help="scaling: sequences decoding together (default: 1,2,4,8,16 on the CPU; "
        "1,4,16,64,256 on a GPU)",
    )
    p.add_argument(
        "--bounds",
        type=Path,
        metavar="FILE",
        help="scaling: Candle's scaling file of the same run, whose bandwidth ladder sets "
        "each point's memory bound (without it: one read measured here)",
    )


def check_args(p: Parser, args: argparse.Namespace) -> None:
    """--write is reference's, and reference's only."""
    if args.what == "reference" and args.write is None:
        p.error("reference: needs --write FILE (the fixture to write)")
    if args.what != "reference" and args.write is not None:
        p.error(f"--write: only reference writes a fixture; {args.what} writes --output")
    given = next((f for f in SCALING_FLAGS if getattr(args, f) is not None), None)
    if args.what != "scaling" and given:
        p.error(f"--{given.replace('_', '-')}: scaling's flag; {args.what} takes none")
    if args.what == "scaling" and args.prompt != DEFAULT_PROMPT:
        p.error("--prompt: scaling fills its caches with the default prompt, as Candle's")


class Generate(runner.Experiment):
    """The generate peers, as experiments/generate.rs's Experiment."""

    PROG = "pytorch/generate"
    ABOUT = (
        "candle-lab's generate with PyTorch: the same GGUF model per precision (its "
        "answer, pp and tg tokens/s, the bound) in the twin (eager PyTorch on the gguf "
        "package's weights) or in transformers; or the tests' fixture."
    )
    KIND = "generate"
    SCHEMA_VERSION = SCHEMA_VERSION
    DRY_RUN_READS = " and the model file"

    # The twin's own flags and checks, module functions (tested on their own).
    add_flags = staticmethod(add_flags)
    check_args = staticmethod(check_args)

    def kind(self, args):
        return "scaling" if args.what == "scaling" else self.KIND

    def schema_version(self, args):
        return scaling.SCHEMA_VERSION if args.what == "scaling" else self.SCHEMA_VERSION

    def inputs(self, args):
        return [("the model", experiment.model_path(args)), ("--bounds", args.bounds)]

    def side_files(self, args):
        return [args.write]  # reference's fixture (None for a peer): never the model

    def before_torch(self, args):
        # transformers' GGUF loader draws a tqdm bar over the file's tensors on every load
        # (tqdm itself, not its logging's): off unless the environment says otherwise.
        # tqdm reads this when it is first imported, which torch and transformers do later.
        os.environ.setdefault("TQDM_DISABLE", "1")

    def open(self, torch, args):
        return experiment.open_model(torch, args)

    def plan_lines(self, dry):
        if dry.args.what == "scaling":
            return scaling.plan_lines(dry)
        return dryrun.plan_lines(dry)

    def config(self, session):
        opened, args = session.state, session.args
        if args.what == "scaling":
            r = scaling.config(args, opened.model, opened.tok, session.on_gpu)
            check_dtypes(session.torch, r.cfg.precisions, session.on_gpu)
            return r
        cfg = config(args, opened.model, opened.tok, session.on_gpu)
        check_dtypes(session.torch, cfg.precisions, session.on_gpu)
        return cfg

    def fits(self, session, cfg, check_host):
        if session.args.what == "scaling":
            return scaling.fits(session, cfg, check_host)
        experiment.fits(session, cfg, check_host)

    def run(self, session, cfg):
        if session.args.what == "scaling":
            return scaling.run(session, cfg)
        return experiment.run(session, cfg)


TWIN = Generate()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return runner.parse_args(TWIN, argv)


def main(argv: list[str] | None = None) -> int:
    """Exit codes: see the module's docstring."""
    return runner.main(TWIN, argv)
