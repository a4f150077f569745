//! Which kernels a layer's forward pass runs ([`Kernels`]): candle-nn's
//! fused ones, the same math from primitive ops (the reference), or the
//! suite's own, each op of the layer behind one method here, so the layer
//! says what it computes and this file says with whose kernels.

use anyhow::{ensure, Result};
use candle_core::{DType, Tensor, D};

#[cfg(debug_assertions)]
use super::causal_mask;
use super::{attention, Rope};
use crate::clock::spans::span;
use crate::model::{Activation, Config};
use crate::schema::KernelChoice;
use crate::schema::TokenOpClass::{Elementwise, Rotary};

/// Which kernels a forward pass uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernels {
    /// candle-nn's fused `rms_norm`, `softmax_last_dim` and `rope`: what the
    /// block is timed with by default (`--kernels candle`).
    Fused,
    /// The same math from primitive ops (`rms_norm_slow`, `softmax`,
    /// `rope_slow`): the f64 reference, which the fused kernels are checked against.
    Composed,
    /// The suite's own kernels (`crate::kernels`, `--kernels lab`): RMSNorm
    /// fused with its weight, softmax, SwiGLU's gate in one pass, the
    /// residual adds, the heads' layout and rope in one pass, attention over
    /// the cache, and the projections' matrix-vector products (on a GPU,
    /// rope is candle-nn's and attention the composed form).
    Lab,
}

impl Kernels {
    /// The forward pass's kernels for `--kernels` (`Both` times candle's
    /// first: its own rows say which ran).
    pub fn of(choice: KernelChoice) -> Self {
        match choice {
            KernelChoice::Lab => Self::Lab,
            _ => Self::Fused,
        }
    }

    /// Whose kernels a row that ran these is said to run (`--kernels`'s
    /// names: the composed reference is candle's ops too).
    pub fn choice(self) -> KernelChoice {
        match self {
            Self::Lab => KernelChoice::Lab,
            _ => KernelChoice::Candle,
        }
    }

    /// RMSNorm of `x` with weight `w`.
    pub(crate) fn rms_norm(self, x: &Tensor, w: &Tensor, eps: f32) -> Result<Tensor> {
        Ok(match self {
            Self::Fused => candle_nn::ops::rms_norm(x, w, eps)?,
            Self::Composed => candle_nn::ops::rms_norm_slow(x, w, eps)?,
            Self::Lab => crate::kernels::rms_norm_mul(x, w, eps)?,
        })
    }

    /// Softmax over the last dimension.
    pub(crate) fn softmax(self, x: &Tensor) -> Result<Tensor> {
        Ok(match self {
            Self::Fused => candle_nn::ops::softmax_last_dim(x)?,
            Self::Composed => candle_nn::ops::softmax(x, D::Minus1)?,
            Self::Lab => crate::kernels::softmax_last_dim(x)?,
        })
    }

    /// silu(gate) * up.
    pub(crate) fn swiglu(self, gate: &Tensor, up: &Tensor) -> Result<Tensor> {
        Ok(match self {
            Self::Lab => crate::kernels::swiglu(gate, up)?,
            _ => (candle_nn::ops::silu(gate)? * up)?,
        })
    }

    /// The MLP's gate `act` on `gate`, times `up`: SwiGLU, or GeGLU with
    /// GELU's tanh form (candle's `gelu`; the suite has no kernel of its own
    /// for it: at one token it is a few microseconds of a layer).
    pub(crate) fn gated(self, gate: &Tensor, up: &Tensor, act: Activation) -> Result<Tensor> {
        match act {
            Activation::Silu => self.swiglu(gate, up),
            Activation::GeluTanh => Ok((gate.gelu()? * up)?),
        }
    }

    /// softmax(Q K^T / sqrt(d) + mask) V, as [`attention`]: on the lab's
    /// kernels on the CPU, a decode step (one query row, no mask) and a
    /// prompt chunk under the causal mask are the suite's one-pass op, which
    /// applies that mask by position; anything else is the composed form.
    pub(crate) fn attention(
        self,
        q: &Tensor,
        keys: &Tensor,
        values: &Tensor,
        mask: Option<&Tensor>,
        c: &Config,
    ) -> Result<Tensor> {
        // A mask given here is always `causal_mask(t, n - t)` (the callers'),
        // which the suite's op applies by position: checked in debug builds.
        let (t, n) = (q.dim(2)?, keys.dim(2)?);
        let causal = mask.map_or(t == 1, |m| m.dims() == [t, n]);
        #[cfg(debug_assertions)]
        if let (true, Some(m)) = (causal, mask) {
            let same = m.eq(&causal_mask(t, n - t, m.dtype(), m.device())?)?;
            ensure!(
                same.min_all()?.to_scalar::<u8>()? == 1,
                "lab: a mask not causal"
            );
        }
        if self == Self::Lab && causal && q.device().is_cpu() {
            return Ok(crate::kernels::cached_attention(q, keys, values)?);
        }
        attention(q, keys, values, mask, c, self)
    }

    /// `y` (batch, tokens, n x head_dim), a projection's output or a view of
    /// one, as (batch, n, tokens, head_dim), contiguous, and rotated at
    /// `rope`'s positions when given. The lab's on the CPU is one op that
    /// reads `y` where it lies (booked as rotary when it rotates, else
    /// element-wise); the others, and the lab's on a GPU, copy the heads out
    /// (element-wise), then rotate them (rotary).
    pub(crate) fn heads(self, y: &Tensor, n: usize, rope: Option<&Rope>) -> Result<Tensor> {
        if self == Self::Lab && y.device().is_cpu() {
            let class = if rope.is_some() { Rotary } else { Elementwise };
            let tables = rope.map(|r| (&r.cos, &r.sin));
            return span(class, || Ok(crate::kernels::heads(y, n, tables)?));
        }
        let (b, t, w) = y.dims3()?;
        ensure!(
            n > 0 && w.is_multiple_of(n),
            "{w} columns are not {n} heads"
        );
        let split = span(Elementwise, || {
            Ok(y.reshape((b, t, n, w / n))?.transpose(1, 2)?.contiguous()?)
        })?;
        match rope {
            Some(rope) => span(Rotary, || rope.apply(&split, self)),
            None => Ok(split),
        }
    }

    /// a + b, of one shape (the residual adds).
    pub(crate) fn add(self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        Ok(match self {
            Self::Lab => crate::kernels::add(a, b)?,
            _ => (a + b)?,
        })
    }

    /// `x` in `dtype` (a 16-bit KV cache's keys and values from f32 ones):
    /// the suite's `round_to` on its kernels, Candle's `to_dtype` on
    /// Candle's (the same values, bit for bit).
    pub(crate) fn to_dtype(self, x: &Tensor, dtype: DType) -> Result<Tensor> {
        Ok(match self {
            Self::Lab => crate::kernels::round_to(x, dtype)?,
            _ => x.to_dtype(dtype)?,
        })
    }
}
