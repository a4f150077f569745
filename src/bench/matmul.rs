//! The `matmul` experiment's core: the square matmul per precision, C = A x
//! B for random n x n matrices, timed, its memory and accuracy measured. The
//! measurement itself is [`crate::bench::square`], below every experiment
//! that runs it (`cpu_vs_gpu`, `sweep` and `memory` run it too), so that no
//! experiment's core imports another's; this is matmul's name for it.

pub use crate::bench::square::{benchmark, need, Config};
