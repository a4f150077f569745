//! a + b with AVX-512: at 16 bits sixteen values of each input converted in
//! a register ([`Lanes16`]), added, and rounded back on the way out; in f32
//! past the last cache with non-temporal stores ([`add_streaming`]). The
//! portable kernel (in `add.rs`) widens both inputs through f32 buffers and
//! narrows through a third, whose extra stores and loads held bf16 at 8.4 G
//! elements/s on the Xeon VM's two cores with its data in L2: compute-bound
//! on them in the large case (docs/kernels.md).

use std::arch::x86_64::*;
use std::mem::MaybeUninit;

use crate::kernels::ahead::ahead;
use crate::kernels::cpu::x86::{native_bf16, Lanes16};

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
    let native = native_bf16();
    for i in (0..whole).step_by(16) {
        // The streams' lines ahead asked for, as the ladder's triad does.
        ahead(pa.wrapping_add(i));
        ahead(pb.wrapping_add(i));
        ahead(pz.wrapping_add(i));
        // SAFETY: i + 16 <= whole <= the length of each (asserted).
        unsafe {
            let s = _mm512_add_ps(E::load16(pa.add(i)), E::load16(pb.add(i)));
            E::store16_as(s, pz.add(i), native);
        }
    }
    super::into(&a[whole..], &b[whole..], &mut z[whole..]);
}

/// a + b into `z` (all three the same length) in f32, the whole 64-byte
/// lines of `z` stored non-temporally (`vmovntps`: to memory through the
/// write-combining buffers, not read for ownership, not kept in a cache);
/// the elements before `z`'s first line boundary and after its last whole
/// register the ordinary way (the instruction takes aligned addresses
/// only). A store fence ends it: such stores are weakly ordered, and the
/// op's caller (another thread, once the pool's task returns) reads them.
///
/// # Safety
/// This CPU has AVX-512F.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn add_streaming(a: &[f32], b: &[f32], z: &mut [MaybeUninit<f32>]) {
    assert!(a.len() == z.len() && b.len() == z.len());
    let n = z.len();
    let head = z.as_ptr().align_offset(64).min(n);
    let whole = head + (n - head) / 16 * 16;
    super::into(&a[..head], &b[..head], &mut z[..head]);
    let (pa, pb, pz) = (a.as_ptr(), b.as_ptr(), z.as_mut_ptr().cast::<f32>());
    for i in (head..whole).step_by(16) {
        // SAFETY: i + 16 <= whole <= the length of each (asserted); z + i
        // is 64-byte aligned (z + head is, and i - head is a multiple of 16
        // f32), as `_mm512_stream_ps` requires.
        unsafe {
            let s = _mm512_add_ps(_mm512_loadu_ps(pa.add(i)), _mm512_loadu_ps(pb.add(i)));
            _mm512_stream_ps(pz.add(i), s);
        }
    }
    _mm_sfence();
    super::into(&a[whole..], &b[whole..], &mut z[whole..]);
}
