//! The ladder's CPU kernels, STREAM's three patterns over f32 arrays: read
//! (a sum: one stream in), copy (one in, one out) and triad (`a = b + s*c`:
//! two in, one out). What makes them a ceiling rather than one more op:
//! - **Compiled for the CPU in hand.** Each loop runs in a function built for
//!   AVX-512 or AVX2 when the CPU has it (checked at run time), so it moves
//!   full vector registers.
//! - **Each store kind said.** The copy and the triad store either way, each
//!   a kernel of its own: ordinary stores (the line is read for ownership,
//!   then written back: what a norm, SwiGLU or an add in the cache does) and
//!   non-temporal ones (`movntps`: written to memory without the read, as
//!   `memcpy` stores a large copy and the suite's f32 add an output past the
//!   last cache). The copy is the suite's own loop, not `memcpy`, which
//!   switches to non-temporal stores above a size of its own (3/4 of the
//!   shared cache in glibc), so that one 1 GiB part a thread went past the
//!   switch and 256 KiB parts did not: 46 and 26 GB/s for "the copy" at one
//!   footprint on a 2-vCPU Xeon VM.
//! - **Every stream asked for ahead.** The ordinary copy and triad ask the
//!   cache for each line 4 KiB before they read or write it, as the suite's
//!   add and SwiGLU do, with the same helper (`kernels::ahead`): a bound the
//!   ops beat is no bound (RMSNorm, which asks for its next row, read
//!   102-114% of a copy that did not). The non-temporal pair reads four
//!   streams a thread in turn, as glibc's large `memcpy`.
//! - **The sum in integers.** Floating-point adds may not be reordered, so a
//!   float sum is one long dependency chain; the bits summed as wrapping u32
//!   may, and the compiler spreads them over many vector accumulators.
//! - **The same part to the same thread.** Threads take fixed, contiguous
//!   parts by their index in Candle's own pool (the one its ops and the
//!   suite's kernels run on), so a part stays in that core's private caches
//!   from one call to the next.
//! - **Nothing allocated, nothing faulted.** The arrays are made and written
//!   once before timing; a call only moves bytes.
//! - **Huge pages where the suite's kernels have them.** Arrays of 64 MiB
//!   and more are advised onto 2 MiB pages, as the kernels' outputs are
//!   ([`crate::kernels::advise_huge_pages`]): on 4 KiB pages a stream past
//!   the caches misses the TLB every page, and the lab's copy of 1.9 GiB
//!   then ran at 105-109% of the ladder's.

use std::sync::atomic::{AtomicU32, Ordering};

use crate::kernels::ahead::ahead;
use crate::schema::LadderKernel;

/// Elements of a part, at most, when threads take parts as they finish:
/// 256 KiB of f32, long enough that the shared cursor costs nothing against
/// the bytes.
pub const CHUNK: usize = 64 << 10;

/// The arrays one kernel works on, filled once (never zeros).
pub struct Arrays {
    kernel: LadderKernel,
    a: Vec<f32>,
    b: Vec<f32>,
    c: Vec<f32>,
    /// The sum's result, kept so the reads cannot be optimized away.
    sink: AtomicU32,
}

impl Arrays {
    /// Arrays for `kernel` of `n` elements each (one per stream it moves).
    pub fn new(kernel: LadderKernel, n: usize) -> Self {
        let (reads, writes) = kernel.streams();
        let streams = (reads + writes) as usize;
        let fill = |seed: f32, used: bool| -> Vec<f32> {
            if !used {
                return Vec::new();
            }
            let mut v = Vec::with_capacity(n);
            let spare = &mut v.spare_capacity_mut()[..n];
            crate::kernels::advise_huge_pages(spare);
            // On every thread, and copied from one period of the values:
            // past the caches an array is gigabytes, and one thread's first
            // touch and fill of 2 GB, an element at a time, took about a
            // second of each of the ladder's points there.
            const PERIOD: usize = 1021;
            let period: Vec<f32> = (0..2 * PERIOD)
                .map(|i| 1.0 + ((i % PERIOD) as f32) * 1e-3 * seed)
                .collect();
            use rayon::prelude::*;
            spare
                .par_chunks_mut(CHUNK)
                .enumerate()
                .for_each(|(c, part)| {
                    let at = (c * CHUNK) % PERIOD;
                    for (k, piece) in part.chunks_mut(PERIOD).enumerate() {
                        let from = &period[(at + k * PERIOD) % PERIOD..][..piece.len()];
                        for (x, &f) in piece.iter_mut().zip(from) {
                            x.write(f);
                        }
                    }
                });
            // SAFETY: every one of the n elements was written just above.
            unsafe { v.set_len(n) };
            v
        };
        Self {
            kernel,
            a: fill(1.0, true),
            b: fill(2.0, streams > 1),
            c: fill(3.0, streams > 2),
            sink: AtomicU32::new(0),
        }
    }

    /// Elements per array.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.a.len()
    }

    /// Bytes of every array together.
    pub fn footprint(&self) -> u64 {
        ((self.a.len() + self.b.len() + self.c.len()) * 4) as u64
    }

    /// One call on `threads` threads: 1 on the calling thread, else every
    /// thread of Candle's pool, each on its own fixed part, or (`chunked`)
    /// taking parts (at most [`CHUNK`] elements, four a thread or more) as it
    /// finishes the last, as the suite's ops share their work (Candle's
    /// `execute_chunked`).
    pub fn call(&mut self, threads: usize, chunked: bool) {
        let n = self.a.len();
        let (kernel, sink) = (self.kernel, &self.sink);
        if threads <= 1 {
            part(kernel, &mut self.a, &self.b, &self.c, sink);
            return;
        }
        let pool = candle_core::utils::barrier_pool();
        // Parts taken as threads finish are at most CHUNK, and at least four
        // a thread, as the ops' `split` cuts theirs: with CHUNK alone, an
        // array under it was one part, one thread's, and the suite's add at
        // 256 KiB an array, shared by two threads, read 103-108% of it.
        let chunk = if chunked {
            CHUNK.min(n.div_ceil(4 * (pool.n_workers() + 1)))
        } else {
            n.div_ceil(pool.n_workers() + 1)
        };
        let cursor = std::sync::atomic::AtomicUsize::new(0);
        // The pool's closure must be Sync: the arrays travel as addresses.
        let (a, b, c) = (
            self.a.as_mut_ptr() as usize,
            self.b.as_ptr() as usize,
            self.c.as_ptr() as usize,
        );
        let (has_b, has_c) = (!self.b.is_empty(), !self.c.is_empty());
        pool.execute(|tid| loop {
            let start = if chunked {
                cursor.fetch_add(chunk, Ordering::Relaxed).min(n)
            } else {
                (tid * chunk).min(n)
            };
            let len = chunk.min(n - start);
            if len == 0 {
                break;
            }
            // SAFETY: each thread index (fixed parts) or each cursor value
            // (chunked) is handed out once per call, so the ranges
            // [start, start + len) are disjoint and inside every array
            // in use (all n long); the arrays are borrowed (a mutably) until
            // `execute` returns, after every part.
            let (a, b, c) = unsafe {
                let at = |p: usize, used: bool| -> &[f32] {
                    if used {
                        std::slice::from_raw_parts((p as *const f32).add(start), len)
                    } else {
                        &[]
                    }
                };
                (
                    std::slice::from_raw_parts_mut((a as *mut f32).add(start), len),
                    at(b, has_b),
                    at(c, has_c),
                )
            };
            part(kernel, a, b, c, sink);
            if !chunked {
                break;
            }
        });
    }

    /// Reads the sink, so the sums' work is observed.
    pub fn observed(&self) -> u32 {
        self.sink.load(Ordering::Relaxed)
    }
}

/// The kernel over one part of the arrays (`b` and `c` as long as `a`
/// where the kernel reads them).
fn part(kernel: LadderKernel, a: &mut [f32], b: &[f32], c: &[f32], sink: &AtomicU32) {
    if a.is_empty() {
        return;
    }
    match kernel {
        LadderKernel::Read => {
            sink.fetch_add(sum_bits(a), Ordering::Relaxed);
        }
        LadderKernel::Copy | LadderKernel::DeviceCopy => copy(a, b),
        LadderKernel::Triad => triad(a, b, c, 0.5),
        LadderKernel::CopyNt => streaming::copy(a, b),
        LadderKernel::TriadNt => streaming::triad(a, b, c, 0.5),
    }
}

/// Whether this build has the non-temporal kernels (x86-64's `movntps`).
pub const HAS_STREAMING_STORES: bool = cfg!(target_arch = "x86_64");

/// Defines `$name` as `$body` compiled for AVX-512, for AVX2 and for the
/// crate's baseline, the widest this CPU has called.
macro_rules! widest {
    (fn $name:ident($($arg:ident: $ty:ty),*) $(-> $ret:ty)? $body:block) => {
        fn $name($($arg: $ty),*) $(-> $ret)? {
            #[inline(always)]
            fn body($($arg: $ty),*) $(-> $ret)? $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f")]
                fn avx512($($arg: $ty),*) $(-> $ret)? { body($($arg),*) }
                #[target_feature(enable = "avx2")]
                fn avx2($($arg: $ty),*) $(-> $ret)? { body($($arg),*) }
                if std::arch::is_x86_feature_detected!("avx512f") {
                    // SAFETY: this CPU has AVX-512F, the feature `avx512` is built with.
                    return unsafe { avx512($($arg),*) };
                }
                if std::arch::is_x86_feature_detected!("avx2") {
                    // SAFETY: this CPU has AVX2, the feature `avx2` is built with.
                    return unsafe { avx2($($arg),*) };
                }
            }
            body($($arg),*)
        }
    };
}

widest! {
    fn sum_bits(x: &[f32]) -> u32 {
        // Four streams at once, a quarter of the part each: one sequential
        // stream a core is held to what one prefetch stream fetches ahead,
        // while a matrix-vector op reads several weight rows at once (and
        // read 20% faster than one stream past the caches on this VM).
        let q = x.len() / STREAMS;
        let (a, rest) = x.split_at(q);
        let (b, rest) = rest.split_at(q);
        let (c, rest) = rest.split_at(q);
        let (d, tail) = rest.split_at(q);
        let bits = |v: &f32| v.to_bits();
        let four = a
            .iter()
            .zip(b)
            .zip(c)
            .zip(d)
            .fold(0u32, |acc, (((a, b), c), d)| {
                acc.wrapping_add(bits(a))
                    .wrapping_add(bits(b))
                    .wrapping_add(bits(c))
                    .wrapping_add(bits(d))
            });
        tail.iter().fold(four, |acc, v| acc.wrapping_add(bits(v)))
    }
}

/// Streams the read kernel reads at once on each thread (and the
/// non-temporal kernels copy).
const STREAMS: usize = 4;

/// Where the `v`th vector of `w` elements goes in a body of `whole`
/// elements (a multiple of `w`) taken as [`STREAMS`] streams in turn: the
/// first [`STREAMS`] x q elements (q the largest multiple of `w` with
/// [`STREAMS`] x q <= `whole`) a quarter each, vector v of stream v %
/// [`STREAMS`] at its v / [`STREAMS`]th vector; the rest in order. Every
/// vector once; each a multiple of `w` from the start.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn interleaved(v: usize, whole: usize, w: usize) -> usize {
    let q = whole / (w * STREAMS) * w;
    match v < STREAMS * q / w {
        true => (v % STREAMS) * q + (v / STREAMS) * w,
        false => v * w,
    }
}

widest! {
    fn copy(a: &mut [f32], b: &[f32]) {
        // `a = one * b` with a one the compiler cannot see: a plain copy
        // loop is recognized and replaced by a `memcpy` call, whose stores
        // are its own choice (non-temporal above its size); the multiply is
        // one vector op per 64 bytes, far under any cache's pace.
        let one = std::hint::black_box(1.0f32);
        assert_eq!(a.len(), b.len());
        let (n, mut lines) = (a.len(), a.chunks_exact_mut(LINE));
        for (k, a) in (&mut lines).enumerate() {
            let b = &b[k * LINE..][..LINE];
            ahead(b.as_ptr());
            ahead(a.as_ptr());
            for (a, &b) in a.iter_mut().zip(b) {
                *a = one * b;
            }
        }
        for (a, &b) in lines.into_remainder().iter_mut().zip(&b[n / LINE * LINE..]) {
            *a = one * b;
        }
    }
}

widest! {
    fn triad(a: &mut [f32], b: &[f32], c: &[f32], s: f32) {
        assert!(a.len() == b.len() && a.len() == c.len());
        let (n, mut lines) = (a.len(), a.chunks_exact_mut(LINE));
        for (k, a) in (&mut lines).enumerate() {
            let (b, c) = (&b[k * LINE..][..LINE], &c[k * LINE..][..LINE]);
            ahead(b.as_ptr());
            ahead(c.as_ptr());
            ahead(a.as_ptr());
            for ((a, &b), &c) in a.iter_mut().zip(b).zip(c) {
                *a = b + s * c;
            }
        }
        let rest = n / LINE * LINE;
        let tail = lines.into_remainder().iter_mut().zip(&b[rest..]).zip(&c[rest..]);
        for ((a, &b), &c) in tail {
            *a = b + s * c;
        }
    }
}

/// f32s of a 64-byte cache line: the ordinary kernels' step.
const LINE: usize = 16;

/// The copy and the triad with non-temporal stores: the lines of `a` go to
/// memory through the write-combining buffers, never read for ownership
/// and never kept in a cache. The first elements up to a 64-byte boundary
/// and the last partial vector are stored the ordinary way (the
/// instruction takes aligned addresses only); a store fence ends each part,
/// as such stores are weakly ordered. The body runs as [`STREAMS`] streams
/// at once, a quarter of the part each, a vector of each in turn
/// ([`interleaved`]), as the read kernel reads and glibc's large `memcpy`
/// copies (four pages in turn): with one stream the ladder's copy past the
/// caches read 42.2 GB/s on two threads where the suite's copy, `memcpy`'s
/// streaming path, moved 45.6 at the same footprint (108% of its bound,
/// `kernels`' dram row on a 2-core Xeon VM, f6m207).
#[cfg(target_arch = "x86_64")]
mod streaming {
    use std::arch::x86_64::*;

    pub fn copy(a: &mut [f32], b: &[f32]) {
        stream(a, b, &[], 0.0);
    }

    pub fn triad(a: &mut [f32], b: &[f32], c: &[f32], s: f32) {
        stream(a, b, c, s);
    }

    /// `a = b + s*c`, or `a = b` where `c` is empty.
    fn stream(a: &mut [f32], b: &[f32], c: &[f32], s: f32) {
        let n = a.len().min(b.len());
        let head = a.as_ptr().align_offset(64).min(n);
        let one =
            |a: &mut [f32], i: usize| a[i] = if c.is_empty() { b[i] } else { b[i] + s * c[i] };
        for i in 0..head {
            one(a, i);
        }
        let body = if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: this CPU has AVX-512F; the range checks are inside.
            unsafe { body_avx512(&mut a[head..n], &b[head..n], c.get(head..n), s) }
        } else if std::arch::is_x86_feature_detected!("avx") {
            // SAFETY: this CPU has AVX; the range checks are inside.
            unsafe { body_avx(&mut a[head..n], &b[head..n], c.get(head..n), s) }
        } else {
            // SAFETY: SSE and SSE2 are x86-64's baseline.
            unsafe { body_sse(&mut a[head..n], &b[head..n], c.get(head..n), s) }
        };
        for i in head + body..n {
            one(a, i);
        }
    }

    /// Stores whole 64-byte vectors of `a` (64-byte aligned at its start)
    /// non-temporally; returns how many elements it stored.
    #[target_feature(enable = "avx512f")]
    unsafe fn body_avx512(a: &mut [f32], b: &[f32], c: Option<&[f32]>, s: f32) -> usize {
        let whole = a.len() / 16 * 16;
        let sv = _mm512_set1_ps(s);
        for v in 0..whole / 16 {
            let i = super::interleaved(v, whole, 16);
            // SAFETY: i + 16 <= whole <= the length of a, b (and c when
            // given); a + i is 64-byte aligned (a's start is, and i is a
            // multiple of 16 f32: `interleaved`'s), as `_mm512_stream_ps`
            // requires.
            let v = _mm512_loadu_ps(b.as_ptr().add(i));
            let v = match c {
                Some(c) => _mm512_add_ps(v, _mm512_mul_ps(sv, _mm512_loadu_ps(c.as_ptr().add(i)))),
                None => v,
            };
            _mm512_stream_ps(a.as_mut_ptr().add(i), v);
        }
        _mm_sfence();
        whole
    }

    /// As [`body_avx512`], 32 bytes a store (as `memcpy`'s AVX path).
    #[target_feature(enable = "avx")]
    unsafe fn body_avx(a: &mut [f32], b: &[f32], c: Option<&[f32]>, s: f32) -> usize {
        let whole = a.len() / 8 * 8;
        let sv = _mm256_set1_ps(s);
        for v in 0..whole / 8 {
            let i = super::interleaved(v, whole, 8);
            // SAFETY: i + 8 <= whole <= every slice's length; a + i is
            // 32-byte aligned (a's start is 64-byte aligned, i a multiple
            // of 8 f32), as `_mm256_stream_ps` requires.
            let v = _mm256_loadu_ps(b.as_ptr().add(i));
            let v = match c {
                Some(c) => _mm256_add_ps(v, _mm256_mul_ps(sv, _mm256_loadu_ps(c.as_ptr().add(i)))),
                None => v,
            };
            _mm256_stream_ps(a.as_mut_ptr().add(i), v);
        }
        _mm_sfence();
        whole
    }

    /// As [`body_avx512`], 16 bytes a store.
    #[target_feature(enable = "sse2")]
    unsafe fn body_sse(a: &mut [f32], b: &[f32], c: Option<&[f32]>, s: f32) -> usize {
        let whole = a.len() / 4 * 4;
        let sv = _mm_set1_ps(s);
        for v in 0..whole / 4 {
            let i = super::interleaved(v, whole, 4);
            // SAFETY: i + 4 <= whole <= every slice's length; a + i is
            // 16-byte aligned (a's start is 64-byte aligned, i a multiple
            // of 4 f32), as `_mm_stream_ps` requires.
            let v = _mm_loadu_ps(b.as_ptr().add(i));
            let v = match c {
                Some(c) => _mm_add_ps(v, _mm_mul_ps(sv, _mm_loadu_ps(c.as_ptr().add(i)))),
                None => v,
            };
            _mm_stream_ps(a.as_mut_ptr().add(i), v);
        }
        _mm_sfence();
        whole
    }
}

/// Off x86-64 the non-temporal kernels are not in the ladder
/// ([`HAS_STREAMING_STORES`]); these keep `part` whole.
#[cfg(not(target_arch = "x86_64"))]
mod streaming {
    pub fn copy(a: &mut [f32], b: &[f32]) {
        super::copy(a, b)
    }

    pub fn triad(a: &mut [f32], b: &[f32], c: &[f32], s: f32) {
        super::triad(a, b, c, s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streaming_stores_take_any_alignment_and_length() {
        // Every start within a 64-byte line and lengths around a vector's.
        let b: Vec<f32> = (0..200).map(|i| i as f32 + 0.25).collect();
        let c: Vec<f32> = (0..200).map(|i| 3.0 - i as f32).collect();
        for start in 0..16 {
            for len in [0, 1, 15, 16, 17, 33, 100, 180] {
                let mut a = vec![-1.0f32; 200];
                let (a, b, c) = (&mut a[start..start + len], &b[..len], &c[..len]);
                streaming::copy(a, b);
                assert_eq!(a, b, "copy at {start} of {len}");
                streaming::triad(a, b, c, 0.5);
                for i in 0..len {
                    assert_eq!(a[i], b[i] + 0.5 * c[i], "triad at {start} of {len}: {i}");
                }
            }
        }
    }

    #[test]
    fn interleaved_takes_every_vector_once_from_its_quarter() {
        for (whole, w) in [
            (0, 16),
            (16, 16),
            (64, 16),
            (80, 16),
            (1024, 16),
            (1040, 8),
            (12, 4),
        ] {
            let mut seen: Vec<usize> = (0..whole / w).map(|v| interleaved(v, whole, w)).collect();
            assert!(seen.iter().all(|i| i % w == 0), "{whole} {w}");
            // The first four vectors open the four quarters.
            let q = whole / (w * STREAMS) * w;
            if q > 0 {
                assert_eq!(seen[..4], [0, q, 2 * q, 3 * q], "{whole} {w}");
            }
            seen.sort_unstable();
            assert_eq!(
                seen,
                (0..whole / w).map(|v| v * w).collect::<Vec<_>>(),
                "{whole} {w}"
            );
        }
    }

    #[test]
    fn arrays_are_filled_with_their_period_across_parts() {
        // Parts of CHUNK filled apart, each from where its first element
        // falls in the period; the streams told apart by their seeds.
        let n = 3 * CHUNK + 77;
        let t = Arrays::new(LadderKernel::Triad, n);
        for (v, seed) in [(&t.a, 1.0f32), (&t.b, 2.0), (&t.c, 3.0)] {
            assert_eq!(v.len(), n);
            for (i, &x) in v.iter().enumerate() {
                assert_eq!(x, 1.0 + ((i % 1021) as f32) * 1e-3 * seed, "{seed} {i}");
            }
        }
    }

    #[test]
    fn each_kernel_does_its_work_on_any_thread_count() {
        let many = candle_core::utils::get_num_threads().max(2);
        // Past one chunk, so that chunked parts are several.
        let n = 2 * CHUNK + 1000;
        for (threads, chunked) in [(1, false), (many, false), (many, true)] {
            let mut r = Arrays::new(LadderKernel::Read, n);
            assert_eq!(r.len(), n);
            r.call(threads, chunked);
            let want =
                r.a.iter()
                    .fold(0u32, |acc, v| acc.wrapping_add(v.to_bits()));
            assert_eq!(r.observed(), want, "{threads} threads");
            for kernel in [LadderKernel::Copy, LadderKernel::CopyNt] {
                let mut c = Arrays::new(kernel, n);
                assert_eq!((c.len(), c.footprint()), (n, 8 * n as u64));
                c.call(threads, chunked);
                assert_eq!(c.a, c.b, "{kernel:?}");
            }
            for kernel in [LadderKernel::Triad, LadderKernel::TriadNt] {
                let mut t = Arrays::new(kernel, n);
                t.call(threads, chunked);
                for i in 0..n {
                    assert_eq!(t.a[i], t.b[i] + 0.5 * t.c[i], "{kernel:?} {i}");
                }
            }
        }
    }
}
