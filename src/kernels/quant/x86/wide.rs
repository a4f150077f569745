//! The 32-value blocks sixteen weight rows at a time, in AVX-512's 512-bit
//! registers: [`group_pair`], the AVX512-VNNI tier's kernel for a prompt
//! chunk and a decode step alike (the k-quants and a last odd group stay in
//! 256 bits, [`super::group`]).

use std::arch::x86_64::*;

use super::super::act::{Q8, QK};
use super::{prefetch_ahead, Packed32, Vnni512};

/// Sixteen weight rows, two packed groups at `w0` and `w1`, against `R`
/// activation rows from `r0`, in 512-bit registers: [`super::group`] with each
/// register's low half from the first group and its high half from the
/// second. One `vpdpbusd` then multiplies sixteen rows' four values by the
/// same four activations, so every activation load, every conversion and
/// every scale multiply serves twice the weights: on the Xeon this was
/// measured on, a 256-bit `vpdpbusd` and a 512-bit one each issue about
/// twice a cycle, and the 256-bit loop was held by the instructions around
/// its dot products, not by the weights' bytes.
///
/// # Safety
/// The CPU has AVX512F, AVX512BW and AVX512-VNNI; `w0` and `w1` point at
/// whole packed groups of `a.blocks` blocks of `B`; rows `r0..r0 + R` of `a`
/// exist.
#[inline(always)]
pub(in crate::kernels::quant) unsafe fn group_pair<B: Packed32, const R: usize>(
    w0: *const u8,
    w1: *const u8,
    a: &Q8,
    r0: usize,
) -> [[f32; 16]; R] {
    let (nb, gb) = (a.blocks, 8 * B::KIND.bytes());
    let zero = unsafe { _mm512_setzero_ps() };
    let (mut sum, mut corr) = ([zero; R], [zero; R]);
    let sums = if B::SUM16 { &a.s16 } else { &a.s };
    let join = |lo: __m256i, hi: __m256i| unsafe {
        _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi)
    };
    let join_ps = |lo: __m256, hi: __m256| unsafe {
        let lo = _mm512_castpd256_pd512(_mm256_castps_pd(lo));
        _mm512_castpd_ps(_mm512_insertf64x4::<1>(lo, _mm256_castps_pd(hi)))
    };
    for b in 0..nb {
        // SAFETY: block b of both groups exists (b < nb), and so do block b
        // of the activation rows (the caller's rows); a prefetch past a
        // group's end reads nothing.
        unsafe {
            let (p0, p1) = (w0.add(b * gb), w1.add(b * gb));
            prefetch_ahead(p0, gb);
            prefetch_ahead(p1, gb);
            let (v0, v1) = (B::values::<Vnni512>(p0), B::values::<Vnni512>(p1));
            let v: [__m512i; 8] = std::array::from_fn(|c| join(v0[c], v1[c]));
            let ((d0, c0), (d1, c1)) = (B::scales::<Vnni512>(p0), B::scales::<Vnni512>(p1));
            let (d, c) = (join_ps(d0, d1), join_ps(c0, c1));
            for r in 0..R {
                let i = (r0 + r) * nb + b;
                let x = a.qs.as_ptr().add(i * QK).cast::<i32>();
                let mut acc = [_mm512_setzero_si512(); 2];
                for (k, &v) in v.iter().enumerate() {
                    let xb = _mm512_set1_epi32(x.add(k).read_unaligned());
                    acc[k / 4] = _mm512_dpbusd_epi32(acc[k / 4], v, xb);
                }
                let p = _mm512_add_epi32(acc[0], acc[1]);
                let dx = _mm512_set1_ps(*a.d.as_ptr().add(i));
                let sx = _mm512_set1_ps(*sums.as_ptr().add(i));
                sum[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(d, dx), sum[r]);
                corr[r] = _mm512_fmadd_ps(c, sx, corr[r]);
            }
        }
    }
    std::array::from_fn(|r| {
        let mut out = [0f32; 16];
        // SAFETY: `out` holds sixteen f32.
        unsafe { _mm512_storeu_ps(out.as_mut_ptr(), _mm512_add_ps(sum[r], corr[r])) };
        out
    })
}
