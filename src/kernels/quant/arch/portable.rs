//! The quantized dot products in plain integer arithmetic, for any CPU: a
//! weight row (eight packed rows, for the repacked types) against one
//! quantized activation row, block by block, each block's integer sum
//! scaled once. The x86 kernels compute the same sums with vector
//! instructions; the tests hold them to these. The walk over a pass's rows
//! is [`Pass::portable`]; each type's sums are in the file of its name
//! ([`super`]'s table).

mod q2k_q3k;
mod q32;
mod q4k_q5k;
mod q6k;

use std::ops::Range;

use crate::kernels::quant::blocks::Kind;
use crate::kernels::quant::{groups, Acts, Pass, Work};

impl Pass<'_> {
    /// Weight rows `rows` against every activation row, one at a time.
    pub(in crate::kernels::quant) fn portable(&self, rows: Range<usize>) {
        match &self.work {
            Work::Packed(p, a) => {
                for gi in groups(&rows) {
                    for r in 0..self.m {
                        let out = match a {
                            Acts::Q8(a) => q32::group(p.kind, p.group(gi), a, r),
                            Acts::Q8K(a) => match p.kind {
                                Kind::Q2K | Kind::Q3K => {
                                    q2k_q3k::group_q2k_q3k(p.kind, p.group(gi), a, r)
                                }
                                _ => q4k_q5k::group_q4k_q5k(p.kind, p.group(gi), a, r),
                            },
                        };
                        self.write_group(r, gi, [out]);
                    }
                }
            }
            Work::Stored(kind, w, a) => {
                let bytes = self.op.k / kind.values() * kind.bytes();
                for j in rows {
                    let w = &w[j * bytes..(j + 1) * bytes];
                    for r in 0..self.m {
                        self.write(r, j, [q6k::dot_q6k(w, a, r)]);
                    }
                }
            }
        }
    }
}
