//! `compare A.json B.json [C.json ...]`: each further result file against the
//! baseline A, row by row: both medians, their ratio and a verdict, as a
//! terminal table or Markdown, then how the verdict is reached. All files are read before anything is printed,
//! so a bad one is one error line and no table. The statistics live in
//! `candle_lab::read::compare`; this program only parses, loads and prints.

use std::path::{Path, PathBuf};

use anyhow::Result;
use candle_lab::cli::{finish_check, parse};
use candle_lab::read::compare::{self, Comparison, Format, Row};
use clap::Parser;

/// Compare result files: each FILE against the BASELINE, row by row.
#[derive(Parser, Debug)]
#[command(
    version,
    after_help = format!(
        "{}\n\nReads candle-lab result files (schema 2.x: matmul, cpu_vs_gpu and sweep) and the reference \
         lab's week05-results-gb10.json.\nExit codes: 0 done; 1 an error, or a row slower than \
         --fail-if-slower allows (the stderr line says which); 2 a bad flag.",
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

    /// Exit 1 when a row is SLOW and its median is more than PCT percent above
    /// the baseline's. Rows without a verdict (ratio only) are not checked.
    #[arg(long, value_name = "PCT", value_parser = percent)]
    fail_if_slower: Option<f64>,

    /// Check the flags, print what would be compared, and exit 0 without
    /// reading the files (CI rehearses the GPU call this way, before the files
    /// exist).
    #[arg(long)]
    dry_run: bool,
}

fn percent(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(p) if p.is_finite() && p >= 0.0 => Ok(p),
        _ => Err(format!("{text} is not a percentage (a number, 0 or more)")),
    }
}

fn main() -> std::process::ExitCode {
    finish_check(run(parse()))
}

/// Prints every comparison; `Some(reason)` when `--fail-if-slower` trips.
fn run(args: Args) -> Result<Option<String>> {
    if args.dry_run {
        println!("dry run: compare (nothing read)");
        println!("flags: {args:#?}");
        for path in &args.files {
            println!(
                "would compare: {} against the baseline {}",
                name(path),
                name(&args.baseline)
            );
        }
        return Ok(None);
    }
    let baseline = compare::load(&args.baseline)?;
    let others = args
        .files
        .iter()
        .map(|path| Ok((path, compare::load(path)?)))
        .collect::<Result<Vec<_>>>()?;

    let mut slower = Vec::new();
    let mut unchecked = 0;
    for (path, entries) in &others {
        let comparison = Comparison::new(&name(&args.baseline), &baseline, &name(path), entries);
        print!("{}", comparison.render(args.format));
        if let Some(pct) = args.fail_if_slower {
            for row in &comparison.rows {
                if let Row::Both { b, ratio, .. } = row {
                    if compare::slower_than(row, pct) {
                        slower.push(format!(
                            "{} {} {} {} in {} ({:+.1}%)",
                            b.experiment,
                            b.size,
                            b.precision,
                            b.device_kind,
                            path.display(),
                            (ratio - 1.0) * 100.0
                        ));
                    }
                }
                unchecked += usize::from(matches!(row, Row::Both { verdict: None, .. }));
            }
        }
    }
    print!("{}", compare::render_method(args.format));
    if unchecked > 0 {
        eprintln!("note: {unchecked} row(s) have no verdict (ratio only): --fail-if-slower does not check them");
    }
    Ok((!slower.is_empty()).then(|| {
        format!(
            "slower than --fail-if-slower {} allows: {}",
            args.fail_if_slower.unwrap_or_default(),
            slower.join("; ")
        )
    }))
}

fn name(path: &Path) -> String {
    path.display().to_string()
}
