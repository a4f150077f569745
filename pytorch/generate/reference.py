"""The fixture tests/fixtures/generate-reference.json: what transformers makes of the model
file (its tokenizer's ids for a handful of prompts, with and without the chat template, and
its fp32 greedy answer to the default prompt). The Rust tests hold Candle's tokenizer and
fp32 answer to it (tests/generate_model.rs), the Python tests transformers' tokenizer
(test_generate.py) and the twin's and the transformers peer's answers (test_program.py):
so Candle, transformers and the twin agree, with the fixture between them.
`python pytorch/generate reference --write FILE` makes it."""

from __future__ import annotations

import json
import re

from generate.gguffile import DEFAULT_PROMPT

PROMPTS = [
    DEFAULT_PROMPT,
    "What is the capital of France?",
    "Héllo wörld: ünïcode, an emoji 🙂, and  two  spaces.",
    "def square(x):\n    return x ** 2\n",
    "Numbers: 3.14159, 1,000,000 and 2026!",
]
# Enough for the answer to run through the cache: a prefill and seven decode steps.
GREEDY_TOKENS = 8


def tokens(path: str) -> dict:
    """transformers' tokenizer on PROMPTS: with the chat template (ids, and decoded back)
    and without."""
    from generate import hf

    tok = hf.load_tokenizer(path)
    chats = []
    for user in PROMPTS:
        formatted, ids = hf.chat_ids(tok, user)
        chats.append(
            {
                "user": user,
                "formatted": formatted,
                "ids": ids,
                "decoded": tok.decode(
                    ids, skip_special_tokens=False, clean_up_tokenization_spaces=False
                ),
            }
        )
    plain = [{"text": p, "ids": tok(p, add_special_tokens=False)["input_ids"]} for p in PROMPTS]
    return {"chat": chats, "plain": plain}


def make(path: str, torch) -> dict:
    import transformers

    from generate import hf

    t = tokens(path)
    model = hf.load_model(path, torch, torch.float32, torch.device("cpu"))
    answer = hf.greedy(model, torch, t["chat"][0]["ids"], GREEDY_TOKENS)
    return {
        "what": "transformers' tokenizer and fp32 greedy answer on the model file",
        "transformers": transformers.__version__,
        "model": path.rsplit("/", 1)[-1],
        **t,
        "greedy": {"user": DEFAULT_PROMPT, "tokens": GREEDY_TOKENS, "ids": answer},
    }


def dumps(obj: dict) -> str:
    """JSON with one key a line and each list of ids on one line."""
    text = json.dumps(obj, indent=1, ensure_ascii=False)
    return re.sub(
        r"\[\s*(-?\d+(?:,\s*-?\d+)*)\s*\]",
        lambda m: "[" + ", ".join(m.group(1).replace(",", " ").split()) + "]",
        text,
    )


def write(path: str, out: str, torch) -> None:
    with open(out, "w", encoding="utf-8") as f:
        f.write(dumps(make(path, torch)) + "\n")
