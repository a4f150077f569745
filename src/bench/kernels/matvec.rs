//! The `kernels` experiment's matrix-vector rows: `y = x W^T` on one weight
//! of a model's decode shape (SmolLM2-135M's and Llama-3-8B's projections,
//! SmolLM2's output head), the weight in each type a model stores
//! (fp32, fp16, bf16, and GGUF's Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K,
//! Q4_K, Q5_K, Q6_K blocks: [`WEIGHTS`]; [`DEFAULT_WEIGHTS`] by default), the
//! suite's op (`kernels::linear`, `kernels::QLinear`) against Candle's
//! (`matmul`, `QMatMul`), and the bound the weight's bytes set: at one token
//! the product is reading the weight, so it cannot beat the bandwidth
//! ladder's read at the same footprint with up to the pool's threads
//! ([`bound`]).
//!
//! The weights are random: floats standard normal over sqrt(k); blocks
//! quantized by Candle (`QTensor::quantize`) from 64 random rows, repeated
//! as bytes to the weight's height (a k-quant's search takes seconds per
//! million values, and the speed does not depend on the values; the copies
//! are separate memory, so nothing is read from a cache it would not be).
//! Each output's first [`CHECKED`] columns are held to an f64 product on the
//! dequantized weights.

use anyhow::{bail, Context, Result};
use candle_core::quantized::ggml_file::qtensor_from_ggml;
use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{DType, Device, Module, Tensor};
use rand::{Rng, SeedableRng};

use super::{fill_speedups, host_f64, normwise_errors};
use crate::availability::ThreadClocks;
use crate::bench::ladder::Ladder;
use crate::clock::Plan;
use crate::formulas::gb_per_s;
use crate::kernels::{self, QLinear};
use crate::precision::Precision;
use crate::schema::{Implementation, KernelAccuracy, MatvecRow, VariantMeasured};

/// The models whose decode shapes the rows take (`--models`).
pub const MODELS: [&str; 2] = ["smollm2-135m", "llama-3-8b"];
/// Output columns checked against f64 (and the rows the blocks repeat).
const CHECKED: usize = 64;

/// A weight type of the rows: a float dtype or GGUF blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightType {
    Float(Precision),
    Blocks(GgmlDType),
}

/// The weight types `--weights` takes, in order: every block type
/// `QLinear` reads.
pub const WEIGHTS: [WeightType; 13] = [
    WeightType::Float(Precision::F32),
    WeightType::Float(Precision::F16),
    WeightType::Float(Precision::Bf16),
    WeightType::Blocks(GgmlDType::Q8_0),
    WeightType::Blocks(GgmlDType::Q4_0),
    WeightType::Blocks(GgmlDType::Q4_1),
    WeightType::Blocks(GgmlDType::Q5_0),
    WeightType::Blocks(GgmlDType::Q5_1),
    WeightType::Blocks(GgmlDType::Q2K),
    WeightType::Blocks(GgmlDType::Q3K),
    WeightType::Blocks(GgmlDType::Q4K),
    WeightType::Blocks(GgmlDType::Q5K),
    WeightType::Blocks(GgmlDType::Q6K),
];

/// The types `--weights` runs unless told (`just results`' set): the
/// floats, and the blocks the common presets write most: Q4_K_M's Q4_K,
/// Q6_K and its Q5_0 (rows not whole 256-value blocks, as SmolLM2's 576),
/// Q5_K_M's Q5_K, and Q8_0, Q4_0, Q4_1. Q5_1, Q2_K and Q3_K are taken by
/// name (docs/kernels.md says why).
pub const DEFAULT_WEIGHTS: &str = "fp32,fp16,bf16,q8_0,q4_0,q4_1,q5_0,q4_k,q5_k,q6_k";

impl WeightType {
    pub fn name(self) -> String {
        match self {
            Self::Float(p) => p.to_string(),
            Self::Blocks(t) => crate::model::gguf::type_name(t).to_lowercase(),
        }
    }

    /// The type named `s` ([`Self::name`]; f32, f16 also taken).
    pub fn parse(s: &str) -> Result<Self, String> {
        let s = s.trim().to_ascii_lowercase();
        if let Some(w) = WEIGHTS.iter().find(|w| w.name() == s) {
            return Ok(*w);
        }
        match s.parse::<Precision>() {
            Ok(p @ (Precision::F32 | Precision::F16 | Precision::Bf16)) => Ok(Self::Float(p)),
            _ => {
                let names: Vec<String> = WEIGHTS.iter().map(|w| w.name()).collect();
                Err(format!(
                    "unknown weight type '{s}': expected one of {}",
                    names.join(", ")
                ))
            }
        }
    }

    /// Bytes of an n x k weight of this type.
    fn bytes(self, n: usize, k: usize) -> u64 {
        match self {
            Self::Float(p) => (n * k * p.dtype().size_in_bytes()) as u64,
            Self::Blocks(t) => (n * k / t.block_size() * t.type_size()) as u64,
        }
    }

    /// Whether rows of `k` are whole blocks of this type.
    pub fn fits(self, k: usize) -> bool {
        match self {
            Self::Float(_) => true,
            Self::Blocks(t) => k.is_multiple_of(t.block_size()),
        }
    }
}

/// What the matrix-vector rows run.
#[derive(Clone, Debug)]
pub struct MatvecConfig {
    pub models: Vec<String>,
    /// Which of each model's weights ([`MATRICES`]).
    pub matrices: Vec<String>,
    pub weights: Vec<WeightType>,
    /// Activation rows of one call (1: a decode step).
    pub tokens: usize,
}

/// The weights of a model's shape `--matrices` takes: Q and O (hidden x
/// hidden), K and V (the key/value width x hidden), the MLP's gate and up,
/// its down, and the output head.
pub const MATRICES: [&str; 5] = ["q_o", "k_v", "gate_up", "down", "head"];

/// One weight of a model's shape: which projections it is, and n x k.
#[derive(Clone, Debug, PartialEq)]
pub struct Matrix {
    pub name: &'static str,
    pub n: usize,
    pub k: usize,
}

/// The distinct weights of `model`'s decode: its layers' projections, and
/// SmolLM2's output head (a fifth of its weights). Llama-3-8B's head (525M
/// weights, 7% of a token's) is left out: Candle's bf16 CPU matmul takes
/// seconds a call there.
pub fn matrices(model: &str) -> Result<Vec<Matrix>> {
    let (h, kv, m, head) = match model {
        "smollm2-135m" => (576, 192, 1536, Some(49_152)),
        "llama-3-8b" => {
            let d = crate::model::weights::shape("llama-3-8b")?.config;
            (d.hidden, d.kv_width(), d.mlp, None)
        }
        other => bail!(
            "unknown model '{other}': expected one of {}",
            MODELS.join(", ")
        ),
    };
    let mut out = vec![
        Matrix {
            name: "q_o",
            n: h,
            k: h,
        },
        Matrix {
            name: "k_v",
            n: kv,
            k: h,
        },
        Matrix {
            name: "gate_up",
            n: m,
            k: h,
        },
        Matrix {
            name: "down",
            n: h,
            k: m,
        },
    ];
    if let Some(v) = head {
        out.push(Matrix {
            name: "head",
            n: v,
            k: h,
        });
    }
    Ok(out)
}

/// Host bytes the largest row holds at once: its weight, the f32 it is made
/// from, and Candle's copy (QMatMul's blocks, or the transposed view's).
pub fn largest_bytes(cfg: &MatvecConfig) -> u64 {
    let mut most = 0;
    for model in &cfg.models {
        let all = matrices(model).unwrap_or_default();
        for m in all
            .iter()
            .filter(|m| cfg.matrices.iter().any(|n| n == m.name))
        {
            let f32 = (m.n * m.k * 4) as u64;
            let w = cfg
                .weights
                .iter()
                .map(|w| w.bytes(m.n, m.k))
                .max()
                .unwrap_or(0);
            most = most.max(f32 + 2 * w);
        }
    }
    most
}

/// Every row of `cfg`: per model, matrix and weight type (a block type only
/// where the rows are whole blocks).
pub fn run(
    device: &Device,
    cfg: &MatvecConfig,
    plan: Plan,
    ladder: &Ladder,
) -> Result<Vec<MatvecRow>> {
    let mut rows = Vec::new();
    for model in &cfg.models {
        let asked = matrices(model)?
            .into_iter()
            .filter(|m| cfg.matrices.iter().any(|n| n == m.name));
        for m in asked {
            for &w in cfg.weights.iter().filter(|w| w.fits(m.k)) {
                let what = format!("matvec {model} {} {}", m.name, w.name());
                let row = measure(device, (model, &m), w, cfg.tokens, plan, ladder)
                    .with_context(|| what.clone())?;
                rows.push(row);
            }
        }
    }
    Ok(rows)
}

/// The two ops of a row on its weight, and the f64 product they are held to.
enum Weight {
    Float { w: Tensor, wt: Tensor },
    Blocks { lab: QLinear, candle: QMatMul },
}

impl Weight {
    fn call(&self, imp: Implementation, x: &Tensor) -> candle_core::Result<Tensor> {
        match (self, imp) {
            (Self::Float { w, .. }, Implementation::Lab) => kernels::linear(x, w),
            (Self::Float { wt, .. }, _) => x.matmul(wt),
            (Self::Blocks { lab, .. }, Implementation::Lab) => lab.forward(x),
            (Self::Blocks { candle, .. }, _) => candle.forward(x),
        }
    }
}

fn call_name(w: WeightType, imp: Implementation, device: &Device) -> &'static str {
    match (w, imp) {
        (WeightType::Float(_), Implementation::Lab) => "candle_lab::kernels::linear(x, w)",
        (WeightType::Float(_), _) => "x.matmul(&w.t())",
        (WeightType::Blocks(_), Implementation::Lab) if device.is_cuda() => {
            "candle_lab::kernels::QLinear::forward(x) (on a GPU: Candle's own quantized kernels)"
        }
        (WeightType::Blocks(_), Implementation::Lab) => "candle_lab::kernels::QLinear::forward(x)",
        (WeightType::Blocks(_), _) => "candle_core::quantized::QMatMul::forward(x)",
    }
}

/// The weight of type `w` (n x k) on `device`, and its first [`CHECKED`]
/// rows as f64 (what the weight holds, dequantized).
fn weight(device: &Device, m: &Matrix, w: WeightType, seed: u64) -> Result<(Weight, Vec<f64>)> {
    let std = 1.0 / (m.k as f64).sqrt();
    let top = CHECKED.min(m.n);
    Ok(match w {
        WeightType::Float(p) => {
            // Drawn on every core (`Tensor::randn` draws on one: Llama-3-8B's
            // float weights took seconds of the run).
            let mut v = super::ops::normal(m.n * m.k, seed);
            v.iter_mut().for_each(|x| *x *= std as f32);
            let f = Tensor::from_vec(v, (m.n, m.k), &Device::Cpu)?;
            let w = f.to_dtype(p.dtype())?.to_device(device)?;
            let want = host_f64(&w.narrow(0, 0, top)?)?;
            let wt = w.t()?;
            (Weight::Float { w, wt }, want)
        }
        WeightType::Blocks(t) => {
            let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
            let v: Vec<f32> = (0..top * m.k)
                .map(|_| normal(&mut rng) * std as f32)
                .collect();
            let tile = QTensor::quantize(&Tensor::from_vec(v, (top, m.k), &Device::Cpu)?, t)?;
            let want = host_f64(&tile.dequantize(&Device::Cpu)?)?;
            let bytes = tile.data()?;
            let full: Vec<u8> = bytes
                .iter()
                .copied()
                .cycle()
                .take(bytes.len() / top * m.n)
                .collect();
            let on = |d: &Device| qtensor_from_ggml(t, &full, vec![m.n, m.k], d);
            let lab = QLinear::new(on(device)?)?;
            let candle = QMatMul::from_qtensor(on(device)?)?;
            (Weight::Blocks { lab, candle }, want)
        }
    })
}

/// A standard-normal-ish value: the sum of four uniforms, scaled to unit variance.
fn normal(rng: &mut impl Rng) -> f32 {
    (0..4).map(|_| rng.random::<f32>() - 0.5).sum::<f32>() * 1.732
}

fn measure(
    device: &Device,
    (model, m): (&str, &Matrix),
    wt: WeightType,
    tokens: usize,
    plan: Plan,
    ladder: &Ladder,
) -> Result<MatvecRow> {
    let weight_bytes = wt.bytes(m.n, m.k);
    let (w, want_w) = weight(device, m, wt, (m.n * 31 + m.k) as u64)?;
    let act = match wt {
        WeightType::Float(p) => p.dtype(),
        WeightType::Blocks(_) => DType::F32,
    };
    let x = Tensor::randn(0f32, 1f32, (tokens, m.k), device)?.to_dtype(act)?;
    let want = reference(&host_f64(&x)?, &want_w, m.k);
    let label = format!("matvec {model} {} {}", m.name, wt.name());
    // At one token the product is reading the weight: its bound is the
    // ladder's read at the weight's footprint, timed in turn with the ops.
    let b = super::beside::measure(
        plan,
        ladder,
        (&[ladder.kernel_for(1, 0)], weight_bytes),
        &label,
        &[Implementation::Lab, Implementation::Candle],
        &|imp| Ok(w.call(imp, &x)?),
    )?;
    let ceiling = b.ceiling;
    let mut variants = Vec::new();
    for (imp, run) in b.runs {
        let measured = run.and_then(|(out, c)| {
            let threads_held = threads_held(device, || {
                w.call(imp, &x)?;
                Ok(())
            })?;
            let rate = gb_per_s(weight_bytes, c.per_call_ms);
            Ok(VariantMeasured {
                time_ms: c.per_call_ms,
                time_source: c.timed.rate_ms().1,
                gb_per_s: rate,
                pct_of_ceiling: 100.0 * rate / ceiling.gb_per_s,
                speedup_vs_candle: None,
                speedup_interval: None,
                accuracy: check(&out, &want, tokens, m.n)?,
                calls_per_sample: c.calls_per_sample,
                threads_held,
                timed: c.timed,
            })
        });
        let call = call_name(wt, imp, device);
        variants.push(super::variant(imp, call, &label, measured));
    }
    fill_speedups(&mut variants);
    Ok(MatvecRow {
        model: model.into(),
        matrix: m.name.into(),
        n: m.n,
        k: m.k,
        tokens,
        weights: wt.name(),
        weight_bytes,
        bound_ms: bound_ms(&ceiling, weight_bytes),
        ceiling,
        variants,
    })
}

/// The time the weight's bytes take at the ceiling's rate.
pub(super) fn bound_ms(ceiling: &crate::schema::KernelCeiling, weight_bytes: u64) -> f64 {
    ceiling.time_ms * weight_bytes as f64 / (2 * ceiling.bytes_copied) as f64
}

/// The least wall time [`threads_held`] runs its op for.
const HELD_WINDOW_S: f64 = 0.03;

/// Threads busy on average while `call` runs back to back (at least 3
/// calls, at least [`HELD_WINDOW_S`]) on the CPU: the time every thread of
/// this process spent on a CPU over the window (its CPU clock,
/// [`ThreadClocks`]; the pool's spinning waits count, as they hold a core)
/// over the window's wall time. None on a GPU (the host threads wait) or
/// where the clock cannot be read. The clock covers the calls and nothing else.
fn threads_held(device: &Device, mut call: impl FnMut() -> Result<()>) -> Result<Option<f64>> {
    if !device.is_cpu() {
        return Ok(None);
    }
    let Some(before) = ThreadClocks::read() else {
        return Ok(None);
    };
    let start = std::time::Instant::now();
    let mut calls = 0;
    while calls < 3 || start.elapsed().as_secs_f64() < HELD_WINDOW_S {
        call()?;
        calls += 1;
    }
    let wall = start.elapsed().as_secs_f64();
    let Some(after) = ThreadClocks::read() else {
        return Ok(None);
    };
    Ok(Some(after.since(&before) as f64 * 1e-9 / wall))
}

/// x (tokens x k) times the first rows of the weight (`w`, rows of k), in f64:
/// tokens x rows.
fn reference(x: &[f64], w: &[f64], k: usize) -> Vec<f64> {
    let mut out = Vec::new();
    for xr in x.chunks(k) {
        for wr in w.chunks(k) {
            out.push(xr.iter().zip(wr).map(|(a, b)| a * b).sum());
        }
    }
    out
}

/// The output's first columns (as many as `want` has per row) against `want`.
fn check(out: &Tensor, want: &[f64], tokens: usize, n: usize) -> Result<KernelAccuracy> {
    let cols = want.len() / tokens.max(1);
    let got = host_f64(&out.reshape((tokens, n))?.narrow(1, 0, cols)?.contiguous()?)?;
    let (max_rel_err, mean_rel_err) = normwise_errors(&got, want);
    Ok(KernelAccuracy {
        elements_checked: got.len(),
        max_rel_err,
        mean_rel_err,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::Telemetry;

    #[test]
    fn the_shapes_are_the_models_and_the_types_parse() {
        let s = matrices("smollm2-135m").unwrap();
        let dims: Vec<_> = s.iter().map(|m| (m.name, m.n, m.k)).collect();
        assert_eq!(
            dims,
            [
                ("q_o", 576, 576),
                ("k_v", 192, 576),
                ("gate_up", 1536, 576),
                ("down", 576, 1536),
                ("head", 49152, 576)
            ]
        );
        let l = matrices("llama-3-8b").unwrap();
        assert_eq!((l[1].n, l[2].n, l[3].k), (1024, 14336, 14336));
        assert!(matrices("gpt-2").is_err());
        for w in WEIGHTS {
            assert_eq!(WeightType::parse(&w.name()), Ok(w));
        }
        assert_eq!(
            WeightType::parse("f16"),
            Ok(WeightType::Float(Precision::F16))
        );
        assert!(WeightType::parse("q8_1")
            .unwrap_err()
            .contains("expected one of fp32"));
        for name in DEFAULT_WEIGHTS.split(',') {
            assert!(WeightType::parse(name).is_ok(), "{name}");
        }
        // Q4_K at k = 576 is not whole blocks: no such row.
        assert!(!WeightType::Blocks(GgmlDType::Q4K).fits(576));
        assert_eq!(
            WeightType::Blocks(GgmlDType::Q4_1).bytes(576, 576),
            576 * 18 * 20
        );
    }

    #[test]
    fn a_row_per_type_is_measured_and_checked() {
        let cfg = MatvecConfig {
            models: vec!["smollm2-135m".into()],
            matrices: MATRICES.map(String::from).to_vec(),
            weights: WEIGHTS.to_vec(),
            tokens: 2,
        };
        let plan = Plan {
            warmup: 0,
            iters: 1,
        };
        let dev = Device::Cpu;
        let telemetry = Telemetry::open(&dev);
        let m = Matrix {
            name: "down",
            n: 40,
            k: 512,
        };
        for w in WEIGHTS {
            let ladder = Ladder::new(&dev, &telemetry, Some(1 << 20)).unwrap();
            let row = measure(&dev, ("smollm2-135m", &m), w, cfg.tokens, plan, &ladder).unwrap();
            assert_eq!(row.weight_bytes, w.bytes(40, 512));
            for imp in [Implementation::Lab, Implementation::Candle] {
                let v = row.measured(imp).unwrap();
                assert_eq!(v.accuracy.elements_checked, 2 * 40);
                // fp32: rounding; 16 bits: the output's half ulp; blocks: the
                // activations' 8 bits (a few per mille norm-wise).
                let bound = match w {
                    WeightType::Float(Precision::F32) => 1e-5,
                    WeightType::Float(_) => 1e-2,
                    WeightType::Blocks(_) => 3e-2,
                };
                assert!(
                    v.accuracy.max_rel_err < bound,
                    "{} {imp:?}: {:?}",
                    w.name(),
                    v.accuracy
                );
                let rate = row.weight_bytes as f64 / (v.time_ms * 1e-3) / 1e9;
                assert!((v.gb_per_s - rate).abs() <= 1e-9 * rate);
                let held = v.threads_held.unwrap();
                assert!(held > 0.0 && held <= 1.05 * 64.0, "{held}");
            }
            let want = row.ceiling.time_ms * row.weight_bytes as f64
                / (2 * row.ceiling.bytes_copied) as f64;
            assert!((row.bound_ms - want).abs() <= 1e-12 * want);
        }
        assert!(largest_bytes(&cfg) >= 49_152 * 576 * 4);
    }
}
