//! Summary: the reference lab's closing table, measured on this machine. Reads
//! this machine's result files (results/<machine>/basics.json, matmul.json,
//! cpu_vs_gpu.json) and the lab's results file, prints each value beside the
//! lab's GB10 value with their ratio, and the CUDA versions of the driver and
//! the build; writes the same as Markdown to results/<machine>/summary.md.
//! The table itself is built in `candle_lab::read::summary`; summary.md is
//! written, and the machine's files read, only as regular files inside the
//! results folder, never through a link.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use candle_lab::cli::{finish, parse};
use candle_lab::device::{select, DeviceArg};
use candle_lab::error::error_line;
use candle_lab::export::output::{prepare, shown};
use candle_lab::export::table::{print_text, Screen};
use candle_lab::read::folder::{check_inside, readable_inside};
use candle_lab::read::summary::{self, MachineFiles, Side};
use candle_lab::schema::{self, ResultFile};
use clap::Parser;

/// The reference lab's "in one place" table with this machine's values beside
/// the lab's and their ratio, and the CUDA driver and build versions.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// Whose results: the machine folder the experiments write for this
    /// device (auto: the GPU if this build has CUDA and one answers, else the
    /// CPU; cpu; cuda; cuda:N).
    #[arg(long, default_value = "auto", value_name = "DEVICE")]
    device: DeviceArg,

    /// The folder of machine folders: reads DIR/<machine>/.
    #[arg(long, default_value = "results", value_name = "DIR")]
    results_dir: PathBuf,

    /// Read this machine folder instead of one under --results-dir (another
    /// machine's results, say).
    #[arg(long, value_name = "DIR", conflicts_with = "device")]
    machine_dir: Option<PathBuf>,

    /// The reference lab's results file.
    #[arg(
        long,
        default_value = "results/reference-lab-gb10/week05-results-gb10.json",
        value_name = "FILE"
    )]
    reference: PathBuf,
}

fn main() -> std::process::ExitCode {
    finish(run(parse()))
}

fn run(args: Args) -> Result<()> {
    let path = &args.reference;
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the reference lab's file {}", shown(path)))?;
    let lab = summary::parse_lab(&text).with_context(|| shown(path))?;

    // The folder summary.md goes in, and the folder it is checked from: under
    // --results-dir the machine folder must be a real folder, not a link.
    let (root, machine) = match args.machine_dir {
        Some(dir) => (dir, PathBuf::new()),
        None => (
            args.results_dir,
            PathBuf::from(select(args.device)?.1.slug()),
        ),
    };
    let dir = root.join(&machine);
    check_inside(&root, &machine.join("summary.md"))?;
    if !dir.is_dir() {
        bail!(
            "no results folder {}: run `just results` first",
            shown(&dir)
        );
    }
    let load = |name: &str, recipe: &str| -> Result<ResultFile, String> {
        let file = format!("{name}.json");
        let path = readable_inside(&dir, Path::new(&file)).map_err(|e| error_line(&e))?;
        if !path.exists() {
            return Err(format!("no {file} yet (run `just {recipe}`)"));
        }
        schema::read(&path).map_err(|e| error_line(&e))
    };
    let files = MachineFiles {
        basics: load("basics", "basics"),
        matmul: load("matmul", "matmul"),
        cpu_vs_gpu: load("cpu_vs_gpu", "cpu-vs-gpu"),
    };
    if let (Err(a), Err(b), Err(c)) = (&files.basics, &files.matmul, &files.cpu_vs_gpu) {
        bail!("nothing to summarize in {}: {a}; {b}; {c}", shown(&dir));
    }

    let result = summary::build(&Side::from_results(&files), &Side::from_lab(&lab));
    // Saved first, then shown: a closed standard output loses nothing.
    prepare(&dir.join("summary.md"))?.save_bytes(result.markdown().as_bytes())?;
    print_text(&result.text(), Screen::StdoutBesideFile)
}
