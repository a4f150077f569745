//! The float tiles: `MR` rows of the activations against `NR` rows of the
//! weight, `MR x NR` dot products at once in vector accumulators, each weight
//! vector loaded once and multiplied into every activation row of the tile
//! (so a prompt chunk reads each weight once per `MR` rows, from cache after
//! the first), each activation vector into every weight row. A range of
//! weight rows is walked in groups of four, in the order they are stored,
//! every tile of the activations against each group before the next group is
//! read. The k elements that do not fill a vector are summed one at a time.
//! Each row's read asks the cache for the line 4 KiB ahead of it
//! ([`crate::kernels::ahead`]): a group's rows are streams too short for the
//! hardware's prefetcher alone.
//!
//! Compiled per instruction set ([`Tier`]): AVX-512 (4 x 4 tiles, 21 of its
//! 32 registers), AVX2 (2 x 4), portable (2 x 4); bf16 on a CPU with
//! AVX512-BF16 takes its own tile, `vdpbf16ps`, which multiplies pairs of
//! bf16 and adds them into f32 (32 products per instruction, no widening).

use std::ops::Range;
use std::sync::OnceLock;

use half::{bf16, f16, slice::HalfFloatSliceExt};

use super::super::cpu::{bf16_round, Elem};
use super::super::rows::Out;
use super::isa::{Isa, Portable};
use crate::kernels::ahead::ahead;

/// Weight rows per group: four streams from memory at once.
const NR: usize = 4;

// Each weight row's read asks the cache for the line 4 KiB ahead of it
// (`kernels::ahead`). A group's rows are short streams (SmolLM2's 576 fp16 values
// are 18 lines), too short for the hardware's streamer to ramp up on each:
// 4 KiB ahead of a row's read is 1.8 (fp32) to 3.6 (16-bit) rows on at
// SmolLM2's 576, rows the group's streams reach next or the next group's. A
// prompt chunk's later tiles prefetch what the first brought in: a hint that
// finds the line cached. Measured on SmolLM2 (Xeon VM, `generate --kernels
// lab`, pp16 and tg16, three A B rounds): fp16's tg went from 64-73 to 90-92
// tok/s, bf16's from 76-79 to 83-96 (its pp from 345-368 to 427-434), fp32's
// within its noise; 2 KiB ahead gave less, 8 KiB no more.

/// A weight element type: how a tile loads it, and it as f32 and back.
pub(super) trait Weight: Elem {
    /// # Safety
    /// `p` points at `I::LANES` readable values.
    unsafe fn load<I: Isa>(p: *const Self) -> I::V;
    fn f32(self) -> f32;
    /// `v` rounded to this type (to nearest, ties to even).
    fn round(v: f32) -> Self;
    /// The values as bf16, when they are bf16.
    fn as_bf16(s: &[Self]) -> Option<&[bf16]>;
    /// The values as f32, when they are f32.
    fn as_f32(s: &[Self]) -> Option<&[f32]>;
    /// `src` widened into `dst` (of the same length), exactly.
    fn widen_all(src: &[Self], dst: &mut [f32]);
}

impl Weight for f32 {
    #[inline(always)]
    unsafe fn load<I: Isa>(p: *const f32) -> I::V {
        // SAFETY: the caller's contract.
        unsafe { I::load(p) }
    }
    #[inline(always)]
    fn f32(self) -> f32 {
        self
    }
    #[inline(always)]
    fn round(v: f32) -> f32 {
        v
    }
    fn as_bf16(_: &[f32]) -> Option<&[bf16]> {
        None
    }
    fn as_f32(s: &[f32]) -> Option<&[f32]> {
        Some(s)
    }
    fn widen_all(src: &[f32], dst: &mut [f32]) {
        dst.copy_from_slice(src);
    }
}

impl Weight for f16 {
    #[inline(always)]
    unsafe fn load<I: Isa>(p: *const f16) -> I::V {
        // SAFETY: the caller's contract.
        unsafe { I::load_f16(p) }
    }
    #[inline(always)]
    fn f32(self) -> f32 {
        self.to_f32()
    }
    #[inline(always)]
    fn round(v: f32) -> f16 {
        f16::from_f32(v)
    }
    fn as_bf16(_: &[f16]) -> Option<&[bf16]> {
        None
    }
    fn as_f32(_: &[f16]) -> Option<&[f32]> {
        None
    }
    fn widen_all(src: &[f16], dst: &mut [f32]) {
        // F16C where the CPU has it (half checks at run time).
        src.convert_to_f32_slice(dst);
    }
}

impl Weight for bf16 {
    #[inline(always)]
    unsafe fn load<I: Isa>(p: *const bf16) -> I::V {
        // SAFETY: the caller's contract.
        unsafe { I::load_bf16(p) }
    }
    #[inline(always)]
    fn f32(self) -> f32 {
        self.to_f32()
    }
    #[inline(always)]
    fn round(v: f32) -> bf16 {
        bf16_round(v)
    }
    fn as_bf16(s: &[bf16]) -> Option<&[bf16]> {
        Some(s)
    }
    fn as_f32(_: &[bf16]) -> Option<&[f32]> {
        None
    }
    fn widen_all(src: &[bf16], dst: &mut [f32]) {
        // bf16 is the top half of an f32: a shift (the loop vectorizes).
        for (d, s) in dst.iter_mut().zip(src) {
            *d = f32::from_bits(u32::from(s.to_bits()) << 16);
        }
    }
}

/// The instruction set the float tiles run with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tier {
    /// AVX-512F (and F16C, FMA); bf16 through `vdpbf16ps` (AVX512-BF16).
    Avx512Bf16,
    /// AVX-512F (and F16C, FMA).
    Avx512,
    /// AVX2, FMA and F16C.
    Avx2,
    /// Whatever the build's baseline vectorizes to (SSE2 on x86-64, NEON on aarch64).
    Portable,
}

impl Tier {
    /// The widest this CPU has (checked once).
    pub fn detect() -> Tier {
        static TIER: OnceLock<Tier> = OnceLock::new();
        *TIER.get_or_init(|| {
            #[cfg(target_arch = "x86_64")]
            {
                use std::arch::is_x86_feature_detected as has;
                let base = has!("fma") && has!("f16c");
                if base && has!("avx512f") && has!("avx512bf16") {
                    return Tier::Avx512Bf16;
                }
                if base && has!("avx512f") {
                    return Tier::Avx512;
                }
                if base && has!("avx2") {
                    return Tier::Avx2;
                }
            }
            Tier::Portable
        })
    }

    /// This tier and every one below it the CPU can run, widest first.
    pub fn available() -> Vec<Tier> {
        let all = [Tier::Avx512Bf16, Tier::Avx512, Tier::Avx2, Tier::Portable];
        all.into_iter().filter(|t| t.runs_here()).collect()
    }

    /// Whether this CPU has every feature the tier needs (each tier needs
    /// the next one's).
    pub fn runs_here(self) -> bool {
        let order = |t: Tier| t as u8;
        order(self) >= order(Tier::detect())
    }

    pub fn name(self) -> &'static str {
        match self {
            Tier::Avx512Bf16 => "avx512+bf16",
            Tier::Avx512 => "avx512",
            Tier::Avx2 => "avx2",
            Tier::Portable => "portable",
        }
    }
}

/// One product: activations `x` (`m` rows of `k`, as f32, and as stored; the
/// f32 copy is empty when the tier reads them as stored),
/// weights `w` (rows of `k`), the outputs of weight rows `rows` for every
/// activation row, written at `out[(row0 + i) * n + j]`.
pub(super) struct Job<'a, E> {
    pub x: &'a [f32],
    pub x_raw: &'a [E],
    pub m: usize,
    pub k: usize,
    pub w: &'a [E],
    pub n: usize,
    pub row0: usize,
    pub out: &'a Out<E>,
}

/// Runs `job` for weight rows `rows` with `tier` (one the CPU has).
pub(super) fn run<E: Weight>(tier: Tier, job: &Job<'_, E>, rows: Range<usize>) {
    let need = job.m * job.k;
    assert!(job.x_raw.len() >= need && job.w.len() >= rows.end * job.k);
    assert!(tier.runs_here(), "tier {tier:?} on a CPU without it");
    #[cfg(target_arch = "x86_64")]
    {
        use super::isa::{Avx2, Avx512};
        // SAFETY (each call): `tier` is one `Tier::available` found this CPU
        // has, which is every feature the function enables.
        if tier != Tier::Avx512Bf16 || E::as_bf16(job.w).is_none() {
            assert!(job.x.len() >= need, "the f32 activations");
        }
        match tier {
            Tier::Avx512Bf16 => match (E::as_bf16(job.x_raw), E::as_bf16(job.w)) {
                (Some(x), Some(w)) => return unsafe { x86::bf16_rows(job, x, w, rows) },
                _ => return unsafe { x86::avx512(job, rows) },
            },
            Tier::Avx512 => return unsafe { x86::avx512(job, rows) },
            Tier::Avx2 => return unsafe { x86::avx2(job, rows) },
            Tier::Portable => {}
        }
        let _ = (Avx2, Avx512);
    }
    walk::<Portable, E, 2>(job, rows);
}

/// Every group of weight rows in `rows` against every tile of activation rows.
#[inline(always)]
pub(super) fn walk<I: Isa, E: Weight, const MR: usize>(job: &Job<'_, E>, rows: Range<usize>) {
    let mut j = rows.start;
    while j + NR <= rows.end {
        group::<I, E, MR, NR>(job, j);
        j += NR;
    }
    while j < rows.end {
        group::<I, E, MR, 1>(job, j);
        j += 1;
    }
}

#[inline(always)]
fn group<I: Isa, E: Weight, const MR: usize, const G: usize>(job: &Job<'_, E>, j: usize) {
    let k = job.k;
    let mut i = 0;
    while i + MR <= job.m {
        // SAFETY: rows i..i+MR of x and j..j+G of w are in bounds (`run`'s check).
        let s =
            unsafe { tile::<I, E, MR, G>(job.x.as_ptr().add(i * k), job.w.as_ptr().add(j * k), k) };
        store(job, i, j, &s);
        i += MR;
    }
    while i < job.m {
        // SAFETY: as above, one row.
        let s =
            unsafe { tile::<I, E, 1, G>(job.x.as_ptr().add(i * k), job.w.as_ptr().add(j * k), k) };
        store(job, i, j, &s);
        i += 1;
    }
}

#[inline(always)]
fn store<E: Weight, const R: usize, const G: usize>(
    job: &Job<'_, E>,
    i: usize,
    j: usize,
    s: &[[f32; G]; R],
) {
    for (r, row) in s.iter().enumerate() {
        for (c, &v) in row.iter().enumerate() {
            // SAFETY: output (row0 + i + r, j + c) belongs to this task alone:
            // its weight row j + c is in this task's range.
            unsafe {
                job.out
                    .write((job.row0 + i + r) * job.n + j + c, E::round(v))
            };
        }
    }
}

/// The `R x G` dot products of `R` activation rows at `x` with `G` weight
/// rows at `w`, all rows `k` long.
///
/// # Safety
/// `x` points at `R * k` f32 and `w` at `G * k` weights.
#[inline(always)]
unsafe fn tile<I: Isa, E: Weight, const R: usize, const G: usize>(
    x: *const f32,
    w: *const E,
    k: usize,
) -> [[f32; G]; R] {
    let mut acc = [[I::zero(); G]; R];
    let body = k - k % I::LANES;
    let mut p = 0;
    while p < body {
        // SAFETY: p + LANES <= k within every row (the caller's contract).
        // A loop, not `std::array::from_fn`: a closure is built without the
        // caller's target features, and where the inliner leaves it a call,
        // so are the loads in it.
        let mut wv = [I::zero(); G];
        // Once a line: a step reads 16, 32 or 64 bytes of a row (each divides 64).
        let line = (p * std::mem::size_of::<E>()).is_multiple_of(64);
        for (j, wv) in wv.iter_mut().enumerate() {
            if line {
                ahead(w.wrapping_add(j * k + p));
            }
            *wv = unsafe { E::load::<I>(w.add(j * k + p)) };
        }
        for (i, acc) in acc.iter_mut().enumerate() {
            let xv = unsafe { I::load(x.add(i * k + p)) };
            for (a, &wv) in acc.iter_mut().zip(&wv) {
                *a = I::fma(wv, xv, *a);
            }
        }
        p += I::LANES;
    }
    let mut out = [[0f32; G]; R];
    for (i, (o, acc)) in out.iter_mut().zip(&acc).enumerate() {
        for (j, (o, &a)) in o.iter_mut().zip(acc).enumerate() {
            let mut s = I::sum(a);
            for q in body..k {
                // SAFETY: q < k, inside both rows.
                s += unsafe { (*w.add(j * k + q)).f32() * *x.add(i * k + q) };
            }
            *o = s;
        }
    }
    out
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;
    use std::ops::Range;

    use half::bf16;

    use super::super::isa::{Avx2, Avx512};
    use super::{store, walk, Job, Weight, NR};

    /// # Safety
    /// The CPU has AVX-512F, F16C and FMA.
    #[target_feature(enable = "avx512f,f16c,fma")]
    pub(super) unsafe fn avx512<E: Weight>(job: &Job<'_, E>, rows: Range<usize>) {
        walk::<Avx512, E, 4>(job, rows)
    }

    /// # Safety
    /// The CPU has AVX2, F16C and FMA.
    #[target_feature(enable = "avx2,f16c,fma")]
    pub(super) unsafe fn avx2<E: Weight>(job: &Job<'_, E>, rows: Range<usize>) {
        walk::<Avx2, E, 2>(job, rows)
    }

    /// bf16 with `vdpbf16ps`: pairs of bf16 multiplied and summed into f32.
    ///
    /// # Safety
    /// The CPU has AVX-512F and AVX512-BF16.
    #[target_feature(enable = "avx512f,avx512bf16")]
    pub(super) unsafe fn bf16_rows<E: Weight>(
        job: &Job<'_, E>,
        x: &[bf16],
        w: &[bf16],
        rows: Range<usize>,
    ) {
        let mut j = rows.start;
        while j < rows.end {
            if j + NR <= rows.end {
                bf16_group::<E, NR>(job, x, w, j);
                j += NR;
            } else {
                bf16_group::<E, 1>(job, x, w, j);
                j += 1;
            }
        }
    }

    #[inline(always)]
    fn bf16_group<E: Weight, const G: usize>(job: &Job<'_, E>, x: &[bf16], w: &[bf16], j: usize) {
        let k = job.k;
        let mut i = 0;
        // SAFETY (each tile): rows i.. of x and j..j+G of w are in bounds
        // (`run`'s check; `x` is `x_raw`, as long as `job.x`).
        while i + 4 <= job.m {
            let s = unsafe { bf16_tile::<4, G>(x.as_ptr().add(i * k), w.as_ptr().add(j * k), k) };
            store(job, i, j, &s);
            i += 4;
        }
        while i < job.m {
            let s = unsafe { bf16_tile::<1, G>(x.as_ptr().add(i * k), w.as_ptr().add(j * k), k) };
            store(job, i, j, &s);
            i += 1;
        }
    }

    /// # Safety
    /// `x` points at `R * k` values and `w` at `G * k`, on a CPU with
    /// AVX-512F and AVX512-BF16 (the caller's features).
    #[inline(always)]
    unsafe fn bf16_tile<const R: usize, const G: usize>(
        x: *const bf16,
        w: *const bf16,
        k: usize,
    ) -> [[f32; G]; R] {
        const STEP: usize = 32;
        // SAFETY (the intrinsics): the caller's features; the loads read
        // STEP values inside each row (p + STEP <= k).
        let mut acc = [[unsafe { _mm512_setzero_ps() }; G]; R];
        let body = k - k % STEP;
        let mut p = 0;
        while p < body {
            let wv: [__m512bh; G] = std::array::from_fn(|j| unsafe {
                super::ahead(w.wrapping_add(j * k + p));
                std::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512(
                    w.add(j * k + p).cast(),
                ))
            });
            for (i, acc) in acc.iter_mut().enumerate() {
                let xv = unsafe {
                    std::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512(
                        x.add(i * k + p).cast(),
                    ))
                };
                for (a, &wv) in acc.iter_mut().zip(&wv) {
                    *a = unsafe { _mm512_dpbf16_ps(*a, wv, xv) };
                }
            }
            p += STEP;
        }
        let mut out = [[0f32; G]; R];
        for (i, (o, acc)) in out.iter_mut().zip(&acc).enumerate() {
            for (j, (o, &a)) in o.iter_mut().zip(acc).enumerate() {
                let mut s = unsafe { _mm512_reduce_add_ps(a) };
                for q in body..k {
                    // SAFETY: q < k, inside both rows.
                    s += unsafe { (*w.add(j * k + q)).to_f32() * (*x.add(i * k + q)).to_f32() };
                }
                *o = s;
            }
        }
        out
    }
}
