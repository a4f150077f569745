//! `compare A.json B.json [C.json ...]`: each further result file against the
//! baseline A, row by row: both medians, their ratio and a verdict, as a
//! terminal table or Markdown, then how the verdict is reached. All files are
//! read (and checked, by the shared loader) before anything is printed, so a bad
//! one is one error line and no table. The statistics and the gate live in
//! `candle_lab::read::compare`; this program only parses, loads and prints.

use std::path::PathBuf;

use anyhow::Result;
use candle_lab::cli::parse;
use candle_lab::export::table::{print_text, Screen};
use candle_lab::memory::CountingAlloc;
use candle_lab::outcome::finish_check;
use candle_lab::quote::shown;
use candle_lab::read::compare::{self, Comparison, Format, BAND, MAX_FILE_BOOTSTRAP_SAMPLES};
use candle_lab::read::load::MAX_FILE_SIZE;
use clap::Parser;

// A failed allocation is one error line, not an abort.
#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// Compare result files: each FILE against the BASELINE, row by row.
#[derive(Parser, Debug)]
#[command(
    version = candle_lab::env::BUILD_VERSION,
    after_help = format!(
        "{}\n\nReads candle-lab result files (schema 2.x: matmul, cpu_vs_gpu, sweep, block and generate; the PyTorch twins' too) and the reference \
         lab's week05-results-gb10.json, each at most {MAX_FILE_SIZE}, with positive, finite times whose \
         medians match their samples, each row once, and at most {MAX_FILE_BOOTSTRAP_SAMPLES} samples \
         to resample in all (anything else is refused, naming the file, row and field).\n\
         Exit codes: 0 done; 1 an error, or --fail-if-slower failed (the stderr line says which and why); \
         2 a bad flag.",
        compare::method()
    )
)]
struct Args {
    /// The baseline: A in every B/A.
    #[arg(value_name = "BASELINE")]
    baseline: PathBuf,

    /// Files to compare with the baseline, each on its own.
    #[arg(value_name = "FILE", required = true)]
    files: Vec<PathBuf>,

    /// Print a terminal table or GitHub Markdown.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,

    /// A regression gate: exit 1 when a row is SLOW and its median is more than
    /// PCT percent above the baseline's (PCT is 5 or more: under the ±5% band a
    /// row is SAME, whatever its ratio). It also fails, saying why, when a file
    /// pairs no row with the baseline, when a row has no verdict (ratio only),
    /// or when a baseline row is missing from a file: a gate passes only what it
    /// judged.
    #[arg(long, value_name = "PCT", value_parser = percent)]
    fail_if_slower: Option<f64>,

    /// Check the flags, print what would be compared, and exit 0 without
    /// reading the files (CI rehearses the GPU call this way, before the files
    /// exist).
    #[arg(long)]
    dry_run: bool,
}

fn percent(text: &str) -> Result<f64, String> {
    let band = BAND * 100.0;
    match text.parse::<f64>() {
        Ok(p) if p.is_finite() && p >= band => Ok(p),
        Ok(p) if p.is_finite() && p >= 0.0 => Err(format!(
            "{text} is under the ±{band:.0}% band: a row is SLOW only when its whole interval is \
             above +{band:.0}%, so a smaller threshold could never act alone; give {band:.0} or more"
        )),
        _ => Err(format!("{text} is not a percentage (a number, {band:.0} or more)")),
    }
}

fn main() -> std::process::ExitCode {
    match parse() {
        Ok(args) => finish_check(run(args)),
        Err(code) => code,
    }
}

/// Prints every comparison; `Some(reason)` when `--fail-if-slower` fails.
fn run(args: Args) -> Result<Option<String>> {
    if args.dry_run {
        let mut text = format!("dry run: compare (nothing read)\nflags: {args:#?}\n");
        for path in &args.files {
            text.push_str(&format!(
                "would compare: {} against the baseline {}\n",
                shown(path),
                shown(&args.baseline)
            ));
        }
        print_text(&text, Screen::Stdout)?;
        return Ok(None);
    }
    let baseline = compare::load(&args.baseline)?;
    let others = args
        .files
        .iter()
        .map(|path| Ok((path, compare::load(path)?)))
        .collect::<Result<Vec<_>>>()?;

    let comparisons: Vec<Comparison> = others
        .iter()
        .map(|(path, entries)| {
            Comparison::new(&shown(&args.baseline), &baseline, &shown(path), entries)
        })
        .collect();
    let mut text: String = comparisons.iter().map(|c| c.render(args.format)).collect();
    text.push_str(&compare::render_method(args.format));
    // The tables are all compare leaves: a write error fails it; a reader gone
    // (`| head`) ends the printing quietly, and the gate still answers.
    print_text(&text, Screen::Stdout)?;
    Ok(args
        .fail_if_slower
        .and_then(|pct| compare::gate(&comparisons, pct)))
}
