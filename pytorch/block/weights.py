"""The block's weights file: what Candle's `block --save-weights FILE` writes and
`pytorch/block --weights FILE` reads. A safetensors file, read and written with the
standard library (the reference's venv has no `safetensors` package): an 8-byte
little-endian header length, a JSON header {name: {dtype, shape, data_offsets}} (and an
optional "__metadata__" of strings), then the tensors' raw little-endian bytes. Every
tensor is F32. The block's shape is read from the tensors (BlockShape.from_header),
every tensor's shape is checked against it, and each problem is one line. Grouped-query
attention shows in the shapes: K and V (wk, wv, the cache) are kv_heads x head_dim wide."""

from __future__ import annotations

import ctypes
import json
import struct
import sys
from dataclasses import dataclass
from pathlib import Path

from common.errors import Failure

# The names src/bench/block/weights.rs HostWeights writes, in its order.
NAMES = [
    "x_prefill",
    "x_decode",
    "k_cache",
    "v_cache",
    "attn_norm",
    "wq",
    "wk",
    "wv",
    "wo",
    "mlp_norm",
    "w_gate",
    "w_up",
    "w_down",
]
# The constants of src/bench/block/mod.rs shape(): not in the file, the same on both sides.
RMS_EPS = 1e-5
ROPE_THETA = 10_000.0
# A header larger than this is not a weights file (safetensors' own limit is 100 MB).
MAX_HEADER = 100_000_000


@dataclass(frozen=True)
class BlockShape:
    """The schema's BlockShape less accuracy_seq (a flag's, not the file's)."""

    batch: int
    seq: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    mlp: int

    @property
    def kv_width(self) -> int:
        """Width of K and V: kv_heads x head_dim (hidden without GQA)."""
        return self.kv_heads * self.head_dim

    @property
    def groups(self) -> int:
        """Query heads per key/value head."""
        return self.heads // self.kv_heads

    @staticmethod
    def from_header(header: dict, path: Path) -> BlockShape:
        """The shape the tensors say (x_prefill: batch, seq, hidden; k_cache: batch,
        kv_heads, seq, head_dim, so heads = hidden / head_dim; w_gate: mlp, hidden), after
        checking every tensor against it."""
        missing = [n for n in NAMES if n not in header]
        if missing:
            raise Failure(f"{path}: not a block weights file: no tensor {', '.join(missing)}")
        dims = {n: header[n]["shape"] for n in NAMES}
        try:
            batch, seq, hidden = dims["x_prefill"]
            _, kv_heads, _, head_dim = dims["k_cache"]
            mlp = dims["w_gate"][0]
        except (TypeError, ValueError, IndexError):
            raise Failure(f"{path}: x_prefill, k_cache or w_gate has the wrong rank") from None
        if min(batch, seq, hidden, kv_heads, head_dim, mlp) < 1 or hidden % head_dim:
            raise Failure(f"{path}: head_dim {head_dim} does not divide hidden {hidden}")
        heads = hidden // head_dim
        if heads % kv_heads:
            raise Failure(f"{path}: kv_heads {kv_heads} does not divide heads {heads}")
        s = BlockShape(batch, seq, hidden, heads, kv_heads, head_dim, mlp)
        for name, want in s.expected().items():
            if dims[name] != want:
                raise Failure(
                    f"{path}: {name} has shape {dims[name]}, the block's shape needs {want} "
                    f"(batch {batch}, seq {seq}, hidden {hidden}, heads {heads}, kv_heads "
                    f"{kv_heads}, mlp {mlp})"
                )
        if head_dim % 2:
            raise Failure(
                f"{path}: head_dim {head_dim} is odd: rotary embedding needs an even head size"
            )
        return s

    def expected(self) -> dict[str, list[int]]:
        """Each tensor's shape for this block; Linear weights are (out, in)."""
        b, t, h, m, kv = self.batch, self.seq, self.hidden, self.mlp, self.kv_width
        cache = [b, self.kv_heads, t, self.head_dim]
        return {
            "x_prefill": [b, t, h],
            "x_decode": [b, 1, h],
            "k_cache": cache,
            "v_cache": cache,
            "attn_norm": [h],
            "wq": [h, h],
            "wk": [kv, h],
            "wv": [kv, h],
            "wo": [h, h],
            "mlp_norm": [h],
            "w_gate": [m, h],
            "w_up": [m, h],
            "w_down": [h, m],
        }


def read_header(path: Path) -> tuple[dict, int]:
    """The header (tensors by name, "__metadata__" left in) and where the data starts.
    Every tensor must be F32 with offsets inside the file that match its shape."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise Failure(f"{path}: not a safetensors file (shorter than 8 bytes)")
            (n,) = struct.unpack("<Q", head)
            if n > MAX_HEADER:
                raise Failure(f"{path}: not a safetensors file (a header of {n} bytes)")
            raw = f.read(n)
            size = f.seek(0, 2)
    except OSError as e:
        raise Failure(f"cannot read {path}: {e.strerror or e}") from e
    try:
        header = json.loads(raw.decode("utf-8"))
        assert isinstance(header, dict)
    except (UnicodeDecodeError, ValueError, AssertionError):
        raise Failure(f"{path}: not a safetensors file (its header is not a JSON object)") from None
    start = 8 + n
    for name, t in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (lo, hi) = t["dtype"], t["shape"], t["data_offsets"]
            count = 1
            for x in shape:
                count *= int(x)
        except (KeyError, TypeError, ValueError):
            raise Failure(f"{path}: tensor {name}: a malformed header entry") from None
        if dtype != "F32":
            raise Failure(f"{path}: tensor {name} is {dtype}; the block's weights are F32")
        if not (0 <= lo <= hi and start + hi <= size and hi - lo == 4 * count):
            raise Failure(
                f"{path}: tensor {name}: bytes {lo}..{hi} do not hold its shape {shape} in a "
                f"file of {size} bytes (truncated?)"
            )
    return header, start


def read_shape(path: Path) -> tuple[BlockShape, dict]:
    """The block's shape and the file's metadata (empty when none), from the header only."""
    header, _ = read_header(path)
    meta = header.get("__metadata__") or {}
    return BlockShape.from_header(header, path), meta


def load(torch, path: Path) -> dict:
    """Every block tensor as an f32 CPU tensor, by name."""
    if sys.byteorder != "little":
        raise Failure("reading safetensors needs a little-endian host")
    header, start = read_header(path)
    BlockShape.from_header(header, path)
    tensors = {}
    with open(path, "rb") as f:
        for name in NAMES:
            lo, hi = header[name]["data_offsets"]
            f.seek(start + lo)
            data = bytearray(f.read(hi - lo))
            flat = torch.frombuffer(data, dtype=torch.float32) if data else torch.zeros(0)
            tensors[name] = flat.reshape(header[name]["shape"])
    return tensors


def to_bytes(torch, tensors: dict, metadata: dict | None = None) -> bytes:
    """A safetensors file's bytes holding `tensors` (name -> tensor) as F32, in the order
    given; the header is padded with spaces to 8 bytes, as the safetensors crate writes."""
    entries, blobs, offset = {}, [], 0
    if metadata:
        entries["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name, t in tensors.items():
        t = t.detach().to(device="cpu", dtype=torch.float32).contiguous()
        # The tensor's own bytes (little-endian on the hosts load() accepts): no numpy here.
        blob = ctypes.string_at(t.data_ptr(), 4 * t.numel()) if t.numel() else b""
        entries[name] = {
            "dtype": "F32",
            "shape": list(t.shape),
            "data_offsets": [offset, offset + len(blob)],
        }
        blobs.append(blob)
        offset += len(blob)
    header = json.dumps(entries, separators=(",", ":")).encode()
    header += b" " * (-len(header) % 8)
    return struct.pack("<Q", len(header)) + header + b"".join(blobs)
