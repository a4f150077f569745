//! Tensor basics: what a tensor is to Candle. For a scalar, a vector, a matrix
//! and a 3-D tensor: rank, shape, dtype, element size, total bytes, device. Then
//! one shape at every dtype, an element-wise add, broadcasting, the views
//! (broadcast, transpose) that copy nothing until `.contiguous()`, and a
//! host-to-device transfer. Every number is read from Candle at run time
//! (`candle_lab::bench::basics`).

use anyhow::Result;
use candle_lab::bench::basics;
use candle_lab::experiment::{self, Experiment, Session};
use candle_lab::memory::CountingAlloc;
use candle_lab::schema::{Body, Kind};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

struct Basics;

/// No flags of its own: every table has fixed shapes.
#[derive(clap::Args, Debug)]
struct Flags {}

impl Experiment for Basics {
    const KIND: Kind = Kind::Basics;
    const ABOUT: &'static str = "Rank, shape, dtype, bytes and device of Candle tensors; \
        element-wise ops, broadcasting, views, and a host-to-device transfer.";
    const SMALL: &'static [&'static str] = &[];
    type Flags = Flags;
    type Config = &'static str;

    fn config(_: &Flags, _: bool) -> Result<Self::Config> {
        Ok("the fixed tables")
    }

    fn run(_: &Self::Config, s: &Session) -> Result<Body> {
        Ok(Body::Basics(basics::run(&s.device)?))
    }
}

fn main() -> std::process::ExitCode {
    experiment::main::<Basics>()
}
