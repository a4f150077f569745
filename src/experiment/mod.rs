//! The one experiment seam. An experiment is what [`Experiment`] says it is:
//! the body it writes (its name comes from it), its flags, the config it
//! checks from them, what it needs in memory, its small preset and its run.
//! [`main`] is the one runner every program calls, and it does the same
//! sequence for all of them: parse the flags (the small preset folded in),
//! stop after the plan on `--dry-run`, open the device, check the config and
//! whether it fits, check every output path, wait for a quiet machine when
//! asked, run, save the files, show the tables, and end with the exit code
//! the outcome calls for ([`crate::outcome`]).
//!
//! A new experiment is then its core (`src/bench/`), its body (a [`Body`]
//! variant, `src/schema/`), its view (`src/export/views/`), its test, and its
//! program (`experiments/NAME.rs`: an implementation of this trait and a
//! three-line `main`), with Cargo's `[[bin]]` and a recipe; `tests/registry.rs`
//! fails when one of those lists misses a registered experiment.

mod preset;

use std::cell::OnceCell;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use candle_core::Device;

use crate::cli::Common;
use crate::device::select;
use crate::export::{self, output, output::Output, Outputs};
use crate::memory::fits::{self, Need};
use crate::outcome::{self, Completion};
use crate::schema::{Body, DeviceInfo, Kind, ResultFile, SCHEMA_VERSION};
use crate::telemetry::{self, Telemetry};

/// What one experiment is; [`main`] runs it.
pub trait Experiment {
    /// The body it writes: its name, result file and body key come from it.
    const KIND: Kind;
    /// What the program does, for `--help`.
    const ABOUT: &'static str;
    /// The small preset (`--preset small`), as command-line words: sizes
    /// that run in seconds on two cores. The quick `just results`, CI, the
    /// GPU run's CPU rehearsal and the tests use it; a flag the command line
    /// gives itself wins over the preset's.
    const SMALL: &'static [&'static str];
    /// The one-call GPU run's flags (`--preset gpu-call`, scripts/gpu-run.sh):
    /// none unless the defaults leave out what that call should measure.
    const GPU_CALL: &'static [&'static str] = &[];
    /// `just results`' flags (`--preset results`): none unless the defaults
    /// take minutes.
    const RESULTS: &'static [&'static str] = &[];

    /// The experiment's own flags, beside the shared [`Common`] ones.
    type Flags: clap::Args + clap::FromArgMatches + std::fmt::Debug;
    /// The checked plan a run follows.
    type Config: std::fmt::Debug;

    /// The plan the flags ask for on a GPU (`on_cuda`) or the CPU, checked:
    /// a bad combination is one error here, before anything runs.
    fn config(flags: &Self::Flags, on_cuda: bool) -> Result<Self::Config>;

    /// What must fit before the run allocates, checked on `device` by
    /// [`fits::check_all`] (a part that lives on the host whatever the
    /// device says so: [`Need::on_host`]).
    fn needs(_cfg: &Self::Config, _device: &Device) -> Result<Vec<Need>> {
        Ok(Vec::new())
    }

    /// Files the run writes besides its result (the block's weights), by a
    /// name the run asks [`Session::side_file`] for; checked before it runs.
    fn side_files(_cfg: &Self::Config) -> Vec<(&'static str, PathBuf)> {
        Vec::new()
    }

    /// Files the run reads (the model), each with what it is to the run: no
    /// output may be one of them ([`output::refuse_overlap`]), checked before
    /// any work, the dry run's too.
    fn inputs(_cfg: &Self::Config) -> Vec<output::Input> {
        Vec::new()
    }

    /// Which tables the terminal shows ([`export::views::Width`]): the
    /// compact ones unless the experiment has a flag for the full ones
    /// (generate's `--wide`).
    fn width(_flags: &Self::Flags) -> export::views::Width {
        export::views::Width::Compact
    }

    /// Measures, and returns the body; a row that fails is kept in it with
    /// its error (the exit code then says so), an error ends the run.
    fn run(cfg: &Self::Config, session: &Session) -> Result<Body>;
}

/// What a run is given: the device, what the runner knows of it, and the
/// ways a run may speak before its result is shown.
pub struct Session {
    pub device: Device,
    pub info: DeviceInfo,
    /// How long opening the device took: the first thing the process did with it.
    pub open_ms: f64,
    outputs: Outputs,
    side: Vec<(&'static str, Output)>,
    telemetry: OnceCell<Telemetry>,
    notes: std::cell::RefCell<Vec<String>>,
}

impl Session {
    /// The GPU's name when the run is on one (for its datasheet peaks).
    pub fn gpu_name(&self) -> Option<&str> {
        self.device.is_cuda().then_some(self.info.name.as_str())
    }

    /// The GPU's telemetry, opened on first use (its source said in one line).
    pub fn telemetry(&self) -> &Telemetry {
        self.telemetry.get_or_init(|| {
            let t = Telemetry::open(&self.device);
            crate::note!("{}", telemetry::line(&t.source()));
            t
        })
    }

    /// The side file [`Experiment::side_files`] named `name`, if the run has it.
    pub fn side_file(&self, name: &str) -> Option<&Output> {
        self.side.iter().find(|(n, _)| *n == name).map(|(_, o)| o)
    }

    /// Saves `body` as the run stands, quietly, for a run that keeps what it
    /// finished if it is stopped (the sweep, after every point). Nothing is
    /// written when the JSON goes to standard output: that takes one document.
    pub fn save_progress(&self, body: Body) -> Result<()> {
        if self.outputs.is_stdout() {
            return Ok(());
        }
        self.outputs
            .save_quietly(&result_file(self.info.clone(), body))
    }

    /// Whether the JSON goes to standard output (`--output -`).
    pub fn writes_stdout(&self) -> bool {
        self.outputs.is_stdout()
    }

    /// A line shown after the result's tables.
    pub fn note_after(&self, line: String) {
        self.notes.borrow_mut().push(line);
    }
}

/// Wraps `body` in the envelope every result file shares (schema version,
/// time, this command line, environment, device).
pub fn result_file(device: DeviceInfo, body: Body) -> ResultFile {
    ResultFile {
        schema_version: SCHEMA_VERSION.into(),
        experiment: body.experiment().into(),
        created_utc: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        command: crate::quote::command_line(),
        environment: crate::env::capture(),
        device,
        body,
    }
}

/// The program of experiment `E`: the whole sequence (module docs), and the
/// exit code of its outcome.
pub fn main<E: Experiment>() -> ExitCode {
    match preset::parse::<E>(std::env::args_os().collect()) {
        Ok((common, flags)) => {
            crate::cli::on_start();
            outcome::finish(run::<E>(&common, &flags))
        }
        Err(e) => outcome::usage(&e),
    }
}

fn run<E: Experiment>(common: &Common, flags: &E::Flags) -> Result<Completion> {
    // The config is checked before the device opens (a bad flag or file opens
    // no GPU context), for the device the flag expects; again for the one that
    // opened, if that is another (`--device auto` without a GPU).
    let expects_cuda = common.device.expects_cuda();
    let cfg = E::config(flags, expects_cuda)?;
    if common.dry_run {
        let side: Vec<PathBuf> = E::side_files(&cfg).into_iter().map(|(_, p)| p).collect();
        return common.dry_run(E::KIND, flags, &cfg, &side, &E::inputs(&cfg));
    }
    // Opening the device is the first thing the process does with it, so its
    // time is the context's creation (overhead's first row).
    let started = std::time::Instant::now();
    let (device, info) = select(common.device)?;
    let open_ms = started.elapsed().as_secs_f64() * 1e3;
    let cfg = if device.is_cuda() == expects_cuda {
        cfg
    } else {
        E::config(flags, device.is_cuda())?
    };
    fits::check_all(&device, &E::needs(&cfg, &device)?, common.host.check())?;
    let outputs = common.outputs(E::KIND, &info)?;
    let side = E::side_files(&cfg)
        .into_iter()
        .map(|(n, path)| Ok((n, output::prepare(&path)?)))
        .collect::<Result<Vec<_>>>()?;
    let written: Vec<&std::path::Path> = outputs
        .paths()
        .into_iter()
        .chain(side.iter().filter_map(|(_, o)| o.path()))
        .collect();
    output::refuse_overlap(&written, &E::inputs(&cfg))?;
    common.wait_for_quiet()?;
    let session = Session {
        device,
        info,
        open_ms,
        outputs,
        side,
        telemetry: OnceCell::new(),
        notes: Default::default(),
    };
    let body = E::run(&cfg, &session)?;
    let done = Completion::of_body(&body);
    let file = result_file(session.info.clone(), body);
    session.outputs.save_all(&file)?;
    let (notes, screen) = (session.notes.borrow(), session.outputs.screen());
    export::show(&file, &notes, screen, E::width(flags))?;
    Ok(done)
}
