"""`python pytorch/generate` (or `python -m generate` with pytorch/ on PYTHONPATH): the
peers of candle-lab's `generate`.

  twin  [flags]               the model in eager PyTorch on the gguf package's dequantized
                              weights: greedy answer, pp and tg tokens/s as Candle measures
                              them (llama-bench's tests, median of --iters after --warmup)
  hf    [flags]               transformers' GGUF loading and greedy generate: its answer,
                              pp tokens/s (one forward of --pp-tokens) and generate()'s
                              tokens/s (new tokens over its wall time, prompt included)
  reference --write FILE      the fixture the tests share (transformers' ids and answer)
  side-by-side CANDLE.json PEER.json...   tokens/s per precision, Candle beside the peers

Flags: --model FILE (default: `just model`'s), --dtypes fp32,fp16,bf16, --prompt TEXT,
--tokens N (32), --pp-tokens N (64), --iters N (3), --warmup N (1), --device cpu|cuda,
--output FILE (JSON). A bad input is one `error:` line and exit code 1 (2 for flags)."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

# Run as `python pytorch/generate`, Python puts this folder first on the path; the twins'
# packages are imported from the folder above it.
if __name__ == "__main__":
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from generate.gguffile import DEFAULT_PROMPT, default_model_path  # noqa: E402

DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def parse(argv):
    p = argparse.ArgumentParser(prog="pytorch/generate")
    p.add_argument("what", choices=["twin", "hf", "reference", "side-by-side"])
    p.add_argument("files", nargs="*")
    p.add_argument("--model", default=None)
    p.add_argument("--dtypes", default="fp32,fp16,bf16")
    p.add_argument("--prompt", default=DEFAULT_PROMPT)
    p.add_argument("--tokens", type=int, default=32)
    p.add_argument("--pp-tokens", type=int, default=64)
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--device", default="cpu")
    p.add_argument("--output", default=None)
    p.add_argument("--write", default=None)
    a = p.parse_args(argv)
    for flag in ("tokens", "pp_tokens", "iters"):
        if getattr(a, flag) < 1:
            p.error(f"--{flag.replace('_', '-')} {getattr(a, flag)}: must be at least 1")
    bad = [d for d in a.dtypes.split(",") if d not in DTYPES]
    if bad:
        p.error(f"--dtypes {bad[0]}: expected fp32, fp16 or bf16")
    return a


def model_path(a) -> str:
    path = a.model or default_model_path()
    if not os.path.isfile(path):
        hint = "" if a.model else ": `just model` fetches it"
        raise SystemExit(f"error: no model at {path}{hint}")
    return path


def timed(torch, device, plan, work) -> list[float]:
    """Seconds per run of `work`, after the warm-up, synchronized around each."""
    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for _ in range(plan[0]):
        work()
        sync()
    out = []
    for _ in range(plan[1]):
        sync()
        t0 = time.perf_counter()
        work()
        sync()
        out.append(time.perf_counter() - t0)
    return out


def rate(tokens: int, seconds: list[float]) -> float:
    return tokens / statistics.median(seconds)


def run_twin(a, torch, path):
    from generate import gguffile, hf, twin

    dims, weights = gguffile.read(path)
    tok = hf.load_tokenizer(path)
    formatted, ids = hf.chat_ids(tok, a.prompt)
    eos = [tok.convert_tokens_to_ids("<|im_end|>")] if "<|im_end|>" in tok.get_vocab() else []
    eos = [e for e in eos if e is not None] or ([tok.eos_token_id] if tok.eos_token_id is not None else [])
    device = torch.device(a.device)
    plan = (a.warmup, a.iters)
    rows = []
    for name in a.dtypes.split(","):
        m = twin.Twin(torch, dims, weights, getattr(torch, DTYPES[name]), device)
        answer = twin.greedy(m, ids, a.tokens, eos)
        pp_ids = (ids * (a.pp_tokens // len(ids) + 1))[: a.pp_tokens]
        start = ids[0]

        def pp():
            with torch.inference_mode():
                m.forward(pp_ids, 0)

        def tg():
            with torch.inference_mode():
                t = start
                for pos in range(a.tokens):
                    t = int(m.forward([t], pos).argmax())

        def ttft():
            with torch.inference_mode():
                int(m.forward(ids, 0).argmax())

        rows.append({
            "precision": name, "token_ids": answer, "text": tok.decode(answer),
            "ttft_ms": 1e3 * statistics.median(timed(torch, device, plan, ttft)),
            "pp_tokens_per_s": rate(a.pp_tokens, timed(torch, device, plan, pp)),
            "tg_tokens_per_s": rate(a.tokens, timed(torch, device, plan, tg)),
        })
        print(f"twin {name}: pp {rows[-1]['pp_tokens_per_s']:.1f} tok/s, tg "
              f"{rows[-1]['tg_tokens_per_s']:.1f} tok/s: {rows[-1]['text']!r}", file=sys.stderr)
    return {"framework": "pytorch-twin", "prompt": formatted, "prompt_ids": ids, "rows": rows}


def run_hf(a, torch, path):
    import transformers

    from generate import hf

    tok = hf.load_tokenizer(path)
    formatted, ids = hf.chat_ids(tok, a.prompt)
    device = torch.device(a.device)
    plan = (a.warmup, a.iters)
    rows = []
    for name in a.dtypes.split(","):
        model = hf.load_model(path, torch, getattr(torch, DTYPES[name]), device)
        answer = hf.greedy(model, torch, ids, a.tokens)
        pp_ids = torch.tensor([(ids * (a.pp_tokens // len(ids) + 1))[: a.pp_tokens]], device=device)

        def pp():
            with torch.inference_mode():
                model(pp_ids)

        n = len(answer)
        rows.append({
            "precision": name, "token_ids": answer, "text": tok.decode(answer),
            "pp_tokens_per_s": rate(a.pp_tokens, timed(torch, device, plan, pp)),
            "generate_tokens_per_s": rate(n, timed(torch, device, plan, lambda: hf.greedy(model, torch, ids, a.tokens))),
        })
        print(f"transformers {name}: pp {rows[-1]['pp_tokens_per_s']:.1f} tok/s, generate() "
              f"{rows[-1]['generate_tokens_per_s']:.1f} tok/s: {rows[-1]['text']!r}", file=sys.stderr)
    return {"framework": f"transformers {transformers.__version__}", "prompt": formatted,
            "prompt_ids": ids, "rows": rows}


def side_by_side(files: list[str]) -> str:
    """A Markdown table: per precision, Candle's pp and tg tokens/s, then each peer's."""
    with open(files[0], encoding="utf-8") as f:
        candle = json.load(f)["generate"]
    peers = []
    for p in files[1:]:
        with open(p, encoding="utf-8") as f:
            peers.append(json.load(f))
    head = ["precision", "Candle pp tok/s", "Candle tg tok/s", "Candle bound", "% bound"]
    for peer in peers:
        tg = "tg tok/s" if peer["framework"] == "pytorch-twin" else "generate() tok/s"
        head += [f"{peer['framework']} pp tok/s", f"{peer['framework']} {tg}"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in candle["rows"]:
        m = row.get("measured")
        if not m:
            continue
        cells = [row["precision"], f"{m['pp_tokens_per_s']:.1f}", f"{m['tg_tokens_per_s']:.1f}",
                 f"{m['tg_bound_tokens_per_s']:.0f}", f"{m['tg_pct_of_bound']:.0f}%"]
        for peer in peers:
            r = next((x for x in peer["rows"] if x["precision"] == row["precision"]), None)
            tg = (r or {}).get("tg_tokens_per_s", (r or {}).get("generate_tokens_per_s"))
            cells += [f"{r['pp_tokens_per_s']:.1f}" if r else "-", f"{tg:.1f}" if r else "-"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    a = parse(argv)
    try:
        if a.what == "side-by-side":
            if len(a.files) < 2:
                raise SystemExit("error: side-by-side takes Candle's result file and one or more peers'")
            print(side_by_side(a.files))
            return 0
        import torch

        torch.manual_seed(0)
        path = model_path(a)
        if a.what == "reference":
            from generate import reference

            if not a.write:
                raise SystemExit("error: reference needs --write FILE")
            reference.write(path, a.write, torch)
            return 0
        result = (run_twin if a.what == "twin" else run_hf)(a, torch, path)
        result.update({"model": os.path.basename(path), "device": a.device,
                       "torch": torch.__version__, "pp_tokens": a.pp_tokens, "tg_tokens": a.tokens})
        if a.output:
            tmp = a.output + ".tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(result, f, indent=1, ensure_ascii=False)
            os.replace(tmp, a.output)
        return 0
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
