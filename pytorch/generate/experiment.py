"""The generate peers' run, as experiments/generate.rs and src/bench/generate/measure.rs
run Candle's: the model file checked before the device opens (or, for `reference`, the
tests' fixture written instead of a run), what must fit (the model's weights, its cache and
a pass's scores); then a copy's bandwidth (the bound's), every precision's row (each row
stands alone: an error is that row's), the speedups over fp32, and the tables, with
transformers' version in the environment for the hf peer. common.runner does the rest
(device, checks, the file in schema 2.3's `generate` body, the exit code); this module
imports nothing of generate.cli, so that the two are no circle."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from functools import partial

from common.memory import check_need
from common.precisions import GemmMode, torch_dtype
from common.rows import failed_rows, row_error
from common.runner import DONE, Report, Session
from common.timing import Clock
from generate import gguffile, hf, reference
from generate.formulas import copy_bytes, float_bytes
from generate.measure import copy_ceiling, fill_vs_fp32, measure
from generate.rows import hf_row, twin_row
from generate.setup import Config, needs
from generate.table import show

HF_ROTARY = (
    "GGUF's Llama Q and K rows are permuted by llama.cpp's converter to rotate interleaved "
    "pairs (2i, 2i+1): transformers' GGUF loader undoes it (reverse_permute_weights) and its "
    "Llama rotates halves (i, i+d/2)"
)


def model_path(args) -> str:
    """--model, or where `just model` puts the model."""
    return str(args.model or gguffile.default_model_path())


@dataclass(frozen=True)
class Opened:
    """The model file, checked, and its tokenizer: what the dry run and the run read."""

    path: str
    model: object  # gguffile.Model
    tok: object


def open_model(torch, args):
    """The model file opened and checked (its tensors are not dequantized) with its
    tokenizer; for `reference`, the fixture written instead (runner.DONE)."""
    path = model_path(args)
    if args.what == "reference":
        gguffile.open_model(path, args.model is None)
        reference.write(path, str(args.write), torch)
        print(f"wrote {args.write}", file=sys.stderr)
        return DONE
    model = gguffile.open_model(path, args.model is None)
    return Opened(path, model, hf.load_tokenizer(path))


def fits(session: Session, cfg: Config, check_host: bool) -> None:
    """Refuses a model the host or the device cannot hold, before its weights load."""
    opened = session.state
    host, on_device = needs(opened.model.dims, cfg)
    what = f"the model {os.path.basename(opened.path)} ({opened.model.dims.params()} parameters)"
    check_need(session.torch, session.device, what, host, on_device, check_host)


def run(session: Session, cfg: Config) -> Report:
    """Every row of the peer --what names: the body, its failed rows and its tables."""
    torch, peer = session.torch, session.args.what
    body = measure_rows(torch, peer, session.device, session.state.model, cfg)
    extra = {}
    if peer == "hf":
        import transformers

        extra = {
            "framework": "transformers",
            "framework_version": f"{transformers.__version__} (torch {torch.__version__})",
        }
    return Report(
        body,
        *failed_rows(body["rows"]),
        show=lambda screen, env: show(body, session.info, env, file=screen),
        environment=extra,
    )


def measure_rows(torch, peer: str, device, model, cfg: Config) -> dict:
    """Every row on `device`: the schema's GenerateResults."""
    clock, d = Clock(torch, device), cfg.dims
    per_token = [float_bytes(d, p.element_bytes)[1] for p in cfg.precisions]
    nbytes = copy_bytes(max(per_token))
    print(f"generate: a copy of {nbytes} bytes (the bound's bandwidth)", file=sys.stderr)
    _, copy_gb = copy_ceiling(torch, clock, device, nbytes, cfg.plan)
    if peer == "twin":  # the file's weights in f32, once; each row casts its own copy
        load = partial(twin_row, torch, cfg, gguffile.weights(model))
    else:
        load = partial(hf_row, torch, cfg, model.path)
    rows = []
    for p in cfg.precisions:
        dtype = torch_dtype(torch, p)
        print(f"generate {p.name}: loading", file=sys.stderr)
        row = {"precision": p.name, "path": "float", "status": "ok", "error": None}
        try:
            with GemmMode(torch, p), torch.inference_mode():
                row_of = partial(load, dtype, device)
                row["measured"] = measure(torch, clock, device, cfg, p.name, row_of, dtype, copy_gb)
        except Exception as e:  # the row's error; the other rows run
            row |= {"status": "error", "error": row_error(e), "measured": None}
            print(
                f"generate {p.name}: row failed, recorded with its error ({row['error']})",
                file=sys.stderr,
            )
        rows.append(row)
        if device.type == "cuda":
            torch.cuda.empty_cache()
    fill_vs_fp32(rows)
    notes = run_notes(device, peer)
    info = dict(model.info, rotary_layout=gguffile.TWIN_ROTARY if peer == "twin" else HF_ROTARY)
    return {
        "model": info,
        "prompt": cfg.prompt,
        "pp_tokens": cfg.pp_tokens,
        "tg_tokens": cfg.tg_tokens,
        "warmup": cfg.plan.warmup,
        "iters": cfg.plan.iters,
        "seed": cfg.seed,
        "copy_gb_per_s": copy_gb,
        "copy_bytes": nbytes,
        "rows": rows,
        "notes": notes,
    }


def run_notes(device, peer: str) -> list[str]:
    """What the body's notes say of how the rows were measured on `device` by `peer`."""
    notes = [
        "copy: "
        + (
            "dst.copy_(src) on the device (a device-to-device memcpy, as Candle's " "cuMemcpyDtoD)"
            if device.type == "cuda"
            else "numpy's copyto, one thread's memcpy (as Candle's copy_from_slice)"
        ),
    ]
    if device.type != "cuda":
        notes.append("peak memory: not measured on the CPU (PyTorch keeps no CPU allocation peak)")
    else:
        notes.append("kernel launches per token: not counted")
    if peer == "hf":
        notes.append(
            "where a token's time goes: not timed for transformers (its model is its own code; "
            "the twin times the op classes); its matmuls alone are its own nn.Linear modules, "
            "and tg is generate() from one token (min_new_tokens = max_new_tokens = --tokens)"
        )
    return notes
