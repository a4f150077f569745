//! The element types sixteen at a time in one AVX-512 register of f32
//! ([`Lanes16`]): the loads and stores the kernels' AVX-512 rows convert
//! through, in registers (f32's a plain load and store). The portable kernels widen a block into an f32
//! buffer and narrow through a second one, three stores and three loads a
//! vector where the math needs one of each; these are one load and a
//! conversion (f16: `vcvtph2ps`; bf16: a widening move and a shift) and a
//! conversion and one store (f16: `vcvtps2ph`, round to nearest, ties to
//! even; bf16: the same rounding as [`super::bf16_round`], in integers, or
//! AVX512-BF16's `vcvtneps2bf16` where the CPU has it: [`native_bf16`]).

use std::arch::x86_64::*;
use std::mem::MaybeUninit;

use half::{bf16, f16};

use super::Elem;

/// A type the AVX-512 rows load and store as f32, sixteen values a register.
pub(in crate::kernels) trait Lanes16: Elem {
    /// The 16 values at `p` as f32.
    ///
    /// # Safety
    /// This CPU has AVX-512F; `p` points at 16 readable values.
    unsafe fn load16(p: *const Self) -> __m512;

    /// `v` rounded to this type (to nearest, ties to even; NaN stays NaN)
    /// into the 16 values at `p`.
    ///
    /// # Safety
    /// This CPU has AVX-512F; `p` points at 16 writable values.
    unsafe fn store16(v: __m512, p: *mut Self);

    /// [`Lanes16::store16`], through AVX512-BF16's rounding instruction
    /// where `native` ([`native_bf16`], asked once a call rather than once
    /// a register) and the type is bf16 (the only one it serves): the same
    /// bits either way.
    ///
    /// # Safety
    /// As `store16`; `native` only as [`native_bf16`] returned it (this CPU
    /// has AVX512-BF16 and AVX512-DQ).
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn store16_as(v: __m512, p: *mut Self, native: bool) {
        let _ = native;
        // SAFETY: the caller's, as store16's.
        unsafe { Self::store16(v, p) }
    }

    /// The first `src.len()` (at most 16) values of `src` as f32, the other
    /// lanes `fill`: a row's tail through a register, so that it rounds (and
    /// takes its exponential) as the rest of the row.
    ///
    /// # Safety
    /// This CPU has AVX-512F.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn load_part(src: &[Self], fill: Self) -> __m512 {
        let mut full = [fill; 16];
        full[..src.len()].copy_from_slice(src);
        // SAFETY: AVX-512F (the caller's); `full` holds 16 values.
        unsafe { Self::load16(full.as_ptr()) }
    }

    /// The first `dst.len()` (at most 16) lanes of `v` rounded into `dst`.
    ///
    /// # Safety
    /// This CPU has AVX-512F.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn store_part(v: __m512, dst: &mut [MaybeUninit<Self>]) {
        let mut full = [MaybeUninit::<Self>::uninit(); 16];
        // SAFETY: AVX-512F (the caller's); `full` holds 16 values.
        unsafe { Self::store16(v, full.as_mut_ptr().cast()) };
        dst.copy_from_slice(&full[..dst.len()]);
    }
}

impl Lanes16 for f32 {
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn load16(p: *const f32) -> __m512 {
        // SAFETY: the caller's: 16 values at p, unaligned.
        unsafe { _mm512_loadu_ps(p) }
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn store16(v: __m512, p: *mut f32) {
        // SAFETY: the caller's: 16 values at p, unaligned.
        unsafe { _mm512_storeu_ps(p, v) }
    }
}

impl Lanes16 for f16 {
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn load16(p: *const f16) -> __m512 {
        // SAFETY: the caller's: 16 values (32 bytes) at p, unaligned.
        unsafe { _mm512_cvtph_ps(_mm256_loadu_si256(p.cast())) }
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn store16(v: __m512, p: *mut f16) {
        let h = _mm512_cvtps_ph::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(v);
        // SAFETY: the caller's: 16 values (32 bytes) at p, unaligned.
        unsafe { _mm256_storeu_si256(p.cast(), h) }
    }
}

/// Whether this CPU rounds f32 to bf16 in one instruction (AVX512-BF16's
/// `vcvtneps2bf16`, where the integer form is about ten; and AVX512-DQ,
/// whose `vfpclassps` finds the subnormal lanes): asked once.
pub(in crate::kernels) fn native_bf16() -> bool {
    static NATIVE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *NATIVE.get_or_init(|| {
        std::arch::is_x86_feature_detected!("avx512bf16")
            && std::arch::is_x86_feature_detected!("avx512dq")
    })
}

impl Lanes16 for bf16 {
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn load16(p: *const bf16) -> __m512 {
        // SAFETY: the caller's: 16 values (32 bytes) at p, unaligned.
        let h = unsafe { _mm256_loadu_si256(p.cast()) };
        // bf16 is the top half of an f32: widening is a shift.
        _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(h)))
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn store16(v: __m512, p: *mut bf16) {
        // As `bf16_round`: add just under half a unit of the last kept bit
        // plus that bit, keep the top half; NaN keeps its top bits, quieted.
        let b = _mm512_castps_si512(v);
        let top = _mm512_srli_epi32::<16>(b);
        let odd = _mm512_and_si512(top, _mm512_set1_epi32(1));
        let bias = _mm512_add_epi32(_mm512_set1_epi32(0x7fff), odd);
        let rounded = _mm512_srli_epi32::<16>(_mm512_add_epi32(b, bias));
        let quiet = _mm512_or_si512(top, _mm512_set1_epi32(0x40));
        let nan = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(v, v);
        let h = _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, rounded, quiet));
        // SAFETY: the caller's: 16 values (32 bytes) at p, unaligned.
        unsafe { _mm256_storeu_si256(p.cast(), h) }
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn store16_as(v: __m512, p: *mut bf16, native: bool) {
        use std::arch::asm;
        if native {
            // Subnormal lanes (`vfpclassps` class 0x20): the instruction
            // reads them as zero, where the integer form (and `half`)
            // rounds them; a register with one takes that form whole.
            let (subnormal, h): (__mmask16, __m256i);
            // SAFETY: this CPU has AVX512-BF16 (the caller's `native`) and
            // AVX512-DQ (`native_bf16` asks both); registers only. Written as
            // assembly so that the kernels, built for AVX-512F alone, need
            // no second build for two instructions. `vcvtneps2bf16` rounds
            // to nearest, ties to even, and keeps NaN quieted (its top half
            // with bit 6 set), as the integer form.
            unsafe {
                asm!(
                    "vfpclassps {k}, {v}, 0x20",
                    "vcvtneps2bf16 {h}, {v}",
                    k = lateout(kreg) subnormal,
                    h = lateout(ymm_reg) h,
                    v = in(zmm_reg) v,
                    options(pure, nomem, nostack, preserves_flags)
                )
            };
            if subnormal == 0 {
                // SAFETY: the caller's: 16 values (32 bytes) at p, unaligned.
                unsafe { _mm256_storeu_si256(p.cast(), h) };
                return;
            }
        }
        // SAFETY: the caller's.
        unsafe { Self::store16(v, p) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every f16 and bf16 in and out of a register gives the bits `half`
    /// gives, and f32 values rounded to them (ties, subnormals, NaN) too.
    #[test]
    fn conversions_match_half_bit_for_bit() {
        if !std::arch::is_x86_feature_detected!("avx512f") {
            return;
        }
        fn check<E: Lanes16>(from_bits: fn(u16) -> E, bits: fn(E) -> u16, from_f32: fn(f32) -> E) {
            for start in (0..=u16::MAX as u32).step_by(16) {
                let src: Vec<E> = (start..start + 16).map(|h| from_bits(h as u16)).collect();
                let mut back = [from_bits(0); 16];
                let mut wide = [0f32; 16];
                // SAFETY: AVX-512F checked above; 16 values each.
                unsafe {
                    let v = E::load16(src.as_ptr());
                    _mm512_storeu_ps(wide.as_mut_ptr(), v);
                    E::store16(v, back.as_mut_ptr());
                }
                for ((&s, &w), &b) in src.iter().zip(&wide).zip(&back) {
                    let want = s.to_f64() as f32;
                    assert!(w.to_bits() == want.to_bits() || (w.is_nan() && want.is_nan()));
                    assert!(bits(b) == bits(s) || (w.is_nan() && b.to_f64().is_nan()));
                }
            }
            let mut x = 1.0f32;
            let mut probes = vec![f32::NAN, -0.0, 1e-40, 65520.0, 5.96e-8, f32::MAX];
            probes.extend((0..4000).map(|i| {
                x = (x * 1.000_37 + 0.013).rem_euclid(1e5) - 3e4;
                if i % 3 == 0 {
                    x * 1e-7
                } else {
                    x
                }
            }));
            // Every 16-bit value's f32 (subnormals, NaN and all), a register
            // of rounding's edges with no subnormal lane (so that AVX512-BF16's
            // instruction rounds all of it: ties to even either way, just
            // over a tie, f32::MAX over to inf, the zeros and infinities),
            // then the probes, through both stores.
            let every: Vec<f32> = (0..=u16::MAX)
                .map(|h| from_bits(h).to_f64() as f32)
                .collect();
            let edges: Vec<f32> = [
                0x3F80_8000u32,
                0x3F81_8000,
                0xBF80_8000,
                0xBF81_8000,
                0x3F80_8001,
                0x3F80_7FFF,
                0x7F7F_FFFF,
                0xFF7F_FFFF,
                0x0000_0000,
                0x8000_0000,
                0x7F80_0000,
                0xFF80_0000,
                0x7FC0_0001,
                0x0080_0000,
                0x477F_F000,
                0x3F7F_FFFF,
            ]
            .map(f32::from_bits)
            .to_vec();
            let chunks = every.chunks_exact(16).chain(edges.chunks_exact(16));
            for c in chunks.chain(probes.chunks_exact(16)) {
                for native in [false, native_bf16()] {
                    let mut out = [from_bits(0); 16];
                    // SAFETY: AVX-512F checked above, AVX512-BF16 where
                    // `native`; 16 values each.
                    unsafe { E::store16_as(_mm512_loadu_ps(c.as_ptr()), out.as_mut_ptr(), native) };
                    for (&v, &o) in c.iter().zip(&out) {
                        let want = from_f32(v);
                        assert!(
                            bits(o) == bits(want) || (v.is_nan() && o.to_f64().is_nan()),
                            "{v:e} (native {native})"
                        );
                    }
                }
            }
        }
        // The rounding instruction is taken wherever the CPU says it has it.
        if let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") {
            let flags = info.lines().find(|l| l.starts_with("flags")).unwrap_or("");
            let has = |f: &str| flags.split_whitespace().any(|x| x == f);
            assert_eq!(native_bf16(), has("avx512_bf16") && has("avx512dq"));
        }
        check::<f16>(f16::from_bits, f16::to_bits, f16::from_f32);
        check::<bf16>(bf16::from_bits, bf16::to_bits, bf16::from_f32);
    }
}
