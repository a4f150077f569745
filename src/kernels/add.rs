//! Element-wise a + b.
//!
//! The idea that makes it fast: nothing but the three transfers the math
//! needs, at full width. Each thread adds a contiguous share of the elements a
//! block at a time in f32 (16-bit inputs widened by F16C or a shift, the sum
//! rounded once), writing straight into the output, which is allocated
//! uninitialized (see [`super::cpu`]): no zeroing pass; above 64 MiB on huge
//! pages, 512 times fewer page faults. Where an f32 output of contiguous
//! inputs is larger than the last cache, it is stored non-temporally
//! (AVX-512's `vmovntps`, as `memcpy` stores a copy past its size): its
//! lines are not read for ownership first, three transfers an element where
//! ordinary stores make four. On a GPU 16 bytes
//! per load and store from each thread (`cuda/add.cu`).

use std::mem::MaybeUninit;

use candle_core::{Result, Tensor};

use super::binary::Binary;
use super::cpu::{simd_kernel, Elem};

#[cfg(target_arch = "x86_64")]
mod x86;

/// Whether [`add`] of `n` contiguous f32 elements on this CPU stores
/// non-temporally (AVX-512, its output past the last cache): what its
/// bound is held to.
pub fn add_streams(n: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    let streaming = std::arch::is_x86_feature_detected!("avx512f");
    #[cfg(not(target_arch = "x86_64"))]
    let streaming = false;
    streaming && super::binary::past_caches(n)
}

/// a + b element-wise, computed in f32; `a` and `b` have one shape and one
/// dtype (no broadcasting).
pub fn add(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    OP.apply(a, b)
}

static OP: Binary = Binary {
    name: "lab-add",
    op: "add",
    // 32 Ki, so that from 64 Ki elements on (where Candle's own element-wise
    // ops share their work too) both threads add.
    min_task: 32 << 10,
    f32: into::<f32>,
    f32_streaming: STREAMING,
    f16: sixteen::<half::f16>,
    bf16: sixteen::<half::bf16>,
    #[cfg(feature = "cuda")]
    module: &super::launch::ADD,
};

/// a + b in f32 with non-temporal stores on x86-64 ([`streaming`] checks
/// for AVX-512 at each call; without it the stores stay ordinary).
#[cfg(target_arch = "x86_64")]
const STREAMING: Option<super::binary::Block<f32>> = Some(streaming);
#[cfg(not(target_arch = "x86_64"))]
const STREAMING: Option<super::binary::Block<f32>> = None;

/// a + b into `z` with non-temporal stores: AVX-512's where this CPU has
/// it, else the ordinary kernel.
#[cfg(target_arch = "x86_64")]
fn streaming(a: &[f32], b: &[f32], z: &mut [MaybeUninit<f32>]) {
    if std::arch::is_x86_feature_detected!("avx512f") {
        // SAFETY: this CPU has AVX-512F, which x86::add_streaming needs.
        unsafe { x86::add_streaming(a, b, z) }
    } else {
        into(a, b, z)
    }
}

/// a + b at 16 bits: AVX-512's (`add/x86.rs`: conversions in registers)
/// where this CPU has it, else the portable kernel.
#[cfg(target_arch = "x86_64")]
fn sixteen<E: crate::kernels::cpu::x86::Lanes16>(a: &[E], b: &[E], z: &mut [MaybeUninit<E>]) {
    if std::arch::is_x86_feature_detected!("avx512f") {
        // SAFETY: this CPU has AVX-512F, which x86::add needs.
        unsafe { x86::add(a, b, z) }
    } else {
        into(a, b, z)
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn sixteen<E: Elem>(a: &[E], b: &[E], z: &mut [MaybeUninit<E>]) {
    into(a, b, z)
}

simd_kernel! {
    /// a + b into `z`, in f32.
    fn into<E: Elem>(a: &[E], b: &[E], z: &mut [MaybeUninit<E>]) {
        E::map2(a, b, z, |x, y| x + y);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::{bf16, f16};

    /// The 16-bit add this CPU picks (AVX-512's where it has it) gives the
    /// portable kernel's bits, at lengths around a register and odd ones:
    /// both add in f32 and round once. The integration tests reach only the
    /// one picked.
    #[cfg(target_arch = "x86_64")]
    use crate::kernels::cpu::x86::Lanes16 as Sixteen;
    #[cfg(not(target_arch = "x86_64"))]
    use Elem as Sixteen;

    fn same_bits<E: Sixteen>(to: fn(f32) -> E) {
        for n in [1, 15, 16, 17, 33, 255, 256, 1000, 4099] {
            let a: Vec<E> = (0..n)
                .map(|i| to((i as f32 * 0.37).sin() * 300.0))
                .collect();
            let b: Vec<E> = (0..n).map(|i| to((i as f32 * 0.11).cos() * 0.01)).collect();
            let (mut x, mut y) = (
                vec![MaybeUninit::uninit(); n],
                vec![MaybeUninit::uninit(); n],
            );
            sixteen(&a, &b, &mut x);
            into(&a, &b, &mut y);
            for (i, (x, y)) in x.iter().zip(&y).enumerate() {
                // SAFETY: both kernels write every element.
                let (x, y) = unsafe { (x.assume_init(), y.assume_init()) };
                assert_eq!(
                    x.to_f64().to_bits(),
                    y.to_f64().to_bits(),
                    "length {n} at {i}"
                );
            }
        }
    }

    /// The non-temporal f32 add gives the ordinary one's bits at every
    /// start within a 64-byte line and lengths around a register's (its
    /// head and tail are stored the ordinary way).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_streaming_add_gives_the_ordinary_bits() {
        let a: Vec<f32> = (0..300).map(|i| (i as f32 * 0.37).sin() * 300.0).collect();
        let b: Vec<f32> = (0..300).map(|i| (i as f32 * 0.11).cos()).collect();
        for start in 0..16 {
            for n in [0, 1, 15, 16, 17, 47, 64, 255, 283] {
                let (a, b) = (&a[start..start + n], &b[start..start + n]);
                let mut x = vec![MaybeUninit::uninit(); 300];
                let x = &mut x[start..start + n];
                streaming(a, b, x);
                for (i, x) in x.iter().enumerate() {
                    // SAFETY: the kernel writes every element.
                    let x = unsafe { x.assume_init() };
                    assert_eq!(x.to_bits(), (a[i] + b[i]).to_bits(), "{start} {n} at {i}");
                }
            }
        }
    }

    #[test]
    fn the_picked_16_bit_add_gives_the_portable_bits() {
        same_bits::<f16>(f16::from_f32);
        same_bits::<bf16>(bf16::from_f32);
    }
}
