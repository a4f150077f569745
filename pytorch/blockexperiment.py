"""The block experiment's run, as experiments/block.rs run(): open the device, settle the
run's settings for it, refuse what cannot run (a cuBLAS mode on the CPU, a block that
cannot fit, an output that cannot be written) before anything big is allocated, load
the weights, run (blockrun), write the result (and, with --save-output, the checked
outputs), and print the tables. Returns the failed rows and the row count."""

from __future__ import annotations

import sys
from pathlib import Path

from blockrun import needs, run_block
from blocktable import show
from blockweights import load, to_bytes
from devices import select_device
from environment import environment
from experiments import check_dtypes
from memory import check_need
from results import (
    check_writable,
    command_line,
    envelope,
    json_text,
    write_bytes_atomic,
    write_json_atomic,
)
from rows import failed_rows

# The block's body is schema 2.3's (src/schema/mod.rs SCHEMA_VERSION; 2.3 added kv_heads,
# time_source, cache_bytes and each row's copy_bytes and copy_ceiling_gb_per_s).
BLOCK_SCHEMA_VERSION = "2.3"


def to_stdout(output: Path | None) -> bool:
    return output is not None and str(output) == "-"


def experiment_block(torch, args, config) -> tuple[list[str], int]:
    device, info = select_device(torch, args.device)
    on_gpu = device.type == "cuda"
    cfg = config(args, on_gpu)
    check_dtypes(torch, cfg.precisions, on_gpu)
    s = args.shape
    host_bytes, device_bytes = needs(s)
    what = (
        f"the block of {args.weights} (hidden {s.hidden}, kv_heads {s.kv_heads}, mlp {s.mlp}, "
        f"seq {s.seq}, batch {s.batch})"
    )
    check_need(torch, device, what, host_bytes, device_bytes, not args.skip_host_memory_check)
    for path in [args.output, args.save_output]:
        if path is not None and not to_stdout(path):
            check_writable(path)
    print(
        f"block: batch {s.batch}, seq {s.seq}, hidden {s.hidden}, {s.heads} heads "
        f"({s.kv_heads} key/value), MLP {s.mlp}; warmup {cfg.plan.warmup}, iters "
        f"{cfg.plan.iters}, on {info['label']}",
        file=sys.stderr,
    )
    host = load(torch, args.weights)
    body, rows, outputs = run_block(torch, device, host, s, cfg)

    screen = sys.stderr if to_stdout(args.output) else sys.stdout
    if args.output is not None:
        result = envelope(
            "block", command_line(), environment(torch), info, body, BLOCK_SCHEMA_VERSION
        )
        if to_stdout(args.output):
            sys.stdout.write(json_text(result))
            sys.stdout.flush()
        else:
            write_json_atomic(args.output, result)
            print(f"wrote {args.output}", file=sys.stderr)
    if args.save_output is not None:
        write_bytes_atomic(args.save_output, to_bytes(torch, outputs))
        print(f"wrote {args.save_output}", file=sys.stderr)
    notes = []
    if not any(f["op"] == "rope" for f in body["fused"]) and "prefill" in cfg.phases:
        notes.append(
            "no rope row among the fused: eager PyTorch has no rotary kernel, the block's "
            "rope is composed (x * cos + rotate_half(x) * sin)"
        )
    show(body, info, notes, file=screen)
    return failed_rows(rows)
