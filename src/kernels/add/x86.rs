//! a + b at 16 bits with AVX-512: sixteen values of each input converted in
//! a register ([`Lanes16`]), added, and rounded back on the way out. The
//! portable kernel (in `add.rs`) widens both inputs through f32 buffers and
//! narrows through a third, whose extra stores and loads held bf16 at 8.4 G
//! elements/s on the Xeon VM's two cores with its data in L2: compute-bound
//! on them in the large case (docs/kernels.md).

use std::arch::x86_64::*;
use std::mem::MaybeUninit;

use crate::kernels::cpu::x86::Lanes16;

/// a + b into `z` (all three the same length), whole registers of sixteen;
/// the tail of under sixteen the portable kernel's (the same bits: both
/// add in f32 and round once).
///
/// # Safety
/// This CPU has AVX-512F.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn add<E: Lanes16>(a: &[E], b: &[E], z: &mut [MaybeUninit<E>]) {
    assert!(a.len() == z.len() && b.len() == z.len());
    let whole = z.len() / 16 * 16;
    let (pa, pb, pz) = (a.as_ptr(), b.as_ptr(), z.as_mut_ptr().cast::<E>());
    for i in (0..whole).step_by(16) {
        // SAFETY: i + 16 <= whole <= the length of each (asserted).
        unsafe {
            let s = _mm512_add_ps(E::load16(pa.add(i)), E::load16(pb.add(i)));
            E::store16(s, pz.add(i));
        }
    }
    super::into(&a[whole..], &b[whole..], &mut z[whole..]);
}
