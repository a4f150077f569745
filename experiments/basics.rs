//! Tensor basics: what a tensor is to Candle. For a scalar, a vector, a matrix
//! and a 3-D tensor: rank, shape, dtype, element size, total bytes, device. Then
//! one shape at every dtype, an element-wise add, broadcasting, the views
//! (broadcast, transpose) that copy nothing until `.contiguous()`, and a
//! host-to-device transfer. Every number is read from Candle at run time
//! (`candle_lab::bench::basics`).

use anyhow::Result;
use candle_lab::bench::basics;
use candle_lab::cli::{parse, result_file, Common};
use candle_lab::device::select;
use candle_lab::export;
use candle_lab::memory::CountingAlloc;
use candle_lab::outcome::{finish, Completion};
use candle_lab::schema::Body;
use clap::Parser;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// Rank, shape, dtype, bytes and device of Candle tensors; element-wise ops,
/// broadcasting, views, and a host-to-device transfer.
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
        return args.common.dry_run("basics", &args, &"the fixed tables");
    }
    let (device, info) = select(args.common.device)?;
    let outputs = args.common.outputs("basics", &info)?;
    args.common.wait_for_quiet()?;
    let file = result_file(info, Body::Basics(basics::run(&device)?));
    outputs.save_all(&file)?;
    export::show(&file, &[], outputs.screen())?;
    Ok(Completion::Complete)
}
