//! Summary: the reference lab's closing table, measured on this machine. Reads
//! this machine's result files (results/<machine>/basics.json, matmul.json,
//! cpu_vs_gpu.json) and the lab's results file, prints each value beside the
//! lab's GB10 value with their ratio, and the CUDA versions of the driver and
//! the build; writes the same as Markdown to results/<machine>/summary.md.
//! The table itself is built in `candle_lab::read::summary`; every file is read
//! through the shared loader, and summary.md is written only as a regular file
//! inside the results folder, never through a link.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use candle_lab::cli::parse;
use candle_lab::device::{select, DeviceArg};
use candle_lab::export::output::{prepare, refuse_overlap, Input};
use candle_lab::export::table::{print_text, Screen};
use candle_lab::memory::CountingAlloc;
use candle_lab::outcome::finish;
use candle_lab::quote::shown;
use candle_lab::read::folder::check_inside;
use candle_lab::read::summary::{self, load_machine_file, MachineFiles, Side};
use clap::Parser;

// A failed allocation is one error line, not an abort.
#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// The reference lab's "in one place" table with this machine's values beside
/// the lab's and their ratio, and the CUDA driver and build versions.
#[derive(Parser, Debug)]
#[command(version = candle_lab::env::BUILD_VERSION)]
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
    match parse() {
        Ok(args) => finish(run(args)),
        Err(code) => code,
    }
}

fn run(args: Args) -> Result<()> {
    let lab = summary::load_lab(&args.reference)?;

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
    let files = MachineFiles {
        basics: load_machine_file(&dir, "basics", "basics"),
        matmul: load_machine_file(&dir, "matmul", "matmul"),
        cpu_vs_gpu: load_machine_file(&dir, "cpu_vs_gpu", "cpu-vs-gpu"),
        block: load_machine_file(&dir, "block", "block"),
        generate: load_machine_file(&dir, "generate", "generate"),
    };
    if let (Err(a), Err(b), Err(c)) = (&files.basics, &files.matmul, &files.cpu_vs_gpu) {
        bail!("nothing to summarize in {}: {a}; {b}; {c}", shown(&dir));
    }

    let result = summary::build(&Side::from_results(&files), &Side::from_lab(&lab));
    let target = prepare(&dir.join(Path::new("summary.md")))?;
    // No output may be an input: the reference and the machine's files.
    let mut inputs = vec![Input::new("the reference lab's results", &args.reference)];
    for name in ["basics", "matmul", "cpu_vs_gpu", "block", "generate"] {
        inputs.push(Input::new(
            "a result file",
            &dir.join(format!("{name}.json")),
        ));
    }
    refuse_overlap(&target.path().into_iter().collect::<Vec<_>>(), &inputs)?;
    // Saved first, then shown: a closed standard output loses nothing.
    target.save_bytes(result.markdown().as_bytes())?;
    print_text(&result.text(), Screen::StdoutBesideFile)
}
