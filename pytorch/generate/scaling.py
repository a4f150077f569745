"""`pytorch/generate scaling`: the twin's eager model (generate.twin) measured as Candle's
`scaling` measures one (src/bench/scaling/points.rs), written as schema 2.10's `scaling`
body so that `compare` pairs each of its points with Candle's. Per precision, on three
axes: after each --depth tokens in the cache (filled untimed by the prompt repeated to the
depth), tg of --tokens greedy steps from the start token and pp of --pp-tokens ids; pp of
each --pp-lengths from an empty cache; and for each --batch B, B made-up prompts of
--pp-tokens ids filled untimed, then --tokens lockstep greedy steps of all B. The twin's
cache is written at positions, so a fill is made once and every sample runs from it, as
the suite's decoder rewinds its own. Each point is held against min(memory, compute): the
bytes a step reads (the weights once, the KV cache it attends to) at a read's bandwidth
(Candle's ladder from --bounds, picked as Bounds::tg picks it; else one large read
measured here), and its FLOPs (src/model/cost.rs's, generate.formulas) at a torch matmul's
peak at the row's precision measured in this run. And the two checks: each sequence of the
largest batch gets the greedy tokens it gets alone; the token after the deepest cache is
the one a pass over the whole context gives."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from common.cli import plan_of
from common.errors import Failure
from common.formulas import MIB
from common.memory import check_need, host_memory
from common.precisions import GemmMode, check_dtypes, torch_dtype
from common.rows import baseline, failed_rows, row_error
from common.runner import Report, Session
from common.table import print_table
from common.timing import Clock, Plan, rate_ms, samples_ms, timed
from generate import gguffile, setup
from generate.formulas import float_bytes, flops_after, kv_bytes_per_token, kv_read_bytes
from generate.rows import pp_ids
from generate.twin import Twin

SCHEMA_VERSION = "2.10"  # src/schema/mod.rs SCHEMA_VERSION: scaling exists from 2.10
# experiments/scaling.rs's defaults: 5 timed and 1 warm-up on a GPU, 3 and 1 on the CPU;
# its axes'.
GPU_PLAN, CPU_PLAN = Plan(warmup=1, iters=5), Plan(warmup=1, iters=3)
DEPTHS = [0, 512, 2048]
PP_LENGTHS = {False: [64, 512, 2048], True: [512, 2048, 8192]}
BATCHES = {False: [1, 2, 4, 8, 16], True: [1, 4, 16, 64, 256]}
# src/bench/ladder MIN_MEMORY_FOOTPRINT: memory's footprint is 4x the last cache, at least.
MIN_MEMORY_FOOTPRINT = 256 << 20
# What Bounds::gemm_peak times: 1 warm-up, 5 runs, the fastest read (a peak is what the
# product did do).
PEAK_PLAN = Plan(warmup=1, iters=5)


@dataclass(frozen=True)
class Axes:
    """src/bench/scaling Axes: the points a row runs."""

    depths: list[int]
    pp_lengths: list[int]
    batches: list[int]

    def check(self, tg: int, pp: int, context: int) -> None:
        """Axes::check's refusals: a point whose positions pass the context, a batch of none."""
        n = max(tg, pp)
        for d in self.depths:
            if d + n > context:
                raise Failure(
                    f"--depth {d}: with --tokens {tg} and --pp-tokens {pp}, {d + n} positions, "
                    f"past the model's context of {context}"
                )
        bad = next((p for p in self.pp_lengths if p > context or p == 0), None)
        if bad is not None:
            raise Failure(
                f"--pp-lengths {bad}: a prompt of 1 to {context} tokens (the model's context)"
            )
        if 0 in self.batches:
            raise Failure("--batch 0: a batch is one sequence or more")
        if pp + tg > context:
            raise Failure(
                f"--pp-tokens {pp} and --tokens {tg}: a batch's sequences pass the model's "
                f"context of {context}"
            )

    def positions(self, tg: int, pp: int) -> int:
        """Positions a row's cache holds (Axes::positions)."""
        depth = max(self.depths, default=0) + max(tg, pp)
        return max(depth, max(self.pp_lengths, default=0), pp + tg) + 1


@dataclass
class Run:
    """A checked scaling run: generate's settings (plan, tokens, prompt), the axes, and
    Candle's scaling file's ladder (--bounds) or None."""

    cfg: setup.Config
    axes: Axes
    bounds: Path | None
    ladder: dict | None


def config(args, model, tok, on_gpu: bool | None) -> Run:
    """generate's config with scaling's plan and axes (experiments/scaling.rs's defaults),
    checked as Candle checks them; --bounds read and checked."""
    gpu = on_gpu is True
    cfg = setup.config(args, model, tok, on_gpu)
    cfg = replace(cfg, plan=plan_of(args, GPU_PLAN if gpu else CPU_PLAN))
    axes = Axes(
        depths=args.depth or DEPTHS,
        pp_lengths=args.pp_lengths or PP_LENGTHS[gpu],
        batches=args.batch or BATCHES[gpu],
    )
    axes.check(cfg.tg_tokens, cfg.pp_tokens, cfg.dims.context)
    ladder = None if args.bounds is None else read_ladder(args.bounds, on_gpu)
    return Run(cfg, axes, args.bounds, ladder)


def read_ladder(path: Path, on_gpu: bool | None) -> dict:
    """The ladder of Candle's scaling file at `path`, refused in one line where it is no
    scaling file with a ladder, or of another kind of device than this run's."""
    try:
        f = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise Failure(f"--bounds {path}: cannot read it as a result file ({e})") from None
    if not isinstance(f, dict) or f.get("experiment") != "scaling":
        raise Failure(f"--bounds {path}: not a scaling result (Candle's `scaling --output`)")
    ladder = (f.get("scaling") or {}).get("ladder")
    if not ladder or not ladder.get("points"):
        raise Failure(f"--bounds {path}: its scaling result has no bandwidth ladder")
    kind = (f.get("device") or {}).get("kind")
    if on_gpu is not None and (kind == "cpu") == on_gpu:
        here = "a GPU" if on_gpu else "the CPU"
        raise Failure(f"--bounds {path}: its ladder was read on {kind}, this run is on {here}")
    return ladder


# --- names and ids, as the Rust side makes them ---------------------------------------


def point_name(p: dict) -> str:
    """ScalingPoint::name: "tg32 @ d2048", "pp512", "tg16 @ d64 x b8"."""
    n = p["pp_tokens"] if p["test"] == "pp" else p["tokens"] // max(p["batch"], 1)
    s = f"{p['test']}{n}"
    if p["depth"] > 0 or p["axis"] == "depth":
        s += f" @ d{p['depth']}"
    if p["batch"] > 1 or p["axis"] == "batch":
        s += f" x b{p['batch']}"
    return s


def random_ids(n: int, vocab: int, seed: int) -> list[int]:
    """src/bench/lm random_ids: made-up ids in u64 arithmetic, wrapping."""
    mask = (1 << 64) - 1
    return [((((seed + i) & mask) * 2_654_435_761 & mask) >> 7) % vocab for i in range(n)]


def prompts(pp: int, vocab: int, seed: int, b: int) -> list[list[int]]:
    """points.rs prompts: `b` distinct made-up prompts of `pp` ids."""
    return [random_ids(pp, vocab, (seed + 1 + s * 7919) & ((1 << 64) - 1)) for s in range(b)]


# --- the bounds ----------------------------------------------------------------------


def fitted_read(footprint: int) -> int:
    """src/bench/ladder fitted for the read kernel: whole float4s, at least 256 floats."""
    return max(footprint // 4 // 4 * 4, 256) * 4


def memory_footprint(caches: list[dict]) -> int:
    """levels::standard_footprints' last at one thread: 4x the last cache, at least 256 MiB."""
    last = caches[-1]["bytes"] if caches else 0
    return max(4 * last, MIN_MEMORY_FOOTPRINT)


def ladder_bound(ladder: dict, nbytes: int) -> dict:
    """The schema's Bound that Candle's Bounds::tg(nbytes) sets from `ladder`
    (Ladder::bound then envelope): the read at the footprint, on one thread and on the
    pool's (fixed and chunked parts), or a faster read of those threads at a larger
    footprint; past the caches, any at memory's footprint or more. Candle measures a
    missing point; here the ladder is the file's, so the footprint is the one its run
    read: capped by its largest (--ladder-max-mib caps every point), or the next larger
    measured where none is at it. Ties go to the later point, as Rust's max_by."""
    n = max(1, ladder["pool_threads"])
    counts = [1, n] if n > 1 else [1]
    ways = [(1, False), (n, False), (n, True)] if n > 1 else [(1, False)]
    reads = [p for p in ladder["points"] if p["kernel"] == "read" and p["threads"] in counts]
    if not reads:
        raise Failure("the ladder has no read at the pool's threads")
    largest = max(p["footprint_bytes"] for p in reads)
    want = min(fitted_read(nbytes), largest)
    at_size = min(p["footprint_bytes"] for p in reads if p["footprint_bytes"] >= want)
    at = []
    for t, chunked in ways:
        p = next(
            (
                p
                for p in reads
                if p["footprint_bytes"] == at_size
                and p["threads"] == t
                and p.get("chunked", False) == chunked
            ),
            None,
        )
        if p is not None:
            at.append(p)
    memory = min(memory_footprint(ladder["caches"]), largest)
    start = memory if at_size >= memory else at_size + 1
    best = None
    for p in at + [p for p in reads if p["footprint_bytes"] >= start]:
        if best is None or p["gb_per_s"] >= best["gb_per_s"]:
            best = p
    return {
        k: best.get(k, False) if k == "chunked" else best[k]
        for k in ["kernel", "threads", "footprint_bytes", "level", "gb_per_s", "chunked"]
    }


def measured_read(torch, clock, device) -> tuple[dict, str]:
    """One read past the caches measured here (a float32 sum of 4x the last cache, at least
    256 MiB; its fastest sample, as the ladder's points): the Bound every point is held to
    without --bounds, and the note that says so."""
    from block.run import largest_cache

    nbytes = max(4 * (largest_cache(torch, device) or 0), MIN_MEMORY_FOOTPRINT)
    buf = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    t = timed(clock, Plan(warmup=1, iters=5), buf.sum)
    gb = nbytes / (min(samples_ms(t)) * 1e-3) / 1e9
    del buf
    gpu = device.type == "cuda"
    bound = {
        "kernel": "read",
        "threads": 1 if gpu else torch.get_num_threads(),
        "footprint_bytes": nbytes,
        "level": "device memory" if gpu else "DRAM",
        "gb_per_s": gb,
        "chunked": False,
    }
    note = (
        f"memory: no --bounds, so one read measured here for every point whatever its "
        f"footprint: torch's sum over {nbytes / MIB:.0f} MiB of float32 (4x the last cache, "
        f"at least 256 MiB: past the caches), {gb:.1f} GB/s at its fastest of 5 samples; "
        "a step whose bytes a cache holds is held to memory's rate (pass Candle's scaling "
        "file as --bounds for its ladder)"
    )
    return bound, note


class Bounds:
    """The run's bounds: memory from Candle's ladder or one read, compute from a matmul
    per precision (Bounds::gemm_peak), measured the first time a row asks."""

    def __init__(self, torch, clock, device, run: Run):
        self.torch, self.clock, self.device, self.ladder = torch, clock, device, run.ladder
        self.peaks: dict[str, tuple[float, int]] = {}
        if run.ladder is None:
            self.read, self.note = measured_read(torch, clock, device)
        else:
            self.read = None
            self.note = (
                f"memory: Candle's ladder from {run.bounds} (its run's reads, on its "
                "machine), each step's bytes picking its point as Candle's Bounds::tg does; "
                "the ladder as that file ends it, so a read Candle measured after a row "
                "counts for it here"
            )

    def memory(self, nbytes: int) -> dict:
        return self.read if self.ladder is None else ladder_bound(self.ladder, nbytes)

    def compute_peak(self, name: str, dtype, width: int) -> tuple[float, int]:
        """GFLOP/s of a square torch matmul at `dtype` under the caller's GEMM mode, its
        side the model's width to the next power of two, 128 to 1024 on the CPU (4096
        on a GPU), as Bounds::gemm_peak; and the side."""
        if name not in self.peaks:
            torch, most = self.torch, 4096 if self.device.type == "cuda" else 1024
            n = min(max(1 << max(width - 1, 0).bit_length(), 128), most)
            g = torch.Generator().manual_seed(0)
            a, b = (torch.randn(n, n, generator=g).to(self.device, dtype) for _ in range(2))
            t = timed(self.clock, PEAK_PLAN, lambda: a @ b)
            self.peaks[name] = (2.0 * n**3 / (min(samples_ms(t)) * 1e-3) / 1e9, n)
        return self.peaks[name]


# --- the points ----------------------------------------------------------------------


@dataclass
class Work:
    """points.rs Work: what a test is, for its bound."""

    axis: str
    test: str
    depth: int
    pp_tokens: int
    batch: int
    tokens: int  # a sample's
    per_step: int  # a forward's
    steps: int
    kv_bytes: int  # a sample's, every step's together
    flops: float  # a sample's


def tg_work(d, kv_elem: int, axis: str, depth: int, b: int, n: int) -> Work:
    """`n` steps of `b` sequences after `depth` cached: step i reads depth + i + 1 keys."""
    kv = sum(kv_read_bytes(d, depth + i + 1, kv_elem) for i in range(n))
    return Work(axis, "tg", depth, 0, b, b * n, b, n, kv * b, b * flops_after(d, depth, n, n))


def pp_work(d, kv_elem: int, axis: str, depth: int, p: int) -> Work:
    """`p` tokens in one pass after `depth` cached."""
    kv = kv_read_bytes(d, depth + p, kv_elem)
    return Work(axis, "pp", depth, p, 1, p, p, 1, kv, flops_after(d, depth, p, 1))


@dataclass
class Row:
    """What a row's points share."""

    name: str
    model: Twin
    dims: object
    weight_bytes_per_token: int
    kv_elem: int
    compute_gflop_per_s: float
    base: int | None  # GPU bytes before the model (peak's baseline); None on the CPU


def picks(logits) -> list[int]:
    """Each sequence's greedy next token (pick_all)."""
    return logits.argmax(-1).tolist()


def decode(m: Twin, start: list[list[int]], pos: int, n: int) -> list[list[int]]:
    """points.rs decode: `n` greedy steps of every sequence from `start` at pos.., one
    forward over all of them a step."""
    toks, out = start, [[] for _ in start]
    for i in range(n):
        nxt = picks(m.forward_batch(toks, pos + i))
        for o, t in zip(out, nxt):
            o.append(t)
        toks = [[t] for t in nxt]
    return out


def bounded(ctx, row: Row, w: Work, t: dict, peak: int | None) -> dict:
    """points.rs bounded: the point of `w` timed as `t`, against min(memory, compute)."""
    ms, samples = rate_ms(t), samples_ms(t)

    def rate(ms: float) -> float:
        return w.tokens / (ms * 1e-3)

    step_bytes = row.weight_bytes_per_token + w.kv_bytes // max(w.steps, 1)
    memory = ctx.bounds.memory(step_bytes)
    memory_tps = memory["gb_per_s"] * 1e9 * w.per_step / step_bytes
    flops_per_token = w.flops / w.tokens
    compute_tps = row.compute_gflop_per_s * 1e9 / flops_per_token
    if memory_tps <= compute_tps:
        bound, by = memory_tps, f"memory ({memory['level']})"
    else:
        bound, by = compute_tps, "compute"
    tps = rate(ms)
    return {
        "axis": w.axis,
        "test": w.test,
        "depth": w.depth,
        "pp_tokens": w.pp_tokens,
        "batch": w.batch,
        "tokens": w.tokens,
        "timed": t,
        "tokens_per_s": tps,
        "tokens_per_s_min": rate(max([ms, *samples])),
        "tokens_per_s_max": rate(min([ms, *samples])),
        "per_sequence_tokens_per_s": tps / w.batch,
        "bytes_per_step": step_bytes,
        "tokens_per_step": w.per_step,
        "flops_per_token": flops_per_token,
        "memory": memory,
        "memory_bound_tokens_per_s": memory_tps,
        "compute_bound_tokens_per_s": compute_tps,
        "bound_tokens_per_s": bound,
        "bound_by": by,
        "pct_of_bound": 100.0 * tps / bound,
        "peak_bytes": peak,
    }


def point(ctx, row: Row, w: Work, fill: list[int], test) -> dict:
    """`test` timed after `fill` is in the cache (made once, untimed: each sample runs
    from it), its peak above the row's baseline (GPU), its bounds."""
    print(f"scaling {row.name}: {point_name(w.__dict__)}", file=sys.stderr)
    if fill:
        row.model.forward(fill, 0)
    if row.base is not None:
        ctx.clock.sync()
        ctx.torch.cuda.reset_peak_memory_stats(ctx.device)
    t = timed(ctx.clock, ctx.run.cfg.plan, test)
    peak = None
    if row.base is not None:
        peak = max(ctx.torch.cuda.max_memory_allocated(ctx.device) - row.base, 0)
    return bounded(ctx, row, w, t, peak)


def points(ctx, row: Row) -> list[dict]:
    """Every point of the row, in axis order (points.rs all)."""
    cfg, axes, m, d, e = ctx.run.cfg, ctx.run.axes, row.model, row.dims, row.kv_elem
    n, p = cfg.tg_tokens, cfg.pp_tokens
    out = []
    for depth in axes.depths:
        fill = pp_ids(cfg.prompt_ids, depth)
        tg = tg_work(d, e, "depth", depth, 1, n)
        out.append(point(ctx, row, tg, fill, lambda: decode(m, [[cfg.start]], depth, n)))
        ids = pp_ids(cfg.prompt_ids, p)
        pp = pp_work(d, e, "depth", depth, p)
        out.append(point(ctx, row, pp, fill, lambda: m.forward(ids, depth)))
    for length in axes.pp_lengths:
        ids = pp_ids(cfg.prompt_ids, length)
        pp = pp_work(d, e, "prompt", 0, length)
        out.append(point(ctx, row, pp, [], lambda: m.forward(ids, 0)))
    for b in axes.batches:
        seqs = prompts(p, d.vocab, cfg.seed, b)
        start = [[t] for t in picks(m.forward_batch(seqs, 0))]
        work = tg_work(d, e, "batch", p, b, n)
        out.append(point(ctx, row, work, [], lambda: decode(m, start, p, n)))
    return out


def batch_matches(m: Twin, seqs: list[list[int]], n: int) -> bool:
    """points.rs batch_matches: each of the first four sequences of the batch gives,
    decoded alone, the greedy tokens it gave in the batch."""
    p = len(seqs[0])
    first = picks(m.forward_batch(seqs, 0))
    together = decode(m, [[t] for t in first], p, n)
    for s, seq in enumerate(seqs[:4]):
        t = int(m.forward(seq, 0).argmax())
        if t != first[s] or decode(m, [[t]], p, n)[0] != together[s]:
            return False
    return True


def depth_matches(m: Twin, cfg, depth: int) -> bool:
    """points.rs depth_matches: the token after the prompt repeated to `depth` and the
    start token, from the cache (filled, then one step) and from scratch (one pass)."""
    ids = pp_ids(cfg.prompt_ids, depth)
    m.forward(ids, 0)
    cached = int(m.forward([cfg.start], depth).argmax())
    return cached == int(m.forward([*ids, cfg.start], 0).argmax())


def ridge(pts: list[dict]) -> dict | None:
    """points.rs ridge: the batch axis' predicted ridge and measured knee."""
    batch = [p for p in pts if p["axis"] == "batch"]
    one = next((p for p in batch if p["batch"] == 1), None)
    if one is None:
        return None
    best = batch[0]
    for p in batch:  # the last of the fastest, as Rust's max_by
        if p["tokens_per_s"] >= best["tokens_per_s"]:
            best = p
    return {
        "predicted_batch": one["compute_bound_tokens_per_s"] / one["memory_bound_tokens_per_s"],
        "measured_knee_batch": best["tokens_per_s"] / one["tokens_per_s"],
        "best_tokens_per_s": best["tokens_per_s"],
        "best_batch": best["batch"],
        "best_pct_of_compute": 100.0 * best["tokens_per_s"] / best["compute_bound_tokens_per_s"],
    }


# --- the run -------------------------------------------------------------------------


@dataclass
class Ctx:
    torch: object
    device: object
    clock: Clock
    run: Run
    bounds: Bounds


def measure_row(ctx: Ctx, p, weights: dict, memory: int | None) -> dict:
    """One precision: the schema's ScalingMeasured."""
    torch, cfg, axes, d = ctx.torch, ctx.run.cfg, ctx.run.axes, ctx.run.cfg.dims
    dtype = torch_dtype(torch, p)
    compute, _ = ctx.bounds.compute_peak(p.name, dtype, d.hidden)
    base = baseline(torch, ctx.device, dtype)
    positions = axes.positions(cfg.tg_tokens, cfg.pp_tokens)
    m = Twin(torch, d, weights, dtype, ctx.device, positions, max(axes.batches, default=1))
    elem = p.element_bytes
    row = Row(p.name, m, d, float_bytes(d, elem)[1], elem, compute, base)
    pts = points(ctx, row)
    most, deepest = max(axes.batches, default=0), max(axes.depths, default=0)
    seqs = prompts(cfg.pp_tokens, d.vocab, cfg.seed, most)
    kv = kv_bytes_per_token(d, elem)
    weight_bytes = m.weight_bytes()
    capacity = None
    if memory is not None:
        per_sequence = kv * d.context
        capacity = {
            "context_tokens": d.context,
            "device_bytes": memory,
            "weight_bytes": weight_bytes,
            "kv_bytes_per_sequence": per_sequence,
            "sequences": max(memory - weight_bytes, 0) // max(per_sequence, 1),
        }
    return {
        "weight_bytes": weight_bytes,
        "weight_bytes_per_token": row.weight_bytes_per_token,
        "kv_precision": "fp32" if elem == 4 else "fp16/bf16",
        "kv_bytes_per_token": kv,
        "compute_peak_gflop_per_s": compute,
        "compute_peak_of": p.name,
        "points": pts,
        "ridge": ridge(pts),
        "capacity": capacity,
        "batch_matches_alone": batch_matches(m, seqs, cfg.tg_tokens) if most > 1 else None,
        "depth_matches_scratch": depth_matches(m, cfg, deepest) if deepest > 0 else None,
    }


def device_memory(session: Session) -> int | None:
    """What the capacity lines divide: the GPU's total, or the host's RAM."""
    if session.on_gpu:
        return session.info.get("total_memory_bytes")
    host = host_memory()
    return host.total_bytes if host else None


def run(session: Session, r: Run) -> Report:
    """Every precision's row (each stands alone: an error is that row's), the body."""
    torch, device, model = session.torch, session.device, session.state.model
    clock = Clock(torch, device)
    cfg = r.cfg
    ctx = Ctx(torch, device, clock, r, Bounds(torch, clock, device, r))
    memory = device_memory(session)
    weights = gguffile.weights(model)  # the file's weights in f32, once
    rows = []
    for p in cfg.precisions:
        row = {"precision": p.name, "kernels": "candle", "status": "ok", "error": None}
        try:
            with GemmMode(torch, p), torch.inference_mode():
                row["measured"] = measure_row(ctx, p, weights, memory)
        except Exception as e:  # the row's error; the other rows run
            row |= {"status": "error", "error": row_error(e), "measured": None}
            print(f"scaling {p.name}: row failed ({row['error']})", file=sys.stderr)
        rows.append(row)
        if device.type == "cuda":
            torch.cuda.empty_cache()
    d = cfg.dims
    body = {
        "model": dict(model.info, rotary_layout=gguffile.TWIN_ROTARY),
        "depths": r.axes.depths,
        "pp_tokens": r.axes.pp_lengths,
        "batches": r.axes.batches,
        "tg_tokens": cfg.tg_tokens,
        "batch_prompt_tokens": cfg.pp_tokens,
        "warmup": cfg.plan.warmup,
        "iters": cfg.plan.iters,
        "seed": cfg.seed,
        "kernels": "candle",
        "kv_cache": [
            {"precision": n, "bytes_per_token": kv_bytes_per_token(d, e)}
            for n, e in [("fp32", 4), ("fp16", 2), ("bf16", 2)]
        ],
        "device_memory_bytes": memory,
        "rows": rows,
        "notes": notes(ctx),
    }
    if r.ladder is not None:
        body["ladder"] = r.ladder
    return Report(
        body, *failed_rows(rows), show=lambda screen, env: show(body, session.info, screen)
    )


def notes(ctx: Ctx) -> list[str]:
    """What the file says of its method (Candle's method_notes, the twin's way)."""
    most = 4096 if ctx.device.type == "cuda" else 1024
    peaks = ", ".join(f"{k} {g:.1f} GFLOP/s at {n}" for k, (g, n) in ctx.bounds.peaks.items())
    out = [
        "depth: the cache filled by an untimed pass of the prompt repeated to the depth, "
        "once: the twin's cache is written at positions, so each sample times its tg test "
        "(and a pp test of the batch prompt's length) from that depth, as the suite's "
        "decoder rewinds its cache",
        "batch: distinct made-up prompts of one length (--pp-tokens; Candle's ids), filled "
        "untimed, then --tokens steps of one forward over every sequence's next token (the "
        "twin's forward_batch, a row of the cache each), each picked greedily; tokens/s is "
        "every sequence's together",
        ctx.bounds.note,
        f"compute: a square torch matmul at the row's precision, its side the model's width "
        f"to the next power of two (128 to {most}), the fastest of 5 after 1 warm-up, as Candle's "
        f"gemm_peak ({peaks or 'no row measured'}; Candle's scaling also measures its peak "
        f"again after a row's points and raises it to the row's matmuls inside a step, which "
        f"the twin does not); FLOPs per token as src/model/cost.rs "
        "counts them; the lower of memory and compute binds",
        "kernels: PyTorch's eager ops; the field says candle, the float path the twin is "
        "the peer of",
    ]
    if ctx.device.type != "cuda":
        out.append("peak memory: not measured on the CPU (PyTorch keeps no CPU allocation peak)")
    return out


def needs(d, r: Run) -> tuple[int, int]:
    """(host, device) bytes, as scaling's needs(): the file's weights in f32 on the host,
    and on the device the widest row's weights, its caches at the largest batch and the
    scores of the longest pass."""
    cfg = r.cfg
    widest = max(p.element_bytes for p in cfg.precisions)
    positions = r.axes.positions(cfg.tg_tokens, cfg.pp_tokens)
    caches = kv_bytes_per_token(d, 4) * positions * max(r.axes.batches, default=1)
    scores = d.heads * positions * positions * 4 * 3
    return d.params() * 4, d.params() * widest + caches + scores


def fits(session: Session, r: Run, check_host: bool) -> None:
    host, on_device = needs(session.state.model.dims, r)
    what = f"the model {Path(session.state.path).name} at scaling's largest points"
    check_need(session.torch, session.device, what, host, on_device, check_host)


def plan_lines(dry) -> list[str]:
    """--dry-run's plan of a scaling run."""
    r = config(dry.args, dry.state.model, dry.state.tok, dry.on_gpu)
    check_dtypes(dry.torch, r.cfg.precisions, dry.on_gpu)
    cfg, a = r.cfg, r.axes
    known = "" if dry.on_gpu is not None else " (the CPU's; a GPU's when the run starts on one)"
    out = dry.args.output
    target = "standard output" if str(out) == "-" else str(out)
    if out is None:
        target = "nothing (no --output)"
    bounds = f"Candle's ladder from {r.bounds}"
    if r.bounds is None:
        bounds = "one read measured here (no --bounds)"
    return [
        "dry run: pytorch generate scaling",
        f"torch: {dry.torch.__version__} (CUDA build: {dry.torch.version.cuda or 'none'})",
        f"device: {dry.device_line}",
        f"model: {dry.state.model.path}: {dry.state.model.info['name']}, "
        f"context {cfg.dims.context}",
        f"precisions: {', '.join(p.name for p in cfg.precisions)}{known}",
        f"depths: {a.depths}, pp lengths: {a.pp_lengths}, batches: {a.batches}{known}",
        f"tg_tokens: {cfg.tg_tokens}, pp_tokens: {cfg.pp_tokens}, iters: {cfg.plan.iters}, "
        f"warmup: {cfg.plan.warmup}{known}",
        f"memory bound: {bounds}",
        f"would write: {target}",
    ]


def show(body: dict, info: dict, file=None) -> None:
    """One line per point, as Candle's scaling table; each row's checks under it."""
    m = body["model"]
    title = (
        f"scaling (pytorch twin): {m['name']} ({m['file']}) on {info['label']} "
        f"({info['name']}): tg{body['tg_tokens']} per sequence, "
        f"pp{body['batch_prompt_tokens']} at each depth"
    )
    header = ["row", "point", "tok/s", "per seq", "bound", "% bound", "bound by"]
    lines, checks = [], []
    for row in body["rows"]:
        x = row["measured"]
        if x is None:
            lines.append([row["precision"], f"{row['status']}: {row['error']}"])
            continue
        for p in x["points"]:
            lines.append(
                [
                    row["precision"],
                    point_name(p),
                    f"{p['tokens_per_s']:.1f}",
                    f"{p['per_sequence_tokens_per_s']:.1f}",
                    f"{p['bound_tokens_per_s']:.1f}",
                    f"{p['pct_of_bound']:.0f}%",
                    p["bound_by"],
                ]
            )
        checks.append(
            f"{row['precision']}: compute ceiling {x['compute_peak_gflop_per_s']:.1f} GFLOP/s; "
            f"batch matches alone: {x['batch_matches_alone']}; depth matches scratch: "
            f"{x['depth_matches_scratch']}"
        )
    print_table(title, header, lines, file=file)
    for line in [*checks, *body["notes"]]:
        print(line, file=file)
