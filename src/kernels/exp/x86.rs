//! [`super::exp`] sixteen lanes at a time in AVX-512, with the instructions
//! the portable form cannot ask for: fused multiply-adds (Rust never fuses
//! `a * b + c`, and the portable form's builds include CPUs without FMA), a
//! rounding instruction (`vrndscaleps`) for n, and `vscalefps` for 2^n. The
//! same reduction, the same Cephes polynomial and the same edges (0 under
//! LO, never a subnormal; +inf over HI; NaN kept), in about half the
//! instructions: exp is what bounds softmax and SwiGLU on the CPU.

use std::arch::x86_64::*;

use super::{HI, LN2_HI, LN2_LO, LO, LOG2E, P};

/// e^x of each lane, as [`super::exp`] (within 2 ulp; fused, so a lane may
/// differ from it by an ulp or two).
///
/// # Safety
/// This CPU has AVX-512F.
#[inline]
#[target_feature(enable = "avx512f")]
pub(in crate::kernels) unsafe fn exp16(x: __m512) -> __m512 {
    let c = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(LO)), _mm512_set1_ps(HI));
    let n = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
        _mm512_mul_ps(c, _mm512_set1_ps(LOG2E)),
    );
    let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_HI), c);
    let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_LO), r);
    let mut p = _mm512_set1_ps(P[0]);
    for &k in &P[1..] {
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(k));
    }
    let er = _mm512_add_ps(
        _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r),
        _mm512_set1_ps(1.0),
    );
    let y = _mm512_scalef_ps(er, n);
    let over = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(x, _mm512_set1_ps(HI));
    let under = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(x, _mm512_set1_ps(LO));
    let nan = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(x, x);
    let y = _mm512_mask_blend_ps(over, y, _mm512_set1_ps(f32::INFINITY));
    let y = _mm512_mask_blend_ps(under, y, _mm512_setzero_ps());
    _mm512_mask_blend_ps(nan, y, x)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every lane within 2 ulp of the true value where the portable form is,
    /// and the same edges: 0 under LO, +inf over HI, NaN kept.
    #[test]
    fn sixteen_lanes_match_the_portable_exp() {
        if !std::arch::is_x86_feature_detected!("avx512f") {
            return;
        }
        let mut xs: Vec<f32> = (0..40_000).map(|i| LO - 3.0 + i as f32 * 0.0046).collect();
        xs.extend([
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            0.0,
            -0.0,
            HI,
            LO,
            100.0,
        ]);
        xs.resize(xs.len().next_multiple_of(16), 1.0);
        for c in xs.chunks_exact(16) {
            let mut got = [0f32; 16];
            // SAFETY: AVX-512F checked above; 16 values each.
            unsafe { _mm512_storeu_ps(got.as_mut_ptr(), exp16(_mm512_loadu_ps(c.as_ptr()))) };
            for (&x, &y) in c.iter().zip(&got) {
                let want = super::super::exp(x);
                if want.is_nan() || want == 0.0 || want.is_infinite() {
                    assert!(
                        y.to_bits() == want.to_bits() || (y.is_nan() && want.is_nan()),
                        "{x}"
                    );
                    continue;
                }
                let truth = f64::from(x).exp();
                assert!(
                    ((f64::from(y) - truth) / truth).abs() < 3e-7,
                    "{x}: {y} against {truth}"
                );
                assert!(y.is_normal(), "{x}: {y:e}");
            }
        }
    }
}
