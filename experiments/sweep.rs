//! Sweep: matmul GFLOP/s across sizes x precisions, each point sampled
//! adaptively (until its median is known to +-1%, or `--max-seconds` runs out).
//! Writes the JSON, a long-format CSV and an SVG chart beside each other after
//! every point, so an interrupted sweep keeps every point it finished. The
//! measurement is `candle_lab::bench::sweep`'s; this program parses, saves and prints.

use anyhow::Result;
use candle_lab::bench::sweep::{self, Config, DEFAULT_MAX_SECONDS, MAX_SECONDS_RANGE};
use candle_lab::cli::{parse, result_file, Common, Dtypes, HostMemoryFlag, MAX_SIZE};
use candle_lab::device::select;
use candle_lab::export::{self, views};
use candle_lab::memory::CountingAlloc;
use candle_lab::outcome::{finish, Completion};
use candle_lab::schema::Body;
use clap::Parser;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// Matmul GFLOP/s across sizes and precisions, sampled adaptively; JSON, CSV and
/// an SVG chart.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    #[command(flatten)]
    common: Common,

    /// Sizes n, comma-separated, run in ascending order (default on the CPU:
    /// 64,128,256,512,1000,1023,1024,1025,2048,3000; on a GPU: 256 to 16384
    /// with the same awkward sizes).
    #[arg(long, value_delimiter = ',', value_name = "N,...",
          value_parser = clap::value_parser!(u64).range(1..=MAX_SIZE))]
    sizes: Vec<u64>,

    #[command(flatten)]
    dtypes: Dtypes,

    /// Sampling time per point, in seconds (0.01 to 3600): after at least 10
    /// samples a point stops when its median is known to +-1%, or when this runs out.
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_MAX_SECONDS, value_parser = seconds)]
    max_seconds: f64,

    #[command(flatten)]
    host: HostMemoryFlag,
}

fn seconds(text: &str) -> Result<f64, String> {
    let (lo, hi) = MAX_SECONDS_RANGE;
    match text.parse::<f64>() {
        Ok(s) if (lo..=hi).contains(&s) => Ok(s),
        _ => Err(format!("expected seconds from {lo} to {hi}")),
    }
}

/// The sweep the flags ask for, checked (sizes default to the device's).
fn config(args: &Args, on_cuda: bool) -> Result<Config> {
    let sizes = if args.sizes.is_empty() {
        sweep::default_sizes(on_cuda)
    } else {
        args.sizes.iter().map(|&n| n as usize).collect()
    };
    let precisions = args.dtypes.for_device(on_cuda)?;
    Config::new(sizes, precisions, sweep::plan(args.max_seconds))
}

fn main() -> std::process::ExitCode {
    finish(run(parse()))
}

fn run(args: Args) -> Result<Completion> {
    if args.common.dry_run {
        let cfg = config(&args, args.common.device.expects_cuda())?;
        return args.common.dry_run("sweep", &args, &cfg);
    }
    let (device, info) = select(args.common.device)?;
    let cfg = config(&args, device.is_cuda())?;
    cfg.check_fits(&device, args.host.check())?;
    let outputs = args.common.outputs("sweep", &info)?;
    args.common.wait_for_quiet()?;
    candle_lab::note!(
        "sweep: sizes {:?} x {} on {}; per point {}",
        cfg.sizes,
        cfg.precisions
            .iter()
            .map(|p| p.name())
            .collect::<Vec<_>>()
            .join(","),
        info.label,
        cfg.sampling
    );
    // After every point: its line, and the files saved as they stand (all three
    // together: an interrupt keeps the same finished points in each). Standard
    // output takes one JSON document: it is written once, at the end.
    let started = std::time::Instant::now();
    let gpu_name = device.is_cuda().then_some(info.name.as_str());
    let results = sweep::run(&device, gpu_name, &cfg, |r| {
        if let Some(point) = r.points.last() {
            candle_lab::note!("{}", views::sweep::point_line(point));
        }
        if outputs.is_stdout() {
            return Ok(());
        }
        outputs.save_quietly(&result_file(info.clone(), Body::Sweep(r.clone())))
    })?;
    let wall_s = started.elapsed().as_secs_f64();
    let points = results.points.len();
    let file = result_file(info, Body::Sweep(results));
    outputs.save_all(&file)?;

    let mut notes = vec![format!(
        "the sweep took {wall_s:.1} s ({points} points, inputs and accuracy checks included)"
    )];
    if outputs.is_stdout() {
        notes.push("the CSV and SVG are written beside a JSON file (--output FILE or --results-dir), not with --output -".into());
    }
    export::show(&file, &notes, outputs.screen())?;
    Ok(Completion::Complete)
}
