//! Launching the CUDA kernels (feature `cuda`). `build.rs` compiles each
//! `cuda/<name>.cu` to PTX with the `nvcc` the cuda build already has (for
//! compute capability `CUDA_COMPUTE_CAP`, default 75); the PTX text is
//! included here and handed to the driver at the first call, which compiles it
//! for the GPU in hand and caches the module in Candle's device
//! (`get_or_load_custom_func`). Nothing is compiled at run time by NVRTC, so a
//! GPU machine needs only the driver.
//!
//! Each kernel is `extern "C" <name>_<dtype>` (`rms_norm_f16`), with its
//! inputs first, then the output, then its scalars: the order [`launch`]
//! pushes them in, as candle-nn's own ops launch theirs.

use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{DeviceRepr, LaunchConfig, PushKernelArg};
use candle_core::cuda_backend::{CudaDType, WrapErr};
use candle_core::{bail, CudaDevice, CudaStorage, DType, Layout, Result, WithDType};

/// One PTX module: its name in Candle's cache, and its text.
pub(super) struct Module {
    name: &'static str,
    ptx: &'static str,
}

macro_rules! module {
    ($konst:ident, $file:literal) => {
        pub(super) const $konst: Module = Module {
            name: concat!("candle_lab_", $file),
            ptx: include_str!(concat!(env!("OUT_DIR"), "/kernels/", $file, ".ptx")),
        };
    };
}

module!(RMS_NORM, "rms_norm");
module!(SOFTMAX, "softmax");
module!(SWIGLU, "swiglu");
module!(COPY, "copy");
module!(ADD, "add");
module!(MATVEC, "matvec");
module!(LADDER, "ladder");

impl Module {
    pub(super) fn name(&self) -> &'static str {
        self.name
    }

    pub(super) fn ptx(&self) -> &'static str {
        self.ptx
    }
}

/// A scalar argument, pushed after the tensors.
pub(super) enum Scalar {
    I32(i32),
    F32(f32),
    U64(u64),
}

/// One block per row: enough threads that each handles about 8 elements,
/// between one warp and 1024.
pub(super) fn per_row(rows: usize, width: usize) -> LaunchConfig {
    let threads = width.div_ceil(8).next_power_of_two().clamp(32, 1024) as u32;
    LaunchConfig {
        grid_dim: (rows as u32, 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Element-wise over `n` elements of `elem` bytes: 256 threads a block, each
/// moving 16 bytes per step, at most 64 Ki blocks (a grid-stride loop takes
/// the rest).
pub(super) fn elementwise(n: usize, elem: usize) -> LaunchConfig {
    let per_thread = (16 / elem.max(1)).max(1);
    let blocks = n.div_ceil(256 * per_thread).clamp(1, 1 << 16) as u32;
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Runs `<func>_<dtype>` of `module` on `inputs` (contiguous, one dtype),
/// into a new output of `n_out` elements of their dtype.
pub(super) fn launch(
    module: &Module,
    func: &str,
    inputs: &[(&CudaStorage, &Layout)],
    n_out: usize,
    cfg: LaunchConfig,
    scalars: &[Scalar],
) -> Result<CudaStorage> {
    let Some((first, _)) = inputs.first() else {
        bail!("lab {func}: no input");
    };
    match first.dtype() {
        DType::F32 => typed::<f32>(module, func, inputs, n_out, cfg, scalars),
        DType::F16 => typed::<half::f16>(module, func, inputs, n_out, cfg, scalars),
        DType::BF16 => typed::<half::bf16>(module, func, inputs, n_out, cfg, scalars),
        other => super::unsupported(func, other),
    }
}

fn typed<T: CudaDType + DeviceRepr + WithDType>(
    module: &Module,
    func: &str,
    inputs: &[(&CudaStorage, &Layout)],
    n_out: usize,
    cfg: LaunchConfig,
    scalars: &[Scalar],
) -> Result<CudaStorage> {
    let dev: &CudaDevice = inputs[0].0.device();
    let mut views = Vec::with_capacity(inputs.len());
    for (s, l) in inputs {
        let (a, b) = super::span(func, l)?;
        views.push(s.as_cuda_slice::<T>()?.slice(a..b));
    }
    let name = format!("{func}_{}", T::DTYPE.as_str());
    let f = dev.get_or_load_custom_func(&name, module.name, module.ptx)?;
    // SAFETY: every element is written by the kernel before anyone reads it.
    let out = unsafe { dev.alloc::<T>(n_out)? };
    let mut args = f.builder();
    for v in &views {
        args.arg(v);
    }
    args.arg(&out);
    for s in scalars {
        match s {
            Scalar::I32(v) => args.arg(v),
            Scalar::F32(v) => args.arg(v),
            Scalar::U64(v) => args.arg(v),
        };
    }
    // SAFETY: the argument list matches the kernel's signature (module doc):
    // inputs of n_out elements (or a row of weights), the output, the scalars.
    unsafe { args.launch(cfg) }.w()?;
    Ok(CudaStorage::wrap_cuda_slice(out, dev.clone()))
}
