//! Candle's own model of each architecture: candle-transformers' quantized
//! model over GGUF blocks ([`CandleLm`]: `quantized_llama`, `quantized_qwen2`,
//! `quantized_qwen3`, `quantized_gemma3`, by [`super::Arch::candle`]), its
//! matmuls candle's QMatMul (on the CPU the activations are quantized to Q8
//! and dotted with the blocks; on CUDA, its dequantizing matrix-vector and
//! matrix-matrix kernels). A row reads its GGUF ([`Gguf`]: the file as
//! stored, or every tensor requantized in memory), so every row runs the
//! same model code; its matmuls alone are read from the same GGUF.

use std::collections::HashMap;

use anyhow::Result;
use candle_core::quantized::{GgmlDType, QMatMul};
use candle_core::{Device, Tensor};

use super::arch::CandleForward;
use super::gguf::tensor_bytes;
use super::quantize::{row_types, Gguf, Quant};
use super::weights::Weights;
use super::{layer_matmul_names, Config, Lm};

/// candle-transformers' quantized model of one row.
pub struct CandleLm {
    model: Box<dyn CandleForward>,
    device: Device,
}

impl CandleLm {
    /// Loads the row of `quant` from `weights` onto `device`.
    pub fn load(weights: &Weights, quant: Quant, device: &Device) -> Result<Self> {
        Self::from_gguf(&Gguf::of(weights, quant)?, device)
    }

    /// Loads the row held in `gguf` onto `device`.
    pub fn from_gguf(gguf: &Gguf, device: &Device) -> Result<Self> {
        let arch = gguf.config().arch;
        let model = gguf.read(|content, r| arch.candle(content, r, device))?;
        Ok(Self {
            model,
            device: device.clone(),
        })
    }
}

impl Lm for CandleLm {
    fn forward(&mut self, tokens: &[u32], pos: usize) -> Result<Tensor> {
        let x = Tensor::new(tokens, &self.device)?.unsqueeze(0)?;
        Ok(self.model.forward(&x, pos)?)
    }

    /// Several sequences of several tokens are fed a position at a time:
    /// candle-transformers' quantized models norm a strided view of each
    /// sequence's last row after a batched prompt, which their RMSNorm
    /// refuses (not contiguous); a position at a time fills the same cache
    /// and gives the same logits.
    fn forward_batch(&mut self, seqs: &[Vec<u32>], pos: usize) -> Result<Tensor> {
        let x = super::batch_ids(seqs, &self.device)?;
        let (b, t) = x.dims2()?;
        if b == 1 || t == 1 {
            return Ok(self.model.forward(&x, pos)?);
        }
        let mut out = None;
        for i in 0..t {
            out = Some(self.model.forward(&x.narrow(1, i, 1)?, pos + i)?);
        }
        out.ok_or_else(|| anyhow::anyhow!("a batch of no tokens"))
    }

    fn device(&self) -> &Device {
        &self.device
    }
}

/// Bytes a row holds, and bytes one token reads, from its tensors' types.
/// candle-transformers' models keep the embedding dequantized to f32 for
/// the lookup and multiply the output head (the embedding's blocks when
/// tied) as stored; the vectors are f32.
pub fn bytes(d: &Config, types: &HashMap<String, GgmlDType>) -> (u64, u64) {
    let of = |name: &str, elems: usize| tensor_bytes(types[name], elems);
    let (h, v) = (d.hidden, d.vocab);
    let mut matmuls = of(d.head_name(), v * h);
    for l in 0..d.layers {
        for (name, (r, c)) in layer_matmul_names(l).iter().zip(d.layer_matmuls()) {
            matmuls += of(name, r * c);
        }
    }
    let embed_f32 = (v * h * 4) as u64;
    let per_layer: usize = d.layer_vectors().iter().map(|(_, n)| n).sum();
    let vectors = ((d.layers * per_layer + h) * 4) as u64;
    let held = matmuls + embed_f32 + vectors;
    let per_token = super::cost::weight_bytes_per_token(d, matmuls, 4, 4);
    (held, per_token)
}

/// (bytes held, bytes per token) of the row of `quant` from `weights`.
pub fn row_bytes(weights: &Weights, quant: Quant) -> Result<(u64, u64)> {
    Ok(bytes(
        weights.config(),
        &row_types(weights.source(), quant)?,
    ))
}

/// Every layer's projections and the head as the row holds them, on
/// `device`, for timing the matmuls alone: read from the row's GGUF, its
/// blocks moved as they are (never quantized again).
pub fn matmuls(gguf: &Gguf, device: &Device) -> Result<(Vec<[QMatMul; 7]>, QMatMul)> {
    let d = gguf.config().clone();
    gguf.read(|content, mut r| {
        let mut on = |name: &str| -> Result<QMatMul> {
            let t = content.tensor(&mut r, name, device)?;
            Ok(QMatMul::from_qtensor(t)?)
        };
        let mut layers = Vec::with_capacity(d.layers);
        for l in 0..d.layers {
            let mut v = Vec::with_capacity(7);
            for n in &layer_matmul_names(l) {
                v.push(on(n)?);
            }
            let arr: [QMatMul; 7] = v
                .try_into()
                .map_err(|_| anyhow::anyhow!("seven projections"))?;
            layers.push(arr);
        }
        let head = on(d.head_name())?;
        Ok((layers, head))
    })
}
