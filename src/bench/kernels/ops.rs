//! Per op: its inputs, the bytes it must move, what each implementation calls
//! (the suite's kernel, Candle's op, the composed form), and the f64 result
//! its accuracy is checked against.

use anyhow::Result;
use candle_core::{DType, Device, Tensor, D};

use crate::bench::ladder::Ladder;
use crate::kernels;
use crate::precision::Precision;
use crate::schema::{Implementation, KernelOp, LadderKernel};

/// RMSNorm's epsilon, as the block's (Llama's 1e-5).
pub const EPS: f32 = 1e-5;

/// One op's inputs on the device, in the row's dtype: `x` (the only input of
/// the norms, softmax and copy; SwiGLU's gate), `y` (the add's second input,
/// SwiGLU's up) and `w` (the norm's weight, one per column).
pub(super) struct Inputs {
    pub x: Tensor,
    pub y: Tensor,
    pub w: Tensor,
}

impl Inputs {
    /// Random inputs of `shape` from `draws`: standard normal, times 3 for
    /// softmax (scores of a few units, as attention's), weights around 1.
    pub fn new(
        op: KernelOp,
        shape: &[usize],
        dtype: DType,
        device: &Device,
        draws: &Draws,
    ) -> Result<Self> {
        let width = shape.last().copied().unwrap_or(1);
        let n = shape.iter().product();
        let (x, y) = draws.pair(n, dtype, device)?;
        let x = x.reshape(shape)?;
        let second = matches!(op, KernelOp::Swiglu | KernelOp::Add);
        let w = Tensor::randn(1.0f32, 0.1, width, device)?.to_dtype(dtype)?;
        Ok(Self {
            x: if op == KernelOp::Softmax {
                (x * 3.0)?
            } else {
                x
            },
            y: if second { y.reshape(shape)? } else { w.clone() },
            w,
        })
    }
}

/// Standard-normal draws by element count and dtype, made once a run: every
/// op of a case takes its inputs from the same two draws (reshaped), so that
/// a case past the caches draws its hundreds of millions of values once, not
/// once per op, and on every core ([`normal`]: Candle's CPU `randn` runs on
/// one thread, seconds a tensor there).
#[derive(Default)]
pub(super) struct Draws {
    made: std::cell::RefCell<Vec<(usize, DType, Tensor, Tensor)>>,
}

impl Draws {
    /// Two independent draws of `n` values in `dtype`, made the first time
    /// they are asked for.
    fn pair(&self, n: usize, dtype: DType, device: &Device) -> Result<(Tensor, Tensor)> {
        let found = self
            .made
            .borrow()
            .iter()
            .find_map(|(m, d, x, y)| (*m == n && *d == dtype).then(|| (x.clone(), y.clone())));
        if let Some(pair) = found {
            return Ok(pair);
        }
        let seed = self.made.borrow().len() as u64 * 2;
        // A GPU draws its own (Candle's CUDA `randn` is fast); the host's
        // on every core.
        let draw = |seed: u64| -> Result<Tensor> {
            let x = if device.is_cpu() {
                Tensor::from_vec(normal(n, seed), n, device)?
            } else {
                Tensor::randn(0.0f32, 1.0, n, device)?
            };
            Ok(x.to_dtype(dtype)?)
        };
        let (x, y) = (draw(seed)?, draw(seed + 1)?);
        self.made
            .borrow_mut()
            .push((n, dtype, x.clone(), y.clone()));
        Ok((x, y))
    }
}

/// `n` standard-normal f32s, drawn in parts of 64 Ki on every core, each
/// part from its own small generator seeded by `seed` and its index: the
/// same values whatever the threads.
pub(super) fn normal(n: usize, seed: u64) -> Vec<f32> {
    use rand::{rngs::SmallRng, Rng, SeedableRng};
    use rayon::prelude::*;
    const PART: usize = 1 << 16;
    let mut v = vec![0f32; n];
    v.par_chunks_mut(PART).enumerate().for_each(|(i, part)| {
        let mut rng = SmallRng::seed_from_u64(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ i as u64);
        for x in part {
            *x = rng.sample(rand_distr::StandardNormal);
        }
    });
    v
}

/// Bytes read and written by the op over `n` output elements of `elem`
/// bytes with rows of `width`: each input read once, the output written once.
pub fn traffic(op: KernelOp, n: u64, width: u64, elem: u64) -> (u64, u64) {
    let read = match op {
        KernelOp::RmsNorm | KernelOp::Softmax | KernelOp::Copy => n,
        KernelOp::RmsNormMul => n + width,
        KernelOp::Swiglu | KernelOp::Add => 2 * n,
    };
    (read * elem, n * elem)
}

/// Streams the op reads and writes (a norm's weight row is not a stream):
/// the ladder kernel whose pattern it has.
pub fn streams(op: KernelOp) -> (u64, u64) {
    match op {
        KernelOp::RmsNorm | KernelOp::RmsNormMul | KernelOp::Softmax | KernelOp::Copy => (1, 1),
        KernelOp::Swiglu | KernelOp::Add => (2, 1),
    }
}

/// Whether the op's stores are `memcpy`'s choice (the copy: Candle's and the
/// suite's both call it, and it stores past the cache above its own size),
/// so that its bound is the faster of the ladder's store kinds.
pub fn memcpy(op: KernelOp) -> bool {
    op == KernelOp::Copy
}

/// The ladder kernels a row of `op` moving `n` elements an array on
/// `device` is held to (the fastest bounds it): the copy's either store
/// kind ([`memcpy`]); the add's the one the suite's add uses at that size
/// (non-temporal for f32 past the caches on the CPU: `kernels::add_streams`);
/// every other op's ordinary stores, read for ownership first.
pub fn bound_kernels(
    (ladder, device): (&Ladder, &Device),
    op: KernelOp,
    p: Precision,
    n: usize,
) -> Vec<LadderKernel> {
    let (reads, writes) = streams(op);
    let ordinary = ladder.kernel_for(reads, writes);
    let add = op == KernelOp::Add;
    let mut kinds = ladder.kernels_for_op(ordinary, memcpy(op) || add);
    if add {
        let nt = p == Precision::F32 && device.is_cpu() && kernels::add_streams(n);
        kinds.retain(|&k| (k == LadderKernel::TriadNt) == nt);
    }
    match kinds.is_empty() {
        true => vec![ordinary],
        false => kinds,
    }
}

/// The implementations an op is measured in, in the table's order; the
/// element-wise copy and add have no composed form (they are one primitive).
pub fn implementations(op: KernelOp) -> &'static [Implementation] {
    use Implementation::*;
    match op {
        KernelOp::Copy | KernelOp::Add => &[Lab, Candle],
        _ => &[Lab, Candle, Composed],
    }
}

/// What `implementation` of `op` calls, for the result file.
pub fn call(op: KernelOp, implementation: Implementation) -> &'static str {
    use Implementation::*;
    match (op, implementation) {
        (KernelOp::RmsNorm, Lab) => "candle_lab::kernels::rms_norm(x, eps)",
        (KernelOp::RmsNorm, Candle) => {
            "candle_nn::ops::rms_norm(x, ones, eps) (candle-nn has no norm without a weight)"
        }
        (KernelOp::RmsNorm, _) => "x / sqrt(mean(x^2) + eps) in primitive ops, in f32",
        (KernelOp::RmsNormMul, Lab) => "candle_lab::kernels::rms_norm_mul(x, w, eps)",
        (KernelOp::RmsNormMul, Candle) => "candle_nn::ops::rms_norm(x, w, eps)",
        (KernelOp::RmsNormMul, _) => "candle_nn::ops::rms_norm_slow(x, w, eps)",
        (KernelOp::Softmax, Lab) => "candle_lab::kernels::softmax_last_dim(x)",
        (KernelOp::Softmax, Candle) => "candle_nn::ops::softmax_last_dim(x)",
        (KernelOp::Softmax, _) => "candle_nn::ops::softmax(x, D::Minus1)",
        (KernelOp::Swiglu, Lab) => "candle_lab::kernels::swiglu(gate, up)",
        (KernelOp::Swiglu, Candle) => "candle_nn::ops::silu(gate) * up",
        (KernelOp::Swiglu, _) => "gate / (exp(-gate) + 1) * up in primitive ops",
        (KernelOp::Copy, Lab) => "candle_lab::kernels::copy(x)",
        (KernelOp::Copy, _) => "x.copy()",
        (KernelOp::Add, Lab) => "candle_lab::kernels::add(a, b)",
        (KernelOp::Add, _) => "a + b",
    }
}

/// One call of `implementation` of `op` on `inputs`.
pub(super) fn run(
    op: KernelOp,
    implementation: Implementation,
    i: &Inputs,
    ones: &Tensor,
) -> candle_core::Result<Tensor> {
    use Implementation::*;
    match (op, implementation) {
        (KernelOp::RmsNorm, Lab) => kernels::rms_norm(&i.x, EPS),
        (KernelOp::RmsNorm, Candle) => candle_nn::ops::rms_norm(&i.x, ones, EPS),
        (KernelOp::RmsNorm, _) => rms_norm_composed(&i.x),
        (KernelOp::RmsNormMul, Lab) => kernels::rms_norm_mul(&i.x, &i.w, EPS),
        (KernelOp::RmsNormMul, Candle) => candle_nn::ops::rms_norm(&i.x, &i.w, EPS),
        (KernelOp::RmsNormMul, _) => candle_nn::ops::rms_norm_slow(&i.x, &i.w, EPS),
        (KernelOp::Softmax, Lab) => kernels::softmax_last_dim(&i.x),
        (KernelOp::Softmax, Candle) => candle_nn::ops::softmax_last_dim(&i.x),
        (KernelOp::Softmax, _) => candle_nn::ops::softmax(&i.x, D::Minus1),
        (KernelOp::Swiglu, Lab) => kernels::swiglu(&i.x, &i.y),
        (KernelOp::Swiglu, Candle) => candle_nn::ops::silu(&i.x)? * &i.y,
        (KernelOp::Swiglu, _) => (&i.x / (i.x.neg()?.exp()? + 1.0)?)? * &i.y,
        (KernelOp::Copy, Lab) => kernels::copy(&i.x),
        (KernelOp::Copy, _) => i.x.copy(),
        (KernelOp::Add, Lab) => kernels::add(&i.x, &i.y),
        (KernelOp::Add, _) => &i.x + &i.y,
    }
}

/// x / sqrt(mean(x^2) + eps) from primitive ops, in f32 for 16-bit inputs:
/// `rms_norm_slow` without its weight.
fn rms_norm_composed(x: &Tensor) -> candle_core::Result<Tensor> {
    let dtype = x.dtype();
    let wide = match dtype {
        DType::F16 | DType::BF16 => x.to_dtype(DType::F32)?,
        _ => x.clone(),
    };
    let width = wide.dim(D::Minus1)? as f64;
    let ms = (wide.sqr()?.sum_keepdim(D::Minus1)? / width)?;
    wide.broadcast_div(&(ms + f64::from(EPS))?.sqrt()?)?
        .to_dtype(dtype)
}

/// The op in f64 on the host over `rows` rows of `width` of `x` (and `y`,
/// `w`), as the math defines it.
pub(super) fn reference(op: KernelOp, x: &[f64], y: &[f64], w: &[f64], width: usize) -> Vec<f64> {
    let eps = f64::from(EPS);
    let mut out = vec![0.0; x.len()];
    let rows = x.chunks(width.max(1)).zip(out.chunks_mut(width.max(1)));
    match op {
        KernelOp::RmsNorm | KernelOp::RmsNormMul => {
            for (r, o) in rows {
                let inv = 1.0 / (r.iter().map(|v| v * v).sum::<f64>() / width as f64 + eps).sqrt();
                for (i, (o, v)) in o.iter_mut().zip(r).enumerate() {
                    let scale = if op == KernelOp::RmsNormMul {
                        w[i]
                    } else {
                        1.0
                    };
                    *o = v * inv * scale;
                }
            }
        }
        KernelOp::Softmax => {
            for (r, o) in rows {
                let max = r.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let sum: f64 = r.iter().map(|v| (v - max).exp()).sum();
                for (o, v) in o.iter_mut().zip(r) {
                    *o = (v - max).exp() / sum;
                }
            }
        }
        KernelOp::Swiglu => {
            for ((o, g), u) in out.iter_mut().zip(x).zip(y) {
                *o = g / (1.0 + (-g).exp()) * u;
            }
        }
        KernelOp::Copy => out.copy_from_slice(x),
        KernelOp::Add => {
            for ((o, a), b) in out.iter_mut().zip(x).zip(y) {
                *o = a + b;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_each_input_read_once_and_the_output_written_once() {
        assert_eq!(traffic(KernelOp::Copy, 100, 10, 4), (400, 400));
        assert_eq!(traffic(KernelOp::Add, 100, 10, 2), (400, 200));
        assert_eq!(traffic(KernelOp::Swiglu, 100, 10, 2), (400, 200));
        assert_eq!(traffic(KernelOp::RmsNormMul, 100, 10, 2), (220, 200));
        assert_eq!(traffic(KernelOp::Softmax, 100, 10, 4), (400, 400));
    }

    #[test]
    fn each_op_is_held_to_the_ladder_kernel_of_its_own_stores() {
        use LadderKernel::{Copy, CopyNt, Triad, TriadNt};
        let device = Device::Cpu;
        let t = crate::telemetry::Telemetry::open(&device);
        let ladder = Ladder::new(&device, &t, Some(1 << 20)).unwrap();
        let held = |op, p, n| bound_kernels((&ladder, &device), op, p, n);
        // Elements an array whose f32 output is past the last cache this
        // machine reports (sysfs), or that no cache holds where it reports
        // none; and one that fits any.
        let llc = crate::env::cpu_last_level_cache().map(|(_, bytes)| bytes as usize);
        let (big, small) = (llc.map_or(1 << 40, |b| b / 4 + 4096), 1 << 14);
        // The f32 add past the cache stores non-temporally where the suite's
        // add does (AVX-512 and a cache sysfs names), and is held to that.
        let nt = kernels::add_streams(big);
        #[cfg(target_arch = "x86_64")]
        assert_eq!(
            nt,
            llc.is_some() && std::arch::is_x86_feature_detected!("avx512f")
        );
        let f32_add = if nt { TriadNt } else { Triad };
        assert_eq!(held(KernelOp::Add, Precision::F32, big), [f32_add]);
        // At 16 bits, or in the cache: ordinary stores.
        assert_eq!(held(KernelOp::Add, Precision::F16, big), [Triad]);
        assert_eq!(held(KernelOp::Add, Precision::F32, small), [Triad]);
        // The copy is `memcpy`'s: either store kind the ladder has (the
        // non-temporal one on x86), the faster binding.
        let either: &[LadderKernel] = match cfg!(target_arch = "x86_64") {
            true => &[Copy, CopyNt],
            false => &[Copy],
        };
        for n in [small, big] {
            assert_eq!(held(KernelOp::Copy, Precision::F32, n), either);
        }
        // Every other op's ordinary stores: one stream in (the norms' weight
        // is a row, not a stream) or two (SwiGLU's gate and up).
        for (op, want) in [
            (KernelOp::RmsNorm, Copy),
            (KernelOp::RmsNormMul, Copy),
            (KernelOp::Softmax, Copy),
            (KernelOp::Swiglu, Triad),
        ] {
            for p in [Precision::F32, Precision::Bf16] {
                assert_eq!(held(op, p, big), [want], "{op:?} {p:?}");
            }
        }
    }

    #[test]
    fn the_reference_is_the_math() {
        let x = [1.0, -2.0, 2.0, 0.0];
        let rms = reference(KernelOp::RmsNorm, &x, &[], &[], 2);
        // Row 1: mean of squares 2.5.
        assert!((rms[0] - 1.0 / (2.5 + 1e-5f64).sqrt()).abs() < 1e-12);
        let sm = reference(KernelOp::Softmax, &x, &[], &[], 2);
        assert!((sm[0] + sm[1] - 1.0).abs() < 1e-12 && sm[0] > sm[1]);
        let w = [2.0, 3.0];
        let m = reference(KernelOp::RmsNormMul, &x, &[], &w, 2);
        assert!((m[3] - 0.0).abs() < 1e-12 && (m[1] - 3.0 * rms[1]).abs() < 1e-12);
        let s = reference(KernelOp::Swiglu, &[0.0, 1.0], &[5.0, 2.0], &[], 2);
        assert_eq!(s[0], 0.0);
        assert!((s[1] - 2.0 / (1.0 + (-1.0f64).exp())).abs() < 1e-12);
    }

    #[test]
    fn every_implementation_runs_and_agrees_with_the_reference() {
        let device = Device::Cpu;
        for op in KernelOp::ALL {
            let shape = [3, 17];
            let inputs = Inputs::new(op, &shape, DType::F32, &device, &Draws::default()).unwrap();
            let ones = Tensor::ones(17, DType::F32, &device).unwrap();
            let flat = |t: &Tensor| t.flatten_all().unwrap().to_dtype(DType::F64).unwrap();
            let v = |t: &Tensor| flat(t).to_vec1::<f64>().unwrap();
            let want = reference(op, &v(&inputs.x), &v(&inputs.y), &v(&inputs.w), 17);
            for &imp in implementations(op) {
                let got = v(&run(op, imp, &inputs, &ones).unwrap());
                let (max, _) = crate::stats::relative_errors(&got, &want);
                assert!(max < 1e-5, "{} {}: {max}", op.name(), imp.name());
            }
        }
    }

    #[test]
    fn normal_draws_are_standard_normal_and_the_seeds_own() {
        let n = 3 * (1 << 16) + 123;
        let a = normal(n, 4);
        assert_eq!(a, normal(n, 4), "the same values again");
        assert_ne!(a, normal(n, 5));
        let mean = a.iter().map(|&x| f64::from(x)).sum::<f64>() / n as f64;
        let var = a
            .iter()
            .map(|&x| (f64::from(x) - mean).powi(2))
            .sum::<f64>()
            / n as f64;
        assert!(
            mean.abs() < 0.01 && (var - 1.0).abs() < 0.02,
            "{mean} {var}"
        );
        // Parts drawn apart are not copies of each other.
        assert_ne!(a[..1 << 16], a[1 << 16..2 << 16]);
    }
}
