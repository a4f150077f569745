"""The kernels experiment's run, as experiments/kernels.rs's config(), needs() and run():
the plan for the device that opened with each row's bound from --bounds (its machine
checked against this one), what must fit (the largest case's buffers), then the clock's
own cost and every op, case, precision and variant (kernels.run). common.runner does the
rest (device, checks, the file, the exit code); the environment gains OpenMP's wait
policy, as set and checked (not in the schema's environment yet)."""

from __future__ import annotations

import sys

from common.memory import check_need
from common.runner import Report, Session
from common.timing import Clock, clock_cost_ms
from kernels.run import largest_cache, run_kernels
from kernels.setup import checked_ceilings, config, given_by, needs
from kernels.table import show, title


def checked(session: Session):
    """The plan on the device that opened, and each row's bound (None without --bounds)."""
    pair = session.state
    cache = largest_cache(session.torch, session.device)
    cfg = config(session.args, session.on_gpu, given_by(pair), cache)
    return cfg, checked_ceilings(pair, cfg, session.info)


def fits(session: Session, cfg, check_host: bool) -> None:
    """Refuses a largest case the device cannot hold, before anything is allocated."""
    what = "the kernels' largest case"
    check_need(session.torch, session.device, what, 0, needs(cfg), check_host)


def run(session: Session, cfg, ceilings) -> Report:
    """Every variant's row, timed with the clock's cost subtracted: the body and its table."""
    torch, pair, info = session.torch, session.state, session.info
    against = f"Candle's ladder from {pair.bounds}" if pair.bounds else "a pytorch copy"
    print(
        f"kernels: {len(cfg.ops)} ops x {len(cfg.cases)} cases x {len(cfg.precisions)} "
        f"precisions, warmup {cfg.plan.warmup}, iters {cfg.plan.iters}, on {info['label']}, "
        f"{pair.threads} threads, OMP_WAIT_POLICY={pair.policy.upper()}, against {against}",
        file=sys.stderr,
    )
    clock = Clock(torch, session.device)
    clock_ms = clock_cost_ms(clock)
    body, failed, total = run_kernels(torch, clock, session.device, cfg, ceilings, clock_ms)
    heading = title(
        info["label"], torch.__version__, pair.threads, pair.policy, pair.bounds, clock_ms
    )
    return Report(
        body,
        failed,
        total,
        show=lambda screen, _env: show(body, heading, file=screen),
        environment={"omp_wait_policy": pair.policy},
    )
