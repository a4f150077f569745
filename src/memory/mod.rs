//! Peak memory, measured rather than estimated. On the CPU a counting global
//! allocator ([`CountingAlloc`], installed by every experiment binary) keeps the
//! bytes currently allocated and their high-water mark. On CUDA, Candle allocates
//! every tensor from the device's stream-ordered memory pool, whose own
//! high-water mark (`CU_MEMPOOL_ATTR_USED_MEM_HIGH`) is the analogue of PyTorch's
//! `max_memory_allocated`. [`MemoryMeter`] hides which one a device uses.
//! [`fits`] is the one policy for "does it fit", checked before allocating.

pub mod fits;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::Result;
use candle_core::Device;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// The system allocator, counting. Install it in a binary with
/// `#[global_allocator] static ALLOC: CountingAlloc = CountingAlloc;`.
/// Counting costs two relaxed atomic operations per allocation.
pub struct CountingAlloc;

fn grew(bytes: usize) {
    let now = CURRENT.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

fn shrank(bytes: usize) {
    CURRENT.fetch_sub(bytes, Ordering::Relaxed);
}

// SAFETY: every call is forwarded unchanged to `System`; only counters are added.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        shrank(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() {
            // Count the new block before dropping the old one: realloc may copy.
            grew(new_size);
            shrank(layout.size());
        }
        p
    }
}

/// Bytes allocated on the heap and not yet freed (0 if [`CountingAlloc`] is not
/// the global allocator).
pub fn host_current_bytes() -> u64 {
    CURRENT.load(Ordering::Relaxed) as u64
}

/// Highest [`host_current_bytes`] since the last [`reset_host_peak`].
pub fn host_peak_bytes() -> u64 {
    PEAK.load(Ordering::Relaxed) as u64
}

pub fn reset_host_peak() {
    PEAK.store(CURRENT.load(Ordering::Relaxed), Ordering::Relaxed);
}

/// Whether this process counts its allocations (the binary installed the allocator).
pub fn host_counting() -> bool {
    let before = host_current_bytes();
    let probe = std::hint::black_box(vec![0u8; 4096]);
    let counted = host_current_bytes() >= before + probe.len() as u64;
    drop(probe);
    counted
}

/// Current and peak bytes of the allocator a device's tensors come from.
pub struct MemoryMeter(Source);

enum Source {
    Host,
    #[cfg(feature = "cuda")]
    CudaPool(crate::cuda::MemoryPool),
    /// No trustworthy source; the reason is reported instead of a number.
    Unavailable(&'static str),
}

impl MemoryMeter {
    pub fn for_device(device: &Device) -> Result<Self> {
        let source = match device {
            Device::Cpu if host_counting() => Source::Host,
            Device::Cpu => Source::Unavailable("the counting allocator is not installed"),
            #[cfg(feature = "cuda")]
            Device::Cuda(dev) => match crate::cuda::MemoryPool::of(dev)? {
                Some(pool) => Source::CudaPool(pool),
                None => Source::Unavailable("this GPU does not allocate from a memory pool"),
            },
            #[allow(unreachable_patterns)]
            _ => Source::Unavailable("no memory meter for this device kind"),
        };
        Ok(Self(source))
    }

    /// What the numbers come from, for the report.
    pub fn source(&self) -> &'static str {
        match &self.0 {
            Source::Host => "counting global allocator (heap bytes of this process)",
            #[cfg(feature = "cuda")]
            Source::CudaPool(_) => {
                "CUDA stream-ordered memory pool (CU_MEMPOOL_ATTR_USED_MEM_HIGH)"
            }
            Source::Unavailable(why) => why,
        }
    }

    /// Bytes in use now (after the device finished its queued frees).
    pub fn used_bytes(&self) -> Result<Option<u64>> {
        Ok(match &self.0 {
            Source::Host => Some(host_current_bytes()),
            #[cfg(feature = "cuda")]
            Source::CudaPool(pool) => Some(pool.used_bytes()?),
            Source::Unavailable(_) => None,
        })
    }

    /// Highest use since the last [`Self::reset_peak`].
    pub fn peak_bytes(&self) -> Result<Option<u64>> {
        Ok(match &self.0 {
            Source::Host => Some(host_peak_bytes()),
            #[cfg(feature = "cuda")]
            Source::CudaPool(pool) => Some(pool.peak_bytes()?),
            Source::Unavailable(_) => None,
        })
    }

    /// Starts a new high-water mark at the current use.
    pub fn reset_peak(&self) -> Result<()> {
        match &self.0 {
            Source::Host => reset_host_peak(),
            #[cfg(feature = "cuda")]
            Source::CudaPool(pool) => pool.reset_peak()?,
            Source::Unavailable(_) => {}
        }
        Ok(())
    }
}
