//! SwiGLU with AVX-512: sixteen values of gate and up loaded as f32
//! ([`Lanes16`]), silu(gate) * up = gate / (1 + exp(-gate)) * up with the
//! fused [`exp16`], and rounded back on the way out. The portable kernel
//! (in `swiglu.rs`) widens and narrows through f32 buffers and takes
//! [`crate::kernels::exp`]'s unfused form, about twice the instructions:
//! SwiGLU is exp-bound on the CPU (docs/kernels.md).

use std::arch::x86_64::*;
use std::mem::MaybeUninit;

use crate::kernels::ahead::ahead;
use crate::kernels::cpu::x86::{native_bf16, Lanes16};
use crate::kernels::exp::x86::exp16;

/// silu(gate) * up into `y` (all three the same length), sixteen at a time.
///
/// # Safety
/// This CPU has AVX-512F.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn swiglu<E: Lanes16>(gate: &[E], up: &[E], y: &mut [MaybeUninit<E>]) {
    assert!(gate.len() == y.len() && up.len() == y.len());
    let whole = y.len() / 16 * 16;
    let (pg, pu, py) = (gate.as_ptr(), up.as_ptr(), y.as_mut_ptr().cast::<E>());
    let native = native_bf16();
    for i in (0..whole).step_by(16) {
        // The streams' lines ahead asked for, as the ladder's triad does
        // (past the caches 80% of its bound without, f32, the f6m207 Xeon VM).
        ahead(pg.wrapping_add(i));
        ahead(pu.wrapping_add(i));
        ahead(py.wrapping_add(i));
        // SAFETY: i + 16 <= whole <= the length of each (asserted).
        unsafe {
            E::store16_as(
                silu_mul(E::load16(pg.add(i)), E::load16(pu.add(i))),
                py.add(i),
                native,
            )
        };
    }
    if whole < y.len() {
        // The tail through a register too: every element's exponential is
        // [`exp16`]'s, wherever a row or a thread's share cuts the run (the
        // portable exp differs from it by an ulp or two).
        let zero = E::from_f64(0.0);
        // SAFETY: AVX-512F (the caller's).
        unsafe {
            let (g, u) = (
                E::load_part(&gate[whole..], zero),
                E::load_part(&up[whole..], zero),
            );
            E::store_part(silu_mul(g, u), &mut y[whole..]);
        }
    }
}

/// gate / (1 + exp(-gate)) * up.
#[inline]
#[target_feature(enable = "avx512f")]
fn silu_mul(g: __m512, u: __m512) -> __m512 {
    // SAFETY: AVX-512F, this function's own.
    let e = unsafe { exp16(_mm512_sub_ps(_mm512_setzero_ps(), g)) };
    _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0), e)), u)
}
