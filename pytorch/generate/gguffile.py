"""The GGUF file read with the `gguf` package (llama.cpp's own reader): the Llama sizes from
its metadata and every tensor dequantized to float32 numpy arrays, shaped as candle and
torch hold them ((out, in) for a projection). Q and K come back unpermuted: llama.cpp's
converter (`LlamaModel.permute`) interleaved each head's rotary halves, and
`reverse_permute` (transformers' `reverse_permute_weights`) puts them back, so the model
rotates halves as the Hugging Face checkpoint does."""

from __future__ import annotations

import os
from dataclasses import dataclass

DEFAULT_MODEL = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_PROMPT = "Explain in two sentences why the sky is blue."


def default_model_path() -> str:
    """Where `just model` (scripts/model.sh) puts the model."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "candle-lab", "models", DEFAULT_MODEL)


@dataclass(frozen=True)
class Dims:
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    mlp: int
    vocab: int
    rope_theta: float
    rms_eps: float

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


def _field(reader, key, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    return f.contents()


def dims(reader) -> Dims:
    arch = _field(reader, "general.architecture")
    if arch != "llama":
        raise ValueError(f"a '{arch}' model: the twin runs Llama-architecture GGUF files")
    heads = int(_field(reader, "llama.attention.head_count"))
    embd = next(t for t in reader.tensors if t.name == "token_embd.weight")
    return Dims(
        layers=int(_field(reader, "llama.block_count")),
        hidden=int(_field(reader, "llama.embedding_length")),
        heads=heads,
        kv_heads=int(_field(reader, "llama.attention.head_count_kv", heads)),
        mlp=int(_field(reader, "llama.feed_forward_length")),
        vocab=int(embd.shape[1]),
        rope_theta=float(_field(reader, "llama.rope.freq_base", 10000.0)),
        rms_eps=float(_field(reader, "llama.attention.layer_norm_rms_epsilon", 1e-5)),
    )


def reverse_permute(w, heads: int):
    """llama.cpp's permute undone: each head's rows (d/2, 2) back to (2, d/2)."""
    rows = w.shape[0]
    return w.reshape(heads, rows // heads // 2, 2, *w.shape[1:]).swapaxes(2, 1).reshape(w.shape)


def read(path: str):
    """(dims, {name: float32 array}) of the GGUF at `path`, Q and K unpermuted."""
    import gguf
    import numpy as np

    reader = gguf.GGUFReader(path)
    d = dims(reader)
    out = {}
    for t in reader.tensors:
        shape = tuple(int(x) for x in reversed(t.shape.tolist()))
        arr = gguf.dequantize(t.data, t.tensor_type).astype(np.float32).reshape(shape)
        if t.name.endswith("attn_q.weight"):
            arr = reverse_permute(arr, d.heads)
        elif t.name.endswith("attn_k.weight"):
            arr = reverse_permute(arr, d.kv_heads)
        out[t.name] = arr
    return d, out
