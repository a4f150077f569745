//! The suite's decoder ([`Decoder`]): [`Layer`]s (grouped-query attention, a
//! preallocated [`KvCache`], each architecture's features) stacked into a
//! model, with the embedding, the final norm and the output head around it.
//! A float row's weights are the run's f32 weights ([`Weights`]) moved to its
//! device and cast there: nothing is drawn or converted again on the host.
//!
//! The same model runs the lab's quantized rows ([`Decoder::load_quantized`]):
//! its projections and head are the row's GGUF blocks as stored, multiplied
//! by the suite's quantized kernels ([`crate::kernels::QLinear`]), the rest
//! f32, as candle-transformers' quantized models keep it (the embedding
//! dequantized for the lookup).
//!
//! Rotary layout: llama.cpp's converter (`convert_hf_to_gguf.py`,
//! `LlamaModel.permute`) reorders the rows of a Llama's Q and K, per head, so
//! that GGUF's Llama weights rotate interleaved pairs (2i, 2i+1), as
//! llama.cpp's ROPE_TYPE_NORM and candle's `rope_i` do (candle-transformers'
//! `quantized_llama` runs them so); Hugging Face's checkpoints, transformers
//! and the layer here rotate halves (i, i + d/2), `rope`. The loader undoes
//! the permutation on a Llama's Q and K rows ([`unpermute`], transformers'
//! `reverse_permute_weights`), so the decoder computes the checkpoint's own
//! layout; both compute the same function. Qwen's and Gemma's files are not
//! permuted (llama.cpp's ROPE_TYPE_NEOX): their rows are used as stored.

use std::borrow::Cow;
use std::collections::HashMap;

use anyhow::Result;
use candle_core::quantized::ggml_file::qtensor_from_ggml;
use candle_core::quantized::{GgmlDType, QStorage, QTensor};
use candle_core::{DType, Device, Tensor};
use candle_nn::Linear;

use super::config::gguf_name;
use super::layer::{window_mask, Input, Kernels, KvCache, Layer, Proj, Rope};
use super::quantize::row_tensor;
use super::weights::Weights;
use super::{Activation, Config, Lm};
use crate::clock::spans::span;
use crate::kernels::QLinear;
use crate::schema::TokenOpClass::{Elementwise, Matmuls, Norms};

/// What the result says about the rotary layout of `d`'s architecture.
pub fn rotary_layout(d: &Config) -> &'static str {
    match d.arch.features().permuted_qk {
        true => {
            "GGUF's Llama Q and K rows are permuted by llama.cpp's converter to rotate \
            interleaved pairs (2i, 2i+1): candle-transformers' model runs them so (rope_i); the \
            suite's decoder undoes the permutation at load and rotates halves (i, i+d/2), as the \
            Hugging Face checkpoint and transformers do"
        }
        false => "Q and K rotate halves (i, i+d/2) as the file stores them, in both models",
    }
}

/// (bytes held, bytes per token) of a float row in `dtype`: the projections,
/// the embedding (the head too when tied), the vectors.
pub fn bytes(d: &Config, dtype: DType) -> (u64, u64) {
    let e = dtype.size_in_bytes() as u64;
    let matmuls = d.token_matmul_params() * e;
    let embed = if d.tied {
        0
    } else {
        (d.vocab * d.hidden) as u64 * e
    };
    let per_layer: usize = d.layer_vectors().iter().map(|(_, n)| n).sum();
    let vectors = (d.layers * per_layer + d.hidden) as u64 * e;
    let per_token = super::cost::weight_bytes_per_token(d, matmuls, e, e);
    (matmuls + embed + vectors, per_token)
}

/// GGUF's Q or K rows (`heads` heads of `rows / heads`) back in the order
/// the checkpoint had them: llama.cpp wrote each head's rows as
/// (head_dim / 2, 2) pairs from the (2, head_dim / 2) halves; this swaps them back.
pub fn unpermute(w: &Tensor, heads: usize) -> Result<Tensor> {
    let (rows, cols) = w.dims2()?;
    Ok(w.reshape((heads, rows / heads / 2, 2, cols))?
        .transpose(1, 2)?
        .contiguous()?
        .reshape((rows, cols))?)
}

/// [`unpermute`] on GGUF blocks as stored: each row of `w` is whole blocks,
/// so the rows are moved as bytes, nothing dequantized.
pub fn unpermute_blocks(w: &QTensor, heads: usize) -> Result<QTensor> {
    let (rows, cols) = w.shape().dims2()?;
    let t = w.dtype();
    let row_bytes = cols / t.block_size() * t.type_size();
    let data = w.data()?;
    let (per_head, half) = (rows / heads, rows / heads / 2);
    let mut out = Vec::with_capacity(data.len());
    // New row (h, a, p) is old row (h, p, a), as unpermute's transpose.
    for h in 0..heads {
        for a in 0..2 {
            for p in 0..half {
                let old = h * per_head + 2 * p + a;
                out.extend_from_slice(&data[old * row_bytes..(old + 1) * row_bytes]);
            }
        }
    }
    let storage = QStorage::from_data(Cow::Owned(out), &Device::Cpu, t)?;
    Ok(QTensor::new(storage, (rows, cols))?)
}

/// The heads `name` (a layer's name) is permuted by, where `d`'s file
/// permutes Q's and K's rows ([`super::Features::permuted_qk`]).
fn permuted(d: &Config, name: &str) -> Option<usize> {
    match (d.arch.features().permuted_qk, name) {
        (true, "wq") => Some(d.heads),
        (true, "wk") => Some(d.kv_heads),
        _ => None,
    }
}

/// The suite's decoder: [`Layer`]s stacked between the embedding and the
/// final norm and head, in one dtype (a float row) or with GGUF blocks as
/// stored ([`Decoder::load_quantized`], the lab's quantized row).
pub struct Decoder {
    cfg: Config,
    layers: Vec<Layer>,
    caches: Vec<KvCache>,
    embedding: Tensor,
    head: Proj,
    norm: Tensor,
    /// The rotary tables of each base the layers use, and each layer's.
    ropes: Vec<(f64, Rope)>,
    /// Masks by (tokens, position, window), made once.
    masks: HashMap<(usize, usize, usize), Tensor>,
    kernels: Kernels,
    device: Device,
}

impl Decoder {
    /// The model of `weights` in `dtype` on `device`, with caches of
    /// `positions` positions, run with `kernels` (candle-nn's fused ones, or
    /// the suite's). Each tensor is moved in f32 and cast on the device; the
    /// row always holds weights of its own (a copy where the cast would share
    /// the run's f32 tensor: an f32 row on the CPU), so its peak memory
    /// counts them as every other row's does.
    pub fn load(
        weights: &Weights,
        dtype: DType,
        device: &Device,
        positions: usize,
        kernels: Kernels,
    ) -> Result<Self> {
        let d = weights.config();
        let on = |t: Tensor| -> Result<Tensor> {
            let moved = t.to_device(device)?.to_dtype(dtype)?;
            let shared = moved.device().same_device(t.device()) && moved.dtype() == t.dtype();
            Ok(if shared { moved.copy()? } else { moved })
        };
        let mut layers = Vec::with_capacity(d.layers);
        for l in 0..d.layers {
            layers.push(Layer::new(d, l, |name| {
                let w = on(weights.f32(&gguf_name(l, name))?)?;
                match permuted(d, name) {
                    Some(heads) => unpermute(&w, heads),
                    None => Ok(w),
                }
            })?);
        }
        let embedding = on(weights.f32("token_embd.weight")?)?;
        let head = match d.tied {
            true => Linear::new(embedding.clone(), None),
            false => Linear::new(on(weights.f32(d.head_name())?)?, None),
        };
        let norm = on(weights.f32("output_norm.weight")?)?;
        let parts = (embedding, Proj::Float(head), norm);
        Self::of(d, layers, parts, (dtype, device, positions), kernels)
    }

    /// The lab's quantized row of `types` (the row's type per tensor, as
    /// `quantize::row_types` gives them) from `weights` on `device`: the
    /// projections and the head as GGUF blocks (Q and K's rows moved back to
    /// the checkpoint's order where the file permuted them,
    /// [`unpermute_blocks`]), run by the suite's kernels; the vectors, the
    /// embedding's lookup and the activations f32.
    pub fn load_quantized(
        weights: &Weights,
        types: &HashMap<String, GgmlDType>,
        device: &Device,
        positions: usize,
    ) -> Result<Self> {
        let d = weights.config();
        let on = |t: Tensor| -> Result<Tensor> { Ok(t.to_device(device)?) };
        let blocks = |name: &str, heads: Option<usize>| -> Result<QLinear> {
            let t = row_tensor(weights, types, name)?;
            let t = match heads {
                Some(h) => unpermute_blocks(&t, h)?,
                None => t,
            };
            let t = if device.is_cpu() {
                t
            } else {
                let dims = t.shape().dims().to_vec();
                qtensor_from_ggml(t.dtype(), &t.data()?, dims, device)?
            };
            Ok(QLinear::new(t)?)
        };
        let mut layers = Vec::with_capacity(d.layers);
        for l in 0..d.layers {
            layers.push(Layer::quantized(
                d,
                l,
                |n| on(weights.f32(&gguf_name(l, n))?),
                |n| blocks(&gguf_name(l, n), permuted(d, n)),
            )?);
        }
        let embedding = row_tensor(weights, types, "token_embd.weight")?.dequantize(device)?;
        let head = Proj::Quantized(blocks(d.head_name(), None)?);
        let norm = on(weights.f32("output_norm.weight")?)?;
        let f32 = (DType::F32, device, positions);
        Self::of(d, layers, (embedding, head, norm), f32, Kernels::Lab)
    }

    fn of(
        d: &Config,
        layers: Vec<Layer>,
        (embedding, head, norm): (Tensor, Proj, Tensor),
        (dtype, device, positions): (DType, &Device, usize),
        kernels: Kernels,
    ) -> Result<Self> {
        let mut caches = Vec::with_capacity(d.layers);
        let mut ropes: Vec<(f64, Rope)> = Vec::new();
        for l in 0..d.layers {
            caches.push(KvCache::new(
                1, d.kv_heads, positions, d.head_dim, dtype, device,
            )?);
            let theta = d.rope_theta(l);
            if !ropes.iter().any(|(t, _)| *t == theta) {
                let rope = Rope::new(d.head_dim, theta, 0, positions, dtype, device)?;
                ropes.push((theta, rope));
            }
        }
        Ok(Self {
            cfg: d.clone(),
            layers,
            caches,
            embedding,
            head,
            norm,
            ropes,
            masks: HashMap::new(),
            kernels,
            device: device.clone(),
        })
    }

    pub fn layers(&self) -> usize {
        self.layers.len()
    }

    /// The model with its MLP gated by `act` instead of its architecture's
    /// ([`Layer::gate_with`]): Gemma 3 as candle-transformers' model of it
    /// computes it, for the tests that hold the two together.
    pub fn with_activation(mut self, act: Activation) -> Self {
        for l in &mut self.layers {
            l.gate_with(act);
        }
        self
    }

    /// Every projection of `layer` as it runs (Q, K and V, and gate and up,
    /// stacked on the lab's quantized path), with the model's kernels: down
    /// on `m` (the MLP's width), O on `o` (attention's output width), the
    /// others on `x`.
    pub fn project_all(&self, layer: usize, x: &Tensor, o: &Tensor, m: &Tensor) -> Result<()> {
        for (p, input) in self.layers[layer].projections() {
            let on = match input {
                Input::Act => m,
                Input::Heads => o,
                _ => x,
            };
            drop(p.forward(on, self.kernels)?);
        }
        Ok(())
    }

    /// The output head on `x`.
    pub fn head(&self, x: &Tensor) -> Result<Tensor> {
        self.head.forward(x, self.kernels)
    }

    /// The rotary tables of layer `l` at positions `pos..pos + t`.
    fn rope(&self, l: usize, pos: usize, t: usize) -> Result<Rope> {
        let theta = self.cfg.rope_theta(l);
        let (_, r) = self
            .ropes
            .iter()
            .find(|(x, _)| *x == theta)
            .ok_or_else(|| anyhow::anyhow!("no rotary tables at base {theta}"))?;
        Ok(Rope {
            cos: r.cos.narrow(0, pos, t)?,
            sin: r.sin.narrow(0, pos, t)?,
        })
    }

    /// The mask of `t` tokens after `pos` on a layer of `window` (none for
    /// one token), made once a shape and kept: causal, or a window's where
    /// the prompt's queries reach past it.
    fn mask(
        &mut self,
        t: usize,
        pos: usize,
        window: Option<usize>,
        dtype: DType,
    ) -> Result<Option<Tensor>> {
        if t == 1 {
            return Ok(None);
        }
        let w = window.filter(|&w| pos + t > w).unwrap_or(usize::MAX);
        if let Some(m) = self.masks.get(&(t, pos, w)) {
            return Ok(Some(m.clone()));
        }
        let m = window_mask(t, pos, w, dtype, &self.device)?;
        self.masks.insert((t, pos, w), m.clone());
        Ok(Some(m))
    }

    /// The embedding's rows of `tokens` (scaled by sqrt(hidden) where the
    /// architecture scales them), (1, tokens, hidden).
    fn embed(&self, tokens: &[u32]) -> Result<Tensor> {
        self.embed_ids(&Tensor::new(tokens, &self.device)?.unsqueeze(0)?)
    }

    /// The embedding's rows of `ids` (batch, tokens), (batch, tokens, hidden).
    fn embed_ids(&self, ids: &Tensor) -> Result<Tensor> {
        let (b, t) = ids.dims2()?;
        span(Elementwise, || {
            let rows = self.embedding.index_select(&ids.flatten_all()?, 0)?;
            let x = rows.reshape((b, t, self.cfg.hidden))?;
            Ok(match self.cfg.arch.features().embed_scale {
                true => (x * (self.cfg.hidden as f64).sqrt())?,
                false => x,
            })
        })
    }
}

impl Decoder {
    /// Every layer's cache made anew in `dtype` (empty, its capacity and
    /// batch kept): a 16-bit cache under f32 activations holds half the
    /// bytes a step reads and a sequence keeps. The keys and values are
    /// rounded to it as they are written.
    pub fn set_kv_dtype(&mut self, dtype: DType) -> Result<()> {
        for c in &mut self.caches {
            *c = KvCache::new(
                c.batch(),
                self.cfg.kv_heads,
                c.capacity(),
                self.cfg.head_dim,
                dtype,
                &self.device,
            )?;
        }
        Ok(())
    }

    /// The precision its caches keep keys and values in.
    pub fn kv_dtype(&self) -> Option<DType> {
        self.caches.first().map(KvCache::dtype)
    }

    /// The caches made for `batch` sequences (their positions kept), where
    /// they hold another number: a batch's step after single ones, or back.
    fn batch(&mut self, batch: usize) -> Result<()> {
        if self.caches.first().is_some_and(|c| c.batch() == batch) {
            return Ok(());
        }
        for c in &mut self.caches {
            *c = KvCache::new(
                batch,
                self.cfg.kv_heads,
                c.capacity(),
                self.cfg.head_dim,
                c.dtype(),
                &self.device,
            )?;
        }
        Ok(())
    }

    /// `x` (batch, tokens, hidden) through every layer at positions `pos..`,
    /// the caches truncated to `pos` first; each sequence's last token's
    /// logits, (batch, vocab).
    fn run(&mut self, mut x: Tensor, pos: usize) -> Result<Tensor> {
        let (b, t, _) = x.dims3()?;
        for c in &mut self.caches {
            c.truncate(pos);
        }
        for l in 0..self.layers.len() {
            let rope = self.rope(l, pos, t)?;
            let mask = self.mask(t, pos, self.layers[l].window(), x.dtype())?;
            let cache = &mut self.caches[l];
            x = self.layers[l].forward(&x, &rope, mask.as_ref(), Some(cache), self.kernels)?;
        }
        let last = span(Elementwise, || Ok(x.narrow(1, t - 1, 1)?.contiguous()?))?;
        let eps = self.cfg.rms_eps as f32;
        let last = span(Norms, || self.kernels.rms_norm(&last, &self.norm, eps))?;
        span(Matmuls, || {
            let logits = self.head.forward(&last, self.kernels)?;
            Ok(logits.reshape((b, self.cfg.vocab))?)
        })
    }
}

impl Lm for Decoder {
    fn forward_batch(&mut self, seqs: &[Vec<u32>], pos: usize) -> Result<Tensor> {
        let ids = super::batch_ids(seqs, &self.device)?;
        self.batch(seqs.len())?;
        let x = self.embed_ids(&ids)?;
        self.run(x, pos)
    }

    fn forward(&mut self, tokens: &[u32], pos: usize) -> Result<Tensor> {
        let t = tokens.len();
        self.batch(1)?;
        let x = self.embed(tokens)?;
        debug_assert_eq!(x.dim(1)?, t);
        self.run(x, pos)
    }

    fn device(&self) -> &Device {
        &self.device
    }

    fn pick_all(&self, logits: &Tensor) -> Result<Vec<u32>> {
        match self.kernels {
            Kernels::Lab => Ok(crate::kernels::argmax_last_dim(logits)?),
            _ => super::pick_all(logits),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unpermute_undoes_llama_cpps_permute() {
        // llama.cpp: w.reshape(heads, 2, d/2, in).swapaxes(1, 2).reshape(w.shape)
        let (heads, d, cols) = (3, 4, 2);
        let rows = heads * d;
        let w = Tensor::arange(0f32, (rows * cols) as f32, &Device::Cpu)
            .unwrap()
            .reshape((rows, cols))
            .unwrap();
        let permuted = w
            .reshape((heads, 2, d / 2, cols))
            .unwrap()
            .transpose(1, 2)
            .unwrap()
            .contiguous()
            .unwrap()
            .reshape((rows, cols))
            .unwrap();
        assert_ne!(
            permuted.to_vec2::<f32>().unwrap(),
            w.to_vec2::<f32>().unwrap()
        );
        let back = unpermute(&permuted, heads).unwrap();
        assert_eq!(back.to_vec2::<f32>().unwrap(), w.to_vec2::<f32>().unwrap());
        // Within a head, GGUF's row order is the halves interleaved: 0, 2, 1, 3.
        let first: Vec<f32> = permuted
            .to_vec2::<f32>()
            .unwrap()
            .iter()
            .take(4)
            .map(|r| r[0])
            .collect();
        assert_eq!(first, [0.0, 4.0, 2.0, 6.0]);
    }
}
