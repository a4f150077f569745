"""The generate peers' run, as experiments/generate.rs and src/bench/generate/measure.rs
run Candle's: the model file checked and its prompt formatted before the device opens,
the run's settings for that device, what cannot run refused (tf32 on the CPU, a prompt
past the context, a model that cannot fit, an output that cannot be written) before
anything big is allocated; then a copy's bandwidth (the bound's), every precision's row
(each row stands alone: an error is that row's), the speedups over fp32, the result file
(schema 2.3's `generate` body, so `compare` pairs its pp and tg rows with Candle's), and
the tables. Returns the failed rows and the row count (cli.finish's exit code)."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Callable

from common.cli import plan_of
from common.devices import select_device
from common.environment import environment
from common.errors import Failure
from common.memory import check_need
from common.precisions import GemmMode, PRECISIONS, check_dtypes, torch_dtype
from common.results import (
    check_writable,
    command_line,
    envelope,
    json_text,
    refuse_overwriting_inputs,
    write_json_atomic,
)
from common.rows import failed_rows, row_error
from common.timing import Clock, Plan
from generate import gguffile, hf
from generate.cli import CPU_PLAN, CPU_TOKENS, GPU_PLAN, GPU_TOKENS
from generate.formulas import copy_bytes, float_bytes
from generate.measure import copy_ceiling, fill_vs_fp32, measure

# The generate body is schema 2.3's (src/schema/mod.rs SCHEMA_VERSION).
SCHEMA_VERSION = "2.3"
HF_ROTARY = (
    "GGUF's Llama Q and K rows are permuted by llama.cpp's converter to rotate interleaved "
    "pairs (2i, 2i+1): transformers' GGUF loader undoes it (reverse_permute_weights) and its "
    "Llama rotates halves (i, i+d/2)"
)


@dataclass
class Config:
    """What a run asks for, checked (setup.rs Config)."""

    dims: object
    plan: Plan
    pp_tokens: int
    tg_tokens: int
    seed: int
    precisions: list
    prompt: dict
    prompt_ids: list[int]
    eos: list[int]
    start: int
    decode: Callable[[list[int]], str]


def config(args, model, tok, on_gpu: bool | None) -> Config:
    """The settings for a device kind (None: not known yet, the CPU's stand in), the
    prompt formatted and its length checked against the context as setup.rs checks it."""
    gpu = on_gpu is True
    default = GPU_PLAN if gpu else CPU_PLAN
    tg, pp = (args.tokens, args.pp_tokens)
    tg = tg or (GPU_TOKENS if gpu else CPU_TOKENS)[0]
    pp = pp or (GPU_TOKENS if gpu else CPU_TOKENS)[1]
    names = ["fp32", "tf32", "fp16", "bf16"] if gpu else ["fp32", "fp16", "bf16"]
    formatted, ids = hf.chat_ids(tok, args.prompt)
    d = model.dims
    if not ids:
        raise Failure("the prompt gives no tokens")
    if len(ids) + tg > d.context:
        raise Failure(
            f"the prompt is {len(ids)} tokens and --tokens {tg}: {len(ids) + tg} positions, "
            f"longer than the model's context of {d.context}"
        )
    for flag, n in [("--pp-tokens", pp), ("--tokens", tg)]:
        if n > d.context:
            raise Failure(f"{flag} {n}: longer than the model's context of {d.context}")
    return Config(
        dims=d,
        plan=plan_of(args, default),
        pp_tokens=pp,
        tg_tokens=tg,
        seed=args.seed,
        precisions=args.dtypes or [PRECISIONS[n] for n in names],
        prompt={"user": args.prompt, "formatted": formatted, "token_ids": ids},
        prompt_ids=ids,
        eos=model.eos,
        start=model.bos if model.bos is not None else ids[0],
        decode=lambda t: tok.decode(
            t, skip_special_tokens=False, clean_up_tokenization_spaces=False
        ),
    )


def needs(d, cfg: Config) -> tuple[int, int]:
    """(host, device) bytes, as generate's needs(): on the host the file's weights in f32
    (the twin's dequantized copy; transformers' state dict while it loads), on the device
    the widest row's weights, its cache and a pass's attention scores."""
    widest = max(p.element_bytes for p in cfg.precisions)
    positions = max(cfg.pp_tokens, len(cfg.prompt_ids) + cfg.tg_tokens)
    cache = 2 * d.layers * positions * d.kv_width * 4
    scores = d.heads * positions * positions * 4 * 3
    return d.params() * 4, d.params() * widest + cache + scores


def to_stdout(output: Path | None) -> bool:
    return output is not None and str(output) == "-"


def experiment(torch, args) -> tuple[list[str], int]:
    path = str(args.model or gguffile.default_model_path())
    refuse_overwriting_inputs([args.output, getattr(args, "write", None)], [("the model", path)])
    if args.what == "reference":
        from generate import reference

        gguffile.open_model(path, args.model is None)
        reference.write(path, str(args.write), torch)
        print(f"wrote {args.write}", file=sys.stderr)
        return [], 0
    model = gguffile.open_model(path, args.model is None)
    tok = hf.load_tokenizer(path)
    if args.dry_run:
        from generate.dryrun import plan_lines

        print("\n".join(plan_lines(torch, args, model, tok, config)))
        return [], 0
    device, info = select_device(torch, args.device)
    on_gpu = device.type == "cuda"
    cfg = config(args, model, tok, on_gpu)
    check_dtypes(torch, cfg.precisions, on_gpu)
    host, on_device = needs(model.dims, cfg)
    what = f"the model {os.path.basename(path)} ({model.dims.params()} parameters)"
    check_need(torch, device, what, host, on_device, not args.skip_host_memory_check)
    if args.output is not None and not to_stdout(args.output):
        check_writable(args.output)
    body = run(torch, args.what, device, model, cfg)
    env = environment(torch)
    if args.what == "hf":
        import transformers

        env |= {
            "framework": "transformers",
            "framework_version": f"{transformers.__version__} (torch {torch.__version__})",
        }
    screen = sys.stderr if to_stdout(args.output) else sys.stdout
    if args.output is not None:
        result = envelope("generate", command_line(), env, info, body, SCHEMA_VERSION)
        if to_stdout(args.output):
            sys.stdout.write(json_text(result))
            sys.stdout.flush()
        else:
            write_json_atomic(args.output, result)
            print(f"wrote {args.output}", file=sys.stderr)
    from generate.table import show

    show(body, info, env, file=screen)
    return failed_rows(body["rows"])


def run(torch, peer: str, device, model, cfg: Config) -> dict:
    """Every row on `device`: the schema's GenerateResults."""
    from generate.rows import hf_row, twin_row

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
