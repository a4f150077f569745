//! A contiguous copy into a new tensor, and one rounded to 16 bits as it is
//! written ([`round_to`]: a KV cache's f16 or bf16 keys from f32 ones).
//!
//! The idea that makes it fast: a copy is `memcpy`, and its time goes to
//! moving bytes, so the only gains are more hands and fewer page faults.
//! Candle's `Tensor::copy` clones the storage on one thread (a `memcpy` into a
//! new buffer); here the threads of Candle's pool each `memcpy` a contiguous
//! share, from 32 Ki elements on (past 256 MiB one share a thread, so that
//! `memcpy` streams its stores), into an output allocated uninitialized
//! (see [`super::cpu`]; above 64 MiB on huge pages). Below that size it is
//! Candle's own copy ([`whole_and_small`]). On a GPU 16 bytes per load and
//! store from each thread (`cuda/copy.cu`).

use std::mem::MaybeUninit;

use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CustomOp1, DType, Layout, Result, Shape, Tensor, WithDType};
use half::{bf16, f16};

use super::cpu::{output, split, Elem};
use super::{check_dtype, contiguous, span, unsupported};

/// A copy of `x` with storage of its own.
pub fn copy(x: &Tensor) -> Result<Tensor> {
    check_dtype("copy", x.dtype())?;
    if x.elem_count() == 0 {
        return x.zeros_like();
    }
    if whole_and_small(x) {
        return x.copy();
    }
    contiguous(x)?.apply_op1_no_bwd(&Copy)
}

/// Whether `x` is a host tensor too small to share that holds its whole
/// storage: then the copy is Candle's own (`Tensor::copy`, a clone of the
/// storage), the same `memcpy` on the same one thread without the CustomOp
/// path around it, which cost a decode step's 2-5 KiB copies 5-9%
/// (0.91-0.95x Candle's, intervals below 1, on a 2-core Xeon VM). A view of
/// a larger storage goes through the op, which copies only the view. This
/// check is the one cost left over Candle's: a read of the storage's lock,
/// about 10 of a 576-float copy's 130-140 ns there (0.92-0.93x). Candle's
/// public ways to a new tensor without it cost more: a `Vec` handed to
/// `Tensor::from_vec` 13 ns, `Tensor::force_contiguous` 16 (medians of 60
/// interleaved rounds of 20,000 calls).
fn whole_and_small(x: &Tensor) -> bool {
    if !x.device().is_cpu() || x.elem_count() >= 2 * MIN_TASK || !x.is_contiguous() {
        return false;
    }
    let (storage, layout) = x.storage_and_layout();
    let len = match &*storage {
        candle_core::Storage::Cpu(CpuStorage::F32(v)) => v.len(),
        candle_core::Storage::Cpu(CpuStorage::F16(v)) => v.len(),
        candle_core::Storage::Cpu(CpuStorage::BF16(v)) => v.len(),
        _ => return false,
    };
    layout.start_offset() == 0 && len == x.elem_count()
}

/// `x` (f32) rounded to `dtype` (f16 or bf16; to nearest, ties to even, as
/// Candle's `to_dtype` rounds) in a new contiguous tensor, with F16C's
/// conversions eight values an instruction (the kernels' `Elem::narrow`), shared
/// over the pool as [`copy`] is. Why: Candle's `to_dtype` calls `half`'s
/// conversion once per element through a runtime check, and a 16-bit KV
/// cache's writes under f32 activations held 4% of the calling thread's
/// time in a batch-16 decode step (SmolLM2 q4_1, a `perf` profile on a
/// 2-core AMD EPYC VM: 6,144 keys and values a layer at about 3 ns each),
/// where they now do not show. Another pair of dtypes, or a
/// GPU, is Candle's `to_dtype`.
pub fn round_to(x: &Tensor, dtype: DType) -> Result<Tensor> {
    let sixteen = matches!(dtype, DType::F16 | DType::BF16);
    if !x.device().is_cpu() || x.dtype() != DType::F32 || !sixteen || x.elem_count() == 0 {
        return x.to_dtype(dtype);
    }
    contiguous(x)?.apply_op1_no_bwd(&RoundTo(dtype))
}

struct RoundTo(DType);

impl CustomOp1 for RoundTo {
    fn name(&self) -> &'static str {
        "lab-round-to"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let (a, b) = span("round_to", l)?;
        let CpuStorage::F32(x) = s else {
            return unsupported("round_to", s.dtype());
        };
        let x = &x[a..b];
        let out = match self.0 {
            DType::F16 => output::<f16>(x.len(), |dst| narrowed(x, dst)),
            DType::BF16 => output::<bf16>(x.len(), |dst| narrowed(x, dst)),
            other => return unsupported("round_to", other),
        };
        Ok((out, l.shape().clone()))
    }
}

/// `x` rounded into `dst` (the same length), in shares of the pool as
/// [`copied`]'s.
fn narrowed<E: Elem>(x: &[f32], dst: &mut [MaybeUninit<E>]) {
    split(dst, 1, MIN_TASK, |first, chunk| {
        E::narrow(&x[first..first + chunk.len()], chunk)
    })
}

struct Copy;

impl CustomOp1 for Copy {
    fn name(&self) -> &'static str {
        "lab-copy"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let (a, b) = span("copy", l)?;
        let out = match s {
            CpuStorage::F32(x) => copied(&x[a..b]),
            CpuStorage::F16(x) => copied(&x[a..b]),
            CpuStorage::BF16(x) => copied(&x[a..b]),
            other => return unsupported("copy", other.dtype()),
        };
        Ok((out, l.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s: &candle_core::CudaStorage,
        l: &Layout,
    ) -> Result<(candle_core::CudaStorage, Shape)> {
        use super::launch::{elementwise as grid, launch, Scalar, COPY};
        let n = l.shape().elem_count();
        let cfg = grid(n, s.dtype().size_in_bytes());
        let out = launch(&COPY, "copy", &[(s, l)], n, cfg, &[Scalar::U64(n as u64)])?;
        Ok((out, l.shape().clone()))
    }
}

/// Elements worth a task of their own: `memcpy` moves 64 KiB of f32 in about
/// a microsecond and Candle's pool hands out a task in well under one, so a
/// copy is shared from two tasks, 32 Ki elements, on. (From 128 Ki, a
/// prefill's 256 KiB copy was one thread's, 0.98-0.99x Candle's; shared,
/// 1.16-1.33x, on a 2-core Xeon VM.)
const MIN_TASK: usize = 16 << 10;

/// A copy this large is past any cache this suite has met: each thread then
/// copies one part of it, so that `memcpy` sees a whole stream and takes its
/// own streaming path (glibc stores past the cache for a copy over its
/// `x86_non_temporal_threshold`, 3/4 of the shared cache: 181 MiB on a VM
/// that reports 480 MiB of L3). Four parts a thread would each be under it,
/// and every line written would be read first: 60% of the ladder's copy at
/// 1.9 GiB there, against 98% in one part a thread. (With many threads a
/// part can still fall under glibc's threshold: then `memcpy` stores as it
/// would for any part that size.)
const STREAM_BYTES: usize = 256 << 20;

fn copied<E: Elem + WithDType>(x: &[E]) -> CpuStorage {
    // One part for each thread of the pool the copy runs on (`split`'s);
    // only where it is used (`get_num_threads` would read the system on each
    // call: tens of microseconds, a decode copy's time many times).
    let min_task = match std::mem::size_of_val(x) >= STREAM_BYTES {
        true => (x.len() / (candle_core::utils::barrier_pool().n_workers() + 1)).max(MIN_TASK),
        false => MIN_TASK,
    };
    output(x.len(), |dst| {
        split(dst, 1, min_task, |first, chunk| {
            chunk.write_copy_of_slice(&x[first..first + chunk.len()]);
        })
    })
}
