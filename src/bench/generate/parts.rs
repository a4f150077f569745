//! Where a generated token's time goes, and the matmuls alone. The matmuls
//! are the row's own weights, every layer's in turn (so the weights stream
//! from memory as they do in a token; one layer's, repeated, would sit in a
//! cache), at one token (tg's shapes) and at `pp_tokens` (pp's, the roofline
//! pp is held against). The other classes are timed at one layer's shapes
//! with the calls quantized_llama makes (the context at tg's middle), and
//! counted once per layer; sampling and the embedding row once per token.

use anyhow::Result;
use candle_core::quantized::QMatMul;
use candle_core::{DType, Device, Module, Tensor};

use crate::clock::Plan;
use crate::model::decoder::Decoder;
use crate::model::layer::Kernels;
use crate::model::{Config, Lm};
use crate::schema::{Bound, Timed, TokenOpClass, TokenPart};
use crate::telemetry::Telemetry;

/// The row's matmuls: candle-transformers' model's (loaded again) or the
/// suite's decoder's.
pub enum Mats {
    Candle {
        layers: Vec<[QMatMul; 7]>,
        head: QMatMul,
    },
    Decoder(Box<Decoder>),
}

impl Mats {
    fn layers(&self) -> usize {
        match self {
            Self::Candle { layers, .. } => layers.len(),
            Self::Decoder(f) => f.layers(),
        }
    }

    /// Every projection of `layer`: O on `o` (attention's output), down on
    /// `m` (the MLP's), the others on `x`.
    fn project_all(&self, layer: usize, (x, o, m): (&Tensor, &Tensor, &Tensor)) -> Result<()> {
        match self {
            Self::Candle { layers, .. } => {
                for (which, w) in layers[layer].iter().enumerate() {
                    let on = match which {
                        3 => o,
                        6 => m,
                        _ => x,
                    };
                    drop(w.forward(on)?);
                }
            }
            Self::Decoder(f) => f.project_all(layer, x, o, m)?,
        }
        Ok(())
    }

    fn head(&self, x: &Tensor) -> Result<Tensor> {
        Ok(match self {
            Self::Candle { head, .. } => head.forward(x)?,
            Self::Decoder(f) => f.head(x)?,
        })
    }
}

/// Random inputs (seeded, never zeros) at the model's shapes, made off the clock.
pub struct Shapes {
    x: Tensor,
    o: Tensor,
    m: Tensor,
    x_pp: Tensor,
    o_pp: Tensor,
    m_pp: Tensor,
    q: Tensor,
    k: Tensor,
    keys: Tensor,
    values: Tensor,
    cos: Tensor,
    sin: Tensor,
    norm: Tensor,
    head_norm: Tensor,
    bias: Tensor,
    logits: Tensor,
    embedding: Tensor,
}

impl Shapes {
    pub fn new(
        d: &Config,
        dtype: DType,
        device: &Device,
        seed: u64,
        pp: usize,
        tg: usize,
    ) -> Result<Self> {
        let mut n = 0u64;
        let mut rand = |shape: &[usize]| -> Result<Tensor> {
            n += 1;
            let t = crate::model::weights::random(
                &format!("part {n}"),
                &[shape.iter().product(), 1],
                seed,
            )?
            .reshape(shape)?;
            Ok(t.to_dtype(dtype)?.to_device(device)?)
        };
        let (h, q, m, hd) = (d.hidden, d.q_width(), d.mlp, d.head_dim);
        let context = (tg / 2).max(1);
        let half = hd / 2;
        Ok(Self {
            x: rand(&[1, 1, h])?,
            o: rand(&[1, 1, q])?,
            m: rand(&[1, 1, m])?,
            x_pp: rand(&[1, pp, h])?,
            o_pp: rand(&[1, pp, q])?,
            m_pp: rand(&[1, pp, m])?,
            q: rand(&[1, d.heads, 1, hd])?,
            k: rand(&[1, d.kv_heads, 1, hd])?,
            keys: rand(&[1, d.kv_heads, context, hd])?,
            values: rand(&[1, d.kv_heads, context, hd])?,
            cos: rand(&[1, half])?,
            sin: rand(&[1, half])?,
            norm: rand(&[h])?,
            head_norm: rand(&[hd])?,
            bias: rand(&[q])?,
            logits: rand(&[1, d.vocab])?,
            embedding: rand(&[d.vocab.min(4096), h])?,
        })
    }
}

/// Every layer's projections (seven, or four stacked) and the head, at one token or at pp's
/// tokens (the head at the last token only, as the model runs it).
pub fn matmuls(
    mats: &Mats,
    s: &Shapes,
    pp: bool,
    telemetry: &Telemetry,
    plan: Plan,
    label: &str,
) -> Result<Timed> {
    let inputs = match pp {
        true => (&s.x_pp, &s.o_pp, &s.m_pp),
        false => (&s.x, &s.o, &s.m),
    };
    let what = if pp { "pp" } else { "tg" };
    telemetry.time(
        s.x.device(),
        plan,
        &format!("{label} matmuls at {what}"),
        || {
            for l in 0..mats.layers() {
                mats.project_all(l, inputs)?;
            }
            mats.head(&s.x)
        },
    )
}

/// repeat_kv as candle-transformers does it: each key/value head repeated
/// for the query heads that share it.
fn repeat_kv(x: &Tensor, n: usize) -> Result<Tensor> {
    Ok(candle_transformers::utils::repeat_kv(x.clone(), n)?)
}

/// Each class's time per generated token; `matmuls_tg` is the matmuls'. The
/// norms, softmax, SwiGLU and adds are timed with the row's kernels `kern`.
#[allow(clippy::too_many_arguments)]
pub fn token_parts(
    d: &Config,
    s: &Shapes,
    matmuls_tg: &Timed,
    (interleaved, kern): (bool, Kernels),
    telemetry: &Telemetry,
    plan: Plan,
    label: &str,
) -> Result<Vec<TokenPart>> {
    let device = s.x.device();
    let layers = d.layers;
    let groups = d.heads / d.kv_heads;
    let scale = 1.0 / (d.head_dim as f64).sqrt();
    let time = |class: TokenOpClass, work: &mut dyn FnMut() -> Result<Tensor>| -> Result<Timed> {
        telemetry.time(device, plan, &format!("{label} {}", class.name()), work)
    };
    let mut parts = vec![TokenPart {
        class: TokenOpClass::Matmuls,
        calls: 7 * layers + 1,
        ms_per_token: matmuls_tg.rate_ms().0,
        timed: matmuls_tg.clone(),
    }];
    let mut push = |class, calls, per_token: usize, timed: Timed| {
        parts.push(TokenPart {
            class,
            calls,
            ms_per_token: timed.rate_ms().0 * per_token as f64,
            timed,
        })
    };
    let t = time(TokenOpClass::Attention, &mut || {
        attention(s, groups, scale, kern)
    })?;
    push(TokenOpClass::Attention, 4 * layers, layers, t);
    // A layer's norms: before attention and the MLP (and after them, Gemma
    // 3), and each head of Q and K (Qwen 3, Gemma 3).
    let f = d.arch.features();
    let (t, calls) = norms(d, s, kern, &time)?;
    push(TokenOpClass::Norms, calls, layers, t);
    let rope = |x: &Tensor| -> Result<Tensor> {
        Ok(if interleaved {
            candle_nn::rotary_emb::rope_i(x, &s.cos, &s.sin)?
        } else {
            candle_nn::rotary_emb::rope(x, &s.cos, &s.sin)?
        })
    };
    let t = time(TokenOpClass::Rotary, &mut || {
        drop(rope(&s.q)?);
        rope(&s.k)
    })?;
    push(TokenOpClass::Rotary, 2 * layers, layers, t);
    let t = time(TokenOpClass::Elementwise, &mut || elementwise(d, s, kern))?;
    let biases = if f.qkv_bias { 3 } else { 0 };
    push(
        TokenOpClass::Elementwise,
        (10 + biases) * layers + 1,
        layers,
        t,
    );
    let t = embedding_row(d, s, &time)?;
    if let Some(e) = parts
        .iter_mut()
        .find(|p| p.class == TokenOpClass::Elementwise)
    {
        e.ms_per_token += t.rate_ms().0;
    }
    let t = time(TokenOpClass::Sampling, &mut || {
        let id = crate::model::pick(&s.logits)?;
        Ok(Tensor::new(&[id], &Device::Cpu)?)
    })?;
    parts.push(TokenPart {
        class: TokenOpClass::Sampling,
        calls: 1,
        ms_per_token: t.rate_ms().0,
        timed: t,
    });
    Ok(parts)
}

/// A timing of one op class's work, named by its class.
type TimeClass<'a> = dyn Fn(TokenOpClass, &mut dyn FnMut() -> Result<Tensor>) -> Result<Timed> + 'a;

/// One layer's norms, timed, and their calls a token: before attention and
/// the MLP (and after them, Gemma 3), and each head of Q and K (Qwen 3,
/// Gemma 3), and the final norm once.
fn norms(d: &Config, s: &Shapes, kern: Kernels, time: &TimeClass) -> Result<(Timed, usize)> {
    let f = d.arch.features();
    let eps = d.rms_eps as f32;
    let wide = if f.sandwich_norms { 4 } else { 2 };
    let heads = if f.qk_norm { 2 } else { 0 };
    let t = time(TokenOpClass::Norms, &mut || {
        for _ in 1..wide {
            drop(kern.rms_norm(&s.x, &s.norm, eps)?);
        }
        if f.qk_norm {
            drop(kern.rms_norm(&s.q, &s.head_norm, eps)?);
            drop(kern.rms_norm(&s.k, &s.head_norm, eps)?);
        }
        kern.rms_norm(&s.x, &s.norm, eps)
    })?;
    Ok((t, (wide + heads) * d.layers + 1))
}

/// A row of the embedding (any: the lookup's cost is the row's bytes),
/// scaled by sqrt(hidden) where the architecture scales it (Gemma 3), timed.
fn embedding_row(d: &Config, s: &Shapes, time: &TimeClass) -> Result<Timed> {
    let row = (s.embedding.dim(0)? - 1).min(7) as u32;
    let ids = Tensor::new(&[row], s.x.device())?;
    time(TokenOpClass::Elementwise, &mut || {
        let row = s.embedding.index_select(&ids, 0)?;
        Ok(match d.arch.features().embed_scale {
            true => (row * (d.hidden as f64).sqrt())?,
            false => row,
        })
    })
}

/// One layer's attention at one token, as Candle's model does it: the
/// cache's keys and values repeated to every query head, the scores, their
/// softmax and the values' weighted sum.
fn attention(s: &Shapes, groups: usize, scale: f64, kern: Kernels) -> Result<Tensor> {
    let k = repeat_kv(&s.keys, groups)?;
    let v = repeat_kv(&s.values, groups)?;
    let att = (s.q.matmul(&k.t()?)? * scale)?;
    let att = kern.softmax(&att)?;
    Ok(att.matmul(&v.contiguous()?)?)
}

/// One layer's element-wise work at one token: two residual adds, SiLU and
/// the gate's product (candle-transformers' models all gate with SiLU,
/// Gemma 3's too: its issue 3745), Q, K and V's biases where the
/// architecture has them, Q/K/V laid out by head and the output back, the
/// cache's two appends.
fn elementwise(d: &Config, s: &Shapes, kern: Kernels) -> Result<Tensor> {
    let (q, hd, kvw) = (d.q_width(), d.head_dim, d.kv_width());
    drop(kern.add(&s.x, &s.x)?);
    drop(kern.add(&s.x, &s.x)?);
    drop(kern.swiglu(&s.m, &s.m)?);
    if d.arch.features().qkv_bias {
        for _ in 0..3 {
            drop(s.o.broadcast_add(&s.bias)?);
        }
    }
    let qh =
        s.o.reshape((1, 1, d.heads, hd))?
            .transpose(1, 2)?
            .contiguous()?;
    let kv = s.o.narrow(2, 0, kvw)?;
    for _ in 0..2 {
        drop(
            kv.reshape((1, 1, d.kv_heads, hd))?
                .transpose(1, 2)?
                .contiguous()?,
        );
    }
    drop(Tensor::cat(&[&s.keys, &s.k], 2)?);
    drop(Tensor::cat(&[&s.values, &s.k], 2)?);
    Ok(qh.transpose(1, 2)?.reshape((1, 1, q))?)
}

/// The parts measured inside the pass ([`in_pass`]): each class per token,
/// the token's time the spans leave out, and what the spans cost.
pub struct InPass {
    pub parts: Vec<TokenPart>,
    pub remainder_ms: f64,
    pub overhead_ms: f64,
}

/// Where a generated token's time goes, inside the real decode steps:
/// `cfg.plan` tg runs of their own (after its warm-up), every op of every
/// layer in a span (`clock::spans`), each class's time per token a sample of
/// each run; the token's time less the spans is the remainder, the spanned
/// token's time less the clean one's (`clean_ms`, a token of the clean tg
/// runs) what the spans cost. The clock covers each run whole.
pub fn in_pass(
    lm: &mut Decoder,
    cfg: &super::Config,
    telemetry: &Telemetry,
    clean_ms: f64,
) -> Result<InPass> {
    use crate::clock::spans::{record, span};
    let (n, start) = (cfg.tg_tokens, cfg.start_token);
    let device = Lm::device(lm).clone();
    let mut run = || {
        record(&device, || {
            let mut tok = start;
            for pos in 0..n {
                let logits = Lm::forward(lm, &[tok], pos)?;
                tok = span(TokenOpClass::Sampling, || Lm::pick(lm, &logits))?;
            }
            Ok(tok)
        })
    };
    for _ in 0..cfg.plan.warmup.min(1) {
        run()?;
    }
    let started = std::time::Instant::now();
    let mut totals = Vec::new();
    let mut per_class: Vec<(TokenOpClass, Vec<f64>, usize)> = Vec::new();
    for _ in 0..cfg.plan.iters {
        let (_, split) = run()?;
        totals.push(split.total_ms / n as f64);
        for (class, ms, calls) in split.classes {
            match per_class.iter_mut().find(|(c, _, _)| *c == class) {
                Some(e) => e.1.push(ms / n as f64),
                None => per_class.push((class, vec![ms / n as f64], calls / n.max(1))),
            }
        }
    }
    let timed = |v: Vec<f64>| -> Result<Timed> {
        let samples = crate::clock::Samples {
            wall_ms: v,
            gpu_ms: Vec::new(),
            stopped_by: crate::clock::StopRule::FixedCount,
            elapsed_s: started.elapsed().as_secs_f64(),
            window: None,
            on_gpu: device.is_cuda(),
            held: None,
        };
        crate::telemetry::to_timed(samples, telemetry.state(), None)
    };
    let token = timed(totals)?.median_ms;
    let mut parts = Vec::new();
    for (class, v, calls) in per_class {
        let t = timed(v)?;
        parts.push(TokenPart {
            class,
            calls,
            ms_per_token: t.median_ms,
            timed: t,
        });
    }
    let sum: f64 = parts.iter().map(|p| p.ms_per_token).sum();
    Ok(InPass {
        parts,
        remainder_ms: token - sum,
        overhead_ms: token - clean_ms,
    })
}

/// The host's floor as a verdict, where it is over the bandwidth's: `ops`
/// (a token's ops, their floor in ms) against the time reading the weights
/// at the ladder's read (`bound`) takes; `None` where the bandwidth's floor
/// is the higher. "launch-bound" on a GPU, where each op is one kernel
/// launch or more; "op-bound" on the CPU.
pub fn op_bound(
    (ops, floor_ms): (usize, f64),
    token_ms: f64,
    bytes_per_token: u64,
    bound: &Bound,
    on_gpu: bool,
) -> Option<String> {
    let bound_ms = bytes_per_token as f64 / (bound.gb_per_s * 1e9) * 1e3;
    (floor_ms > bound_ms).then(|| {
        format!(
            "{}: {ops} ops x {:.2} us = {floor_ms:.2} of the token's {token_ms:.2} ms (the \
             weights at the bound: {bound_ms:.2} ms)",
            if on_gpu { "launch-bound" } else { "op-bound" },
            1e3 * floor_ms / ops.max(1) as f64,
        )
    })
}

/// What holds a row back, against each class's own bound: the class whose
/// time is furthest over it, the matmuls' bound the time reading the
/// weights at the ladder's read (`bound`) takes, every other class's none
/// (its time all over); shares are of the measured token (`token_ms`).
/// Before, the matmuls were named only past twice their bound, so a row
/// whose matmuls held 85% of its token at 56% of the ladder's read was said
/// to be held by an element-wise 4%.
pub fn held_back_by(
    parts: &[TokenPart],
    token_ms: f64,
    bytes_per_token: u64,
    bound: &Bound,
) -> String {
    let share = |p: &TokenPart| 100.0 * p.ms_per_token / token_ms;
    let bound_ms = bytes_per_token as f64 / (bound.gb_per_s * 1e9) * 1e3;
    let over = |p: &TokenPart| match p.class {
        TokenOpClass::Matmuls => p.ms_per_token - bound_ms,
        _ => p.ms_per_token,
    };
    match parts.iter().max_by(|a, b| over(a).total_cmp(&over(b))) {
        Some(mm) if mm.class == TokenOpClass::Matmuls => format!(
            "matmuls ({:.0}% of the token): they read the weights at {:.0}% of the ladder's \
             read ({} {} threads)",
            share(mm),
            100.0 * bound_ms / mm.ms_per_token,
            bound.level,
            bound.threads
        ),
        Some(p) => format!("{} ({:.0}% of the token)", p.class.name(), share(p)),
        None => "nothing timed".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bound(gb_per_s: f64) -> Bound {
        Bound {
            kernel: crate::schema::LadderKernel::Read,
            threads: 2,
            footprint_bytes: 1 << 30,
            level: "DRAM".into(),
            gb_per_s,
            chunked: false,
        }
    }

    fn part(class: TokenOpClass, ms: f64) -> TokenPart {
        TokenPart {
            class,
            calls: 1,
            ms_per_token: ms,
            timed: crate::telemetry::timed_at(&[ms], &[]),
        }
    }

    #[test]
    fn the_class_furthest_over_its_own_bound_holds_a_row_back() {
        // 100 MB at 50 GB/s: the matmuls' bound is 2 ms.
        let b = bound(50.0);
        let why = |mm: f64, ew: f64| {
            let parts = [
                part(TokenOpClass::Matmuls, mm),
                part(TokenOpClass::Elementwise, ew),
            ];
            held_back_by(&parts, mm + ew, 100_000_000, &b)
        };
        // Matmuls of 2.7 ms, 0.7 over their bound, beside 0.14 ms of
        // element-wise ops: the matmuls, at 74% of the ladder's read.
        let w = why(2.7, 0.14);
        assert!(
            w.starts_with("matmuls (95% of the token): they read the weights at 74%"),
            "{w}"
        );
        // At their bound, the element-wise ops are what is over.
        assert_eq!(why(2.05, 0.3), "element-wise (13% of the token)");
        assert_eq!(held_back_by(&[], 1.0, 1, &b), "nothing timed");
    }

    #[test]
    fn the_ops_bind_where_their_floor_is_over_the_bandwidths() {
        // 100 MB a token at 50 GB/s: 2 ms. 454 ops at 8.7 us: 3.95 ms.
        let b = bound(50.0);
        let why = op_bound((454, 3.95), 4.1, 100_000_000, &b, true).unwrap();
        assert!(
            why.starts_with("launch-bound: 454 ops x 8.70 us = 3.95 of the token's 4.10 ms"),
            "{why}"
        );
        assert!(why.contains("2.00 ms"), "{why}");
        let cpu = op_bound((454, 3.95), 4.1, 100_000_000, &b, false).unwrap();
        assert!(cpu.starts_with("op-bound:"), "{cpu}");
        // At 0.9 us an op the floor (0.41 ms) is under the bandwidth's.
        assert_eq!(op_bound((454, 0.41), 4.4, 100_000_000, &b, false), None);
    }
}
