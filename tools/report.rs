//! `report`: regenerates `results/README.md` from every machine folder under
//! `results/`, with a bar chart of each matmul file (`<machine>/matmul.svg`)
//! and each sweep's chart and CSV drawn again from its JSON. Same JSON in, same
//! files out. The README is built by `candle_lab::read::report`; this program reads,
//! checks where it will write, and writes.

use std::path::PathBuf;

use anyhow::Result;
use candle_lab::cli::{finish, parse};
use candle_lab::export::output::{prepare, shown};
use candle_lab::read::report::{self, Content};
use clap::Parser;

/// Regenerate results/README.md (and its charts) from the result files.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// The results folder: every folder in it is a machine whose JSON files are
    /// read; README.md and the charts are written there.
    #[arg(long, value_name = "DIR", default_value = "results")]
    results_dir: PathBuf,
}

fn main() -> std::process::ExitCode {
    finish(run(parse()))
}

fn run(args: Args) -> Result<()> {
    let dir = &args.results_dir;
    let sources = report::load(dir)?;
    for s in &sources {
        if let Content::Unreadable(why) = &s.content {
            eprintln!(
                "note: {} is listed but not used: {why}",
                shown(&dir.join(&s.machine).join(&s.file))
            );
        }
    }
    let built = report::build(&sources)?;
    // Every target is checked before any is written.
    let mut targets = Vec::new();
    for (path, text) in &built.files {
        targets.push((prepare(&dir.join(path))?, text));
    }
    targets.push((prepare(&dir.join("README.md"))?, &built.readme));
    for (target, text) in targets {
        target.save_bytes(text.as_bytes())?;
    }
    Ok(())
}
