"""Hugging Face transformers on the same GGUF, as most users would run it:
`AutoTokenizer` and `AutoModelForCausalLM.from_pretrained(folder, gguf_file=name)` (which
dequantizes the file into a float model), the chat template through
`apply_chat_template(..., add_generation_prompt=True)`, greedy `generate`."""

from __future__ import annotations

import os


def load_tokenizer(path: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(os.path.dirname(path) or ".", gguf_file=os.path.basename(path))


def load_model(path: str, torch, dtype, device):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(
        os.path.dirname(path) or ".", gguf_file=os.path.basename(path), dtype=dtype
    )
    return model.to(device).eval()


def chat_ids(tok, user: str) -> tuple[str, list[int]]:
    """The user's message formatted by the file's chat template, and its ids."""
    text = tok.apply_chat_template(
        [{"role": "user", "content": user}], tokenize=False, add_generation_prompt=True
    )
    return text, tok(text, add_special_tokens=False)["input_ids"]


def greedy(model, torch, prompt: list[int], n: int) -> list[int]:
    """transformers' greedy `generate`: up to `n` new tokens, ending at its EOS."""
    ids = torch.tensor([prompt], device=model.device)
    with torch.inference_mode():
        out = model.generate(
            ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, do_sample=False,
            temperature=None, top_p=None, top_k=None,
        )
    return out[0, len(prompt):].tolist()
