//! A row's model on its device: the weights made once for every row, a
//! quantized row's GGUF made once, and the model loaded ([`Loaded`]:
//! candle-transformers' quantized model of the architecture, or the suite's
//! decoder on Candle's kernels or the suite's), each step timed and said.

use anyhow::{Context, Result};
use candle_core::{Device, Tensor};

use super::{needs_f32, RowKind};
use crate::model::candle::{self, CandleLm};
use crate::model::decoder::{self, Decoder};
use crate::model::layer::Kernels;
use crate::model::quantize::{row_types, Gguf};
use crate::model::weights::{Source, Weights};
use crate::model::Lm;
use crate::schema::LAB_SUFFIX;

/// A row's model: candle-transformers', or the suite's decoder.
pub enum Loaded {
    Candle(CandleLm),
    Decoder(Box<Decoder>),
}

impl Lm for Loaded {
    fn forward(&mut self, tokens: &[u32], pos: usize) -> Result<Tensor> {
        match self {
            Self::Candle(m) => m.forward(tokens, pos),
            Self::Decoder(m) => m.forward(tokens, pos),
        }
    }

    fn forward_batch(&mut self, seqs: &[Vec<u32>], pos: usize) -> Result<Tensor> {
        match self {
            Self::Candle(m) => m.forward_batch(seqs, pos),
            Self::Decoder(m) => m.forward_batch(seqs, pos),
        }
    }

    fn device(&self) -> &Device {
        match self {
            Self::Candle(m) => m.device(),
            Self::Decoder(m) => m.device(),
        }
    }

    fn pick_all(&self, logits: &Tensor) -> Result<Vec<u32>> {
        match self {
            Self::Candle(m) => m.pick_all(logits),
            Self::Decoder(m) => m.pick_all(logits),
        }
    }
}

/// The ids of a pp test: the prompt's, repeated to `n`.
pub fn pp_ids(prompt: &[u32], n: usize) -> Vec<u32> {
    prompt.iter().copied().cycle().take(n).collect()
}

/// (bytes held, bytes per token) of a row.
pub fn row_bytes(weights: &Weights, kind: RowKind) -> Result<(u64, u64)> {
    match kind {
        RowKind::Quantized(q) => candle::row_bytes(weights, q),
        RowKind::Float(p) => Ok(decoder::bytes(weights.config(), p.dtype())),
    }
}

/// Which row: its kind, its kernels, and its GGUF (a quantized row on candle's).
pub type Rowed<'a> = (RowKind, Kernels, Option<&'a Gguf>);

/// A row's model loaded on `device` with KV caches of `positions`
/// positions (the suite's decoder; candle's grow theirs), timed and said
/// as `label` ("generate q4_1").
pub fn load_at(
    device: &Device,
    weights: &Weights,
    positions: usize,
    (kind, kernels, gguf): Rowed<'_>,
    label: &str,
) -> Result<Loaded> {
    let started = std::time::Instant::now();
    let lm = match (kind, kernels) {
        // The suite's quantized path: its decoder's layers on the blocks.
        (RowKind::Quantized(q), Kernels::Lab) => {
            let types = row_types(weights.source(), q)?;
            let lm = Decoder::load_quantized(weights, &types, device, positions)?;
            Loaded::Decoder(Box::new(lm))
        }
        (RowKind::Quantized(_), _) => {
            let gguf = gguf.context("a quantized row without its GGUF")?;
            Loaded::Candle(CandleLm::from_gguf(gguf, device)?)
        }
        (RowKind::Float(p), _) => {
            let lm = Decoder::load(weights, p.dtype(), device, positions, kernels)?;
            Loaded::Decoder(Box::new(lm))
        }
    };
    crate::note!(
        "{label}: its model loaded on the device in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(lm)
}

/// The weights `rows` are made from, made once and timed, said as `who`'s.
pub fn made_once<'a>(source: &'a Source, rows: &[RowKind], who: &str) -> Result<Weights<'a>> {
    let started = std::time::Instant::now();
    let weights = Weights::new(source, needs_f32(source, rows))?;
    let (tensors, bytes) = weights.kept();
    if tensors > 0 {
        crate::note!(
            "{who}: the weights in f32 on the host, made once for every row: {tensors} \
             tensors, {:.2} GB, in {:.1} s on {} threads",
            bytes as f64 / 1e9,
            started.elapsed().as_secs_f64(),
            rayon::current_num_threads()
        );
    }
    Ok(weights)
}

/// A quantized row's GGUF, made once (timed, said as `label`: "generate
/// q4_1"); none for a float row.
pub fn row_gguf(
    weights: &Weights,
    (kind, kernels): (RowKind, Kernels),
    label: &str,
) -> Result<Option<Gguf>> {
    // The suite's quantized path takes its blocks itself (kernels::QLinear).
    let (RowKind::Quantized(quant), Kernels::Fused) = (kind, kernels) else {
        return Ok(None);
    };
    let started = std::time::Instant::now();
    let gguf = Gguf::of(weights, quant)?;
    if gguf.bytes_in_memory() > 0 {
        crate::note!(
            "{label}: quantized once, {:.2} GB of GGUF in memory, in {:.1} s",
            gguf.bytes_in_memory() as f64 / 1e9,
            started.elapsed().as_secs_f64()
        );
    }
    Ok(Some(gguf))
}

/// A row's name: its kind's, and the suite's kernels said.
pub fn label(source: &Source, kind: RowKind, kernels: Kernels) -> String {
    match kernels {
        Kernels::Lab => format!("{}{LAB_SUFFIX}", kind.label(source)),
        _ => kind.label(source),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pp_tests_repeat_the_prompt_to_their_length() {
        assert_eq!(pp_ids(&[5, 6, 7], 7), [5, 6, 7, 5, 6, 7, 5]);
        assert_eq!(pp_ids(&[5, 6, 7], 2), [5, 6]);
    }
}
