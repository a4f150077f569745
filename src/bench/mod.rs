//! The measurement cores, one module per experiment: each knows what to time
//! (a matmul, a copy, a transfer), times it with the [`crate::clock`] and
//! returns plain result types. Nothing here prints a result or opens a file.
//! No core imports another's: what several share lives beside them
//! ([`square`]: the square matmul per precision; [`ladder`]: the bandwidth
//! ladder) or below them (the model layer, [`crate::model`]).

pub mod basics;
pub mod block;
pub mod cpu_vs_gpu;
mod gemm_mode;
pub mod generate;
pub mod kernels;
pub mod ladder;
pub mod lm;
pub mod matmul;
pub mod memory;
pub mod overhead;
pub mod precision;
pub mod scaling;
pub mod square;
pub mod sweep;
