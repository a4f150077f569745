//! candle-lab's shared layer: everything the experiment programs in `experiments/`
//! have in common. Each program parses its flags ([`cli`]), picks a device
//! ([`device`]), computes with Candle tensors, and hands plain `Serialize` results
//! to [`output`], which writes the JSON, then to [`report`], which prints tables.
//! Result types live in [`schema`]; [`compare`] reads result files back and
//! compares them row by row. Measurement lives here too: the clock ([`timing`]),
//! its statistics ([`stats`]) and peak memory ([`memory`]). [`summary`] sets
//! this machine's results beside the reference lab's. The cores of the `memory`
//! and `overhead` programs are [`bandwidth`] and [`overhead`]; [`telemetry`]
//! reads the GPU's state around their rows. [`sweep`] runs the matmul benchmark
//! across sizes and precisions, and [`readme`] builds `results/README.md`.

pub mod bandwidth;
pub mod cli;
pub mod compare;
#[cfg(feature = "cuda")]
mod cuda;
#[cfg(feature = "cuda")]
mod cuda_bench;
pub mod device;
pub mod env;
pub mod error;
pub mod formats;
pub mod matmul;
pub mod memory;
pub mod output;
pub mod overhead;
pub mod peaks;
pub mod plot;
pub mod precision;
pub mod readme;
pub mod report;
pub mod schema;
pub mod stats;
pub mod summary;
pub mod sweep;
pub mod telemetry;
pub mod timing;
