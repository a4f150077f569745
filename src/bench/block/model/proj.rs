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
