//! A pass's weight rows on x86: the instruction set's entry points (each
//! built with its features, so the kernels of [`super`] inline into it),
//! and the walk over the rows of a range, a tile of activation rows at a
//! time: packed groups in pairs where the CPU has 512-bit registers
//! ([`super::wide::group_pair`]), one at a time otherwise, and the stored
//! Q6_K rows one by one.

use std::ops::Range;

use super::wide::{group_pair, WIDE as WIDE_TILE};
use super::{q2k_q3k, q32, q4k_q5k, q6k, Avx2, AvxVnni, Int, Vnni512};
use crate::kernels::quant::act::{Q8, Q8K};
use crate::kernels::quant::blocks::Kind;
use crate::kernels::quant::packed::{Packed, ROWS};
use crate::kernels::quant::{groups, Acts, Pass, Work, TILE};

impl Pass<'_> {
    /// # Safety
    /// The CPU has AVX2, FMA, F16C, AVX512F, AVX512BW, AVX512-VNNI and
    /// AVX512-VL.
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vnni,avx512vl")]
    pub(in crate::kernels::quant) unsafe fn vnni512(&self, rows: Range<usize>) {
        self.walk::<Vnni512>(rows)
    }

    /// # Safety
    /// The CPU has AVX2, FMA, F16C and AVX-VNNI.
    #[target_feature(enable = "avx2,fma,f16c,avxvnni")]
    pub(in crate::kernels::quant) unsafe fn avx_vnni(&self, rows: Range<usize>) {
        self.walk::<AvxVnni>(rows)
    }

    /// # Safety
    /// The CPU has AVX2, FMA and F16C.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(in crate::kernels::quant) unsafe fn avx2(&self, rows: Range<usize>) {
        self.walk::<Avx2>(rows)
    }

    /// Each weight row of `rows` against the activations, [`TILE`]
    /// activation rows at a time, then one at a time.
    #[inline(always)]
    fn walk<I: Int>(&self, rows: Range<usize>) {
        match &self.work {
            Work::Packed(p, a) => {
                let mut gs = groups(&rows);
                if let (true, Acts::Q8(a)) = (I::WIDE, a) {
                    while gs.len() >= 2 {
                        self.pair(p, a, gs.start);
                        gs.start += 2;
                    }
                }
                for gi in gs {
                    let w = p.group(gi).as_ptr();
                    let mut r = 0;
                    while r + TILE <= self.m {
                        self.write_group(r, gi, Self::group::<I, TILE>(p.kind, w, a, r));
                        r += TILE;
                    }
                    while r < self.m {
                        self.write_group(r, gi, Self::group::<I, 1>(p.kind, w, a, r));
                        r += 1;
                    }
                }
            }
            Work::Stored(kind, w, a) => {
                let bytes = self.op.k / kind.values() * kind.bytes();
                for j in rows {
                    let w = w[j * bytes..(j + 1) * bytes].as_ptr();
                    let mut r = 0;
                    while r + TILE <= self.m {
                        self.write(r, j, Self::q6k_tile::<I, TILE>(w, a, r));
                        r += TILE;
                    }
                    while r < self.m {
                        self.write(r, j, Self::q6k_tile::<I, 1>(w, a, r));
                        r += 1;
                    }
                }
            }
        }
    }

    /// Packed groups `gi` and `gi + 1` against every activation row, in
    /// 512-bit registers ([`group_pair`]), [`WIDE_TILE`] rows a tile,
    /// then [`TILE`], then one; only where [`Int::WIDE`], inside
    /// [`Pass::vnni512`].
    #[inline(always)]
    fn pair(&self, p: &Packed, a: &Q8, gi: usize) {
        let (w0, w1) = (p.group(gi).as_ptr(), p.group(gi + 1).as_ptr());
        let mut r = 0;
        while r + WIDE_TILE <= self.m {
            self.write_pair(r, gi, Self::group_pair::<WIDE_TILE>(p.kind, w0, w1, a, r));
            r += WIDE_TILE;
        }
        while r + TILE <= self.m {
            self.write_pair(r, gi, Self::group_pair::<TILE>(p.kind, w0, w1, a, r));
            r += TILE;
        }
        while r < self.m {
            self.write_pair(r, gi, Self::group_pair::<1>(p.kind, w0, w1, a, r));
            r += 1;
        }
    }

    /// Groups `gi` and `gi + 1`'s outputs: each row's sixteen in one copy
    /// where both groups are whole (they lie side by side in the output).
    fn write_pair<const R: usize>(&self, r0: usize, gi: usize, v: [[f32; 2 * ROWS]; R]) {
        let n = self.op.n;
        if (gi + 2) * ROWS <= n {
            for (r, v) in v.iter().enumerate() {
                let at = (self.row0 + r0 + r) * n + gi * ROWS;
                // SAFETY: outputs (row0 + r0 + r, 8 gi .. 8 gi + 16) are this
                // task's: groups gi and gi + 1 are in its range.
                unsafe { self.out.write_array(at, v) };
            }
            return;
        }
        let half = |h: usize| -> [[f32; ROWS]; R] {
            std::array::from_fn(|r| std::array::from_fn(|j| v[r][h * ROWS + j]))
        };
        self.write_group(r0, gi, half(0));
        self.write_group(r0, gi + 1, half(1));
    }

    #[inline(always)]
    fn group_pair<const R: usize>(
        kind: Kind,
        w0: *const u8,
        w1: *const u8,
        a: &Q8,
        r0: usize,
    ) -> [[f32; 2 * ROWS]; R] {
        // SAFETY: called only from `pair`, inside `vnni512` (AVX512F, BW and
        // VNNI checked by the tier); `w0` and `w1` are whole packed groups;
        // rows r0..r0 + R of the activations exist (r0 + R <= m).
        unsafe {
            match kind {
                Kind::Q8_0 => group_pair::<q32::Q8_0, R>(w0, w1, a, r0),
                Kind::Q4_0 => group_pair::<q32::Q4_0, R>(w0, w1, a, r0),
                Kind::Q4_1 => group_pair::<q32::Q4_1, R>(w0, w1, a, r0),
                Kind::Q5_0 => group_pair::<q32::Q5_0, R>(w0, w1, a, r0),
                _ => group_pair::<q32::Q5_1, R>(w0, w1, a, r0),
            }
        }
    }

    #[inline(always)]
    fn group<I: Int, const R: usize>(
        kind: Kind,
        w: *const u8,
        a: &Acts,
        r0: usize,
    ) -> [[f32; ROWS]; R] {
        // SAFETY: `w` is a whole packed group (`Packed::group`); rows
        // r0..r0 + R of the activations exist (r0 + R <= m).
        unsafe {
            match (a, kind) {
                (Acts::Q8K(a), Kind::Q2K) => q2k_q3k::group_q2k::<I, R>(w, a, r0),
                (Acts::Q8K(a), Kind::Q3K) => q2k_q3k::group_q3k::<I, R>(w, a, r0),
                (Acts::Q8K(a), Kind::Q4K) => q4k_q5k::group_q4k_q5k::<I, false, R>(w, a, r0),
                (Acts::Q8K(a), _) => q4k_q5k::group_q4k_q5k::<I, true, R>(w, a, r0),
                (Acts::Q8(a), Kind::Q8_0) => q32::group::<I, q32::Q8_0, R>(w, a, r0),
                (Acts::Q8(a), Kind::Q4_0) => q32::group::<I, q32::Q4_0, R>(w, a, r0),
                (Acts::Q8(a), Kind::Q4_1) => q32::group::<I, q32::Q4_1, R>(w, a, r0),
                (Acts::Q8(a), Kind::Q5_0) => q32::group::<I, q32::Q5_0, R>(w, a, r0),
                (Acts::Q8(a), _) => q32::group::<I, q32::Q5_1, R>(w, a, r0),
            }
        }
    }

    #[inline(always)]
    fn q6k_tile<I: Int, const R: usize>(w: *const u8, a: &Q8K, r0: usize) -> [f32; R] {
        // SAFETY: `w` is a whole row of blocks (sliced in `walk`); rows
        // r0..r0 + R of the activations exist (r0 + R <= m).
        unsafe { q6k::row_q6k::<I, R>(w, a, r0) }
    }
}
