//! The 32-value blocks sixteen weight rows at a time, in AVX-512's 512-bit
//! registers: [`group_pair`], the AVX512-VNNI tier's kernel for a prompt
//! chunk and a decode step alike (the k-quants and a last odd group stay in
//! 256 bits, [`super::q32::group`]).

use std::arch::x86_64::*;

use super::q32::Packed32;
use super::{ahead_lines, Vnni512};
use crate::kernels::quant::act::{Q8, QK};

/// Activation rows per tile of [`group_pair`] where a prompt chunk has that
/// many: each unpacked block of sixteen weight rows meets eight activation
/// rows, one chain of multiply-adds each, in the 32 registers. The
/// unpacking (masks, shifts, joining the halves, the scales' conversions)
/// issues on the two ports the multiply-adds do, and is paid once per tile.
/// On the Xeon this was measured on (f6m207, 2 threads, `just kernels
/// --ops matvec --tokens 16`, A B runs), SmolLM2's q4_1 head at sixteen
/// rows went from 2.21-2.28 ms to 1.87-1.95; a copy of the kernel alone
/// (one thread, weights in L2) ran 1.3x the `vpdpbusd`s a second of four rows.
pub(in crate::kernels::quant) const WIDE: usize = 8;

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
    for b in 0..nb {
        // SAFETY: block b of both groups exists (b < nb), and so do block b
        // of the activation rows (the caller's rows); a prefetch past a
        // group's end reads nothing.
        unsafe {
            let (p0, p1) = (w0.add(b * gb), w1.add(b * gb));
            ahead_lines(p0, gb);
            ahead_lines(p1, gb);
            let (v0, v1) = (B::values::<Vnni512>(p0), B::values::<Vnni512>(p1));
            let mut v = [_mm512_setzero_si512(); 8];
            for (c, v) in v.iter_mut().enumerate() {
                *v = join(v0[c], v1[c]);
            }
            let ((d0, c0), (d1, c1)) = (B::scales::<Vnni512>(p0), B::scales::<Vnni512>(p1));
            let (d, c) = (join_ps(d0, d1), join_ps(c0, c1));
            // The rows' multiply-adds interleaved (k outer, rows inner): at
            // WIDE rows, one chain a row is eight independent chains side by
            // side, and the registers a second chain a row would take hold
            // the tile; two chains a row where fewer. Integer sums: how they
            // are split changes no bit.
            let mut xs = [std::ptr::null::<i32>(); R];
            for (r, x) in xs.iter_mut().enumerate() {
                *x = a.qs.as_ptr().add(((r0 + r) * nb + b) * QK).cast();
            }
            let mut acc = [[_mm512_setzero_si512(); 2]; R];
            for (k, &v) in v.iter().enumerate() {
                let chain = if R >= WIDE { 0 } else { k / 4 };
                for r in 0..R {
                    let xb = _mm512_set1_epi32(xs[r].add(k).read_unaligned());
                    acc[r][chain] = _mm512_dpbusd_epi32(acc[r][chain], v, xb);
                }
            }
            for r in 0..R {
                let p = _mm512_add_epi32(acc[r][0], acc[r][1]);
                let dx = _mm512_set1_ps(*a.d.as_ptr().add((r0 + r) * nb + b));
                sum[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(d, dx), sum[r]);
                if R < WIDE {
                    let sx = _mm512_set1_ps(*sums.as_ptr().add((r0 + r) * nb + b));
                    corr[r] = _mm512_fmadd_ps(c, sx, corr[r]);
                }
            }
        }
    }
    // At eight rows, what the weights subtract meets the activation
    // blocks' sums in a pass of its own: in the loop above, its eight
    // accumulators would not fit the 32 registers beside the rows' sums and
    // the weights (the same multiply-adds in the same order: the same bits).
    for b in (0..nb).filter(|_| R >= WIDE) {
        // SAFETY: as above.
        unsafe {
            let (p0, p1) = (w0.add(b * gb), w1.add(b * gb));
            let ((_, c0), (_, c1)) = (B::scales::<Vnni512>(p0), B::scales::<Vnni512>(p1));
            let c = join_ps(c0, c1);
            for (r, corr) in corr.iter_mut().enumerate() {
                let sx = _mm512_set1_ps(*sums.as_ptr().add((r0 + r) * nb + b));
                *corr = _mm512_fmadd_ps(c, sx, *corr);
            }
        }
    }
    let mut out = [[0f32; 16]; R];
    for (r, o) in out.iter_mut().enumerate() {
        // SAFETY: `o` holds sixteen f32.
        unsafe { _mm512_storeu_ps(o.as_mut_ptr(), _mm512_add_ps(sum[r], corr[r])) };
    }
    out
}

/// One 512-bit register of `lo` and `hi`.
///
/// # Safety
/// The CPU has AVX512F.
#[inline(always)]
unsafe fn join(lo: __m256i, hi: __m256i) -> __m512i {
    unsafe { _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi) }
}

/// [`join`] for floats.
///
/// # Safety
/// As [`join`].
#[inline(always)]
unsafe fn join_ps(lo: __m256, hi: __m256) -> __m512 {
    unsafe {
        let lo = _mm512_castpd256_pd512(_mm256_castps_pd(lo));
        _mm512_castpd_ps(_mm512_insertf64x4::<1>(lo, _mm256_castps_pd(hi)))
    }
}
