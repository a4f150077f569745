//! A pass's weight rows on x86: the instruction sets' entry points (each
//! family of kernels built with the tier's features, so that the kernels of
//! [`super`] inline into it), and the walks over the rows of a range, a
//! tile of activation rows at a time: the 32-value blocks' groups in pairs
//! where the CPU has 512-bit registers ([`super::wide::group_pair`]), the
//! packed groups one at a time otherwise, and the stored Q6_K rows one by
//! one.

use std::ops::Range;

use super::wide::{group_pair, WIDE as WIDE_TILE};
use super::{q2k_q3k, q32, q4k_q5k, q6k, Avx2, AvxVnni, Int, Vnni512};
use crate::kernels::quant::act::{Q8, Q8K};
use crate::kernels::quant::blocks::Kind;
use crate::kernels::quant::packed::{Packed, ROWS};
use crate::kernels::quant::{groups, Acts, Pass, Work, TILE};

/// A tier's entry point, `$tier`, and its three families of kernels, each
/// in a function of its own built with the tier's features (so that the
/// kernels inline into it): the 32-value blocks, the repacked k-quants and
/// the stored Q6_K rows. With ten types, one function held every kernel of
/// a tier (37 KiB of code for AVX-512), and a kernel's code moves with what
/// the compiler puts beside it (see `super`'s note on closures); apart, each
/// family is the size it was with five types. Measured on one thread in L2
/// (Xeon VM, best of 2 ms samples): Q4_K 12.8 to 12.3 us, the others within
/// their noise.
macro_rules! tier {
    ($tier:ident, $features:literal, $I:ty, $q32:ident, $kq:ident, $stored:ident) => {
        /// # Safety
        /// The CPU has the tier's instructions (`$features`).
        pub(in crate::kernels::quant) unsafe fn $tier(&self, rows: Range<usize>) {
            // SAFETY: the caller's: the CPU has the features each is built with.
            unsafe {
                match &self.work {
                    Work::Packed(p, Acts::Q8(a)) => self.$q32(p, a, rows),
                    Work::Packed(p, Acts::Q8K(a)) => self.$kq(p, a, rows),
                    Work::Stored(kind, w, a) => self.$stored(*kind, w, a, rows),
                }
            }
        }

        #[target_feature(enable = $features)]
        #[inline(never)]
        unsafe fn $q32(&self, p: &Packed, a: &Q8, rows: Range<usize>) {
            self.walk_q32::<$I>(p, a, rows)
        }

        #[target_feature(enable = $features)]
        #[inline(never)]
        unsafe fn $kq(&self, p: &Packed, a: &Q8K, rows: Range<usize>) {
            self.walk_packed::<$I, Q8K>(p, a, rows)
        }

        #[target_feature(enable = $features)]
        #[inline(never)]
        unsafe fn $stored(&self, kind: Kind, w: &[u8], a: &Q8K, rows: Range<usize>) {
            self.walk_stored::<$I>(kind, w, a, rows)
        }
    };
}

impl Pass<'_> {
    tier!(
        vnni512,
        "avx2,fma,f16c,avx512f,avx512bw,avx512vnni,avx512vl",
        Vnni512,
        q32_vnni512,
        kq_vnni512,
        stored_vnni512
    );
    tier!(
        avx_vnni,
        "avx2,fma,f16c,avxvnni",
        AvxVnni,
        q32_avx_vnni,
        kq_avx_vnni,
        stored_avx_vnni
    );
    tier!(avx2, "avx2,fma,f16c", Avx2, q32_avx2, kq_avx2, stored_avx2);

    /// The 32-value blocks' groups of `rows`: in pairs where the CPU has
    /// 512-bit registers, then one at a time.
    #[inline(always)]
    fn walk_q32<I: Int>(&self, p: &Packed, a: &Q8, rows: Range<usize>) {
        let mut gs = groups(&rows);
        if I::WIDE {
            while gs.len() >= 2 {
                self.pair(p, a, gs.start);
                gs.start += 2;
            }
        }
        self.walk_packed::<I, Q8>(p, a, gs.start * ROWS..rows.end);
    }

    /// Each packed group of `rows` against the activations, [`TILE`]
    /// activation rows at a time, then one at a time.
    #[inline(always)]
    fn walk_packed<I: Int, A: Group>(&self, p: &Packed, a: &A, rows: Range<usize>) {
        for gi in groups(&rows) {
            let w = p.group(gi).as_ptr();
            let mut r = 0;
            while r + TILE <= self.m {
                // SAFETY: `w` is a whole packed group (`Packed::group`);
                // rows r..r + TILE of the activations exist.
                self.write_group(r, gi, unsafe { a.group::<I, TILE>(p.kind, w, r) });
                r += TILE;
            }
            while r < self.m {
                // SAFETY: as above, row r.
                self.write_group(r, gi, unsafe { a.group::<I, 1>(p.kind, w, r) });
                r += 1;
            }
        }
    }

    /// Each stored Q6_K row of `rows` against the activations, [`TILE`]
    /// activation rows at a time, then one at a time.
    #[inline(always)]
    fn walk_stored<I: Int>(&self, kind: Kind, w: &[u8], a: &Q8K, rows: Range<usize>) {
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

    /// Packed groups `gi` and `gi + 1` against every activation row, in
    /// 512-bit registers ([`group_pair`]), [`WIDE_TILE`] rows a tile,
    /// then [`TILE`], then one; only where [`Int::WIDE`], inside
    /// `q32_vnni512`.
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
        // SAFETY: called only from `pair`, inside `q32_vnni512` (AVX512F, BW and
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
    fn q6k_tile<I: Int, const R: usize>(w: *const u8, a: &Q8K, r0: usize) -> [f32; R] {
        // SAFETY: `w` is a whole row of blocks (sliced in `walk`); rows
        // r0..r0 + R of the activations exist (r0 + R <= m).
        unsafe { q6k::row_q6k::<I, R>(w, a, r0) }
    }
}

/// The activations a packed type's kernels take: [`Q8`] for the 32-value
/// blocks, [`Q8K`] for the k-quants; each picks its type's kernel.
trait Group {
    /// Eight weight rows (packed group `w` of `kind`) against `R`
    /// activation rows from `r0`.
    ///
    /// # Safety
    /// `w` is a whole packed group of `kind` (`Packed::group`); rows
    /// `r0..r0 + R` of the activations exist.
    unsafe fn group<I: Int, const R: usize>(
        &self,
        kind: Kind,
        w: *const u8,
        r0: usize,
    ) -> [[f32; ROWS]; R];
}

impl Group for Q8 {
    #[inline(always)]
    unsafe fn group<I: Int, const R: usize>(
        &self,
        kind: Kind,
        w: *const u8,
        r0: usize,
    ) -> [[f32; ROWS]; R] {
        // SAFETY: the caller's contract.
        unsafe {
            match kind {
                Kind::Q8_0 => q32::group::<I, q32::Q8_0, R>(w, self, r0),
                Kind::Q4_0 => q32::group::<I, q32::Q4_0, R>(w, self, r0),
                Kind::Q4_1 => q32::group::<I, q32::Q4_1, R>(w, self, r0),
                Kind::Q5_0 => q32::group::<I, q32::Q5_0, R>(w, self, r0),
                _ => q32::group::<I, q32::Q5_1, R>(w, self, r0),
            }
        }
    }
}

impl Group for Q8K {
    #[inline(always)]
    unsafe fn group<I: Int, const R: usize>(
        &self,
        kind: Kind,
        w: *const u8,
        r0: usize,
    ) -> [[f32; ROWS]; R] {
        // SAFETY: the caller's contract.
        unsafe {
            match kind {
                Kind::Q2K => q2k_q3k::group_q2k::<I, R>(w, self, r0),
                Kind::Q3K => q2k_q3k::group_q3k::<I, R>(w, self, r0),
                Kind::Q4K => q4k_q5k::group_q4k_q5k::<I, false, R>(w, self, r0),
                _ => q4k_q5k::group_q4k_q5k::<I, true, R>(w, self, r0),
            }
        }
    }
}
