//! Precision: the limits of each float format (bits, max, smallest normal and
//! subnormal, eps, decimal digits), then what they mean, shown by converting
//! real Candle tensors on the selected device: 1 + eps/2 rounds back to 1,
//! 70000 overflows f16 but not bf16, bf16 skips integers above 256, 0.1 is
//! stored inexactly, and summing 0.01 ten thousand times drifts or stalls
//! (`candle_lab::bench::precision`).

use anyhow::Result;
use candle_lab::bench::precision;
use candle_lab::experiment::{self, Experiment, Session};
use candle_lab::memory::CountingAlloc;
use candle_lab::schema::{Body, Kind};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

struct Precision;

/// No flags of its own: every table has fixed shapes.
#[derive(clap::Args, Debug)]
struct Flags {}

impl Experiment for Precision {
    const KIND: Kind = Kind::Precision;
    const ABOUT: &'static str =
        "Limits of f64, f32, f16, bf16 and f8e4m3, and what they do to real numbers.";
    const SMALL: &'static [&'static str] = &[];
    type Flags = Flags;
    type Config = &'static str;

    fn config(_: &Flags, _: bool) -> Result<Self::Config> {
        Ok("the fixed tables")
    }

    fn run(_: &Self::Config, s: &Session) -> Result<Body> {
        Ok(Body::Precision(precision::run(&s.device)?))
    }
}

fn main() -> std::process::ExitCode {
    experiment::main::<Precision>()
}
