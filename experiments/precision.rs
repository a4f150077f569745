//! Precision: the limits of each float format (bits, max, smallest normal and
//! subnormal, eps, decimal digits), then what they mean, shown by converting
//! real Candle tensors on the selected device: 1 + eps/2 rounds back to 1,
//! 70000 overflows f16 but not bf16, bf16 skips integers above 256, 0.1 is
//! stored inexactly, and summing 0.01 ten thousand times drifts or stalls
//! (`candle_lab::bench::floats`).

use anyhow::Result;
use candle_lab::bench::floats;
use candle_lab::cli::{parse, result_file, Common};
use candle_lab::device::select;
use candle_lab::export;
use candle_lab::memory::CountingAlloc;
use candle_lab::outcome::{finish, Completion};
use candle_lab::schema::Body;
use clap::Parser;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// Limits of f64, f32, f16, bf16 and f8e4m3, and what they do to real numbers.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    #[command(flatten)]
    common: Common,
}

fn main() -> std::process::ExitCode {
    finish(run(parse()))
}

fn run(args: Args) -> Result<Completion> {
    if args.common.dry_run {
        // Nothing to plan beyond the flags: every table has fixed shapes.
        return args.common.dry_run("precision", &args, &"the fixed tables");
    }
    let (device, info) = select(args.common.device)?;
    let outputs = args.common.outputs("precision", &info)?;
    args.common.wait_for_quiet()?;
    let file = result_file(info, Body::Precision(floats::run(&device)?));
    outputs.save_all(&file)?;
    export::show(&file, &[], outputs.screen())?;
    Ok(Completion::Complete)
}
