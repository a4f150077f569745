//! The bandwidth ladder's CUDA kernels (`cuda/ladder.cu`, feature `cuda`):
//! read, copy and triad over preallocated f32 arrays on Candle's stream, for
//! `bench::ladder`'s GPU points beside the driver's device-to-device copy.
//! The arrays hold ones (never the allocator's zeros) and are made once; a
//! call only launches the kernel (the clock synchronizes).

use candle_core::cuda_backend::cudarc::driver::{CudaSlice, LaunchConfig, PushKernelArg};
use candle_core::cuda_backend::WrapErr;
use candle_core::{CudaDevice, Result};

use super::launch::{Module, LADDER};

/// Which pattern an array set runs: one stream read, one read and one
/// written, two read and one written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    Read,
    Copy,
    Triad,
}

impl Pattern {
    fn streams(self) -> usize {
        match self {
            Self::Read => 1,
            Self::Copy => 2,
            Self::Triad => 3,
        }
    }
}

/// One pattern's arrays on the GPU.
pub struct GpuArrays {
    pattern: Pattern,
    dev: CudaDevice,
    /// Elements per array, a multiple of 4 (float4).
    n: usize,
    arrays: Vec<CudaSlice<f32>>,
    sink: CudaSlice<f32>,
}

impl GpuArrays {
    /// Arrays for `pattern` of `n` elements each (a multiple of 4).
    pub fn new(dev: &CudaDevice, pattern: Pattern, n: usize) -> Result<Self> {
        let n = n / 4 * 4;
        let ones = vec![1.0f32; n];
        let mut arrays = Vec::with_capacity(pattern.streams());
        for _ in 0..pattern.streams() {
            // SAFETY: every element is written by the copy from `ones` below
            // before a kernel reads it.
            let mut a = unsafe { dev.alloc::<f32>(n)? };
            dev.memcpy_htod(&ones, &mut a)?;
            arrays.push(a);
        }
        Ok(Self {
            pattern,
            dev: dev.clone(),
            n,
            arrays,
            sink: dev.alloc_zeros::<f32>(1)?,
        })
    }

    /// Bytes of every array together: what one call moves (each once).
    pub fn footprint(&self) -> u64 {
        (self.n * 4 * self.pattern.streams()) as u64
    }

    /// One launch of the pattern's kernel over every element, enqueued.
    pub fn call(&mut self) -> Result<()> {
        let n4 = (self.n / 4) as u64;
        let blocks = (n4 as usize).div_ceil(256).clamp(1, 1 << 16) as u32;
        let cfg = LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let name = match self.pattern {
            Pattern::Read => "ladder_read",
            Pattern::Copy => "ladder_copy",
            Pattern::Triad => "ladder_triad",
        };
        let module: &Module = &LADDER;
        let f = self
            .dev
            .get_or_load_custom_func(name, module.name(), module.ptx())?;
        let mut args = f.builder();
        let s = 0.5f32;
        match self.pattern {
            Pattern::Read => {
                args.arg(&self.arrays[0]).arg(&n4).arg(&mut self.sink);
            }
            Pattern::Copy => {
                let (x, y) = self.arrays.split_at_mut(1);
                args.arg(&x[0]).arg(&mut y[0]).arg(&n4);
            }
            Pattern::Triad => {
                let (bc, a) = self.arrays.split_at_mut(2);
                args.arg(&bc[0]).arg(&bc[1]).arg(&mut a[0]).arg(&s).arg(&n4);
            }
        }
        // SAFETY: the arguments match each kernel's signature in ladder.cu
        // (inputs, output, scalars, n4), every array holds n elements, n4 = n / 4.
        unsafe { args.launch(cfg) }.w()?;
        Ok(())
    }
}
