//! Sweep: matmul GFLOP/s across sizes x precisions, each point sampled
//! adaptively (until its median is known to +-1%, or `--max-seconds` runs out).
//! Writes the JSON, a long-format CSV and an SVG chart beside each other after
//! every point, so an interrupted sweep keeps every point it finished. The
//! measurement is `candle_lab::bench::sweep`'s; this program parses and saves.

use anyhow::Result;
use candle_core::Device;
use candle_lab::bench::sweep::{self, Config, DEFAULT_MAX_SECONDS, MAX_SECONDS_RANGE};
use candle_lab::cli::{Dtypes, MAX_SIZE};
use candle_lab::experiment::{self, Experiment, Session};
use candle_lab::export::views;
use candle_lab::memory::fits::Need;
use candle_lab::memory::CountingAlloc;
use candle_lab::schema::{Body, Kind};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

struct Sweep;

#[derive(clap::Args, Debug)]
struct Flags {
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
}

fn seconds(text: &str) -> Result<f64, String> {
    let (lo, hi) = MAX_SECONDS_RANGE;
    match text.parse::<f64>() {
        Ok(s) if (lo..=hi).contains(&s) => Ok(s),
        _ => Err(format!("expected seconds from {lo} to {hi}")),
    }
}

impl Experiment for Sweep {
    const KIND: Kind = Kind::Sweep;
    const ABOUT: &'static str = "Matmul GFLOP/s across sizes and precisions, sampled \
        adaptively; JSON, CSV and an SVG chart.";
    const SMALL: &'static [&'static str] = &["--sizes", "64,96,128", "--max-seconds", "0.2"];
    type Flags = Flags;
    type Config = Config;

    /// Sizes default to the device's.
    fn config(f: &Flags, on_cuda: bool) -> Result<Config> {
        let sizes = if f.sizes.is_empty() {
            sweep::default_sizes(on_cuda)
        } else {
            f.sizes.iter().map(|&n| n as usize).collect()
        };
        let precisions = f.dtypes.for_device(on_cuda)?;
        Config::new(sizes, precisions, sweep::plan(f.max_seconds))
    }

    fn needs(cfg: &Config, device: &Device) -> Result<Vec<Need>> {
        Ok(cfg.needs(device))
    }

    /// After every point: its line, and the files saved as they stand (all
    /// together: an interrupt keeps the same finished points in each).
    fn run(cfg: &Config, s: &Session) -> Result<Body> {
        let names: Vec<&str> = cfg.precisions.iter().map(|p| p.name()).collect();
        candle_lab::note!(
            "sweep: sizes {:?} x {} on {}; per point {}",
            cfg.sizes,
            names.join(","),
            s.info.label,
            cfg.sampling
        );
        let started = std::time::Instant::now();
        let results = sweep::run(&s.device, s.gpu_name(), cfg, |r| {
            if let Some(point) = r.points.last() {
                candle_lab::note!("{}", views::sweep::point_line(point));
            }
            s.save_progress(Body::Sweep(r.clone()))
        })?;
        s.note_after(format!(
            "the sweep took {:.1} s ({} points, inputs and accuracy checks included)",
            started.elapsed().as_secs_f64(),
            results.points.len()
        ));
        if s.writes_stdout() {
            s.note_after("the CSV and SVG are written beside a JSON file (--output FILE or --results-dir), not with --output -".into());
        }
        Ok(Body::Sweep(results))
    }
}

fn main() -> std::process::ExitCode {
    experiment::main::<Sweep>()
}
