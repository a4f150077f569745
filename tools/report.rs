//! `report`: regenerates `results/README.md` from every machine folder under
//! `results/`, with a bar chart of each matmul file (`<machine>/matmul.svg`)
//! and each sweep's chart and CSV drawn again from its JSON. Same JSON in, same
//! files out. The README is built by `candle_lab::read::report`; this program
//! reads (only real folders and regular files, never through a link: what it
//! skips, it says), checks every place it will write (a regular file inside the
//! results folder, reached through real folders), and writes.

use std::path::{Path, PathBuf};

use anyhow::Result;
use candle_lab::cli::parse;
use candle_lab::export::output::{prepare, refuse_overlap, Input};
use candle_lab::memory::CountingAlloc;
use candle_lab::outcome::finish;
use candle_lab::quote::shown;
use candle_lab::read::folder::check_inside;
use candle_lab::read::report::{self, Content};
use clap::Parser;

// A failed allocation is one error line, not an abort.
#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// Regenerate results/README.md (and its charts) from the result files.
#[derive(Parser, Debug)]
#[command(version = candle_lab::env::BUILD_VERSION)]
struct Args {
    /// The results folder: every folder in it is a machine whose JSON files are
    /// read; README.md and the charts are written there. Inside it, links,
    /// FIFOs and names other than letters, digits and . _ + - are skipped (with
    /// a warning), and a file is written only where a regular file or nothing is.
    #[arg(long, value_name = "DIR", default_value = "results")]
    results_dir: PathBuf,
}

fn main() -> std::process::ExitCode {
    match parse() {
        Ok(args) => finish(run(args)),
        Err(code) => code,
    }
}

fn run(args: Args) -> Result<()> {
    let dir = &args.results_dir;
    let listing = report::load(dir)?;
    for skipped in &listing.skipped {
        candle_lab::note!("warning: {skipped}");
    }
    for s in &listing.sources {
        if let Content::Unreadable(why) = &s.content {
            candle_lab::note!(
                "note: {} is listed but not used: {why}",
                shown(&dir.join(&s.machine).join(&s.file))
            );
        }
    }
    for s in &listing.sources {
        if let Content::Result(f) = &s.content {
            for row in candle_lab::read::bounds::beaten(f) {
                candle_lab::note!(
                    "warning: {}: {row} (a bound that is beaten is the wrong bound)",
                    shown(&dir.join(&s.machine).join(&s.file))
                );
            }
        }
    }
    let built = report::build(&listing.sources)?;
    // Every target is checked before any is written.
    let mut targets = Vec::new();
    for (path, text) in &built.files {
        targets.push((target(dir, Path::new(path))?, text));
    }
    targets.push((target(dir, Path::new("README.md"))?, &built.readme));
    // No output may be an input (a chart hard-linked to a result file, say).
    let inputs: Vec<Input> = listing
        .sources
        .iter()
        .map(|s| Input::new("a result file", &dir.join(&s.machine).join(&s.file)))
        .collect();
    let written: Vec<&Path> = targets.iter().filter_map(|(t, _)| t.path()).collect();
    refuse_overlap(&written, &inputs)?;
    for (target, text) in targets {
        target.save_bytes(text.as_bytes())?;
    }
    Ok(())
}

/// `dir/rel`, checked: inside the results folder, then by the output policy.
fn target(dir: &Path, rel: &Path) -> Result<candle_lab::export::output::Output> {
    check_inside(dir, rel)?;
    prepare(&dir.join(rel))
}
