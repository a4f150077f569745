"""Each precision timed in turn with fp32 (A B A B ...), in one more pass after every row's
own sampling, as src/bench/square/beside.rs: a row's "x fp32" measured side by side, with
the 95% interval of the paired samples, so that what drifts between two rows' own
samplings (a neighbour's load, the clock's boost, heat) is not read as a speedup. The rows
themselves are sampled one after the other, so their medians' ratio holds that drift. A
pass holds two precisions' inputs at once (common/memory.py at_once_bytes counts both)."""

from __future__ import annotations

import sys

from common.precisions import PRECISIONS, GemmMode, torch_dtype
from common.rows import row_error
from common.stats import MIN_SAMPLES, bootstrap_ratio
from common.timing import Clock, Plan, rate_ms, samples_ms, time_source, timed_interleaved
from matmul.rows import place_inputs

FP32 = PRECISIONS["fp32"]
# The schema's Measured holds the field after the rates against the datasheet
# (src/schema/matmul.rs): the twin's rows keep its place.
AFTER = "pct_of_datasheet"


def plan(rows_plan: Plan) -> Plan:
    """The pass's plan: one warm-up round, then as many rounds as a row's own sampling
    (never under the interval's MIN_SAMPLES)."""
    return Plan(warmup=1, iters=max(MIN_SAMPLES, rows_plan.iters))


def fill(torch, device, rows_plan: Plan, rows: list[dict], inputs) -> None:
    """Adds `vs_fp32_side_by_side` to every measured row but fp32's, when fp32's row was
    measured. A pass that fails leaves its row without the field, saying why in one line on
    stderr: the row's own measurement stands."""
    if not any(r["precision"] == FP32.name and r["status"] == "ok" for r in rows):
        return
    for i, row in enumerate(rows):
        if row["precision"] == FP32.name or row["status"] != "ok":
            continue
        p = PRECISIONS[row["precision"]]
        failed = None
        try:
            side = pair(torch, device, plan(rows_plan), p, inputs)
        except Exception as e:
            failed = row_error(e)
        if failed is not None:
            # Out here the exception, and the pass's tensors its frames held, are gone.
            why = f"not timed beside fp32, its x fp32 stays apart ({failed})"
            print(f"{p.name}: {why}", file=sys.stderr)
            if device.type == "cuda":
                torch.cuda.empty_cache()
            continue
        rows[i] = placed(row, side)


def placed(row: dict, side: dict) -> dict:
    """`row` with `vs_fp32_side_by_side` where the schema's Measured has it."""
    out = {}
    for k, v in row.items():
        out[k] = v
        if k == AFTER:
            out["vs_fp32_side_by_side"] = side
    out.setdefault("vs_fp32_side_by_side", side)
    return out


def pair(torch, device, pass_plan: Plan, p, inputs) -> dict:
    """Precision `p` and fp32 timed in turn on the same inputs, each call under its own GEMM
    mode: fp32's switches it for its call and back, as Rust's does. The clock covers one
    matmul and the device's synchronization after it, as a row's own samples do
    (common/timing.py Clock.time_interleaved). The schema's SideBySide."""
    rounds = f"warmup {pass_plan.warmup}, iters {pass_plan.iters}"
    print(f"{p.name} beside fp32: {rounds}, in turn", file=sys.stderr)
    a, b = place_inputs(inputs, torch_dtype(torch, p), device)
    fa, fb = place_inputs(inputs, torch_dtype(torch, FP32), device)

    fp32_mode = GemmMode(torch, FP32)  # made once: only entering it is in fp32's samples

    def fp32():
        with fp32_mode:
            return fa @ fb

    with GemmMode(torch, p):
        row, base = timed_interleaved(Clock(torch, device), pass_plan, [lambda: a @ b, fp32])
    return {
        "speedup": rate_ms(base) / rate_ms(row),
        "interval": bootstrap_ratio(samples_ms(row), samples_ms(base)),
        "time_source": time_source(row),
        "row": row,
        "fp32": base,
    }
