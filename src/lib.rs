//! candle-lab's shared layer: everything the experiment programs in `experiments/`
//! have in common. Each program parses its flags ([`cli`]), picks a device
//! ([`device`]), computes with Candle tensors, and hands plain `Serialize` results
//! to [`output`], which writes the JSON, then to [`report`], which prints tables.
//! Result types live in [`schema`]; [`compare`] reads result files back and
//! compares them row by row, and [`readme`] builds `results/README.md` from
//! them. [`sweep`] runs the matmul benchmark across sizes and precisions. Measurement lives here too: the clock ([`timing`]),
//! its statistics ([`stats`]) and peak memory ([`memory`]).

pub mod cli;
pub mod compare;
#[cfg(feature = "cuda")]
mod cuda;
pub mod device;
pub mod env;
pub mod error;
pub mod formats;
pub mod matmul;
pub mod memory;
pub mod output;
pub mod peaks;
pub mod plot;
pub mod precision;
pub mod readme;
pub mod report;
pub mod schema;
pub mod stats;
pub mod sweep;
pub mod timing;
