"""The block experiment's run, as experiments/block.rs's needs() and run(): what must fit
(the block's weights and activations), then the weights loaded, every phase and precision
run (block.run), the tables' notes, and with --save-output the checked outputs as the side
file. common.runner does the rest (device, checks, the file, the exit code); this module
imports nothing of block.cli, so that the two are no circle."""

from __future__ import annotations

import sys

from block.run import needs, run_block
from block.table import show
from block.weights import load, to_bytes
from common.memory import check_need
from common.rows import failed_rows
from common.runner import Report, Session


def fits(session: Session, check_host: bool) -> None:
    """Refuses a block the host or the device cannot hold, before its weights load."""
    args = session.args
    s = args.shape
    host_bytes, device_bytes = needs(s)
    what = (
        f"the block of {args.weights} (hidden {s.hidden}, kv_heads {s.kv_heads}, mlp {s.mlp}, "
        f"seq {s.seq}, batch {s.batch})"
    )
    check_need(session.torch, session.device, what, host_bytes, device_bytes, check_host)


def run(session: Session, cfg) -> Report:
    """Loads the weights and runs every row: the body, its failed rows, its tables and,
    with --save-output, the outputs' safetensors bytes."""
    torch, args, s = session.torch, session.args, session.args.shape
    print(
        f"block: batch {s.batch}, seq {s.seq}, hidden {s.hidden}, {s.heads} heads "
        f"({s.kv_heads} key/value), MLP {s.mlp}; warmup {cfg.plan.warmup}, iters "
        f"{cfg.plan.iters}, on {session.info['label']}",
        file=sys.stderr,
    )
    host = load(torch, args.weights)
    body, rows, outputs = run_block(torch, session.device, host, s, cfg)
    notes = []
    if not any(f["op"] == "rope" for f in body["fused"]) and "prefill" in cfg.phases:
        notes.append(
            "no rope row among the fused: eager PyTorch has no rotary kernel, the block's "
            "rope is composed (x * cos + rotate_half(x) * sin)"
        )
    side = {}
    if args.save_output is not None:
        side[args.save_output] = to_bytes(torch, outputs)
    failed, total = failed_rows(rows)
    return Report(
        body,
        failed,
        total,
        show=lambda screen, _env: show(body, session.info, notes, file=screen),
        side=side,
    )
