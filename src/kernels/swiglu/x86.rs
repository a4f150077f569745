//! SwiGLU with AVX-512: sixteen values of gate and up loaded as f32
//! ([`Lanes16`]), silu(gate) * up = gate / (1 + exp(-gate)) * up with the
//! fused [`exp16`], and rounded back on the way out. The portable kernel
//! (in `swiglu.rs`) widens and narrows through f32 buffers and takes
//! [`crate::kernels::exp`]'s unfused form, about twice the instructions:
//! SwiGLU is exp-bound on the CPU (docs/kernels.md).

use std::arch::x86_64::*;
use std::mem::MaybeUninit;

use crate::kernels::cpu::x86::Lanes16;
use crate::kernels::exp::x86::exp16;

/// silu(gate) * up into `y` (all three the same length), whole registers
/// of sixteen; the tail of under sixteen the portable kernel's.
///
/// # Safety
/// This CPU has AVX-512F.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn swiglu<E: Lanes16>(gate: &[E], up: &[E], y: &mut [MaybeUninit<E>]) {
    assert!(gate.len() == y.len() && up.len() == y.len());
    let whole = y.len() / 16 * 16;
    let (pg, pu, py) = (gate.as_ptr(), up.as_ptr(), y.as_mut_ptr().cast::<E>());
    let one = _mm512_set1_ps(1.0);
    for i in (0..whole).step_by(16) {
        // SAFETY: i + 16 <= whole <= the length of each (asserted).
        unsafe {
            let (g, u) = (E::load16(pg.add(i)), E::load16(pu.add(i)));
            let e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), g));
            let silu = _mm512_div_ps(g, _mm512_add_ps(one, e));
            E::store16(_mm512_mul_ps(silu, u), py.add(i));
        }
    }
    super::into(&gate[whole..], &up[whole..], &mut y[whole..]);
}
