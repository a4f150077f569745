//! `y = x W^T` on GGUF weights as they are stored: [`QLinear`], for Q8_0,
//! Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K and Q6_K blocks (every
//! type the common llama.cpp presets write; and F32, F16 or BF16 tensors,
//! which it runs as f32 on [`super::linear`]), the activations f32.
//!
//! The idea that makes it fast: never turn a weight back into a float. The
//! activations are quantized once per row to 8-bit blocks as ggml does
//! ([`act`]), and each weight block is then a few integer multiply-add
//! instructions against them, one float multiply per block ([`arch`], by
//! instruction set: VNNI's `vpdpbusd` or AVX2's `vpmaddubsw` on x86, chosen
//! at run time; plain integer arithmetic elsewhere). Every type but Q6_K is
//! repacked once, when the layer is made, eight rows interleaved
//! ([`packed`]), so that a register's eight lanes are eight rows' sums and a
//! block's eight scales one load; Q6_K is read as stored. At one token the
//! weights are read once, in the order they are held, their rows split
//! across every thread of Candle's pool ([`super::rows`]); Candle's CPU path
//! has the same blocks and threads but no vector code for Q4_1, Q5_0 and
//! Q5_1 (a scalar loop), and reads the other k-quants but Q4_K a row at a
//! time. A prompt chunk multiplies each unpacked weight block into four
//! activation rows (eight, sixteen weight rows at a time, with AVX-512)
//! before the next block is read, so its weights come from memory once per
//! 64 rows.
//!
//! A new block type gets its layout in `blocks.rs` (and `packed.rs` if it is
//! repacked) and its kernels in one file of each folder of [`arch`].
//!
//! On a GPU the quantized op is Candle's own (its CUDA matrix-vector and
//! matrix-matrix kernels for these blocks): a `QLinear` whose tensor is on a
//! CUDA device applies the tensor's `CustomOp` as `QMatMul` does.

mod act;
mod arch;
mod blocks;
mod packed;
mod tier;

use std::ops::Range;
use std::sync::Arc;

use candle_core::backend::BackendStorage;
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{bail, CpuStorage, CustomOp1, DType, Layout, Result, Shape, Tensor};

use super::cpu::output;
use super::rows::{share, Out, Threads};
use super::span;
use act::{Q8, Q8K};
use blocks::Kind;
use packed::{Packed, ROWS};
pub use tier::QuantTier;

/// Activation rows per pass over the weights (their 8-bit copy stays in L2).
const CHUNK_ROWS: usize = 64;
/// Weight rows per unit of shared work, for the stored rows (Q6_K; the
/// packed blocks share a group of [`ROWS`]).
const GROUP: usize = 4;
/// Activation rows per tile: each unpacked weight block meets this many (in
/// the x86 walk; the portable one takes a row at a time).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const TILE: usize = 4;

/// A linear layer's weight as GGUF stores it: `forward(x)` is `x W^T`.
pub struct QLinear {
    dtype: GgmlDType,
    n: usize,
    k: usize,
    how: How,
}

enum How {
    /// Blocks of any type but Q6_K, repacked for the kernels, on the host.
    Packed(Packed),
    /// Q6_K blocks as stored, on the host.
    Stored(Kind, Arc<QTensor>),
    /// A float tensor (F32, F16 or BF16 in the file), as f32.
    Float(Tensor),
    /// A tensor on a CUDA device: Candle's kernels.
    Device(Arc<QTensor>),
}

impl QLinear {
    /// The layer of `w` (out x in). Refuses a block type the kernels lack.
    pub fn new(w: QTensor) -> Result<Self> {
        Self::from_arc(Arc::new(w))
    }

    /// Whether the suite's kernels read a tensor stored as `t` on the CPU
    /// (every block type of a GGUF file, and the float types; on a GPU,
    /// Candle's kernels take every type candle reads): what a dry run checks
    /// of a row's tensors before any work.
    pub fn takes(t: GgmlDType) -> bool {
        Kind::of(t).is_some() || matches!(t, GgmlDType::F32 | GgmlDType::F16 | GgmlDType::BF16)
    }

    /// [`QLinear::new`] over a shared tensor.
    pub fn from_arc(w: Arc<QTensor>) -> Result<Self> {
        let (n, k) = w.shape().dims2()?;
        let t = w.dtype();
        let how = if !w.device().is_cpu() {
            How::Device(w)
        } else if let Some(kind) = Kind::of(t) {
            if !k.is_multiple_of(kind.values()) {
                bail!("lab qlinear: rows of {k} are not whole {t:?} blocks");
            }
            if kind == Kind::Q6K {
                How::Stored(kind, w)
            } else {
                How::Packed(Packed::new(kind, &stored(&w, kind, n, k)?, n, k))
            }
        } else if matches!(t, GgmlDType::F32 | GgmlDType::F16 | GgmlDType::BF16) {
            How::Float(w.dequantize(&candle_core::Device::Cpu)?)
        } else {
            bail!(
                "lab qlinear: GGUF type {t:?} has no kernel here (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, \
                 Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, F32, F16 and BF16 do)"
            );
        };
        Ok(Self {
            dtype: t,
            n,
            k,
            how,
        })
    }

    /// The layers of `parts` as one, their output rows stacked in order (Q,
    /// K and V, or gate and up: one product where there were three or two),
    /// when they are repacked blocks of one type and length, each of whole
    /// groups of rows; else `parts` back as they were. Nothing is copied
    /// but the packed bytes, once.
    pub fn stack(parts: Vec<QLinear>) -> std::result::Result<QLinear, Vec<QLinear>> {
        let packed: Option<Vec<(&Packed, usize)>> = parts
            .iter()
            .map(|q| match &q.how {
                How::Packed(p) => Some((p, q.n)),
                _ => None,
            })
            .collect();
        let Some(first) = parts.first() else {
            return Err(parts);
        };
        let one = parts
            .iter()
            .all(|q| q.dtype == first.dtype && q.k == first.k);
        match packed.filter(|_| one).and_then(|p| Packed::stack(&p)) {
            Some(p) => Ok(QLinear {
                dtype: first.dtype,
                n: parts.iter().map(|q| q.n).sum(),
                k: first.k,
                how: How::Packed(p),
            }),
            None => Err(parts),
        }
    }

    /// (out, in).
    pub fn dims(&self) -> (usize, usize) {
        (self.n, self.k)
    }

    pub fn dtype(&self) -> GgmlDType {
        self.dtype
    }

    /// `x W^T` over the last dimension of `x` (f32, (..., in)), shared
    /// across Candle's CPU pool.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.forward_with(x, Threads::Pool)
    }

    /// [`QLinear::forward`] on the given threads.
    pub fn forward_with(&self, x: &Tensor, threads: Threads) -> Result<Tensor> {
        self.forward_on(x, threads, QuantTier::detect())
    }

    /// [`QLinear::forward`] on the given threads with the kernels of `tier`
    /// (one of [`QuantTier::available`]; the tests run each).
    pub fn forward_on(&self, x: &Tensor, threads: Threads, tier: QuantTier) -> Result<Tensor> {
        if !tier.runs_here() {
            bail!("lab qlinear: this CPU has no {} instructions", tier.name());
        }
        if x.dtype() != DType::F32 {
            bail!("lab qlinear: input in {} (f32 only)", x.dtype().as_str());
        }
        let dims = x.dims();
        if dims.last() != Some(&self.k) {
            bail!(
                "lab qlinear: input of shape {dims:?} for a weight of {} x {}",
                self.n,
                self.k
            );
        }
        let mut out_dims = dims.to_vec();
        *out_dims.last_mut().expect("rank >= 1: its last dim is k") = self.n;
        if x.elem_count() == 0 {
            return Tensor::zeros(out_dims, DType::F32, x.device());
        }
        let x = super::contiguous(x)?;
        let op = |w| Op {
            w,
            n: self.n,
            k: self.k,
            threads,
            tier,
        };
        let y = match &self.how {
            How::Float(w) => return super::linear_with(&x, w, threads),
            How::Device(w) => x.apply_op1_no_bwd(w.as_ref())?,
            How::Packed(p) => x.apply_op1_no_bwd(&op(Weights::Packed(p)))?,
            How::Stored(kind, w) => x.apply_op1_no_bwd(&op(Weights::Stored(*kind, w)))?,
        };
        y.reshape(out_dims)
    }
}

/// The bytes of `w`'s blocks as stored, their count checked against its shape.
fn stored<'a>(
    w: &'a QTensor,
    kind: Kind,
    n: usize,
    k: usize,
) -> Result<std::borrow::Cow<'a, [u8]>> {
    let data = w.data()?;
    let expect = n * k / kind.values() * kind.bytes();
    if data.len() != expect {
        bail!(
            "lab qlinear: {} bytes of blocks, {expect} expected",
            data.len()
        );
    }
    Ok(data)
}

/// The weight an op reads.
#[derive(Clone, Copy)]
enum Weights<'a> {
    Packed(&'a Packed),
    Stored(Kind, &'a QTensor),
}

struct Op<'a> {
    w: Weights<'a>,
    n: usize,
    k: usize,
    threads: Threads,
    tier: QuantTier,
}

impl CustomOp1 for Op<'_> {
    fn name(&self) -> &'static str {
        "lab-qlinear"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let (a, b) = span("qlinear", l)?;
        let CpuStorage::F32(x) = s else {
            bail!("lab qlinear: input in {} (f32 only)", s.dtype().as_str());
        };
        let m = (b - a) / self.k;
        let out = match self.w {
            Weights::Packed(p) => product(self, &x[a..b], m, Source::Packed(p)),
            Weights::Stored(kind, w) => {
                let data = stored(w, kind, self.n, self.k)?;
                product(self, &x[a..b], m, Source::Stored(kind, &data))
            }
        };
        Ok((out, Shape::from((m, self.n))))
    }
}

/// The host bytes a product reads.
#[derive(Clone, Copy)]
enum Source<'a> {
    Packed(&'a Packed),
    Stored(Kind, &'a [u8]),
}

/// The weights of one pass with its activation rows, quantized for them.
enum Work<'a> {
    Packed(&'a Packed, Acts),
    Stored(Kind, &'a [u8], Q8K),
}

/// A packed weight's activations: Q8 blocks for the 32-value types, Q8_K
/// (256 values, sums of 16) for Q4_K.
enum Acts {
    Q8(Q8),
    Q8K(Q8K),
}

/// One pass: its weights and activation rows, and where they go in the output.
struct Pass<'a> {
    op: &'a Op<'a>,
    work: Work<'a>,
    m: usize,
    row0: usize,
    out: &'a Out<f32>,
}

/// `x` (m x k) times the weight's transpose, (m x n).
fn product(op: &Op<'_>, x: &[f32], m: usize, w: Source<'_>) -> CpuStorage {
    let (n, k) = (op.n, op.k);
    // Weight rows per unit of shared work: a packed group (two where the
    // kernels take them in pairs), or GROUP rows.
    let per = match w {
        Source::Packed(p) if op.tier.pairs_groups() && !p.kind.k_quant() => 2 * ROWS,
        Source::Packed(_) => ROWS,
        Source::Stored(..) => GROUP,
    };
    output::<f32>(m * n, |dst| {
        let out = Out::new(dst);
        for row0 in (0..m).step_by(CHUNK_ROWS) {
            let rows = CHUNK_ROWS.min(m - row0);
            let x = &x[row0 * k..(row0 + rows) * k];
            let work = match w {
                Source::Packed(p) if p.kind.k_quant() => Work::Packed(p, Acts::Q8K(act::q8k(x, k))),
                Source::Packed(p) => Work::Packed(p, Acts::Q8(act::q8(x, k))),
                Source::Stored(kind, bytes) => Work::Stored(kind, bytes, act::q8k(x, k)),
            };
            let pass = Pass {
                op,
                work,
                m: rows,
                row0,
                out: &out,
            };
            share(n.div_ceil(per), per * k * rows, op.threads, |units| {
                pass.rows(units.start * per..(units.end * per).min(n));
            });
        }
    })
}

impl Pass<'_> {
    /// Weight rows `rows` against every activation row (a packed weight's
    /// from a group's first row).
    fn rows(&self, rows: Range<usize>) {
        assert!(
            self.op.tier.runs_here(),
            "{:?} on a CPU without it",
            self.op.tier
        );
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY (each): the tier is one this CPU has (checked above).
            match self.op.tier {
                QuantTier::Vnni512 => return unsafe { self.vnni512(rows) },
                QuantTier::AvxVnni => return unsafe { self.avx_vnni(rows) },
                QuantTier::Avx2 => return unsafe { self.avx2(rows) },
                QuantTier::Portable => {}
            }
        }
        self.portable(rows);
    }

    /// Outputs (row0 + r0 + r, 8 gi..) from a packed group's eight rows, the
    /// padding's left out.
    fn write_group<const R: usize>(&self, r0: usize, gi: usize, v: [[f32; ROWS]; R]) {
        let n = self.op.n;
        let real = ROWS.min(n - gi * ROWS);
        for (r, v) in v.iter().enumerate() {
            let at = (self.row0 + r0 + r) * n + gi * ROWS;
            // SAFETY: outputs (row0 + r0 + r, 8 gi ..) are this task's:
            // group gi is in its range.
            unsafe {
                match real == ROWS {
                    true => self.out.write_array(at, v),
                    false => self.out.write_all(at, &v[..real]),
                }
            };
        }
    }

    fn write<const R: usize>(&self, r0: usize, j: usize, v: [f32; R]) {
        for (r, v) in v.into_iter().enumerate() {
            // SAFETY: output (row0 + r0 + r, j) is this task's: row j is in its range.
            unsafe { self.out.write((self.row0 + r0 + r) * self.op.n + j, v) };
        }
    }
}

/// The packed groups a range of rows (from a group's first) covers.
fn groups(rows: &Range<usize>) -> Range<usize> {
    rows.start / ROWS..rows.end.div_ceil(ROWS)
}
