"""Hugging Face transformers on the same GGUF, as most users would run it:
`AutoTokenizer` and `AutoModelForCausalLM.from_pretrained(folder, gguf_file=name)` (which
dequantizes the file into a float model), the chat template through
`apply_chat_template(..., add_generation_prompt=True)`, greedy `generate`."""

from __future__ import annotations

import os


def load_tokenizer(path: str):
    from transformers import AutoTokenizer

    # clean_up_tokenization_spaces: transformers ignores it for a BPE tokenizer (and says so
    # on every load); False is what it does anyway.
    return AutoTokenizer.from_pretrained(
        os.path.dirname(path) or ".",
        gguf_file=os.path.basename(path),
        clean_up_tokenization_spaces=False,
    )


def load_model(path: str, torch, dtype, device):
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging

    logging.disable_progress_bar()  # its bars over the GGUF's tensors, on every load

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


def generate(model, ids, most: int, least: int = 0):
    """transformers' greedy `generate` of at most `most` new tokens after the (1, n) ids,
    at least `least` (the EOS held off until then)."""
    return model.generate(
        ids,
        attention_mask=ids.new_ones(ids.shape),
        max_new_tokens=most,
        min_new_tokens=least,
        do_sample=False,
        temperature=None,
        top_p=None,
        top_k=None,
    )


def greedy(model, torch, prompt: list[int], n: int) -> list[int]:
    """transformers' greedy answer: up to `n` new tokens, ending at its EOS."""
    ids = torch.tensor([prompt], device=model.device)
    with torch.inference_mode():
        out = generate(model, ids, n)
    return out[0, len(prompt) :].tolist()
