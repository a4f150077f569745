//! One decoder layer of the kind every current LLM stacks, built from
//! candle-nn, and reusable beyond the benchmark: RMSNorm, Q/K/V/O projections
//! (`Linear`), rotary embedding (non-interleaved, as Llama's Hugging Face
//! code), causal attention (Q K^T / sqrt(d), softmax, times V), a residual add,
//! RMSNorm, a SwiGLU MLP (down(silu(gate(x)) * up(x))) and a residual add.
//! What an architecture adds is read from its [`super::Features`]: biases on
//! Q, K and V (Qwen 2), an RMSNorm on each head of Q and K before rotary
//! (Qwen 3, Gemma 3), norms on attention's and the MLP's outputs, a GELU gate
//! and sliding-window attention (Gemma 3); the pass is the same code.
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

use super::{Activation, Config};
use crate::clock::spans::span;
use crate::kernels::QLinear;
use crate::schema::TokenOpClass::{Attention, Elementwise, Matmuls, Norms};

mod cache;
mod kernels;
mod proj;
pub use cache::KvCache;
pub use kernels::Kernels;
pub use proj::{Fan, Input, Proj};

/// The layer `block` times, (hidden, heads, MLP, tokens), whose sizes the
/// `kernels` experiment's element-wise ops take too: a Llama-7B-like layer
/// on a GPU (hidden 4096, 32 heads, MLP 11008, 2048 tokens).
pub const GPU_SHAPE: (usize, usize, usize, usize) = (4096, 32, 11008, 2048);
/// On the CPU an eighth of its width (hidden 512, 8 heads, MLP 1376) over 128
/// tokens: seconds on 2 cores rather than minutes.
pub const CPU_SHAPE: (usize, usize, usize, usize) = (512, 8, 1376, 128);

/// Refuses sizes a layer cannot have.
pub fn check(cfg: &Config) -> Result<()> {
    ensure!(
        cfg.heads > 0 && cfg.head_dim > 0,
        "heads {} of width {}: a layer needs heads",
        cfg.heads,
        cfg.head_dim
    );
    ensure!(
        cfg.kv_heads > 0 && cfg.heads.is_multiple_of(cfg.kv_heads),
        "kv_heads {} must divide heads {}",
        cfg.kv_heads,
        cfg.heads
    );
    ensure!(
        cfg.head_dim.is_multiple_of(2),
        "head_dim {}: rotary embedding needs an even head size",
        cfg.head_dim
    );
    Ok(())
}

/// One decoder layer's weights in one dtype on one device.
pub struct Layer {
    cfg: Config,
    /// Keys a query sees on a sliding-window layer (Gemma 3's local ones).
    window: Option<usize>,
    attn_norm: Tensor,
    mlp_norm: Tensor,
    /// Q's, K's and V's biases (Qwen 2).
    bias: Option<[Tensor; 3]>,
    /// The scales of each head's norm of Q and of K (Qwen 3, Gemma 3).
    qk_norm: Option<(Tensor, Tensor)>,
    /// The norms of attention's and the MLP's outputs (Gemma 3).
    post_norm: Option<(Tensor, Tensor)>,
    /// The MLP's gate: the architecture's ([`Layer::gate_with`] for a test).
    act: Activation,
    /// Q, K and V.
    attn_in: Fan,
    wo: Proj,
    /// gate and up.
    mlp_in: Fan,
    down: Proj,
}

/// A layer's weight `name` taken from `weight` and checked against `shape`.
fn take(
    weight: &mut dyn FnMut(&str) -> Result<Tensor>,
    (name, shape): (&str, &[usize]),
) -> Result<Tensor> {
    let t = weight(name).with_context(|| format!("weight {name}"))?;
    if t.dims() != shape {
        bail!(
            "weight {name} has shape {:?}, the layer needs {shape:?}",
            t.dims()
        );
    }
    Ok(t)
}

impl Layer {
    /// Layer `l` of a model of `cfg` from `weight(name)`, for the names of
    /// [`Config::layer_weights`], each checked against its shape. The tensors
    /// are used as given: cast and move them first.
    pub fn new(
        cfg: &Config,
        l: usize,
        mut weight: impl FnMut(&str) -> Result<Tensor>,
    ) -> Result<Self> {
        check(cfg)?;
        let shapes = cfg.layer_weights();
        let mut projs = Vec::new();
        for (name, shape) in shapes.iter().filter(|(_, s)| s.len() == 2) {
            let w = take(&mut weight, (name, shape))?;
            projs.push(Proj::Float(Linear::new(w, None)));
        }
        let [wq, wk, wv, wo, gate, up, down] = projections(projs)?;
        let (attn_in, mlp_in) = (Fan::Apart(vec![wq, wk, wv]), Fan::Apart(vec![gate, up]));
        Self::of(cfg, l, &mut weight, [attn_in, mlp_in], [wo, down])
    }

    /// Layer `l` with its projections as GGUF blocks (`proj(name)`, for the
    /// projection names of [`Config::layer_weights`], each checked against
    /// its shape) and its vectors (norms' scales, biases) from `vector(name)`:
    /// the lab's quantized model path.
    pub fn quantized(
        cfg: &Config,
        l: usize,
        mut vector: impl FnMut(&str) -> Result<Tensor>,
        mut proj: impl FnMut(&str) -> Result<QLinear>,
    ) -> Result<Self> {
        check(cfg)?;
        let mut projs = Vec::new();
        for (name, shape) in cfg.layer_weights().iter().filter(|(_, s)| s.len() == 2) {
            let p = proj(name).with_context(|| format!("weight {name}"))?;
            if [p.dims().0, p.dims().1] != shape[..] {
                bail!("weight {name} is {:?}, the layer needs {shape:?}", p.dims());
            }
            projs.push(Proj::Quantized(p));
        }
        let [wq, wk, wv, wo, gate, up, down] = projections(projs)?;
        let attn_in = Fan::stacked(vec![wq, wk, wv])?;
        let mlp_in = Fan::stacked(vec![gate, up])?;
        Self::of(cfg, l, &mut vector, [attn_in, mlp_in], [wo, down])
    }

    /// The layer of its projections, its vectors taken from `vector`.
    fn of(
        cfg: &Config,
        l: usize,
        vector: &mut dyn FnMut(&str) -> Result<Tensor>,
        [attn_in, mlp_in]: [Fan; 2],
        [wo, down]: [Proj; 2],
    ) -> Result<Self> {
        let shapes = cfg.layer_weights();
        let mut get = |name: &str| -> Result<Tensor> {
            let (_, shape) = shapes
                .iter()
                .find(|(n, _)| *n == name)
                .with_context(|| format!("a {} layer has no weight {name}", cfg.arch.name()))?;
            take(vector, (name, shape))
        };
        let f = cfg.arch.features();
        let bias = match f.qkv_bias {
            true => Some([get("bq")?, get("bk")?, get("bv")?]),
            false => None,
        };
        let qk_norm = match f.qk_norm {
            true => Some((get("q_norm")?, get("k_norm")?)),
            false => None,
        };
        let post_norm = match f.sandwich_norms {
            true => Some((get("post_attn_norm")?, get("post_mlp_norm")?)),
            false => None,
        };
        Ok(Self {
            cfg: cfg.clone(),
            window: cfg.window(l),
            attn_norm: get("attn_norm")?,
            mlp_norm: get("mlp_norm")?,
            bias,
            qk_norm,
            post_norm,
            act: f.activation,
            attn_in,
            wo,
            mlp_in,
            down,
        })
    }

    /// The layer with its MLP gated by `act` instead of its architecture's:
    /// how the tests hold Gemma 3 to candle-transformers' `quantized_gemma3`,
    /// which gates with SiLU (candle's issue 3745).
    pub fn gate_with(&mut self, act: Activation) {
        self.act = act;
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The keys a query sees, on a sliding-window layer.
    pub fn window(&self) -> Option<usize> {
        self.window
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
    /// one token, which sees every key), or to their window on a
    /// sliding-window layer. The cached keys are used as stored, already
    /// rotated at their positions.
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
        let c = &self.cfg;
        let norm = |x: &Tensor, w: &Tensor| k.rms_norm(x, w, c.rms_eps as f32);
        // Each op in a span: a recorded pass (generate's parts) times it by
        // class; any other call runs the ops alone (`clock::spans`).
        let xn = span(Norms, || norm(x, &self.attn_norm))?;
        let (q, keys, values) = self.qkv(&xn, rope, k)?;
        let (keys, values) = match cache {
            Some(cache) => span(Elementwise, || cache.append(&keys, &values, k))?,
            None => (keys, values),
        };
        let attn = span(Attention, || self.attend(&q, &keys, &values, mask, k))?;
        let (b, t, h) = x.dims3()?;
        let attn = span(Elementwise, || {
            Ok(attn
                .transpose(1, 2)?
                .contiguous()?
                .reshape((b, t, c.q_width()))?)
        })?;
        let mut o = span(Matmuls, || self.wo.forward(&attn, k))?;
        if let Some((post, _)) = &self.post_norm {
            o = span(Norms, || norm(&o, post))?;
        }
        let h1 = span(Elementwise, || k.add(x, &o))?;
        let hn = span(Norms, || norm(&h1, &self.mlp_norm))?;
        let [gate, up] = outputs(span(Matmuls, || self.mlp_in.forward(&hn, k))?)?;
        let act = span(Elementwise, || k.gated(&gate, &up, self.act))?;
        let mut down = span(Matmuls, || self.down.forward(&act, k))?;
        if let Some((_, post)) = &self.post_norm {
            down = span(Norms, || norm(&down, post))?;
        }
        debug_assert_eq!(h, c.hidden);
        span(Elementwise, || k.add(&h1, &down))
    }

    /// Q (batch, heads, tokens, head_dim), K and V (batch, kv_heads, ...) of
    /// the normed input: projected (biases added), laid out by head, Q's
    /// and K's heads normed where the architecture norms them, and rotated.
    fn qkv(&self, xn: &Tensor, rope: &Rope, k: Kernels) -> Result<(Tensor, Tensor, Tensor)> {
        let c = &self.cfg;
        let [mut q, mut keys, mut values] =
            outputs(span(Matmuls, || self.attn_in.forward(xn, k))?)?;
        if let Some([bq, bk, bv]) = &self.bias {
            let add = |y: &Tensor, b: &Tensor| Ok::<_, anyhow::Error>(y.broadcast_add(b)?);
            (q, keys, values) = span(Elementwise, || {
                Ok((add(&q, bq)?, add(&keys, bk)?, add(&values, bv)?))
            })?;
        }
        let values = k.heads(&values, c.kv_heads, None)?;
        // The heads' spans hold the layout and the rotation alone (in
        // `Kernels::heads`): a span inside a span counts in the outer one, so
        // wrapping the projections too would book the q and k matmuls (an
        // eighth of a layer's weights) as rotary.
        let Some((qn, kn)) = &self.qk_norm else {
            let q = k.heads(&q, c.heads, Some(rope))?;
            let keys = k.heads(&keys, c.kv_heads, Some(rope))?;
            return Ok((q, keys, values));
        };
        // Normed per head before the rotation: laid out, normed, rotated.
        let eps = c.rms_eps as f32;
        let normed = |y: &Tensor, n: usize, w: &Tensor| -> Result<Tensor> {
            let y = k.heads(y, n, None)?;
            let y = span(Norms, || k.rms_norm(&y, w, eps))?;
            span(crate::schema::TokenOpClass::Rotary, || rope.apply(&y, k))
        };
        Ok((
            normed(&q, c.heads, qn)?,
            normed(&keys, c.kv_heads, kn)?,
            values,
        ))
    }

    /// Attention of `q` over `keys` and `values` (every cached key with the
    /// new ones): causal, and on a sliding-window layer over each query's
    /// window only: a decode step reads the window's keys as a view; a
    /// prompt whose queries reach past a window is given the window's mask
    /// ([`window_mask`], the caller's: made once for every local layer).
    fn attend(
        &self,
        q: &Tensor,
        keys: &Tensor,
        values: &Tensor,
        mask: Option<&Tensor>,
        k: Kernels,
    ) -> Result<Tensor> {
        let (t, n) = (q.dim(2)?, keys.dim(2)?);
        match self.window {
            Some(w) if t == 1 && n > w => {
                let (keys, values) = (keys.narrow(2, n - w, w)?, values.narrow(2, n - w, w)?);
                k.attention(q, &keys, &values, None, &self.cfg)
            }
            Some(w) if n > w && t > 1 => {
                let m = mask.context("a prompt past a window without the window's mask")?;
                attention(q, keys, values, Some(m), &self.cfg, k)
            }
            _ => k.attention(q, keys, values, mask, &self.cfg),
        }
    }
}

/// The seven projections, in [`Config::layer_matmuls`]' order, as an array.
fn projections(v: Vec<Proj>) -> Result<[Proj; 7]> {
    let n = v.len();
    v.try_into()
        .map_err(|_| anyhow::anyhow!("a layer of {n} projections, not seven"))
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
/// (batch, heads, t, d). A cache kept in another precision than the
/// queries (16 bits under f32) is widened to theirs first, a copy a step
/// (the suite's op, `cached_attention`, reads it as it lies).
pub fn attention(
    q: &Tensor,
    keys: &Tensor,
    values: &Tensor,
    mask: Option<&Tensor>,
    c: &Config,
    k: Kernels,
) -> Result<Tensor> {
    if keys.dtype() != q.dtype() || values.dtype() != q.dtype() {
        let (keys, values) = (keys.to_dtype(q.dtype())?, values.to_dtype(q.dtype())?);
        return attention(q, &keys, &values, mask, c, k);
    }
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

/// The mask of `t` new tokens after `past` cached ones on a layer whose
/// queries see `window` keys (their own and the `window - 1` before it, as
/// llama.cpp's `LLAMA_SWA_TYPE_STANDARD` and transformers' sliding window
/// mask them): t x (past + t), 0 where a query may look, -inf elsewhere.
pub fn window_mask(
    t: usize,
    past: usize,
    window: usize,
    dtype: DType,
    device: &Device,
) -> Result<Tensor> {
    let n = past + t;
    let v: Vec<f32> = (0..t)
        .flat_map(|i| {
            (0..n).map(move |j| match j <= past + i && past + i - j < window {
                true => 0.0,
                false => f32::NEG_INFINITY,
            })
        })
        .collect();
    Ok(Tensor::from_vec(v, (t, n), &Device::Cpu)?
        .to_dtype(dtype)?
        .to_device(device)?)
}

/// The causal mask for `t` new tokens after `past` cached ones: t x (past +
/// t), 0 where a query may look (keys up to its own position), -inf after:
/// a window no query reaches past.
pub fn causal_mask(t: usize, past: usize, dtype: DType, device: &Device) -> Result<Tensor> {
    window_mask(t, past, usize::MAX, dtype, device)
}

#[cfg(test)]
mod tests;
