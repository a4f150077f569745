//! One decoder layer of the kind every current LLM stacks, built from
//! candle-nn, and reusable beyond the benchmark: RMSNorm, Q/K/V/O projections
//! (`Linear`), rotary embedding (non-interleaved, as Llama's Hugging Face
//! code), causal attention (Q K^T / sqrt(d), softmax, times V), a residual add,
//! RMSNorm, a SwiGLU MLP (down(silu(gate(x)) * up(x))) and a residual add.
//!
//! Attention is grouped-query (GQA; Ainslie et al., "GQA: Training Generalized
//! Multi-Query Transformer Models from Multi-Head Checkpoints", 2023):
//! `kv_heads` key/value heads, each shared by `heads / kv_heads` consecutive
//! query heads (query head i reads key/value head i / groups, as Llama's
//! `repeat_kv`); `kv_heads == heads` is plain multi-head attention. The keys
//! and values are not repeated: the queries of a group are laid out as one
//! taller matrix against their one key/value head, so every K/V byte is read
//! once.
//!
//! A [`Layer`] is its weights in one dtype on one device; [`Layer::forward`]
//! runs a prefill (no cache, or appending to one) or a decode step against a
//! [`KvCache`], a preallocated buffer the new keys and values are written into
//! (`slice_set`), so a step reads the cache where it lies instead of copying it
//! (as `Tensor::cat` would, every step). [`Rope`] holds the rotary tables for a
//! range of positions, made once, off any clock. The forward pass runs with
//! candle-nn's fused kernels, with the suite's own ([`Kernels::Lab`]), or with
//! the same math from primitive ops ([`Kernels::Composed`]: the f64 reference
//! the fused kernels are held against).

use anyhow::{bail, ensure, Context, Result};
use candle_core::{DType, Device, Tensor};
use candle_nn::Linear;

use crate::clock::spans::span;
use crate::kernels::QLinear;
use crate::schema::BlockShape;
use crate::schema::TokenOpClass::{Attention, Elementwise, Matmuls, Norms};

mod cache;
mod kernels;
mod proj;
pub use cache::KvCache;
pub use kernels::Kernels;
pub use proj::{Fan, Input, Proj};

/// A layer's sizes and constants.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerConfig {
    pub hidden: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads; they divide `heads` (equal: multi-head attention).
    pub kv_heads: usize,
    /// hidden / heads.
    pub head_dim: usize,
    /// The MLP's inner width.
    pub mlp: usize,
    /// RMSNorm's epsilon (Llama: 1e-5 or 1e-6).
    pub rms_eps: f64,
    /// Rotary embedding's base (Llama-2: 10 000; Llama-3: 500 000).
    pub rope_theta: f64,
}

impl LayerConfig {
    /// Width of K and V: kv_heads x head_dim (hidden without GQA).
    pub fn kv_width(&self) -> usize {
        self.kv_heads * self.head_dim
    }

    /// Query heads per key/value head.
    pub fn groups(&self) -> usize {
        self.heads / self.kv_heads
    }

    /// Refuses sizes the layer cannot have.
    pub fn check(&self) -> Result<()> {
        ensure!(
            self.heads > 0 && self.head_dim * self.heads == self.hidden,
            "heads {} x head_dim {} is not hidden {}",
            self.heads,
            self.head_dim,
            self.hidden
        );
        ensure!(
            self.kv_heads > 0 && self.heads.is_multiple_of(self.kv_heads),
            "kv_heads {} must divide heads {}",
            self.kv_heads,
            self.heads
        );
        ensure!(
            self.head_dim.is_multiple_of(2),
            "head_dim {}: rotary embedding needs an even head size",
            self.head_dim
        );
        Ok(())
    }

    /// Each weight's name and shape, in the order a layer's file holds them.
    /// Linear weights are (out, in), as `candle_nn::Linear` and
    /// `torch.nn.Linear` hold them.
    pub fn weight_shapes(&self) -> [(&'static str, Vec<usize>); 9] {
        let (h, kv, m) = (self.hidden, self.kv_width(), self.mlp);
        [
            ("attn_norm", vec![h]),
            ("wq", vec![h, h]),
            ("wk", vec![kv, h]),
            ("wv", vec![kv, h]),
            ("wo", vec![h, h]),
            ("mlp_norm", vec![h]),
            ("w_gate", vec![m, h]),
            ("w_up", vec![m, h]),
            ("w_down", vec![h, m]),
        ]
    }
}

impl From<&BlockShape> for LayerConfig {
    fn from(s: &BlockShape) -> Self {
        Self {
            hidden: s.hidden,
            heads: s.heads,
            kv_heads: s.kv_heads(),
            head_dim: s.head_dim,
            mlp: s.mlp,
            rms_eps: s.rms_eps,
            rope_theta: s.rope_theta,
        }
    }
}

/// One decoder layer's weights in one dtype on one device.
pub struct Layer {
    cfg: LayerConfig,
    attn_norm: Tensor,
    mlp_norm: Tensor,
    /// Q, K and V.
    attn_in: Fan,
    wo: Proj,
    /// gate and up.
    mlp_in: Fan,
    down: Proj,
}

impl Layer {
    /// The layer from `weight(name)`, for the names of
    /// [`LayerConfig::weight_shapes`], each checked against its shape. The
    /// tensors are used as given: cast and move them first.
    pub fn new(cfg: &LayerConfig, mut weight: impl FnMut(&str) -> Result<Tensor>) -> Result<Self> {
        cfg.check()?;
        let mut take = |name: &str, shape: &[usize]| -> Result<Tensor> {
            let t = weight(name).with_context(|| format!("weight {name}"))?;
            if t.dims() != shape {
                bail!(
                    "weight {name} has shape {:?}, the layer needs {shape:?}",
                    t.dims()
                );
            }
            Ok(t)
        };
        let [an, q, k, v, o, mn, g, u, d] = cfg.weight_shapes();
        let mut linear = |(name, shape): (&str, Vec<usize>)| -> Result<Proj> {
            Ok(Proj::Float(Linear::new(take(name, &shape)?, None)))
        };
        let projs = [
            linear(q)?,
            linear(k)?,
            linear(v)?,
            linear(o)?,
            linear(g)?,
            linear(u)?,
            linear(d)?,
        ];
        let norms = (take(an.0, &an.1)?, take(mn.0, &mn.1)?);
        let [wq, wk, wv, wo, gate, up, down] = projs;
        let (attn_in, mlp_in) = (Fan::Apart(vec![wq, wk, wv]), Fan::Apart(vec![gate, up]));
        Ok(Self::of(cfg, norms, [attn_in, mlp_in], [wo, down]))
    }

    /// The layer with its projections as GGUF blocks (`proj(name)`, for the
    /// projection names of [`LayerConfig::weight_shapes`], each checked
    /// against its shape) and its norms' scales from `norm(name)`: the lab's
    /// quantized model path.
    pub fn quantized(
        cfg: &LayerConfig,
        mut norm: impl FnMut(&str) -> Result<Tensor>,
        mut proj: impl FnMut(&str) -> Result<QLinear>,
    ) -> Result<Self> {
        cfg.check()?;
        let [an, q, k, v, o, mn, g, u, d] = cfg.weight_shapes();
        let mut take = |(name, shape): (&str, Vec<usize>)| -> Result<Proj> {
            let p = proj(name).with_context(|| format!("weight {name}"))?;
            if [p.dims().0, p.dims().1] != shape[..] {
                bail!("weight {name} is {:?}, the layer needs {shape:?}", p.dims());
            }
            Ok(Proj::Quantized(p))
        };
        let projs = [
            take(q)?,
            take(k)?,
            take(v)?,
            take(o)?,
            take(g)?,
            take(u)?,
            take(d)?,
        ];
        let mut scale = |(name, shape): (&str, Vec<usize>)| -> Result<Tensor> {
            let t = norm(name).with_context(|| format!("weight {name}"))?;
            if t.dims() != shape {
                bail!(
                    "weight {name} has shape {:?}, the layer needs {shape:?}",
                    t.dims()
                );
            }
            Ok(t)
        };
        let norms = (scale(an)?, scale(mn)?);
        let [wq, wk, wv, wo, gate, up, down] = projs;
        let attn_in = Fan::stacked(vec![wq, wk, wv])?;
        let mlp_in = Fan::stacked(vec![gate, up])?;
        Ok(Self::of(cfg, norms, [attn_in, mlp_in], [wo, down]))
    }

    fn of(
        cfg: &LayerConfig,
        (attn_norm, mlp_norm): (Tensor, Tensor),
        [attn_in, mlp_in]: [Fan; 2],
        [wo, down]: [Proj; 2],
    ) -> Self {
        Self {
            cfg: cfg.clone(),
            attn_norm,
            mlp_norm,
            attn_in,
            wo,
            mlp_in,
            down,
        }
    }

    pub fn config(&self) -> &LayerConfig {
        &self.cfg
    }

    /// The projections as the layer runs them, in order, each with the
    /// activation it reads: Q, K, V (or the three stacked), O, gate, up (or
    /// the two stacked), down.
    pub fn projections(&self) -> Vec<(&Proj, Input)> {
        let attn = self.attn_in.projs().into_iter().map(|p| (p, Input::Attn));
        let mlp = self.mlp_in.projs().into_iter().map(|p| (p, Input::Mlp));
        attn.chain([(&self.wo, Input::Heads)])
            .chain(mlp)
            .chain([(&self.down, Input::Act)])
            .collect()
    }

    /// The two norms' scales: before attention, before the MLP.
    pub fn norms(&self) -> (&Tensor, &Tensor) {
        (&self.attn_norm, &self.mlp_norm)
    }

    /// One call on `x` (batch, tokens, hidden) at the positions `rope` holds.
    /// Without a cache the tokens attend to each other under `mask`; with one,
    /// their keys and values are written into it after what it holds and they
    /// attend to all of it (`mask`: tokens x cached-plus-new keys, or `None` for
    /// one token, which sees every key). The cached keys are used as stored,
    /// already rotated at their positions.
    pub fn forward(
        &self,
        x: &Tensor,
        rope: &Rope,
        mask: Option<&Tensor>,
        cache: Option<&mut KvCache>,
        k: Kernels,
    ) -> Result<Tensor> {
        // The fused kernels need a contiguous input (a no-op when it is one).
        let x = &x.contiguous()?;
        let (b, t, h) = x.dims3()?;
        let c = &self.cfg;
        let (heads, kv_heads) = (c.heads, c.kv_heads);
        let eps = c.rms_eps as f32;
        let norm = |x: &Tensor, w: &Tensor| k.rms_norm(x, w, eps);
        // Each op in a span: a recorded pass (generate's parts) times it by
        // class; any other call runs the ops alone (`clock::spans`).
        let xn = span(Norms, || norm(x, &self.attn_norm))?;
        let proj = |p: &Proj, x: &Tensor| span(Matmuls, || p.forward(x, k));
        // The heads' spans hold the layout and the rotation alone (in
        // `Kernels::heads`): a span inside a span counts in the outer one, so
        // wrapping the projections too would book the q and k matmuls (an
        // eighth of a layer's weights) as rotary.
        let [q, keys, values] = outputs(span(Matmuls, || self.attn_in.forward(&xn, k))?)?;
        let q = k.heads(&q, heads, Some(rope))?;
        let keys = k.heads(&keys, kv_heads, Some(rope))?;
        let values = k.heads(&values, kv_heads, None)?;
        let (keys, values) = match cache {
            Some(cache) => span(Elementwise, || cache.append(&keys, &values))?,
            None => (keys, values),
        };
        let attn = span(Attention, || k.attention(&q, &keys, &values, mask, c))?;
        let attn = span(Elementwise, || {
            Ok(attn.transpose(1, 2)?.contiguous()?.reshape((b, t, h))?)
        })?;
        let o = proj(&self.wo, &attn)?;
        let h1 = span(Elementwise, || k.add(x, &o))?;
        let hn = span(Norms, || norm(&h1, &self.mlp_norm))?;
        let [gate, up] = outputs(span(Matmuls, || self.mlp_in.forward(&hn, k))?)?;
        let act = span(Elementwise, || k.swiglu(&gate, &up))?;
        let down = proj(&self.down, &act)?;
        span(Elementwise, || k.add(&h1, &down))
    }
}

/// A fan's `N` outputs (Q, K and V; gate and up) as an array.
fn outputs<const N: usize>(v: Vec<Tensor>) -> Result<[Tensor; N]> {
    let n = v.len();
    v.try_into()
        .map_err(|_| anyhow::anyhow!("a fan of {N} projections gave {n} outputs"))
}

/// softmax(Q K^T / sqrt(d) + mask) V for `q` (batch, heads, t, d) against
/// `keys` and `values` (batch, kv_heads, keys, d), grouped: the `groups`
/// query heads of one key/value head are one (groups x t) x d matrix (a
/// reshape of `q`, no copy), so K and V are read as they lie. Returns
/// (batch, heads, t, d).
pub fn attention(
    q: &Tensor,
    keys: &Tensor,
    values: &Tensor,
    mask: Option<&Tensor>,
    c: &LayerConfig,
    k: Kernels,
) -> Result<Tensor> {
    let (b, _, t, d) = q.dims4()?;
    let n = keys.dim(2)?;
    let grouped = q.reshape((b, c.kv_heads, c.groups() * t, d))?;
    let scores = (grouped.matmul(&keys.t()?)? * (1.0 / (d as f64).sqrt()))?;
    let mut scores = scores.reshape((b, c.heads, t, n))?;
    if let Some(mask) = mask {
        scores = scores.broadcast_add(mask)?;
    }
    let probs = k.softmax(&scores)?;
    let probs = probs.reshape((b, c.kv_heads, c.groups() * t, n))?;
    Ok(probs.matmul(values)?.reshape((b, c.heads, t, d))?)
}

/// Rotary embedding's cos and sin tables (positions x head_dim / 2) for a
/// range of positions.
pub struct Rope {
    pub cos: Tensor,
    pub sin: Tensor,
}

impl Rope {
    /// Tables for `len` positions from `start`, frequencies theta^(-2i/d)
    /// (RoFormer, Su et al. 2021), computed in f64, then cast to `dtype`.
    pub fn new(
        head_dim: usize,
        theta: f64,
        start: usize,
        len: usize,
        dtype: DType,
        device: &Device,
    ) -> Result<Self> {
        let d = head_dim;
        let mut cos = Vec::with_capacity(len * d / 2);
        let mut sin = Vec::with_capacity(len * d / 2);
        for pos in start..start + len {
            for i in 0..d / 2 {
                let angle = pos as f64 * theta.powf(-2.0 * i as f64 / d as f64);
                cos.push(angle.cos());
                sin.push(angle.sin());
            }
        }
        let table = |v: Vec<f64>| -> Result<Tensor> {
            Ok(Tensor::from_vec(v, (len, d / 2), &Device::Cpu)?
                .to_dtype(dtype)?
                .to_device(device)?)
        };
        Ok(Self {
            cos: table(cos)?,
            sin: table(sin)?,
        })
    }

    /// `x` (batch, heads, tokens, head_dim) rotated, non-interleaved: the
    /// first and second halves of each head are the pairs.
    pub fn apply(&self, x: &Tensor, k: Kernels) -> Result<Tensor> {
        Ok(match k {
            Kernels::Fused => candle_nn::rotary_emb::rope(x, &self.cos, &self.sin)?,
            Kernels::Lab => crate::kernels::rope(x, &self.cos, &self.sin)?,
            Kernels::Composed => candle_nn::rotary_emb::rope_slow(x, &self.cos, &self.sin)?,
        })
    }
}

/// The causal mask for `t` new tokens after `past` cached ones: t x (past +
/// t), 0 where a query may look (keys up to its own position), -inf after.
pub fn causal_mask(t: usize, past: usize, dtype: DType, device: &Device) -> Result<Tensor> {
    let n = past + t;
    let v: Vec<f32> = (0..t)
        .flat_map(|i| (0..n).map(move |j| if j > past + i { f32::NEG_INFINITY } else { 0.0 }))
        .collect();
    Ok(Tensor::from_vec(v, (t, n), &Device::Cpu)?
        .to_dtype(dtype)?
        .to_device(device)?)
}

#[cfg(test)]
mod tests;
