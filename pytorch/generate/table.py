"""The peers' terminal tables, as src/export/views/generate.rs shows Candle's: per precision
pp and tg tokens/s beside generation's bound and its matmuls timed alone, the speedups over
fp32, where a generated token's time goes (the twin's), each precision's answer, and the
notes on what was not measured."""

from __future__ import annotations

from common.formulas import MIB
from common.table import print_table
from generate.parts import CLASS_NAMES, CLASSES


def opt(v, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def show(body: dict, info: dict, env: dict, file=None) -> None:
    m = body["model"]
    title = (
        f"generate ({env['framework']} {env['framework_version']}): {m['name']} ({m['file']}), "
        f"{m['params'] / 1e6:.0f}M parameters, on {info['label']} ({info['name']}): "
        f"pp{body['pp_tokens']} and tg{body['tg_tokens']} tokens/s"
    )
    header = [
        "precision",
        "pp tok/s",
        "tg tok/s",
        "tg bound",
        "% bound",
        "first token ms",
        "pp GFLOP/s",
        "matmuls GFLOP/s",
        "pp vs matmuls alone",
        "weights MiB",
        "read/token MiB",
        "peak MiB",
    ]
    speed, vs, parts, notes = [], [], [], []
    for row in body["rows"]:
        p, x = row["precision"], row["measured"]
        if x is None:
            speed.append([p, f"error: {row['error'] or ''}"])
            continue
        speed.append(
            [
                p,
                f"{x['pp_tokens_per_s']:.1f}",
                f"{x['tg_tokens_per_s']:.1f}",
                opt(x["tg_bound_tokens_per_s"], ".0f"),
                opt(x["tg_pct_of_bound"], ".0f") + "%",
                f"{x['ttft']['median_ms']:.1f}",
                f"{x['pp_gflop_per_s']:.1f}",
                f"{x['matmuls_pp_gflop_per_s']:.1f}",
                f"{x['pp_vs_matmuls_alone_pct']:.0f}%",
                f"{x['weight_bytes'] / MIB:.1f}",
                f"{x['weight_bytes_per_token'] / MIB:.1f}",
                "-" if x["peak_bytes"] is None else f"{x['peak_bytes'] / MIB:.1f}",
            ]
        )
        if x["vs_fp32"]:
            v = x["vs_fp32"]
            vs.append([p] + [f"{v[k]:.2f}x" for k in ("matmuls_pp", "matmuls_tg", "pp", "tg")])
        if x["parts"]:
            cells = [p]
            for cls in CLASSES:
                t = next((q for q in x["parts"] if q["class"] == cls), None)
                share = (
                    "" if t is None else f" ({100 * t['ms_per_token'] / x['parts_sum_ms']:.0f}%)"
                )
                cells.append("-" if t is None else f"{t['ms_per_token']:.2f}{share}")
            cells += [
                f"{x['parts_sum_ms']:.2f}",
                f"{1e3 / x['tg_tokens_per_s']:.2f}",
                x["held_back_by"] or "-",
            ]
            parts.append(cells)
        a = x["answer"]
        at = a["differs_from_fp32_at"]
        differs = "" if at is None else f" [parts from fp32's at token {at}]"
        notes.append(f"{p} answer{differs}: {a['text']!r}")
    print_table(title, header, speed, file=file)
    if vs:
        print_table(
            "against fp32 (fp32's median over the row's): the matmuls alone, then the whole model",
            ["precision", "matmuls at pp", "matmuls at tg", "pp", "tg"],
            vs,
            file=file,
        )
    if parts:
        print_table(
            "where a generated token's time goes: ms per token (share of the sum), each class "
            "timed alone",
            [
                "precision",
                *(CLASS_NAMES.get(c, c) for c in CLASSES),
                "sum ms",
                "tg ms/token",
                "held back by (under half the bound)",
            ],
            parts,
            file=file,
        )
    copy = body["copy_gb_per_s"]
    prompt = body["prompt"]
    n = len(prompt["token_ids"])
    print(f"prompt: {prompt['user']!r} ({n} tokens with the chat template)", file=file)
    for line in notes:
        print(line, file=file)
    print(
        f"tg bound: copy bandwidth measured here ({copy:.1f} GB/s) over the weight bytes a token "
        f"reads; pp and tg as llama-bench runs them (from an empty cache), median of "
        f"{body['iters']} runs after {body['warmup']} warm-up",
        file=file,
    )
    for line in body["notes"]:
        print(line, file=file)
