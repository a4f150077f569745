//! Peak memory, measured rather than estimated. On the CPU a counting global
//! allocator ([`CountingAlloc`], installed by every experiment binary) keeps the
//! bytes currently allocated and their high-water mark. On CUDA, Candle allocates
//! every tensor from the device's stream-ordered memory pool, whose own
//! high-water mark (`CU_MEMPOOL_ATTR_USED_MEM_HIGH`) is the analogue of PyTorch's
//! `max_memory_allocated`. [`MemoryMeter`] hides which one a device uses.
//! [`fits`] is the one policy for "does it fit", checked before allocating;
//! [`keep_freed_memory`] keeps a large output from faulting in on each call.

mod budget;
pub mod fits;
mod held;

pub use budget::within;
pub use held::keep_freed_memory;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use anyhow::Result;
use candle_core::Device;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// The system allocator, counting. Install it in a binary with
/// `#[global_allocator] static ALLOC: CountingAlloc = CountingAlloc;`.
/// Counting costs two relaxed atomic operations per allocation.
///
/// An allocation the system refuses (a process limit such as `ulimit -v`, or
/// memory the kernel will not commit) would make Rust abort with a backtrace
/// and exit code 134. Here it ends the run as every other failure does: one
/// `error:` line, the output's pending files removed ([`on_out_of_memory`]),
/// exit code 1, all without allocating. A caller that expects a refusal asks
/// inside [`fallible`].
pub struct CountingAlloc;

fn grew(bytes: usize) {
    let now = CURRENT.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

fn shrank(bytes: usize) {
    CURRENT.fetch_sub(bytes, Ordering::Relaxed);
}

thread_local! {
    /// Set inside [`fallible`]: a refusal is an answer there, not the end.
    static FALLIBLE: Cell<bool> = const { Cell::new(false) };
}

/// What to remove before exiting when an allocation fails (must not
/// allocate), and the exit code to end with.
static ON_REFUSAL: OnceLock<(fn(), u8)> = OnceLock::new();

/// Registers what to remove when an allocation fails (the output policy's
/// temporary files and created folders) and the exit code the process then
/// ends with: `cli::on_start` registers both, since the exporters never import
/// measurement and exit codes are `outcome`'s. The first registration stays;
/// without one the code is 1.
pub fn on_out_of_memory(cleanup: fn(), exit_code: u8) {
    let _ = ON_REFUSAL.set((cleanup, exit_code));
}

/// Runs `f` with a refused allocation returned to it as a failure, as
/// `Vec::try_reserve` expects, instead of ending the process: for a trial
/// reservation ([`fits::try_reserve_host`]), whose refusal is an answer.
pub fn fallible<R>(f: impl FnOnce() -> R) -> R {
    FALLIBLE.with(|on| on.set(true));
    let result = f();
    FALLIBLE.with(|on| on.set(false));
    result
}

/// A refused allocation: null inside [`fallible`], else the end of the process.
fn refused(bytes: usize) -> *mut u8 {
    if FALLIBLE.try_with(Cell::get).unwrap_or(false) {
        return std::ptr::null_mut();
    }
    out_of_memory(bytes)
}

/// One line on standard error, the pending files removed, the registered exit
/// code ([`on_out_of_memory`]); nothing
/// here allocates (the line is built in a buffer on the stack, written raw).
fn out_of_memory(bytes: usize) -> ! {
    let mut line = Line::default();
    line.push(b"error: out of host memory: an allocation of ");
    line.push_number(bytes);
    line.push(
        b" bytes failed (a process limit such as `ulimit -v`?); \
          the run stopped and wrote nothing more\n",
    );
    // SAFETY: descriptor 2 stays open for the life of the process (Rust's
    // runtime reopens a closed one as /dev/null before main).
    let stderr = unsafe { std::os::fd::BorrowedFd::borrow_raw(2) };
    let _ = rustix::io::write(stderr, line.text());
    let mut code = 1;
    if let Some((cleanup, exit_code)) = ON_REFUSAL.get() {
        cleanup();
        code = *exit_code;
    }
    extern "C" {
        fn _exit(status: std::ffi::c_int) -> !;
    }
    // SAFETY: _exit ends the process at once, without running handlers that
    // could allocate or wait for the other threads.
    unsafe { _exit(std::ffi::c_int::from(code)) }
}

/// A line built without allocating.
struct Line {
    buf: [u8; 256],
    len: usize,
}

impl Default for Line {
    fn default() -> Self {
        Self {
            buf: [0; 256],
            len: 0,
        }
    }
}

impl Line {
    fn push(&mut self, bytes: &[u8]) {
        let n = bytes.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&bytes[..n]);
        self.len += n;
    }

    fn push_number(&mut self, mut n: usize) {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.push(&digits[i..]);
    }

    fn text(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

// SAFETY: every call is forwarded unchanged to `System`; only counters are
// added, and a refused allocation ends the process unless a caller asked to be
// told ([`fallible`]). On a thread with a byte budget ([`within`]), an
// allocation past it is not forwarded at all: the thread stops there.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        budget::grow(layout.size());
        let p = System.alloc(layout);
        if p.is_null() {
            budget::shrink(layout.size());
            return refused(layout.size());
        }
        grew(layout.size());
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        budget::grow(layout.size());
        let p = System.alloc_zeroed(layout);
        if p.is_null() {
            budget::shrink(layout.size());
            return refused(layout.size());
        }
        grew(layout.size());
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        shrank(layout.size());
        budget::shrink(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let more = new_size.saturating_sub(layout.size());
        budget::grow(more);
        let p = System.realloc(ptr, layout, new_size);
        if p.is_null() {
            budget::shrink(more);
            return refused(new_size);
        }
        budget::shrink(layout.size().saturating_sub(new_size));
        // Count the new block before dropping the old one: realloc may copy.
        grew(new_size);
        shrank(layout.size());
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_out_of_memory_line_is_built_without_allocating() {
        let mut line = Line::default();
        line.push(b"an allocation of ");
        line.push_number(67108864);
        line.push(b" bytes, ");
        line.push_number(0);
        assert_eq!(line.text(), b"an allocation of 67108864 bytes, 0");
        line.push(&[b'x'; 300]);
        assert_eq!(line.text().len(), 256, "a long line is cut, not overrun");
        // A refusal inside `fallible` comes back as one (this test binary does
        // not install the allocator; tests/alloc_peak.rs and the programs do).
        assert!(fallible(|| Vec::<u8>::new()
            .try_reserve_exact(1 << 20)
            .is_ok()));
    }
}
