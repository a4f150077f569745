//! Asking the cache for a stream's lines before they are used: one
//! distance, [`AHEAD`], and one instruction (`prefetcht0`), for the
//! kernels that read long streams (the add, SwiGLU, the float
//! matrix-vector tiles, the quantized blocks) and for the bandwidth
//! ladder's ordinary-store kernels that bound them: a bound whose loop did
//! not ask would be beaten by the ops that do (RMSNorm read 102-114% of a
//! copy that did not, f32 past the caches, the f6m207 Xeon VM). RMSNorm
//! and softmax ask for their next row instead ([`line`], from
//! `rms_norm/x86.rs` and `softmax/x86.rs`); decode attention asks for
//! the start of its next unit's keys and values ([`first`]: where the
//! streamer has no history yet), not for each block ahead (tried: slower).
//!
//! Why 4 KiB: the hardware's streamer keeps a few lines in flight per
//! stream and ramps up on each new page; a memory latency (~100 ns) at a
//! thread's pace (a line every 15-20 cycles) is 1.5-2 KiB, so 4 KiB covers
//! it with room. Measured: 2 KiB gave less and 8 KiB no more on SmolLM2's
//! float tiles (Xeon VM); 4 KiB took q4_1's q_o at Llama-3-8B's shape from
//! 0.32-0.39 to 0.25-0.26 ms (AMD EPYC VM). Each call site says what it
//! gained.
//!
//! Why no write prefetch: `_MM_HINT_ET0` (`prefetchw`) needs the `prfchw`
//! target feature, which this build does not enable, and compiled to this
//! same `prefetcht0` (`objdump` counted none). A read prefetch serves a
//! store too: a line no other core holds arrives exclusive, so the store
//! that follows does not wait on a read for ownership of its own.
//!
//! A prefetch is a hint: it never faults, so an address past an array's
//! end reads nothing. Off x86 these ask for nothing.

/// Bytes past the current read or write that a stream asks the cache for.
pub(crate) const AHEAD: usize = 4096;

/// Bytes of a cache line: one prefetch each.
const LINE: usize = 64;

/// Asks the cache for the line [`AHEAD`] bytes past `p`, to be read or
/// written.
#[inline(always)]
pub(crate) fn ahead<T>(p: *const T) {
    line(p.cast::<u8>().wrapping_add(AHEAD));
}

/// Asks the cache for the line holding `p`, to be read or written: for a
/// stream whose next part is somewhere else than [`AHEAD`] on (RMSNorm's
/// and softmax's next row).
#[inline(always)]
pub(crate) fn line<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint: it never faults, whatever the address.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(p.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Asks the cache for every line that holds some of the first `most`
/// bytes of `s` (all of it if shorter): a stream about to start somewhere
/// the hardware cannot guess (decode attention's next unit).
#[inline(always)]
pub(crate) fn first<T>(s: &[T], most: usize) {
    let p = s.as_ptr().cast::<u8>();
    // From the line `s` starts in, so that a start off a line's boundary
    // leaves no line of the range out.
    let skew = p as usize % LINE;
    let line0 = p.wrapping_sub(skew);
    for at in (0..std::mem::size_of_val(s).min(most) + skew).step_by(LINE) {
        line(line0.wrapping_add(at));
    }
}

/// Asks the cache for each line of the `len` bytes [`AHEAD`] past `p`
/// (the quantized blocks' x86 kernels).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
#[inline(always)]
pub(crate) fn ahead_lines<T>(p: *const T, len: usize) {
    let p = p.cast::<u8>();
    for line in (0..len).step_by(LINE) {
        ahead(p.wrapping_add(line));
    }
}
