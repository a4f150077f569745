//! The vector instructions the float matrix-vector tiles are written in, as
//! one small trait ([`Isa`]) with three implementations: AVX-512 (16 f32
//! lanes), AVX2 with FMA and F16C (8 lanes), and a portable one (8 lanes as
//! an array, which the compiler turns into SSE2 on x86-64 and NEON on
//! aarch64). The tiles are generic over it and compiled once per
//! implementation inside a function that enables its CPU features
//! ([`super::tiles`]), so that every `#[inline(always)]` method here becomes
//! the one instruction it wraps; the widest the CPU has is chosen at run time.
//!
//! The weights are widened to f32 on load: f16 by F16C's `vcvtph2ps`, bf16 by
//! a shift (it is the top half of an f32), so every product and sum is f32.

use half::{bf16, f16};

/// A vector of f32 lanes and what the tiles do with it.
pub(super) trait Isa: Copy {
    type V: Copy;
    /// f32 lanes per vector.
    const LANES: usize;
    fn zero() -> Self::V;
    /// `LANES` f32 from `p`.
    ///
    /// # Safety
    /// `p` points at `LANES` readable values.
    unsafe fn load(p: *const f32) -> Self::V;
    /// # Safety
    /// As [`Isa::load`].
    unsafe fn load_f16(p: *const f16) -> Self::V;
    /// # Safety
    /// As [`Isa::load`].
    unsafe fn load_bf16(p: *const bf16) -> Self::V;
    /// a * b + c.
    fn fma(a: Self::V, b: Self::V, c: Self::V) -> Self::V;
    fn sum(v: Self::V) -> f32;
}

/// The portable lanes: an array the compiler vectorizes for the build's
/// baseline (SSE2 on x86-64, NEON on aarch64).
#[derive(Clone, Copy)]
pub(super) struct Portable;

impl Isa for Portable {
    type V = [f32; 8];
    const LANES: usize = 8;

    #[inline(always)]
    fn zero() -> [f32; 8] {
        [0.0; 8]
    }

    #[inline(always)]
    unsafe fn load(p: *const f32) -> [f32; 8] {
        // SAFETY: the caller's contract: 8 readable values.
        unsafe { p.cast::<[f32; 8]>().read_unaligned() }
    }

    #[inline(always)]
    unsafe fn load_f16(p: *const f16) -> [f32; 8] {
        // SAFETY: as `load`.
        let h = unsafe { p.cast::<[f16; 8]>().read_unaligned() };
        h.map(f16::to_f32)
    }

    #[inline(always)]
    unsafe fn load_bf16(p: *const bf16) -> [f32; 8] {
        // SAFETY: as `load`.
        let h = unsafe { p.cast::<[u16; 8]>().read_unaligned() };
        h.map(|b| f32::from_bits(u32::from(b) << 16))
    }

    #[inline(always)]
    fn fma(a: [f32; 8], b: [f32; 8], c: [f32; 8]) -> [f32; 8] {
        // Multiply and add, not `mul_add`: without FMA in the baseline,
        // `mul_add` is a libm call per lane.
        std::array::from_fn(|i| a[i] * b[i] + c[i])
    }

    #[inline(always)]
    fn sum(v: [f32; 8]) -> f32 {
        let s4: [f32; 4] = std::array::from_fn(|i| v[i] + v[i + 4]);
        (s4[0] + s4[2]) + (s4[1] + s4[3])
    }
}

#[cfg(target_arch = "x86_64")]
pub(super) use x86::{Avx2, Avx512};

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use half::{bf16, f16};

    use super::Isa;

    /// AVX2 with FMA and F16C: 8 f32 lanes. Only used inside functions built
    /// with those features, on a CPU checked to have them.
    #[derive(Clone, Copy)]
    pub(in super::super) struct Avx2;

    // SAFETY (every `unsafe` block below): the intrinsics need AVX2, FMA and
    // F16C, which the functions these are inlined into enable, and which the
    // dispatcher checked the CPU has; the loads read what the caller's
    // contract says is readable.
    impl Isa for Avx2 {
        type V = __m256;
        const LANES: usize = 8;

        #[inline(always)]
        fn zero() -> __m256 {
            unsafe { _mm256_setzero_ps() }
        }

        #[inline(always)]
        unsafe fn load(p: *const f32) -> __m256 {
            unsafe { _mm256_loadu_ps(p) }
        }

        #[inline(always)]
        unsafe fn load_f16(p: *const f16) -> __m256 {
            unsafe { _mm256_cvtph_ps(_mm_loadu_si128(p.cast())) }
        }

        #[inline(always)]
        unsafe fn load_bf16(p: *const bf16) -> __m256 {
            unsafe {
                let wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(p.cast()));
                _mm256_castsi256_ps(_mm256_slli_epi32::<16>(wide))
            }
        }

        #[inline(always)]
        fn fma(a: __m256, b: __m256, c: __m256) -> __m256 {
            unsafe { _mm256_fmadd_ps(a, b, c) }
        }

        #[inline(always)]
        fn sum(v: __m256) -> f32 {
            unsafe {
                let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
                let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
                _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)))
            }
        }
    }

    /// AVX-512F (with F16C and FMA): 16 f32 lanes.
    #[derive(Clone, Copy)]
    pub(in super::super) struct Avx512;

    // SAFETY (every `unsafe` block below): as for `Avx2`, with AVX-512F.
    impl Isa for Avx512 {
        type V = __m512;
        const LANES: usize = 16;

        #[inline(always)]
        fn zero() -> __m512 {
            unsafe { _mm512_setzero_ps() }
        }

        #[inline(always)]
        unsafe fn load(p: *const f32) -> __m512 {
            unsafe { _mm512_loadu_ps(p) }
        }

        #[inline(always)]
        unsafe fn load_f16(p: *const f16) -> __m512 {
            unsafe { _mm512_cvtph_ps(_mm256_loadu_si256(p.cast())) }
        }

        #[inline(always)]
        unsafe fn load_bf16(p: *const bf16) -> __m512 {
            unsafe {
                let wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(p.cast()));
                _mm512_castsi512_ps(_mm512_slli_epi32::<16>(wide))
            }
        }

        #[inline(always)]
        fn fma(a: __m512, b: __m512, c: __m512) -> __m512 {
            unsafe { _mm512_fmadd_ps(a, b, c) }
        }

        #[inline(always)]
        fn sum(v: __m512) -> f32 {
            unsafe { _mm512_reduce_add_ps(v) }
        }
    }
}
