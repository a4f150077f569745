//! How the matrix-vector kernels share their work: the output's columns (one
//! per weight row) are cut into groups of rows of the weight, and the groups
//! are handed out on Candle's own CPU pool (`candle_core::utils::barrier_pool`,
//! whose spinning workers take a task in well under a microsecond, the calling
//! thread one of them), a shared cursor giving each thread its next range as
//! it comes free, as llama.cpp's matrix-vector product hands out chunks of
//! weight rows to its threads. Every weight row is read by exactly one thread,
//! once, in the order it is stored; the activations (a few rows of a few KiB)
//! are read by all of them from their caches.
//!
//! Work too small to pay for a hand-off (under two tasks of [`MIN_TASK`]
//! multiply-adds) stays on the calling thread, as does everything under
//! [`Threads::One`], which the tests use to hold the shared result to the
//! one-thread one.

use std::ops::Range;

/// Whether a kernel shares its rows across Candle's CPU pool or runs on the
/// calling thread alone.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Threads {
    /// Every thread of Candle's CPU pool (`CANDLE_NUM_THREADS`, else one per
    /// physical core).
    #[default]
    Pool,
    /// The calling thread only.
    One,
}

/// Multiply-adds worth a task of their own: at a few per nanosecond per core,
/// 32 Ki are about ten microseconds, far above a hand-off on the pool.
pub(super) const MIN_TASK: usize = 32 << 10;

/// Calls `task(units)` over `0..units`, each unit costing about `cost`
/// multiply-adds, every unit in exactly one call: on the calling thread for
/// small work or [`Threads::One`], else in ranges handed out on Candle's pool.
pub(super) fn share(
    units: usize,
    cost: usize,
    threads: Threads,
    task: impl Fn(Range<usize>) + Sync,
) {
    if units == 0 {
        return;
    }
    if threads == Threads::One || units < 2 || units.saturating_mul(cost) < 2 * MIN_TASK {
        task(0..units);
        return;
    }
    super::work::dispatch(|| {
        candle_core::utils::barrier_pool().execute_chunked(units, |r| super::work::task(|| task(r)))
    });
}

/// The output buffer, written through a raw pointer by the threads of
/// [`share`], each at indices no other writes.
pub(super) struct Out<T> {
    ptr: *mut T,
    len: usize,
}

// SAFETY: `Out` is only a pointer with a length; the callers write disjoint
// indices from each thread (each weight row's outputs belong to one task).
unsafe impl<T: Send> Sync for Out<T> {}

impl<T: Copy> Out<T> {
    pub(super) fn new(buf: &mut [std::mem::MaybeUninit<T>]) -> Self {
        Self {
            ptr: buf.as_mut_ptr().cast(),
            len: buf.len(),
        }
    }

    /// Writes `v` at `i`.
    ///
    /// # Safety
    /// No other thread writes or reads index `i` while the buffer is shared.
    #[inline(always)]
    pub(super) unsafe fn write(&self, i: usize, v: T) {
        assert!(i < self.len, "output index {i} of {}", self.len);
        // SAFETY: in bounds (checked above); exclusive by the caller's contract.
        unsafe { self.ptr.add(i).write(v) }
    }

    /// Writes `v` at `i..i + N`, with one bounds check: a copy of a known
    /// length, which compiles to a few vector moves where [`Out::write_all`]
    /// calls `memmove` (6% of a 16-row quantized product's time, for its
    /// rows of eight and sixteen outputs).
    ///
    /// # Safety
    /// No other thread writes or reads those indices while the buffer is
    /// shared.
    #[inline(always)]
    pub(super) unsafe fn write_array<const N: usize>(&self, i: usize, v: &[T; N]) {
        assert!(
            i <= self.len && N <= self.len - i,
            "output {i}..{} of {}",
            i + N,
            self.len
        );
        // SAFETY: in bounds (checked above); exclusive by the caller's
        // contract; the destination holds N values from i.
        unsafe { self.ptr.add(i).cast::<[T; N]>().write_unaligned(*v) }
    }

    /// Writes `v` at `i..i + v.len()`, with one bounds check.
    ///
    /// # Safety
    /// No other thread writes or reads those indices while the buffer is
    /// shared.
    #[inline(always)]
    pub(super) unsafe fn write_all(&self, i: usize, v: &[T]) {
        assert!(
            i <= self.len && v.len() <= self.len - i,
            "output {i}..{} of {}",
            i + v.len(),
            self.len
        );
        // SAFETY: in bounds (checked above); exclusive by the caller's
        // contract; `v` is another allocation (a caller's array).
        unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), self.ptr.add(i), v.len()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn every_unit_once_on_the_pool_and_alone() {
        for threads in [Threads::Pool, Threads::One] {
            for (units, cost) in [(0, 1), (1, 1 << 20), (7, 1), (1000, 1 << 12), (3, 1 << 20)] {
                let seen = Mutex::new(vec![0u32; units]);
                share(units, cost, threads, |r| {
                    let mut s = seen.lock().unwrap();
                    for u in r {
                        s[u] += 1;
                    }
                });
                assert!(seen.into_inner().unwrap().iter().all(|&c| c == 1));
            }
        }
    }
}
