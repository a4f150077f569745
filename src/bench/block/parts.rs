//! Where a block's time goes: each op class timed alone at the block's shapes
//! (per block call: all its calls of that class), and candle-nn's fused
//! kernels against the same math from primitive ops.

use anyhow::Result;
use candle_core::{DType, Tensor, D};
use candle_nn::Module;

use super::model::{Aux, Block};
use crate::bench::formulas::{rms_norm_bytes, rope_bytes, softmax_bytes};
use crate::clock::Plan;
use crate::precision::Precision;
use crate::schema::{BlockPart, FusedOp, FusedRow, OpClass, Phase, Timed};
use crate::telemetry::Telemetry;

/// Random tensors of the shapes the block's ops see in `phase`, on its device.
struct Shapes {
    x: Tensor,
    act: Tensor,
    q: Tensor,
    keys: Tensor,
    values: Tensor,
    scores: Tensor,
}

impl Shapes {
    fn new(block: &Block, phase: Phase, dtype: DType) -> Result<Self> {
        let s = &block.shape;
        let (b, heads, d) = (s.batch, s.heads, s.head_dim);
        let t = block.input(phase).dim(1)?;
        let c = if phase == Phase::Decode { s.seq + 1 } else { t };
        let device = block.x_prefill.device();
        let rand = |shape: &[usize]| -> Result<Tensor> {
            Ok(Tensor::randn(0f32, 1f32, shape, device)?.to_dtype(dtype)?)
        };
        Ok(Self {
            x: rand(&[b, t, s.hidden])?,
            act: rand(&[b, t, s.mlp])?,
            q: rand(&[b, heads, t, d])?,
            keys: rand(&[b, heads, c, d])?,
            values: rand(&[b, heads, c, d])?,
            scores: rand(&[b, heads, t, c])?,
        })
    }
}

/// Each op class of one block call of `phase`, timed alone under `plan`.
pub fn time_parts(
    block: &Block,
    phase: Phase,
    aux: &Aux,
    dtype: DType,
    plan: Plan,
    telemetry: &Telemetry,
) -> Result<Vec<BlockPart>> {
    let device = block.x_prefill.device();
    let sh = Shapes::new(block, phase, dtype)?;
    let (b, t, h) = sh.x.dims3()?;
    let (heads, d) = (block.shape.heads, block.shape.head_dim);
    let eps = block.shape.rms_eps as f32;
    let scale = 1.0 / (d as f64).sqrt();
    let lin = block.linears();
    let norms = block.norms();
    let decode = phase == Phase::Decode;
    let mut parts = Vec::new();
    let mut part = |class: OpClass, calls: usize, work: &mut dyn FnMut() -> Result<Tensor>| {
        let label = format!("{} {}", phase.name(), class.name());
        let timed = telemetry.time(device, plan, &label, work)?;
        parts.push(BlockPart {
            class,
            calls,
            timed,
        });
        anyhow::Ok(())
    };
    part(OpClass::Linear, 7, &mut || {
        for w in &lin[..6] {
            drop(w.forward(&sh.x)?);
        }
        Ok(lin[6].forward(&sh.act)?)
    })?;
    part(OpClass::AttentionMatmul, 2, &mut || {
        drop(sh.q.matmul(&sh.keys.t()?)?);
        Ok(sh.scores.matmul(&sh.values)?)
    })?;
    part(OpClass::Norm, 2, &mut || {
        drop(candle_nn::ops::rms_norm(&sh.x, norms.0, eps)?);
        Ok(candle_nn::ops::rms_norm(&sh.x, norms.1, eps)?)
    })?;
    part(OpClass::Softmax, 1, &mut || {
        Ok(candle_nn::ops::softmax_last_dim(&sh.scores)?)
    })?;
    let fresh_keys = sh.q.clone();
    part(OpClass::Rotary, 2, &mut || {
        drop(candle_nn::rotary_emb::rope(&sh.q, &aux.cos, &aux.sin)?);
        Ok(candle_nn::rotary_emb::rope(
            &fresh_keys,
            &aux.cos,
            &aux.sin,
        )?)
    })?;
    // The scale, the mask (prefill), SiLU and the gate's product, two residual
    // adds, three tensors laid out by head and one back, and (decode) the
    // cache's two concats.
    let calls = 1 + usize::from(!decode) + 2 + 2 + 4 + if decode { 2 } else { 0 };
    part(OpClass::Elementwise, calls, &mut || {
        let mut scores = (&sh.scores * scale)?;
        if let Some(mask) = &aux.mask {
            scores = scores.broadcast_add(mask)?;
        }
        drop(scores);
        drop((candle_nn::ops::silu(&sh.act)? * &sh.act)?);
        drop((&sh.x + &sh.x)?);
        drop((&sh.x + &sh.x)?);
        for _ in 0..3 {
            drop(
                sh.x.reshape((b, t, heads, d))?
                    .transpose(1, 2)?
                    .contiguous()?,
            );
        }
        let back = sh.q.transpose(1, 2)?.contiguous()?.reshape((b, t, h))?;
        if decode {
            drop(Tensor::cat(&[&sh.keys, &sh.q], 2)?);
            drop(Tensor::cat(&[&sh.values, &sh.q], 2)?);
        }
        Ok(back)
    })?;
    Ok(parts)
}

/// candle-nn's fused RMSNorm, softmax and rope against `rms_norm_slow`,
/// `softmax` and `rope_slow`, at the prefill's shapes, in precision `p`.
pub fn fused_rows(
    block: &Block,
    p: Precision,
    plan: Plan,
    telemetry: &Telemetry,
) -> Result<Vec<FusedRow>> {
    let dtype = p.dtype();
    let device = block.x_prefill.device();
    let sh = Shapes::new(block, Phase::Prefill, dtype)?;
    let aux = block.aux(Phase::Prefill, dtype)?;
    let (b, t, h) = sh.x.dims3()?;
    let elem = dtype.size_in_bytes() as u64;
    let eps = block.shape.rms_eps as f32;
    let w = block.norms().0;
    let mut rows = Vec::new();
    for op in FusedOp::ALL {
        let label = |how: &str| format!("{} {} {p}", op.name(), how);
        let time = |how: &str, work: &mut dyn FnMut() -> Result<Tensor>| -> Result<Timed> {
            telemetry.time(device, plan, &label(how), work)
        };
        let (fused, composed, bytes, calls) = match op {
            FusedOp::RmsNorm => (
                time("fused", &mut || {
                    Ok(candle_nn::ops::rms_norm(&sh.x, w, eps)?)
                })?,
                time("composed", &mut || {
                    Ok(candle_nn::ops::rms_norm_slow(&sh.x, w, eps)?)
                })?,
                rms_norm_bytes((b * t) as u64, h as u64, elem),
                ("candle_nn::ops::rms_norm", "candle_nn::ops::rms_norm_slow"),
            ),
            FusedOp::Softmax => (
                time("fused", &mut || {
                    Ok(candle_nn::ops::softmax_last_dim(&sh.scores)?)
                })?,
                time("composed", &mut || {
                    Ok(candle_nn::ops::softmax(&sh.scores, D::Minus1)?)
                })?,
                {
                    let width = sh.scores.dim(D::Minus1)? as u64;
                    softmax_bytes(sh.scores.elem_count() as u64 / width, width, elem)
                },
                (
                    "candle_nn::ops::softmax_last_dim",
                    "candle_nn::ops::softmax",
                ),
            ),
            FusedOp::Rope => (
                time("fused", &mut || {
                    Ok(candle_nn::rotary_emb::rope(&sh.q, &aux.cos, &aux.sin)?)
                })?,
                time("composed", &mut || {
                    Ok(candle_nn::rotary_emb::rope_slow(&sh.q, &aux.cos, &aux.sin)?)
                })?,
                rope_bytes(sh.q.elem_count() as u64, aux.cos.elem_count() as u64, elem),
                (
                    "candle_nn::rotary_emb::rope",
                    "candle_nn::rotary_emb::rope_slow",
                ),
            ),
        };
        rows.push(FusedRow {
            op,
            precision: p,
            fused_call: calls.0.into(),
            composed_call: calls.1.into(),
            composed_over_fused: composed.median_ms / fused.median_ms,
            fused,
            composed,
            fused_bytes: bytes.0,
            composed_bytes: bytes.1,
        });
    }
    Ok(rows)
}
