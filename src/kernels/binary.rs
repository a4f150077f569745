//! The one shape of the suite's two-input element-wise kernels (a + b, and
//! SwiGLU's silu(gate) * up): both inputs of one shape and dtype, each
//! thread taking a contiguous share of the output a block at a time in f32,
//! the output allocated uninitialized ([`super::cpu`]); on a GPU one
//! element-wise PTX kernel per dtype. An input whose rows lie a fixed stride
//! apart is read in place on the CPU (a row at a time): gate and up, the two
//! halves of a stacked projection's output, are such views, which the
//! composed form copies out before it reads them. An op is its per-block
//! function for each dtype and its PTX module ([`Binary`]); this file is the
//! rest.

use std::mem::MaybeUninit;

use candle_core::backend::BackendStorage;
use candle_core::{bail, CpuStorage, CustomOp2, Layout, Result, Shape, Tensor};
use half::{bf16, f16};

use super::cpu::{output, past_last_cache, split, Elem};
use super::{check_same, row_stride, rows_in_place};

/// The per-block function of one dtype: `out[i] = f(a[i], b[i])`, in f32.
pub(super) type Block<E> = fn(&[E], &[E], &mut [MaybeUninit<E>]);

/// A two-input element-wise op.
pub(super) struct Binary {
    /// Its name as a Candle custom op ("lab-add").
    pub name: &'static str,
    /// Its name in errors and its PTX function's ("add").
    pub op: &'static str,
    /// Elements worth a thread's task of their own.
    pub min_task: usize,
    pub f32: Block<f32>,
    /// The f32 block with non-temporal stores, for contiguous arrays past
    /// the last cache ([`past_caches`]), if the op has one.
    pub f32_streaming: Option<Block<f32>>,
    pub f16: Block<f16>,
    pub bf16: Block<bf16>,
    #[cfg(feature = "cuda")]
    pub module: &'static super::launch::Module,
}

impl Binary {
    /// The op on `a` and `b`, one shape and one dtype (no broadcasting).
    pub fn apply(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        check_same(self.op, a, b)?;
        if a.elem_count() == 0 {
            return a.zeros_like();
        }
        // Off the CPU, `rows_in_place` is a contiguous copy (the PTX kernels'
        // layout).
        rows_in_place(a)?.apply_op2_no_bwd(&*rows_in_place(b)?, self)
    }

    /// The op over `n` elements, rows of `w`, each input's row r at its
    /// `start + r * stride` (contiguous inputs are one run of n).
    fn run<E: Elem>(&self, f: Block<E>, (a, b): (&[E], &[E]), [ra, rb]: [Rows; 2]) -> CpuStorage {
        let (n, w) = (ra.n, ra.w);
        if ra.contiguous() && rb.contiguous() {
            let (a, b) = (&a[ra.start..ra.start + n], &b[rb.start..rb.start + n]);
            return output(n, |dst| {
                split(dst, 1, self.min_task, |first, chunk| {
                    let end = first + chunk.len();
                    f(&a[first..end], &b[first..end], chunk);
                })
            });
        }
        output(n, |dst| {
            split(dst, w, self.min_task, |first, chunk| {
                for (k, out) in chunk.chunks_mut(w).enumerate() {
                    let r = first / w + k;
                    f(ra.row(a, r), rb.row(b, r), out);
                }
            })
        })
    }
}

/// Whether an op's f32 output of `n` elements is larger than the last cache
/// ([`past_last_cache`]): it cannot stay there for the op that reads it
/// next, and stored the ordinary way each line would be read from memory
/// first. (The three arrays together is too eager: a model's residual add
/// just past the cache would push an output the next norm reads from the
/// cache out to memory.)
pub(super) fn past_caches(n: usize) -> bool {
    past_last_cache(4 * n)
}

/// Whether an f32 op with a streaming block stores non-temporally on
/// inputs of `rows`: both contiguous (the streaming block takes one run
/// each, not a row at a time) and the output past the last cache
/// ([`past_caches`]).
fn streams(rows: &[Rows; 2]) -> bool {
    past_caches(rows[0].n) && rows.iter().all(Rows::contiguous)
}

/// An input's rows: `n` elements in rows of `w`, row r at `start + r * stride`.
#[derive(Clone, Copy)]
struct Rows {
    start: usize,
    stride: usize,
    w: usize,
    n: usize,
}

impl Rows {
    /// The rows of layout `l` over storage of `len` elements, checked to lie
    /// inside it (the op's inputs are [`rows_in_place`]'s, so they have rows).
    fn of(op: &str, l: &Layout, len: usize) -> Result<Self> {
        let n = l.shape().elem_count();
        // A scalar is one row of one.
        let w = l.dims().last().copied().unwrap_or(1);
        let Some((start, stride)) = row_stride(l) else {
            bail!("lab {op}: an input whose rows are not a fixed stride apart");
        };
        let rows = Self {
            start,
            stride,
            w,
            n,
        };
        if n > 0 && start + (n / w - 1) * stride + w > len {
            bail!("lab {op}: an input's rows lie past its storage");
        }
        Ok(rows)
    }

    fn contiguous(&self) -> bool {
        self.stride == self.w
    }

    fn row<'a, E>(&self, x: &'a [E], r: usize) -> &'a [E] {
        &x[self.start + r * self.stride..][..self.w]
    }
}

impl CustomOp2 for Binary {
    fn name(&self) -> &'static str {
        self.name
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let rows = |l, len| Rows::of(self.op, l, len);
        let out = match (s1, s2) {
            (CpuStorage::F32(x), CpuStorage::F32(y)) => {
                let r = [rows(l1, x.len())?, rows(l2, y.len())?];
                let f = match self.f32_streaming {
                    Some(streaming) if streams(&r) => streaming,
                    _ => self.f32,
                };
                self.run(f, (x, y), r)
            }
            (CpuStorage::F16(x), CpuStorage::F16(y)) => {
                let r = [rows(l1, x.len())?, rows(l2, y.len())?];
                self.run(self.f16, (x, y), r)
            }
            (CpuStorage::BF16(x), CpuStorage::BF16(y)) => {
                let r = [rows(l1, x.len())?, rows(l2, y.len())?];
                self.run(self.bf16, (x, y), r)
            }
            (x, y) => bail!(
                "lab {}: dtypes {} and {} (f32, f16 or bf16, both the same)",
                self.op,
                x.dtype().as_str(),
                y.dtype().as_str()
            ),
        };
        Ok((out, l1.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s1: &candle_core::CudaStorage,
        l1: &Layout,
        s2: &candle_core::CudaStorage,
        l2: &Layout,
    ) -> Result<(candle_core::CudaStorage, Shape)> {
        use super::launch::{elementwise as grid, launch, Scalar};
        let n = l1.shape().elem_count();
        let cfg = grid(n, s1.dtype().size_in_bytes());
        let out = launch(
            self.module,
            self.op,
            &[(s1, l1), (s2, l2)],
            n,
            cfg,
            &[Scalar::U64(n as u64)],
        )?;
        Ok((out, l1.shape().clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_contiguous_inputs_past_the_last_cache_stream() {
        let rows = |n, w, stride| Rows {
            start: 0,
            stride,
            w,
            n,
        };
        // An output past the last cache this machine reports (sysfs), or,
        // where it reports none, one that no cache holds.
        let llc = crate::env::cpu_last_level_cache().map(|(_, bytes)| bytes as usize);
        let big = llc.map_or(1 << 40, |bytes| bytes / 4 + 4096);
        let (w, small) = (4096, 1 << 16);
        assert_eq!(past_caches(big), llc.is_some());
        assert!(!past_caches(small));
        let flat = rows(big, w, w);
        assert_eq!(streams(&[flat, flat]), llc.is_some());
        // Either input a view of rows further apart (a stacked projection's
        // half): the ordinary block, a row at a time.
        let strided = rows(big, w, 2 * w);
        assert!(!streams(&[strided, flat]));
        assert!(!streams(&[flat, strided]));
        // An output that fits: ordinary stores, whatever the layout.
        let fits = rows(small, w, w);
        assert!(!streams(&[fits, fits]));
    }
}
