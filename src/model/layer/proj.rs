//! A layer's projection, `x W^T`: a float weight (`candle_nn::Linear`, run by
//! Candle's matmul, or by the suite's matrix-vector op with
//! [`Kernels::Lab`]), or GGUF blocks as stored ([`QLinear`], the suite's
//! quantized kernels: the lab's quantized model path, whatever the kernels).

use anyhow::Result;
use candle_core::Tensor;
use candle_nn::{Linear, Module};

use super::Kernels;
use crate::kernels::QLinear;

/// One projection's weight.
pub enum Proj {
    Float(Linear),
    Quantized(QLinear),
}

impl Proj {
    /// `x W^T` with `k`'s kernels (a quantized weight has only the suite's).
    pub fn forward(&self, x: &Tensor, k: Kernels) -> Result<Tensor> {
        Ok(match (self, k) {
            (Self::Float(l), Kernels::Lab) => crate::kernels::linear(x, l.weight())?,
            (Self::Float(l), _) => l.forward(x)?,
            (Self::Quantized(q), _) => q.forward(x)?,
        })
    }

    /// (out, in).
    pub fn dims(&self) -> Result<(usize, usize)> {
        Ok(match self {
            Self::Float(l) => l.weight().dims2()?,
            Self::Quantized(q) => q.dims(),
        })
    }
}

/// The activation a projection reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input {
    /// The attention norm's output (Q, K, V).
    Attn,
    /// Attention's output (O).
    Heads,
    /// The MLP norm's output (gate, up).
    Mlp,
    /// SwiGLU's output (down).
    Act,
}

/// Projections that read one input: apart, or their weights stacked into
/// one, whose output is cut back into theirs. Stacked, a decode step reads
/// the input once and hands the threads one product where there were two or
/// three (at SmolLM2's sizes each product is a few microseconds, so the
/// hand-off is a share of it). Only the lab's quantized path stacks: the
/// float rows stay the shapes Candle's users run.
pub enum Fan {
    Apart(Vec<Proj>),
    Stacked(Proj, Vec<usize>),
}

impl Fan {
    /// `projs` stacked where their weights allow it ([`QLinear::stack`]),
    /// else apart.
    pub fn stacked(projs: Vec<Proj>) -> Result<Self> {
        let widths = projs
            .iter()
            .map(|p| Ok(p.dims()?.0))
            .collect::<Result<Vec<_>>>()?;
        let mut blocks = Vec::with_capacity(projs.len());
        for p in projs {
            match p {
                Proj::Quantized(q) => blocks.push(q),
                other => {
                    let mut apart: Vec<Proj> = blocks.into_iter().map(Proj::Quantized).collect();
                    apart.push(other);
                    return Ok(Self::Apart(apart));
                }
            }
        }
        Ok(match QLinear::stack(blocks) {
            Ok(q) => Self::Stacked(Proj::Quantized(q), widths),
            Err(blocks) => Self::Apart(blocks.into_iter().map(Proj::Quantized).collect()),
        })
    }

    /// Each projection's `x W^T`, in order.
    pub fn forward(&self, x: &Tensor, k: Kernels) -> Result<Vec<Tensor>> {
        match self {
            Self::Apart(projs) => projs.iter().map(|p| p.forward(x, k)).collect(),
            Self::Stacked(p, widths) => {
                let y = p.forward(x, k)?;
                let mut at = 0;
                widths
                    .iter()
                    .map(|&w| {
                        let part = y.narrow(candle_core::D::Minus1, at, w)?;
                        at += w;
                        Ok(part)
                    })
                    .collect()
            }
        }
    }

    /// The weights as they run: each apart, or the stacked one.
    pub fn projs(&self) -> Vec<&Proj> {
        match self {
            Self::Apart(projs) => projs.iter().collect(),
            Self::Stacked(p, _) => vec![p],
        }
    }
}
