//! `y = x W^T` on float weights stored as a `Linear` holds them (`w`: out x
//! in), for one activation row (a decode step) or a few (a prompt chunk):
//! [`linear`]. fp32, fp16 and bf16, the activations in the weights' dtype,
//! every product and sum in f32, each output rounded once.
//!
//! The idea that makes it fast: at one token a matrix-vector product is
//! nothing but reading the weights, so the whole job is to stream them from
//! memory on every core at once, each byte once. Candle's CPU matmul hands a
//! single row to the `gemm` crate, whose matrix-vector path runs on one
//! thread: one core's bandwidth, the others idle. Here the weight's rows are
//! split across every thread of Candle's pool ([`super::rows`]), each thread
//! streaming its own rows in the order they are stored, four at a time,
//! through wide vector dot products (AVX-512 or AVX2 with F16C, picked at run
//! time; bf16 by AVX512-BF16's `vdpbf16ps` where the CPU has it; a portable
//! loop elsewhere; [`tiles`]). A prompt chunk runs the same loop with up to
//! four activation rows per weight load, so each weight is read from memory
//! once per 64 rows of activations, and the arithmetic, not the memory,
//! sets the pace.
//!
//! On a GPU one warp per output row: its 32 threads read the row in 16-byte
//! loads (8 halves, 4 floats), each multiplies them into every activation row
//! (up to 8, held in registers), and the warp's sums meet in a shuffle
//! (`cuda/matvec.cu`). More than 8 activation rows is a matrix product,
//! which cuBLAS does better: those go to Candle's matmul.

mod isa;
pub(super) mod tiles;

use std::borrow::Cow;

use candle_core::backend::BackendStorage;
use candle_core::{bail, CpuStorage, CustomOp2, Layout, Result, Shape, Tensor};

use super::cpu::output;
use super::rows::{share, Out, Threads};
use super::{check_dtype, contiguous, span, unsupported};
use tiles::{Job, Tier, Weight};

/// Activation rows per pass over the weights: their f32 copy (64 x 4096 x 4
/// bytes = 1 MiB at an 8B model's width) stays in a core's L2 while every
/// weight row streams past it. A longer input is cut into passes.
const CHUNK_ROWS: usize = 64;
/// Weight rows per unit of shared work (the tiles' group).
const GROUP: usize = 4;
/// Activation rows beyond which the GPU path is Candle's matmul (cuBLAS).
#[cfg(feature = "cuda")]
const CUDA_MAX_ROWS: usize = 8;

/// `x W^T` over the last dimension of `x`: `x` is (..., k), `w` is (n, k)
/// in the same dtype (f32, f16 or bf16), the result (..., n). The work is
/// shared across Candle's CPU pool.
pub fn linear(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    linear_with(x, w, Threads::Pool)
}

/// [`linear`] on the given threads.
pub fn linear_with(x: &Tensor, w: &Tensor, threads: Threads) -> Result<Tensor> {
    linear_on(x, w, threads, Tier::detect())
}

/// [`linear`] on the given threads with the CPU tiles of `tier` (one of
/// [`Tier::available`]; the tests run each).
pub fn linear_on(x: &Tensor, w: &Tensor, threads: Threads, tier: Tier) -> Result<Tensor> {
    if !tier.runs_here() {
        bail!("lab linear: this CPU has no {} instructions", tier.name());
    }
    check_dtype("linear", x.dtype())?;
    let (n, k) = match w.dims() {
        &[n, k] => (n, k),
        other => bail!("lab linear: weight of shape {other:?} (it must be [out, in])"),
    };
    let dims = x.dims();
    if dims.last() != Some(&k) {
        bail!("lab linear: input of shape {dims:?} for a weight of {n} x {k} (rows of {k})");
    }
    if w.dtype() != x.dtype() {
        bail!(
            "lab linear: weight in {}, input in {} (they must match)",
            w.dtype().as_str(),
            x.dtype().as_str()
        );
    }
    if !w.device().same_device(x.device()) {
        bail!("lab linear: input and weight are on different devices");
    }
    let mut out_dims = dims.to_vec();
    *out_dims.last_mut().expect("rank >= 1: its last dim is k") = n;
    if x.elem_count() == 0 || n == 0 {
        return Tensor::zeros(out_dims, x.dtype(), x.device());
    }
    #[cfg(feature = "cuda")]
    if x.device().is_cuda() && x.elem_count() / k.max(1) > CUDA_MAX_ROWS {
        return x.broadcast_matmul(&w.t()?);
    }
    let y = contiguous(x)?.apply_op2_no_bwd(&*contiguous(w)?, &Linear { threads, tier })?;
    y.reshape(out_dims)
}

struct Linear {
    threads: Threads,
    tier: Tier,
}

impl CustomOp2 for Linear {
    fn name(&self) -> &'static str {
        "lab-linear"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (a, b) = span("linear", l1)?;
        let (c, d) = span("linear", l2)?;
        let (n, k) = l2.shape().dims2()?;
        let m = l1.shape().elem_count() / k;
        let (t, tier, mkn) = (self.threads, self.tier, (m, k, n));
        let out = match (s1, s2) {
            (CpuStorage::F32(x), CpuStorage::F32(w)) => product(tier, &x[a..b], &w[c..d], mkn, t),
            (CpuStorage::F16(x), CpuStorage::F16(w)) => product(tier, &x[a..b], &w[c..d], mkn, t),
            (CpuStorage::BF16(x), CpuStorage::BF16(w)) => product(tier, &x[a..b], &w[c..d], mkn, t),
            (x, _) => return unsupported("linear", x.dtype()),
        };
        Ok((out, Shape::from((m, n))))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s1: &candle_core::CudaStorage,
        l1: &Layout,
        s2: &candle_core::CudaStorage,
        l2: &Layout,
    ) -> Result<(candle_core::CudaStorage, Shape)> {
        use super::launch::{launch, Scalar, MATVEC};
        use candle_core::cuda_backend::cudarc::driver::LaunchConfig;
        let (n, k) = l2.shape().dims2()?;
        let m = l1.shape().elem_count() / k;
        // Four warps a block, one output row each (cuda/matvec.cu's WARPS).
        let cfg = LaunchConfig {
            grid_dim: (n.div_ceil(4) as u32, 1, 1),
            block_dim: (128, 1, 1),
            shared_mem_bytes: 0,
        };
        let scalars = [
            Scalar::I32(m as i32),
            Scalar::I32(k as i32),
            Scalar::I32(n as i32),
        ];
        let ins = [(s1, l1), (s2, l2)];
        let out = launch(&MATVEC, "matvec", &ins, m * n, cfg, &scalars)?;
        Ok((out, Shape::from((m, n))))
    }
}

/// `x` (m x k) as f32: itself, or widened once (the tiles read it many times).
fn widened<E: Weight>(x: &[E]) -> Cow<'_, [f32]> {
    if let Some(x) = E::as_f32(x) {
        return Cow::Borrowed(x);
    }
    let mut out = vec![0f32; x.len()];
    E::widen_all(x, &mut out);
    Cow::Owned(out)
}

/// The product of `x` (m x k) and `w` (n x k) as (m x n), on the CPU, with
/// the tiles of `tier` (one this CPU has).
fn product<E: Weight>(
    tier: Tier,
    x: &[E],
    w: &[E],
    (m, k, n): (usize, usize, usize),
    threads: Threads,
) -> CpuStorage {
    // The bf16 tile reads the bf16 activations as they are; the others, f32.
    let direct = tier == Tier::Avx512Bf16 && E::as_bf16(x).is_some();
    output::<E>(m * n, |dst| {
        let out = Out::new(dst);
        for row0 in (0..m).step_by(CHUNK_ROWS) {
            let rows = CHUNK_ROWS.min(m - row0);
            let x_raw = &x[row0 * k..(row0 + rows) * k];
            let xf = if direct {
                Cow::Borrowed(&[][..])
            } else {
                widened(x_raw)
            };
            let job = Job {
                x: if direct { &[] } else { &xf },
                x_raw,
                m: rows,
                k,
                w,
                n,
                row0,
                out: &out,
            };
            share(n.div_ceil(GROUP), GROUP * k * rows, threads, |units| {
                let end = (units.end * GROUP).min(n);
                tiles::run(tier, &job, units.start * GROUP..end);
            });
        }
    })
}
