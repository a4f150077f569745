"""Tests of blockmodel.py: the block against a plain-Python one written from the brief's
formulas (scalars and lists, nothing shared with the module), with as many key/value heads
as query heads and with fewer (grouped-query attention: query head h reads key/value head
h // groups), the causal block's prefix property the f64 reference relies on, decode
against a prefill one token longer (the cache's keys are used as stored, rotated at their
positions; the cache preallocated and written in place), and the single-kernel forms
against the composed ones."""

from __future__ import annotations

import dataclasses
import math
import struct
import tempfile
import unittest
from pathlib import Path

from blockmodel import (
    COMPOSED,
    DECODE,
    FUSED,
    PREFILL,
    Block,
    KvCache,
    rms_norm_composed,
    rms_norm_fused,
    rope,
    softmax_composed,
    softmax_fused,
)
from blockweights import load, read_shape
from testkit import torch_or_skip, write_weights

# 1e-5 as an f32, as model.rs hands it to candle-nn (and blockmodel.Block keeps it).
EPS = struct.unpack("<f", struct.pack("<f", 1e-5))[0]


def py_linear(x, w):
    return [sum(wi * xi for wi, xi in zip(row, x)) for row in w]


def py_rms(x, w, eps=EPS):
    r = math.sqrt(sum(v * v for v in x) / len(x) + eps)
    return [v / r * s for v, s in zip(x, w)]


def py_rope(v, pos, theta=10_000.0):
    d, out = len(v), list(v)
    half = d // 2
    for i in range(half):
        a = pos * theta ** (-2.0 * i / d)
        out[i] = v[i] * math.cos(a) - v[i + half] * math.sin(a)
        out[i + half] = v[i + half] * math.cos(a) + v[i] * math.sin(a)
    return out


def py_block(w, xs, positions, heads, cache=None, kv_heads=None):
    """The block for one sequence: xs (tokens x hidden) at `positions`, attending causally
    within xs after the cache's keys and values (kv_heads x len x d, used as stored).
    Query head h reads key/value head h // (heads // kv_heads)."""
    hidden = len(xs[0])
    d = hidden // heads
    kv = heads if kv_heads is None else kv_heads
    ks = [[list(r) for r in h] for h in cache[0]] if cache else [[] for _ in range(kv)]
    vs = [[list(r) for r in h] for h in cache[1]] if cache else [[] for _ in range(kv)]
    qs = []
    for x, pos in zip(xs, positions):
        xn = py_rms(x, w["attn_norm"])
        q, k, v = (py_linear(xn, w[n]) for n in ("wq", "wk", "wv"))
        qs.append([py_rope(q[h * d : (h + 1) * d], pos) for h in range(heads)])
        for j in range(kv):
            ks[j].append(py_rope(k[j * d : (j + 1) * d], pos))
            vs[j].append(v[j * d : (j + 1) * d])
    before = len(ks[0]) - len(xs)
    out = []
    for t, x in enumerate(xs):
        attn = []
        for h in range(heads):
            j = h // (heads // kv)
            keys = ks[j][: before + t + 1]
            scores = [sum(a * b for a, b in zip(qs[t][h], k)) / math.sqrt(d) for k in keys]
            top = max(scores)
            e = [math.exp(s - top) for s in scores]
            p = [x / sum(e) for x in e]
            attn += [sum(p[i] * vs[j][i][c] for i in range(len(keys))) for c in range(d)]
        h1 = [a + b for a, b in zip(x, py_linear(attn, w["wo"]))]
        hn = py_rms(h1, w["mlp_norm"])
        gate, up = py_linear(hn, w["w_gate"]), py_linear(hn, w["w_up"])
        act = [g / (1 + math.exp(-g)) * u for g, u in zip(gate, up)]
        out.append([a + b for a, b in zip(h1, py_linear(act, w["w_down"]))])
    return out


class Model(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.torch = torch = torch_or_skip()
        cls.dir = tempfile.TemporaryDirectory()
        path = Path(cls.dir.name) / "w.safetensors"
        write_weights(torch, path, batch=2, seq=4, hidden=8, heads=2, mlp=6, seed=3)
        cls.shape, _ = read_shape(path)
        cls.host = load(torch, path)
        cls.f64 = Block(torch, cls.host, cls.shape, torch.float64, torch.device("cpu"))
        # Grouped-query: 4 query heads of 4 over 2 key/value heads.
        gqa = Path(cls.dir.name) / "gqa.safetensors"
        write_weights(torch, gqa, batch=2, seq=4, hidden=16, heads=4, kv_heads=2, mlp=6, seed=5)
        cls.gqa_shape, _ = read_shape(gqa)
        cls.gqa_host = load(torch, gqa)
        cls.gqa = Block(torch, cls.gqa_host, cls.gqa_shape, torch.float64, torch.device("cpu"))

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def assertClose(self, got, want, tol):
        err = (got.double() - want.double()).abs().max().item()
        self.assertLess(err, tol)

    def test_the_block_is_the_brief_s_block(self):
        torch = self.torch
        for b, s, host in [
            (self.f64, self.shape, self.host),
            (self.gqa, self.gqa_shape, self.gqa_host),
        ]:
            self.assertEqual(list(host["wk"].shape), [s.kv_heads * s.head_dim, s.hidden])
            w = {k: v.double().tolist() for k, v in host.items()}
            prefill = b.forward(b.x_prefill, PREFILL, b.aux(PREFILL, torch.float64), COMPOSED)
            decode = b.forward(b.x_decode, DECODE, b.aux(DECODE, torch.float64), COMPOSED)
            for i in range(s.batch):
                want = py_block(w, w["x_prefill"][i], range(s.seq), s.heads, None, s.kv_heads)
                self.assertClose(prefill[i], torch.tensor(want, dtype=torch.float64), 1e-12)
                cache = (w["k_cache"][i], w["v_cache"][i])
                want = py_block(w, w["x_decode"][i], [s.seq], s.heads, cache, s.kv_heads)
                self.assertClose(decode[i], torch.tensor(want, dtype=torch.float64), 1e-12)

    def test_grouped_heads_share_their_key_value_head_in_llama_s_order(self):
        # The same block with each K/V head's weights repeated for its group (Llama's
        # repeat_kv) as plain multi-head attention: the grouped block's output.
        torch, s = self.torch, self.gqa_shape
        d, g = s.head_dim, s.groups
        rep = dict(self.gqa_host)
        for name in ("wk", "wv"):
            rep[name] = self.gqa_host[name].reshape(s.kv_heads, d, -1)
            rep[name] = rep[name].repeat_interleave(g, 0).reshape(s.hidden, s.hidden)
        mha = dataclasses.replace(s, kv_heads=s.heads)
        for name in ("k_cache", "v_cache"):
            rep[name] = self.gqa_host[name].repeat_interleave(g, 1)
        plain = Block(torch, rep, mha, torch.float64, torch.device("cpu"))
        for phase in (PREFILL, DECODE):
            aux = self.gqa.aux(phase, torch.float64)
            want = plain.forward(plain.input(phase), phase, aux, COMPOSED)
            self.assertClose(self.gqa.forward(self.gqa.input(phase), phase, aux), want, 1e-12)

    def test_the_cache_is_written_in_place_and_refuses_what_does_not_fit(self):
        torch = self.torch
        cache = KvCache(torch, 1, 2, 3, 4, torch.float32, torch.device("cpu"))
        ones = torch.ones(1, 2, 2, 4)
        k, _ = cache.append(ones, 2 * ones)
        buffer = cache.k.data_ptr()
        k, v = cache.append(3 * ones[:, :, :1], 3 * ones[:, :, :1])
        self.assertEqual(k.data_ptr(), buffer)  # a view of the buffer, not a copy
        self.assertEqual(k[0, 1, :, 0].tolist(), [1.0, 1.0, 3.0])
        self.assertEqual(v[0, 1, :, 0].tolist(), [2.0, 2.0, 3.0])
        with self.assertRaisesRegex(ValueError, "holds 3 positions: 1 more do not fit after 3"):
            cache.append(ones[:, :, :1], ones[:, :, :1])
        cache.truncate(1)
        self.assertEqual(cache.append(ones[:, :, :1], ones[:, :, :1])[0].shape[2], 2)

    def test_a_causal_block_s_first_tokens_need_nothing_after_them(self):
        torch, b = self.torch, self.f64
        full = b.forward(b.x_prefill, PREFILL, b.aux(PREFILL, torch.float64), COMPOSED)
        for k in (1, 3):
            head = b.forward(b.x_prefill[:, :k], PREFILL, b.aux(PREFILL, torch.float64, k))
            self.assertClose(head, full[:, :k], 1e-12)

    def test_decode_is_the_last_token_of_a_prefill_one_token_longer(self):
        torch, b, s = self.torch, self.f64, self.shape
        F, dt = torch.nn.functional, torch.float64
        # The cache a prefill of x_prefill leaves: its keys rotated at 0..seq-1.
        aux = b.aux(PREFILL, dt)
        xn = rms_norm_composed(b.x_prefill, b.attn_norm, b.eps)

        def heads_of(y):
            return y.reshape(s.batch, s.seq, s.kv_heads, s.head_dim).transpose(1, 2)

        keys = rope(heads_of(F.linear(xn, b.wk)), aux.cos, aux.sin)
        values = heads_of(F.linear(xn, b.wv))
        cache = KvCache(torch, s.batch, s.kv_heads, s.seq + 1, s.head_dim, dt, b.device)
        cache.append(keys, values)
        decode = b.forward(b.x_decode, DECODE, b.aux(DECODE, dt), FUSED, cache=cache)
        longer = torch.cat([b.x_prefill, b.x_decode], 1)
        full = b.forward(longer, PREFILL, b.aux(PREFILL, dt, s.seq + 1), FUSED)
        self.assertClose(decode, full[:, -1:], 1e-12)
        # Timed again, the step rewinds and gives the same token.
        again = b.forward(b.x_decode, DECODE, b.aux(DECODE, dt), FUSED, cache=cache)
        self.assertTrue(torch.equal(again, decode))

    def test_single_kernels_compute_the_composed_math(self):
        torch = self.torch
        x, w = torch.randn(5, 16, dtype=torch.float64), torch.rand(16, dtype=torch.float64)
        self.assertClose(rms_norm_fused(x, w, 1e-5), rms_norm_composed(x, w, 1e-5), 1e-13)
        scores = torch.randn(3, 7, dtype=torch.float64)
        self.assertClose(softmax_fused(scores), softmax_composed(scores), 1e-15)
        # In bf16 the composed form normalizes in f32 and casts back before the scale.
        xb, wb = x.bfloat16(), w.bfloat16()
        xf = xb.float()
        want = (xf / (xf.square().sum(-1, keepdim=True) / 16 + 1e-5).sqrt()).bfloat16() * wb
        self.assertTrue(torch.equal(rms_norm_composed(xb, wb, 1e-5), want))
        # The whole block in f32, single kernels against composed ones.
        b = Block(torch, self.host, self.shape, torch.float32, torch.device("cpu"))
        aux = b.aux(PREFILL, torch.float32)
        fused = b.forward(b.x_prefill, PREFILL, aux, FUSED)
        self.assertClose(fused, b.forward(b.x_prefill, PREFILL, aux, COMPOSED), 1e-5)


if __name__ == "__main__":
    unittest.main()
