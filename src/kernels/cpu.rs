//! What every CPU kernel shares: the element types seen as f32 a block at a
//! time ([`Elem`]), the kernels compiled for the CPU's vector width
//! (`simd_kernel!`), a fresh output written in place ([`output`]), and the
//! work split across Candle's own CPU pool ([`split`]).
//!
//! Four things make the CPU kernels fast, each measured by `kernels`:
//! - **f32 in blocks.** A row is processed [`BLOCK`] elements at a time:
//!   16-bit values are widened into a small f32 buffer that stays in L1 (F16C
//!   instructions for f16, through `half`'s slice conversions; a shift for
//!   bf16), the math runs in plain f32 loops the compiler vectorizes, and the
//!   result is rounded once on the way out. Candle's CPU ops convert element
//!   by element with scalar code and keep 16-bit intermediates.
//! - **Compiled for the CPU in hand.** The loops run inside a function built
//!   for AVX-512 or AVX2 when the CPU has it (checked at run time), not for
//!   the x86-64 baseline's 4-lane SSE2.
//! - **No second write.** The output is allocated uninitialized and each
//!   element written once, by the thread that computes it (Candle's fused ops
//!   zero it first). Outputs of 64 MiB and more are advised onto 2 MiB pages
//!   (`MADV_HUGEPAGE`, as numpy does for large arrays): an allocation that
//!   large comes straight from the kernel, and its first touch costs a page
//!   fault per page, 512 times fewer with huge pages.
//! - **Threads only when they pay.** Work is shared on Candle's own pool
//!   (its spinning workers take a task in well under a microsecond), and only
//!   in tasks of at least `min_task` elements (each kernel says how many its
//!   cost per element makes worth it): a decode row stays on the calling
//!   thread, a prefill's rows are shared.

use std::mem::MaybeUninit;

use candle_core::{CpuStorage, WithDType};
use half::{bf16, f16};

#[cfg(target_arch = "x86_64")]
pub(super) mod x86;

/// Elements handled per step: 1 KiB of f32, well inside L1.
pub(super) const BLOCK: usize = 256;
/// Outputs from this size on are advised onto huge pages: above glibc's
/// largest mmap threshold (32 MiB), where every allocation is a fresh mapping
/// whose pages fault in on first touch. Smaller ones reuse memory malloc
/// already holds (no faults), and advising them costs: where the kernel's THP
/// `defrag` setting is `madvise` (this suite's VMs), a fault in an advised
/// range compacts memory on the spot (measured: an 8 MiB copy 2x slower).
const HUGE_PAGE_OUTPUT: usize = 64 << 20;

/// Whether `bytes` are more than this CPU's last cache holds (sysfs says its
/// size, cpu0's, read once; where it does not, never): an output that large,
/// written the ordinary way, has each of its lines read for ownership first
/// and then pushed out of the cache by the lines after it, before anything
/// reads it back.
pub(super) fn past_last_cache(bytes: usize) -> bool {
    static LAST: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    let last = LAST.get_or_init(|| crate::env::cpu_last_level_cache().map(|(_, b)| b));
    last.is_some_and(|last| bytes as u64 > last)
}

/// An element type the kernels read and write, seen as f32 a block at a time.
pub(super) trait Elem: WithDType + Copy + Send + Sync {
    /// `src` (at most [`BLOCK`] long) as f32: itself for f32, else widened
    /// into `buf` (exactly: f16 and bf16 values are all f32 values).
    fn widen<'a>(src: &'a [Self], buf: &'a mut [f32; BLOCK]) -> &'a [f32];
    /// Writes `src` rounded to this type (to nearest, ties to even) into
    /// `dst`, of the same length: every element.
    fn narrow(src: &[f32], dst: &mut [MaybeUninit<Self>]);

    /// Writes f(a_i, b_i) into `dst` (all three the same length), computed in
    /// f32 a block at a time; f32 itself in one pass, straight into `dst`.
    #[inline(always)]
    fn map2(a: &[Self], b: &[Self], dst: &mut [MaybeUninit<Self>], f: impl Fn(f32, f32) -> f32) {
        let (mut ab, mut bb, mut out) = ([0f32; BLOCK], [0f32; BLOCK], [0f32; BLOCK]);
        let blocks = a
            .chunks(BLOCK)
            .zip(b.chunks(BLOCK))
            .zip(dst.chunks_mut(BLOCK));
        for ((a, b), dst) in blocks {
            let (a, b) = (Self::widen(a, &mut ab), Self::widen(b, &mut bb));
            let o = &mut out[..a.len()];
            for ((o, &a), &b) in o.iter_mut().zip(a).zip(b) {
                *o = f(a, b);
            }
            Self::narrow(o, dst);
        }
    }
}

impl Elem for f32 {
    #[inline(always)]
    fn widen<'a>(src: &'a [f32], _: &'a mut [f32; BLOCK]) -> &'a [f32] {
        src
    }

    #[inline(always)]
    fn narrow(src: &[f32], dst: &mut [MaybeUninit<f32>]) {
        dst.write_copy_of_slice(src);
    }

    #[inline(always)]
    fn map2(a: &[f32], b: &[f32], dst: &mut [MaybeUninit<f32>], f: impl Fn(f32, f32) -> f32) {
        for ((d, &a), &b) in dst.iter_mut().zip(a).zip(b) {
            d.write(f(a, b));
        }
    }
}

// f16 by F16C's conversions where the CPU has them ([`f16c`], inlined into
// the kernels' AVX-512 build), else in plain integer and float arithmetic
// ([`f16_widen`], [`f16_round`]), which the kernels' builds vectorize in
// place. `half`'s slice conversions call F16C code through a runtime check,
// out of line, eight values a call, which held the 16-bit kernels at half
// fp32's speed on half its bytes (rms_norm fp16 at 1024 x 4096: 1.77 ms
// against fp32's 0.93, Xeon VM); the arithmetic alone took it to 1.2-1.5.
impl Elem for f16 {
    #[inline(always)]
    fn widen<'a>(src: &'a [f16], buf: &'a mut [f32; BLOCK]) -> &'a [f32] {
        let buf = &mut buf[..src.len()];
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("f16c") {
            // SAFETY: this CPU has F16C (and AVX, which F16C needs).
            unsafe { f16c::widen(src, buf) };
            return buf;
        }
        for (b, s) in buf.iter_mut().zip(src) {
            *b = f16_widen(s.to_bits());
        }
        buf
    }

    #[inline(always)]
    fn narrow(src: &[f32], dst: &mut [MaybeUninit<f16>]) {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("f16c") {
            // SAFETY: this CPU has F16C (and AVX, which F16C needs).
            unsafe { f16c::narrow(src, dst) };
            return;
        }
        for (d, &x) in dst.iter_mut().zip(src) {
            d.write(f16_round(x));
        }
    }
}

/// f16 to and from f32 eight at a time with F16C's `vcvtph2ps` and
/// `vcvtps2ph` (round to nearest, ties to even: what [`f16_round`] gives),
/// the tail in arithmetic.
#[cfg(target_arch = "x86_64")]
mod f16c {
    use std::arch::x86_64::*;
    use std::mem::MaybeUninit;

    use half::f16;

    /// `src` as f32 into `dst` (the same length).
    ///
    /// # Safety
    /// This CPU has AVX and F16C.
    #[inline]
    #[target_feature(enable = "avx,f16c")]
    pub(super) unsafe fn widen(src: &[f16], dst: &mut [f32]) {
        assert_eq!(src.len(), dst.len());
        let whole = src.len() / 8 * 8;
        for i in (0..whole).step_by(8) {
            // SAFETY: i + 8 <= len of both (asserted); unaligned loads and stores.
            unsafe {
                let h = _mm_loadu_si128(src.as_ptr().add(i).cast());
                _mm256_storeu_ps(dst.as_mut_ptr().add(i), _mm256_cvtph_ps(h));
            }
        }
        for (d, s) in dst[whole..].iter_mut().zip(&src[whole..]) {
            *d = super::f16_widen(s.to_bits());
        }
    }

    /// `src` rounded to f16 into `dst` (the same length).
    ///
    /// # Safety
    /// This CPU has AVX and F16C.
    #[inline]
    #[target_feature(enable = "avx,f16c")]
    pub(super) unsafe fn narrow(src: &[f32], dst: &mut [MaybeUninit<f16>]) {
        assert_eq!(src.len(), dst.len());
        let whole = src.len() / 8 * 8;
        for i in (0..whole).step_by(8) {
            // SAFETY: i + 8 <= len of both (asserted); unaligned loads and stores.
            unsafe {
                let x = _mm256_loadu_ps(src.as_ptr().add(i));
                let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(x);
                _mm_storeu_si128(dst.as_mut_ptr().add(i).cast(), h);
            }
        }
        for (d, &x) in dst[whole..].iter_mut().zip(&src[whole..]) {
            d.write(super::f16_round(x));
        }
    }
}

impl Elem for bf16 {
    #[inline(always)]
    fn widen<'a>(src: &'a [bf16], buf: &'a mut [f32; BLOCK]) -> &'a [f32] {
        let buf = &mut buf[..src.len()];
        // bf16 is the top half of an f32: widening is a shift (NaN stays NaN).
        for (b, s) in buf.iter_mut().zip(src) {
            *b = f32::from_bits(u32::from(s.to_bits()) << 16);
        }
        buf
    }

    #[inline(always)]
    fn narrow(src: &[f32], dst: &mut [MaybeUninit<bf16>]) {
        for (d, &x) in dst.iter_mut().zip(src) {
            d.write(bf16_round(x));
        }
    }
}

/// `x` rounded to the nearest bf16, ties to even (what `half::bf16::from_f32`
/// gives), without branches so that the loop around it vectorizes: add just
/// under half a unit of the last kept bit, plus that bit, and truncate. NaN
/// keeps its sign and top mantissa bits and is made quiet.
#[inline(always)]
pub(super) fn bf16_round(x: f32) -> bf16 {
    let b = x.to_bits();
    let rounded = b.wrapping_add(0x7fff + ((b >> 16) & 1)) >> 16;
    let quiet_nan = (b >> 16) | 0x40;
    bf16::from_bits(if x.is_nan() { quiet_nan } else { rounded } as u16)
}

/// The f16 of bits `h` as f32, exactly (every f16 is an f32), without
/// branches: the exponent rebased, a subnormal renormalized by a float
/// subtraction, infinity and NaN given f32's top exponent (F. Giesen,
/// "half_to_float", 2013; what F16C's `vcvtph2ps` gives).
#[inline(always)]
pub(super) fn f16_widen(h: u16) -> f32 {
    const TOP: u32 = 0x7c00 << 13;
    let h = u32::from(h);
    let o = (h & 0x7fff) << 13;
    let exp = o & TOP;
    let normal = o + ((127 - 15) << 23);
    let special = normal + ((128 - 16) << 23);
    // 2^-14, f16's smallest normal: the subnormal's bits as a normal f32
    // one exponent up, less that, leave the value.
    let subnormal = (f32::from_bits(normal + (1 << 23)) - f32::from_bits(113 << 23)).to_bits();
    let bits = if exp == TOP {
        special
    } else if exp == 0 {
        subnormal
    } else {
        normal
    };
    f32::from_bits(bits | ((h & 0x8000) << 16))
}

/// `x` rounded to the nearest f16, ties to even (what `half::f16::from_f32`
/// gives; NaN stays NaN, made quiet), without branches: past f16's range
/// infinity, under its smallest normal a float addition that leaves the
/// subnormal's bits at the bottom (the FPU rounds), else the exponent
/// rebased and the mantissa's dropped bits rounded in integers (F. Giesen,
/// "float_to_half_fast3_rtne", 2013).
#[inline(always)]
pub(super) fn f16_round(x: f32) -> f16 {
    const F16_OVER: u32 = (127 + 16) << 23;
    const MAGIC: u32 = ((127 - 15) + (23 - 10) + 1) << 23;
    // The exponent from f32's bias to f16's, and just under half of the
    // last kept bit (the other half, when it is odd, added apart: ties to
    // even).
    const REBIAS: u32 = (15u32.wrapping_sub(127) << 23).wrapping_add(0xfff);
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let a = b & 0x7fff_ffff;
    let nan = 0x7e00 | ((a >> 13) & 0x3ff) as u16;
    let big = if a > 0x7f80_0000 { nan } else { 0x7c00 };
    let small = (f32::from_bits(a) + f32::from_bits(MAGIC))
        .to_bits()
        .wrapping_sub(MAGIC) as u16;
    let odd = (a >> 13) & 1;
    let normal = (a.wrapping_add(REBIAS).wrapping_add(odd) >> 13) as u16;
    let h = if a >= F16_OVER {
        big
    } else if a < (113 << 23) {
        small
    } else {
        normal
    };
    f16::from_bits(h | sign)
}

/// Defines a kernel function three times: as written, compiled for AVX2, and
/// compiled for AVX-512, with the widest one this CPU has called (std caches
/// the check). The body and the `#[inline(always)]` loops it calls are
/// inlined into each, so the same code runs with the CPU's full vector width
/// (8 f32 lanes with AVX2; AVX-512's wider registers and masks), and as the
/// crate is built (SSE2 on x86-64) elsewhere. (A closure passed to a
/// `#[target_feature]` function is not reliably inlined into it, so the body
/// is a function of its own.)
macro_rules! simd_kernel {
    ($(#[$doc:meta])* $vis:vis fn $name:ident<E: Elem>($($arg:ident: $ty:ty),* $(,)?) $body:block) => {
        $(#[$doc])*
        $vis fn $name<E: Elem>($($arg: $ty),*) {
            #[inline(always)]
            fn body<E: Elem>($($arg: $ty),*) $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f")]
                fn avx512<E: Elem>($($arg: $ty),*) {
                    body::<E>($($arg),*)
                }
                #[target_feature(enable = "avx2")]
                fn avx2<E: Elem>($($arg: $ty),*) {
                    body::<E>($($arg),*)
                }
                if std::arch::is_x86_feature_detected!("avx512f") {
                    // SAFETY: this CPU has AVX-512F, the feature `avx512` is built with.
                    return unsafe { avx512::<E>($($arg),*) };
                }
                if std::arch::is_x86_feature_detected!("avx2") {
                    // SAFETY: this CPU has AVX2, the feature `avx2` is built with.
                    return unsafe { avx2::<E>($($arg),*) };
                }
            }
            body::<E>($($arg),*)
        }
    };
}
pub(super) use simd_kernel;

/// A new tensor's storage of `n` elements, every one written by `fill`, which
/// is handed the uninitialized buffer.
///
/// `fill` must write each of the `n` elements: the kernels do so through
/// [`split`], whose chunks cover the buffer, and loops that write every
/// element of their chunk.
pub(super) fn output<E: Elem>(n: usize, fill: impl FnOnce(&mut [MaybeUninit<E>])) -> CpuStorage {
    let mut v: Vec<E> = Vec::with_capacity(n);
    let buf = &mut v.spare_capacity_mut()[..n];
    advise_huge_pages(buf);
    fill(buf);
    // SAFETY: the first n elements were allocated above and `fill` wrote each
    // of them (its contract); f32, f16 and bf16 have no invalid bit patterns.
    unsafe { v.set_len(n) };
    E::to_cpu_storage_owned(v)
}

/// Asks the kernel to back the 2 MiB-aligned part of a large buffer with huge
/// pages before it is first touched. Only advice: if it is refused (no
/// transparent huge pages), the buffer works the same with small pages.
pub(crate) fn advise_huge_pages<T>(buf: &mut [MaybeUninit<T>]) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let bytes = std::mem::size_of_val(buf);
        if bytes < HUGE_PAGE_OUTPUT {
            return;
        }
        let start = buf.as_mut_ptr() as usize;
        let first = start.next_multiple_of(HUGE);
        let end = (start + bytes) / HUGE * HUGE;
        if end > first {
            // SAFETY: [first, end) lies inside `buf`, which this call borrows
            // mutably; MADV_HUGEPAGE changes how its pages are backed, never
            // what they hold.
            // Refused (no THP in this kernel): small pages, same result.
            let _ = unsafe {
                rustix::mm::madvise(
                    first as *mut std::ffi::c_void,
                    end - first,
                    rustix::mm::Advice::LinuxHugepage,
                )
            };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (buf, HUGE_PAGE_OUTPUT);
}

/// Calls `task(first, chunk)` over `dst` cut into chunks of whole units
/// (`unit` elements: a row, or 1 for element-wise ops), `first` being the
/// chunk's first element, every element in exactly one chunk. Work under two
/// tasks of `min_task` elements runs on the calling thread; larger work is cut
/// into up to four chunks per thread of Candle's own CPU pool (the spinning
/// "barrier pool" Candle's element-wise ops run on, the calling thread one of
/// its workers), which hands them out as threads come free.
pub(super) fn split<E: Send>(
    dst: &mut [MaybeUninit<E>],
    unit: usize,
    min_task: usize,
    task: impl Fn(usize, &mut [MaybeUninit<E>]) + Sync,
) {
    let n = dst.len();
    let unit = unit.max(1);
    let tasks = n / min_task.max(1);
    if tasks <= 1 {
        task(0, dst);
        return;
    }
    let pool = candle_core::utils::barrier_pool();
    let tasks = tasks.min(4 * (pool.n_workers() + 1));
    let chunk = (n / unit).div_ceil(tasks).max(1) * unit;
    let chunks = n.div_ceil(chunk);
    // The pool's closure must be Sync: the buffer travels as an address.
    let base = dst.as_mut_ptr() as usize;
    super::work::dispatch(|| {
        pool.execute_chunked(chunks, |range| {
            super::work::task(|| {
                for c in range {
                    let first = c * chunk;
                    let len = chunk.min(n - first);
                    // SAFETY: `execute_chunked` hands out each index of 0..chunks
                    // exactly once, so the ranges [first, first + len) are disjoint
                    // and inside `dst`, which is borrowed mutably until it returns,
                    // after every chunk is done.
                    let part = unsafe {
                        std::slice::from_raw_parts_mut(
                            (base as *mut MaybeUninit<E>).add(first),
                            len,
                        )
                    };
                    task(first, part);
                }
            })
        })
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Zeros, infinities, the extremes and a subnormal: every rounding's
    /// edges.
    const EDGES: [f32; 7] = [
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MAX,
        f32::MIN_POSITIVE,
        1e-40,
    ];

    #[test]
    fn bf16_rounding_matches_half_bit_for_bit() {
        let mut probes = EDGES.to_vec();
        probes.extend([
            // Ties: exactly between two bf16 values, even below and odd below.
            f32::from_bits(0x3f80_8000),
            f32::from_bits(0x3f81_8000),
        ]);
        let mut x = 1.0f32;
        for _ in 0..20_000 {
            x = (x * 1.000_37 + 0.013).rem_euclid(1e6) - 3e5;
            probes.extend([x, x * 1e-30]);
        }
        for v in probes {
            assert_eq!(
                bf16_round(v).to_bits(),
                bf16::from_f32(v).to_bits(),
                "{v:e}"
            );
        }
        assert!(bf16_round(f32::NAN).is_nan() && bf16_round(-f32::NAN).is_nan());
        for h in 0..=u16::MAX {
            let b = bf16::from_bits(h);
            let mut buf = [0f32; BLOCK];
            let wide = bf16::widen(&[b], &mut buf)[0];
            assert!(wide.to_bits() == b.to_f32().to_bits() || (wide.is_nan() && b.is_nan()));
        }
    }

    #[test]
    fn f16_conversions_match_half_bit_for_bit() {
        for h in 0..=u16::MAX {
            let (want, got) = (f16::from_bits(h).to_f32(), f16_widen(h));
            assert!(
                got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                "{h:#x}"
            );
        }
        let mut probes = EDGES.to_vec();
        probes.extend([
            65504.0, 65519.99, 65520.0, 6.1e-5, 5.96e-8, 2.98e-8, 2.99e-8,
        ]);
        // Every f16 and the points halfway to its neighbours (ties).
        for h in 0..0x7c00u16 {
            let v = f16::from_bits(h).to_f32();
            let next = f16::from_bits(h + 1).to_f32();
            probes.extend([v, -v, (v + next) / 2.0, -(v + next) / 2.0]);
        }
        let mut x = 1.0f32;
        for _ in 0..20_000 {
            x = (x * 1.000_37 + 0.013).rem_euclid(1e5) - 3e4;
            probes.extend([x, x * 1e-6, x * 1e-9]);
        }
        for v in probes {
            assert_eq!(f16_round(v).to_bits(), f16::from_f32(v).to_bits(), "{v:e}");
        }
        assert!(f16_round(f32::NAN).is_nan() && f16_round(-f32::NAN).is_nan());
        // The Elem path (F16C where this CPU has it) gives the same bits, on
        // whole blocks and a tail.
        let xs: Vec<f32> = (0..BLOCK - 3)
            .map(|i| (i as f32 - 100.0) * 0.37e-3 * i as f32)
            .collect();
        let mut out = [MaybeUninit::<f16>::uninit(); BLOCK];
        f16::narrow(&xs, &mut out[..xs.len()]);
        // SAFETY: `narrow` wrote every element of the first xs.len().
        let hs: Vec<f16> = out[..xs.len()]
            .iter()
            .map(|h| unsafe { h.assume_init() })
            .collect();
        let mut buf = [0f32; BLOCK];
        let back = f16::widen(&hs, &mut buf);
        for ((&x, h), &b) in xs.iter().zip(&hs).zip(back) {
            assert_eq!(h.to_bits(), f16::from_f32(x).to_bits(), "{x:e}");
            assert_eq!(b.to_bits(), h.to_f32().to_bits());
        }
    }

    #[test]
    fn split_covers_every_element_once_in_whole_units() {
        let cases = [
            (0, 1),
            (7, 7),
            (1 << 20, 1),
            (576 * 2000, 576),
            (3 * 577, 577),
        ];
        for (n, unit) in cases {
            let mut dst = vec![MaybeUninit::<u32>::uninit(); n];
            let seen = std::sync::Mutex::new(Vec::new());
            split(&mut dst, unit, 1 << 15, |first, chunk| {
                assert_eq!(first % unit, 0);
                assert_eq!(chunk.len() % unit, 0, "chunk of {} at {first}", chunk.len());
                for (i, d) in chunk.iter_mut().enumerate() {
                    d.write((first + i) as u32);
                }
                seen.lock().unwrap().push((first, chunk.len()));
            });
            let mut seen = seen.into_inner().unwrap();
            seen.sort();
            let mut next = 0;
            for (first, len) in seen {
                assert_eq!(first, next);
                next += len;
            }
            assert_eq!(next, n);
        }
    }

    simd_kernel! {
        /// Doubles `x` into `y`: a kernel as the others are written.
        fn double<E: Elem>(x: &[E], y: &mut [MaybeUninit<E>]) {
            let (mut buf, mut out) = ([0f32; BLOCK], [0f32; BLOCK]);
            let v = E::widen(x, &mut buf);
            for (o, &v) in out.iter_mut().zip(v) {
                *o = 2.0 * v;
            }
            E::narrow(&out[..v.len()], y);
        }
    }

    #[test]
    fn simd_kernels_run_on_any_cpu() {
        let x = [bf16::from_f32(1.5), bf16::from_f32(-3.0)];
        let mut y = [MaybeUninit::uninit(); 2];
        double(&x, &mut y);
        // SAFETY: `double` wrote both.
        let y = y.map(|v| unsafe { v.assume_init() }.to_f32());
        assert_eq!(y, [3.0, -6.0]);
    }
}
