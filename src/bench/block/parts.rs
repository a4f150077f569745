//! Where a block's time goes: each op class timed alone at the block's shapes
//! (per block call: all its calls of that class), and candle-nn's fused
//! kernels against the same math from primitive ops.

use anyhow::{Context, Result};
use candle_core::{DType, Tensor, D};

use super::weights::{Aux, Block};
use crate::clock::Plan;
use crate::formulas::{rms_norm_bytes, rope_bytes, softmax_bytes};
use crate::model::layer::{Input, Kernels, Proj};
use crate::precision::Precision;
use crate::schema::{BlockPart, FusedOp, FusedRow, OpClass, Phase, Timed};
use crate::telemetry::Telemetry;

/// Random tensors of the shapes the block's ops see in `phase`, on its
/// device, one per role (the same-work rule, docs/block.md): within one timed
/// part, two calls read one tensor only where the block's two calls do (Q, K
/// and V project one normed x; gate and up one normed h1), so a part touches
/// the bytes the block's calls would and no call finds its input warm from
/// the call before it. Each is its own allocation (never a view or a shallow
/// clone), made before the part's clock starts; PyTorch's parts follow the
/// same rule (pytorch/block/parts.py).
struct Shapes {
    /// The layer's input, the attention's output, h1 and the two projection
    /// outputs the residuals add: (batch, tokens, hidden) each.
    x: Tensor,
    xn: Tensor,
    attn: Tensor,
    h1: Tensor,
    hn: Tensor,
    o: Tensor,
    down: Tensor,
    /// The projections' outputs, before they are laid out by head.
    q_proj: Tensor,
    k_proj: Tensor,
    v_proj: Tensor,
    /// (batch, tokens, mlp): down's input, gate's and up's outputs.
    act: Tensor,
    gate: Tensor,
    up: Tensor,
    /// By head: queries (batch, heads, tokens, d); the new keys and values
    /// (batch, kv_heads, tokens, d).
    q: Tensor,
    k: Tensor,
    v: Tensor,
    /// What attention reads: every key and value (batch, kv_heads, context,
    /// d; in decode the preallocated cache, the new token's written at `seq`)
    /// and the scores (batch, heads, tokens, context).
    keys: Tensor,
    values: Tensor,
    scores: Tensor,
}

impl Shapes {
    fn new(block: &Block, phase: Phase, dtype: DType) -> Result<Self> {
        let s = &block.shape;
        let (b, heads, kv, d) = (s.batch, s.heads, s.kv_heads(), s.head_dim);
        let t = block.input(phase).dim(1)?;
        let c = if phase == Phase::Decode { s.seq + 1 } else { t };
        let (h, m, kvw) = (s.hidden, s.mlp, kv * d);
        let device = block.device();
        let rand = |shape: &[usize]| -> Result<Tensor> {
            Ok(Tensor::randn(0f32, 1f32, shape, device)?.to_dtype(dtype)?)
        };
        let hidden = || rand(&[b, t, h]);
        Ok(Self {
            x: hidden()?,
            xn: hidden()?,
            attn: hidden()?,
            h1: hidden()?,
            hn: hidden()?,
            o: hidden()?,
            down: hidden()?,
            q_proj: hidden()?,
            k_proj: rand(&[b, t, kvw])?,
            v_proj: rand(&[b, t, kvw])?,
            act: rand(&[b, t, m])?,
            gate: rand(&[b, t, m])?,
            up: rand(&[b, t, m])?,
            q: rand(&[b, heads, t, d])?,
            k: rand(&[b, kv, t, d])?,
            v: rand(&[b, kv, t, d])?,
            keys: rand(&[b, kv, c, d])?,
            values: rand(&[b, kv, c, d])?,
            scores: rand(&[b, heads, t, c])?,
        })
    }
}

/// Each op class of one block call of `phase`, timed alone under `plan`, on
/// the inputs [`Shapes`] makes (the same-work rule).
pub fn time_parts(
    block: &Block,
    phase: Phase,
    aux: &Aux,
    dtype: DType,
    plan: Plan,
    telemetry: &Telemetry,
) -> Result<Vec<BlockPart>> {
    let device = block.device();
    let sh = Shapes::new(block, phase, dtype)?;
    let (b, t, h) = sh.x.dims3()?;
    let cfg = block.config();
    let (heads, kv, g, d) = (cfg.heads, cfg.kv_heads, cfg.groups(), cfg.head_dim);
    let eps = cfg.rms_eps as f32;
    let scale = 1.0 / (d as f64).sqrt();
    let lin = block.layer.projections();
    let norms = block.layer.norms();
    let decode = phase == Phase::Decode;
    let seq = block.shape.seq;
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
    // Candle's matmuls, as every part here is candle-nn's.
    let mm = |w: &Proj, x: &Tensor| w.forward(x, Kernels::Fused);
    let input = |i: Input| match i {
        Input::Attn => &sh.xn,
        Input::Heads => &sh.attn,
        Input::Mlp => &sh.hn,
        Input::Act => &sh.act,
    };
    part(OpClass::Linear, lin.len(), &mut || {
        let ((last, at), rest) = lin.split_last().context("a layer has projections")?;
        for &(w, i) in rest {
            drop(mm(w, input(i))?);
        }
        mm(last, input(*at))
    })?;
    // Grouped as the layer does it: each key/value head against its group's
    // queries, one (groups x t) x d matrix.
    part(OpClass::AttentionMatmul, 2, &mut || {
        let q = sh.q.reshape((b, kv, g * t, d))?;
        drop(q.matmul(&sh.keys.t()?)?);
        let c = sh.scores.dim(3)?;
        let probs = sh.scores.reshape((b, kv, g * t, c))?;
        Ok(probs.matmul(&sh.values)?)
    })?;
    part(OpClass::Norm, 2, &mut || {
        drop(candle_nn::ops::rms_norm(&sh.x, norms.0, eps)?);
        Ok(candle_nn::ops::rms_norm(&sh.h1, norms.1, eps)?)
    })?;
    part(OpClass::Softmax, 1, &mut || {
        Ok(candle_nn::ops::softmax_last_dim(&sh.scores)?)
    })?;
    part(OpClass::Rotary, 2, &mut || {
        drop(aux.rope.apply(&sh.q, Kernels::Fused)?);
        aux.rope.apply(&sh.k, Kernels::Fused)
    })?;
    // The scale, the mask (prefill), SiLU and the gate's product, two residual
    // adds, three tensors laid out by head and one back, and (decode) the new
    // key and value written into the cache.
    let calls = 1 + usize::from(!decode) + 2 + 2 + 4 + if decode { 2 } else { 0 };
    let cache_at = decode.then_some(seq);
    part(OpClass::Elementwise, calls, &mut || {
        elementwise(&sh, aux, (b, t, h), (heads, kv, d), scale, cache_at)
    })?;
    Ok(parts)
}

/// The element-wise work of one block call, on [`Shapes`]' inputs: the
/// scores' scale and (prefill) mask, SiLU and the gate's product, two
/// residual adds, the three projections laid out by head (`heads`, `kv`
/// heads of `d`) and the attention's output back to `(b, t, h)`, and (decode)
/// the new key and value written into the cache at `cache_at`.
fn elementwise(
    sh: &Shapes,
    aux: &Aux,
    (b, t, h): (usize, usize, usize),
    (heads, kv, d): (usize, usize, usize),
    scale: f64,
    cache_at: Option<usize>,
) -> Result<Tensor> {
    let mut scores = (&sh.scores * scale)?;
    if let Some(mask) = &aux.mask {
        scores = scores.broadcast_add(mask)?;
    }
    drop(scores);
    drop((candle_nn::ops::silu(&sh.gate)? * &sh.up)?);
    drop((&sh.x + &sh.o)?);
    drop((&sh.h1 + &sh.down)?);
    for (y, n) in [(&sh.q_proj, heads), (&sh.k_proj, kv), (&sh.v_proj, kv)] {
        drop(y.reshape((b, t, n, d))?.transpose(1, 2)?.contiguous()?);
    }
    let back = sh.q.transpose(1, 2)?.contiguous()?.reshape((b, t, h))?;
    if let Some(seq) = cache_at {
        sh.keys.slice_set(&sh.k, 2, seq)?;
        sh.values.slice_set(&sh.v, 2, seq)?;
    }
    Ok(back)
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
    let device = block.device();
    let sh = Shapes::new(block, Phase::Prefill, dtype)?;
    let aux = block.aux(Phase::Prefill, sh.x.dim(1)?, dtype)?;
    let (cos, sin) = (&aux.rope.cos, &aux.rope.sin);
    let (b, t, h) = sh.x.dims3()?;
    let elem = dtype.size_in_bytes() as u64;
    let eps = block.shape.rms_eps as f32;
    let w = block.layer.norms().0;
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
                    Ok(candle_nn::rotary_emb::rope(&sh.q, cos, sin)?)
                })?,
                time("composed", &mut || {
                    Ok(candle_nn::rotary_emb::rope_slow(&sh.q, cos, sin)?)
                })?,
                rope_bytes(sh.q.elem_count() as u64, cos.elem_count() as u64, elem),
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
            composed_over_fused: composed.rate_ms().0 / fused.rate_ms().0,
            fused,
            composed,
            fused_bytes: bytes.0,
            composed_bytes: bytes.1,
        });
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use candle_core::Device;

    use super::*;
    use crate::bench::block::weights::HostWeights;

    /// The same-work rule's inputs: every role is its own allocation, so no
    /// two hold the same numbers (a view or a shallow clone of another role
    /// would), and the key/value roles have the key/value heads.
    #[test]
    fn every_role_is_its_own_tensor() {
        let shape = crate::bench::block::shape(
            false,
            [Some(32), Some(4), Some(2), Some(40), Some(6)],
            1,
            4,
        );
        let w = HostWeights::random(&shape, 1).unwrap();
        let block = Block::new(&w, &shape, DType::F32, &Device::Cpu).unwrap();
        for phase in [Phase::Prefill, Phase::Decode] {
            let sh = Shapes::new(&block, phase, DType::F32).unwrap();
            let roles = [
                &sh.x, &sh.xn, &sh.attn, &sh.h1, &sh.hn, &sh.o, &sh.down, &sh.q_proj, &sh.k_proj,
                &sh.v_proj, &sh.act, &sh.gate, &sh.up, &sh.q, &sh.k, &sh.v, &sh.keys, &sh.values,
                &sh.scores,
            ];
            for (i, a) in roles.iter().enumerate() {
                for b in &roles[i + 1..] {
                    if a.dims() == b.dims() {
                        let same = (*a - *b).unwrap().abs().unwrap().max_all().unwrap();
                        assert!(
                            same.to_scalar::<f32>().unwrap() > 0.0,
                            "{phase:?}: {:?}",
                            a.dims()
                        );
                    }
                }
            }
            assert_eq!((sh.q.dim(1).unwrap(), sh.k.dim(1).unwrap()), (4, 2));
            assert_eq!(
                sh.keys.dims(),
                [1, 2, if phase == Phase::Decode { 7 } else { 6 }, 8]
            );
        }
    }
}
