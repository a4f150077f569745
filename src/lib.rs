//! candle-lab's shared layer. Data flows one way (docs/architecture.md): an
//! experiment program in `experiments/` parses its flags ([`cli`]), picks a
//! device ([`device`]), calls its measurement core in [`bench`], which times
//! with the [`clock`], tracks [`memory`] and returns plain result types
//! ([`schema`]); the program hands the result to [`export`], which writes the
//! JSON (and CSV, SVG) and prints tables. The tools in `tools/` read result
//! files back through [`read`] (compare, summary, report). CUDA-only code is the
//! leaf [`cuda`]; [`telemetry`] reads the GPU's state around timed rows;
//! [`kernels`] holds the suite's own CustomOps (a leaf too).

pub mod availability;
/// A line on standard error (progress, notes, the error line) that a failed
/// write cannot turn into a panic: `eprintln!` panics when stderr is closed or
/// full (`2>/dev/full`), and a line nobody can read is not worth a crash.
#[macro_export]
macro_rules! note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

pub mod bench;
pub mod cli;
pub mod clock;
pub mod cpu_identity;
#[cfg(feature = "cuda")]
mod cuda;
pub mod device;
pub mod env;
pub mod error;
pub mod experiment;
pub mod export;
pub mod formulas;
pub mod kernels;
pub mod memory;
pub mod model;
pub mod outcome;
pub mod peaks;
pub mod precision;
pub mod quote;
pub mod read;
pub mod schema;
pub mod stats;
pub mod telemetry;
pub mod units;
