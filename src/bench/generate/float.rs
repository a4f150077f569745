//! The float path: the weights dequantized to f32 and cast to the row's
//! dtype, run by `bench::block`'s decoder layer ([`Layer`]: grouped-query
//! attention, a preallocated [`KvCache`]) stacked into a model, with the
//! embedding, the final norm and the output head around it.
//!
//! A row's weights are the run's f32 weights ([`Weights`]) moved to its
//! device and cast there: nothing is drawn or converted again on the host.
//!
//! The same model runs the lab's quantized rows ([`FloatLm::load_quantized`]):
//! its projections and head are the row's GGUF blocks as stored, multiplied
//! by the suite's quantized kernels ([`crate::kernels::QLinear`]), the rest
//! f32, as candle-transformers' `quantized_llama` keeps it (the embedding
//! dequantized for the lookup).
//!
//! Rotary layout: llama.cpp's converter (`convert_hf_to_gguf.py`,
//! `LlamaModel.permute`) reorders the rows of Q and K, per head, so that
//! GGUF's Llama weights rotate interleaved pairs (2i, 2i+1), as llama.cpp's
//! ROPE_TYPE_NORM and candle's `rope_i` do (the quantized path runs them so);
//! Hugging Face's checkpoints, transformers and block's layer rotate halves
//! (i, i + d/2), `rope`. The loader undoes the permutation on Q's and K's rows
//! ([`unpermute`], transformers' `reverse_permute_weights`), so the float
//! path computes the checkpoint's own layout; both compute the same function.

use std::borrow::Cow;
use std::collections::HashMap;

use anyhow::Result;
use candle_core::quantized::ggml_file::qtensor_from_ggml;
use candle_core::quantized::{GgmlDType, QStorage, QTensor};
use candle_core::{DType, Device, Tensor};
use candle_nn::Linear;

use super::quantized::row_tensor;
use super::weights::{head_name, Weights};
use super::{Dims, Lm};
use crate::bench::block::model::{
    causal_mask, Input, Kernels, KvCache, Layer, LayerConfig, Proj, Rope,
};
use crate::clock::spans::span;
use crate::kernels::QLinear;
use crate::schema::TokenOpClass::{Elementwise, Matmuls, Norms};

/// What the result says about the rotary layout.
pub const ROTARY_LAYOUT: &str = "GGUF's Llama Q and K rows are permuted by llama.cpp's converter \
    to rotate interleaved pairs (2i, 2i+1): the quantized path runs them so (rope_i); the float \
    path undoes the permutation at load and rotates halves (i, i+d/2), as the Hugging Face \
    checkpoint and transformers do";

/// (bytes held, bytes per token) of a float row in `dtype`: the projections,
/// the embedding (the head too when tied), the norms.
pub fn bytes(d: &Dims, dtype: DType) -> (u64, u64) {
    let e = dtype.size_in_bytes() as u64;
    let matmuls = d.token_matmul_params() * e;
    let embed = if d.tied {
        0
    } else {
        (d.vocab * d.hidden) as u64 * e
    };
    let norms = ((2 * d.layers + 1) * d.hidden) as u64 * e;
    let per_token = crate::bench::decoder::weight_bytes_per_token(d, matmuls, e, e);
    (matmuls + embed + norms, per_token)
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

/// The layer's block names for GGUF's.
const NAMES: [(&str, &str); 9] = [
    ("attn_norm", "attn_norm"),
    ("wq", "attn_q"),
    ("wk", "attn_k"),
    ("wv", "attn_v"),
    ("wo", "attn_output"),
    ("mlp_norm", "ffn_norm"),
    ("w_gate", "ffn_gate"),
    ("w_up", "ffn_up"),
    ("w_down", "ffn_down"),
];

/// The layer's weight names in GGUF's (`wq` is `attn_q`).
fn gguf_name(name: &str) -> &str {
    NAMES
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(name, |(_, g)| *g)
}

fn layer_config(d: &Dims) -> LayerConfig {
    LayerConfig {
        hidden: d.hidden,
        heads: d.heads,
        kv_heads: d.kv_heads,
        head_dim: d.head_dim,
        mlp: d.mlp,
        rms_eps: d.rms_eps,
        rope_theta: d.rope_theta,
    }
}

/// The float model of one row (or, [`FloatLm::load_quantized`], the lab's
/// quantized one).
pub struct FloatLm {
    layers: Vec<Layer>,
    caches: Vec<KvCache>,
    embedding: Tensor,
    head: Proj,
    norm: Tensor,
    rope: Rope,
    masks: HashMap<(usize, usize), Tensor>,
    rms_eps: f32,
    kernels: Kernels,
    device: Device,
}

impl FloatLm {
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
        let d = weights.dims();
        let cfg = layer_config(d);
        let on = |t: Tensor| -> Result<Tensor> {
            let moved = t.to_device(device)?.to_dtype(dtype)?;
            let shared = moved.device().same_device(t.device()) && moved.dtype() == t.dtype();
            Ok(if shared { moved.copy()? } else { moved })
        };
        let mut layers = Vec::with_capacity(d.layers);
        for l in 0..d.layers {
            layers.push(Layer::new(&cfg, |name| {
                let w = on(weights.f32(&format!("blk.{l}.{}.weight", gguf_name(name)))?)?;
                match name {
                    "wq" => unpermute(&w, d.heads),
                    "wk" => unpermute(&w, d.kv_heads),
                    _ => Ok(w),
                }
            })?);
        }
        let embedding = on(weights.f32("token_embd.weight")?)?;
        let head = match d.tied {
            true => Linear::new(embedding.clone(), None),
            false => Linear::new(on(weights.f32(head_name(d))?)?, None),
        };
        let norm = on(weights.f32("output_norm.weight")?)?;
        let parts = (embedding, Proj::Float(head), norm);
        Self::of(d, layers, parts, (dtype, device, positions), kernels)
    }

    /// The lab's quantized row of `types` (the row's type per tensor, as
    /// `quantized::row_types` gives them) from `weights` on `device`: the
    /// projections and the head as GGUF blocks (Q and K's rows moved back to
    /// the checkpoint's order, [`unpermute_blocks`]), run by the suite's
    /// kernels; the norms, the embedding's lookup and the activations f32.
    pub fn load_quantized(
        weights: &Weights,
        types: &HashMap<String, GgmlDType>,
        device: &Device,
        positions: usize,
    ) -> Result<Self> {
        let d = weights.dims();
        let cfg = layer_config(d);
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
            let name = |n: &str| format!("blk.{l}.{}.weight", gguf_name(n));
            layers.push(Layer::quantized(
                &cfg,
                |n| on(weights.f32(&name(n))?),
                |n| match n {
                    "wq" => blocks(&name(n), Some(d.heads)),
                    "wk" => blocks(&name(n), Some(d.kv_heads)),
                    _ => blocks(&name(n), None),
                },
            )?);
        }
        let embedding = row_tensor(weights, types, "token_embd.weight")?.dequantize(device)?;
        let head = Proj::Quantized(blocks(head_name(d), None)?);
        let norm = on(weights.f32("output_norm.weight")?)?;
        let f32 = (DType::F32, device, positions);
        Self::of(d, layers, (embedding, head, norm), f32, Kernels::Lab)
    }

    fn of(
        d: &Dims,
        layers: Vec<Layer>,
        (embedding, head, norm): (Tensor, Proj, Tensor),
        (dtype, device, positions): (DType, &Device, usize),
        kernels: Kernels,
    ) -> Result<Self> {
        let mut caches = Vec::with_capacity(d.layers);
        for _ in 0..d.layers {
            caches.push(KvCache::new(
                1, d.kv_heads, positions, d.head_dim, dtype, device,
            )?);
        }
        Ok(Self {
            layers,
            caches,
            embedding,
            head,
            norm,
            rope: Rope::new(d.head_dim, d.rope_theta, 0, positions, dtype, device)?,
            masks: HashMap::new(),
            rms_eps: d.rms_eps as f32,
            kernels,
            device: device.clone(),
        })
    }

    pub fn layers(&self) -> usize {
        self.layers.len()
    }

    /// Every projection of `layer` as it runs (Q, K and V, and gate and up,
    /// stacked on the lab's quantized path), with the model's kernels: down
    /// on `m` (the MLP's width), the others on `x`.
    pub fn project_all(&self, layer: usize, x: &Tensor, m: &Tensor) -> Result<()> {
        for (p, input) in self.layers[layer].projections() {
            drop(p.forward(if input == Input::Act { m } else { x }, self.kernels)?);
        }
        Ok(())
    }

    /// The output head on `x`.
    pub fn head(&self, x: &Tensor) -> Result<Tensor> {
        self.head.forward(x, self.kernels)
    }
}

impl Lm for FloatLm {
    fn forward(&mut self, tokens: &[u32], pos: usize) -> Result<Tensor> {
        let t = tokens.len();
        for c in &mut self.caches {
            c.truncate(pos);
        }
        let ids = Tensor::new(tokens, &self.device)?;
        let mut x = span(Elementwise, || {
            Ok(self.embedding.index_select(&ids, 0)?.unsqueeze(0)?)
        })?;
        let rope = Rope {
            cos: self.rope.cos.narrow(0, pos, t)?,
            sin: self.rope.sin.narrow(0, pos, t)?,
        };
        let mask = match t {
            1 => None,
            _ => {
                let (dtype, device) = (x.dtype(), self.device.clone());
                let m = match self.masks.get(&(t, pos)) {
                    Some(m) => m.clone(),
                    None => causal_mask(t, pos, dtype, &device)?,
                };
                self.masks.insert((t, pos), m.clone());
                Some(m)
            }
        };
        for (layer, cache) in self.layers.iter().zip(self.caches.iter_mut()) {
            x = layer.forward(&x, &rope, mask.as_ref(), Some(cache), self.kernels)?;
        }
        let last = span(Elementwise, || Ok(x.narrow(1, t - 1, 1)?.contiguous()?))?;
        let last = span(Norms, || {
            self.kernels.rms_norm(&last, &self.norm, self.rms_eps)
        })?;
        span(Matmuls, || {
            Ok(self.head.forward(&last, self.kernels)?.squeeze(0)?)
        })
    }

    fn device(&self) -> &Device {
        &self.device
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
