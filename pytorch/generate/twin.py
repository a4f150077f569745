"""The model, as Candle's float path computes it (src/model/decoder.rs on
src/model/layer.rs), in eager PyTorch: the embedding row, per layer RMSNorm, Q/K/V
projections, rotary embedding over halves, grouped-query attention against a preallocated
KV cache (each key/value head shared by heads / kv_heads query heads; block's cache, as
Candle's), the output projection and a residual add, RMSNorm, a SwiGLU MLP and a residual
add; then the final RMSNorm and the output head (the embedding when the file has no
output.weight) on the last token. Greedy decoding as Candle's: the answer is the argmax of each step's logits.
A call runs one sequence (`forward`) or several of one length in lockstep at one position
(`forward_batch`, scaling's batch axis), each in its own row of the cache.
"""

from __future__ import annotations

import math


class Twin:
    def __init__(self, torch, dims, weights: dict, dtype, device, positions: int, batch: int = 1):
        self.torch, self.d, self.dtype, self.device = torch, dims, dtype, device
        self.layers_count = dims.layers

        def on(name):
            return torch.from_numpy(weights[name]).to(device=device, dtype=dtype)

        self.embedding = on("token_embd.weight")
        self.head = on("output.weight") if "output.weight" in weights else self.embedding
        self.norm = on("output_norm.weight")
        names = (
            "attn_norm",
            "attn_q",
            "attn_k",
            "attn_v",
            "attn_output",
            "ffn_norm",
            "ffn_gate",
            "ffn_up",
            "ffn_down",
        )
        self.layers = [{n: on(f"blk.{i}.{n}.weight") for n in names} for i in range(dims.layers)]
        hd = dims.head_dim
        inv = [dims.rope_theta ** (-2.0 * i / hd) for i in range(hd // 2)]
        # Full-width cos and sin of every position, computed in f64, then cast, once.
        angles = torch.outer(
            torch.arange(positions, dtype=torch.float64), torch.tensor(inv, dtype=torch.float64)
        )
        angles = torch.cat([angles, angles], -1)
        self.cos, self.sin = (a.to(device, dtype) for a in (angles.cos(), angles.sin()))
        # Keys and values of `positions` tokens per layer for `batch` sequences, made once;
        # a call writes its tokens' at their positions and attends over the filled part.
        shape = (batch, dims.kv_heads, positions, hd)
        self.cache = [
            (
                torch.empty(shape, dtype=dtype, device=device),
                torch.empty(shape, dtype=dtype, device=device),
            )
            for _ in range(dims.layers)
        ]

    def weight_bytes(self) -> int:
        """Bytes the row's weights hold (the head counted once when it is the embedding)."""
        seen, total = set(), 0
        tensors = [self.embedding, self.head, self.norm] + [
            w for l in self.layers for w in l.values()
        ]
        for t in tensors:
            if id(t) not in seen:
                seen.add(id(t))
                total += t.numel() * t.element_size()
        return total

    def project(self, layer: int, which: int, x):
        """One of a layer's seven projections (Q, K, V, O, gate, up, down) of x."""
        names = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")
        return self.torch.nn.functional.linear(x, self.layers[layer][names[which]])

    def logits(self, x):
        return self.torch.nn.functional.linear(x, self.head)

    def rope_tables(self, pos: int, t: int):
        """Full-width (t, d) cos and sin for positions pos.. (made once, as Candle's)."""
        return self.cos[pos : pos + t], self.sin[pos : pos + t]

    def rms_norm(self, x, w):
        xf = x.float()
        y = xf * self.torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.d.rms_eps)
        return y.to(x.dtype) * w

    @staticmethod
    def rotate_half(x):
        import torch

        half = x.shape[-1] // 2
        return torch.cat([-x[..., half:], x[..., :half]], -1)

    def forward(self, tokens: list[int], pos: int):
        """Logits (vocab,) of the last of `tokens`, at positions pos.. after the cache's
        `pos` tokens (0 starts a new sequence)."""
        return self.forward_batch([tokens], pos)[0]

    def forward_batch(self, seqs: list[list[int]], pos: int):
        """Logits (B, vocab) of the last token of each of B sequences of one length, at
        positions pos.. after each one's `pos` cached tokens (the cache's rows 0..B)."""
        torch, d = self.torch, self.d
        b, t = len(seqs), len(seqs[0])
        ids = torch.tensor(seqs, device=self.device)
        x = self.embedding[ids]
        cos, sin = self.rope_tables(pos, t)
        hd, groups = d.head_dim, d.heads // d.kv_heads
        mask = None
        if t > 1:
            mask = torch.full((t, pos + t), float("-inf"), device=self.device, dtype=self.dtype)
            mask = torch.triu(mask, diagonal=pos + 1)
        for i, w in enumerate(self.layers):
            xn = self.rms_norm(x, w["attn_norm"])
            q = torch.nn.functional.linear(xn, w["attn_q"]).view(b, t, d.heads, hd).transpose(1, 2)
            k = (
                torch.nn.functional.linear(xn, w["attn_k"])
                .view(b, t, d.kv_heads, hd)
                .transpose(1, 2)
            )
            v = (
                torch.nn.functional.linear(xn, w["attn_v"])
                .view(b, t, d.kv_heads, hd)
                .transpose(1, 2)
            )
            q = q * cos + self.rotate_half(q) * sin
            k = k * cos + self.rotate_half(k) * sin
            keys, values = self.cache[i]
            keys[:b, :, pos : pos + t] = k
            values[:b, :, pos : pos + t] = v
            k, v = keys[:b, :, : pos + t], values[:b, :, : pos + t]
            kr = k.repeat_interleave(groups, 1)
            vr = v.repeat_interleave(groups, 1)
            scores = q @ kr.transpose(-1, -2) / math.sqrt(hd)
            if mask is not None:
                scores = scores + mask
            attn = torch.softmax(scores, -1) @ vr
            attn = attn.transpose(1, 2).reshape(b, t, d.hidden)
            h1 = x + torch.nn.functional.linear(attn, w["attn_output"])
            hn = self.rms_norm(h1, w["ffn_norm"])
            act = torch.nn.functional.silu(torch.nn.functional.linear(hn, w["ffn_gate"]))
            act = act * torch.nn.functional.linear(hn, w["ffn_up"])
            x = h1 + torch.nn.functional.linear(act, w["ffn_down"])
        last = self.rms_norm(x[:, -1], self.norm)
        return torch.nn.functional.linear(last, self.head)


def greedy(model, prompt: list[int], n: int, eos: list[int]) -> list[int]:
    """Up to `n` new tokens, each the argmax of the last logits, ending at an EOS."""
    out = []
    with model.torch.inference_mode():
        nxt = int(model.forward(prompt, 0).argmax())
        for i in range(n):
            out.append(nxt)
            if nxt in eos or i + 1 == n:
                break
            nxt = int(model.forward([nxt], len(prompt) + i).argmax())
    return out
