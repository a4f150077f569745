//! Flags every experiment shares, each defined once with one bound ([`Common`],
//! [`RunCounts`], [`HostMemoryFlag`], [`BenchSize`], [`Dtypes`]), `--dry-run`'s
//! plan, and what every program installs when its command line is accepted
//! (the signal and out-of-memory cleanup). Exit codes are `crate::outcome`'s.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::{Args, Parser};

use crate::clock::Plan;
use crate::device::DeviceArg;
use crate::export::output::Output;
use crate::memory::fits::HostCheck;
use crate::precision::Precision;
use crate::schema::{Adaptive, Sampling};
use crate::schema::{DeviceInfo, Kind};

#[derive(Args, Debug, Clone)]
pub struct Common {
    /// Where to run: auto (CUDA GPU 0 if this build has CUDA and a GPU answers,
    /// else the CPU), cpu, cuda, or cuda:N for GPU N.
    #[arg(long, default_value = "auto", value_name = "DEVICE")]
    pub device: DeviceArg,

    /// Write the JSON report to FILE, or to standard output if FILE is "-" (the
    /// tables then go to standard error). Missing folders are created; an
    /// existing FILE must be a writable regular file, or a link to one: it is
    /// replaced whole, keeping its permissions.
    #[arg(long, value_name = "FILE", conflicts_with = "results_dir")]
    pub output: Option<PathBuf>,

    /// Write the JSON report to DIR/<machine>/<experiment>.json, where <machine>
    /// names the hardware: the GPU ("nvidia-h200"), or the CPU model, its
    /// family/model and ISA level, and its logical CPUs
    /// ("intel-xeon-processor-2-80ghz-f6m106-v4-2t").
    #[arg(long, value_name = "DIR")]
    pub results_dir: Option<PathBuf>,

    /// Check every flag and value and the output path as a run would, print
    /// the plan and the file it would write, and exit 0, without opening the
    /// device or computing anything (CI rehearses the GPU call this way).
    #[arg(long)]
    pub dry_run: bool,

    /// Before measuring, wait up to SECONDS (60 if not given) for other work to
    /// leave the machine (others using under 10% of its CPUs, the hypervisor
    /// stealing under 5%), else refuse in one line. Every row records how much of the machine it had either way.
    #[arg(long, value_name = "SECONDS", num_args = 0..=1, default_missing_value = "60",
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub require_quiet: Option<u64>,

    /// Before measuring, wait up to SECONDS for a quiet machine as
    /// --require-quiet does, then measure anyway: the rows record how much of
    /// the machine they had, and those that ran contended are marked (what
    /// `just results` does).
    #[arg(long, value_name = "SECONDS", conflicts_with = "require_quiet",
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub wait_for_quiet: Option<u64>,

    /// Fill the flags not given with a named preset: `small` runs in seconds
    /// on two cores (what CI and the quick `just results` use; its numbers
    /// are not the machine's speed). The flags given win over it.
    #[arg(long, value_name = "NAME")]
    pub preset: Option<Preset>,

    #[command(flatten)]
    pub host: HostMemoryFlag,
}

impl Common {
    /// Where this run's JSON goes, checked now, before anything is computed.
    pub fn output(&self, experiment: Kind, device: &DeviceInfo) -> Result<Output> {
        let path = match (&self.output, &self.results_dir) {
            (Some(file), _) => file.clone(),
            (None, Some(dir)) => {
                results_dir_files(dir, &device.slug(), experiment)?;
                let folder = dir.join(device.slug());
                if device.kind == crate::schema::DeviceKind::Cpu {
                    let here = crate::cpu_identity::CpuIdentity::detect();
                    crate::cpu_identity::check_folder(&folder, &here)?;
                }
                folder.join(format!("{}.json", experiment.name()))
            }
            (None, None) => return Ok(Output::None),
        };
        crate::export::output::prepare(&path)
    }

    /// [`Common::output`] and, beside it, every other format the experiment
    /// is written in ([`crate::export::Outputs`]), all checked now.
    pub fn outputs(&self, experiment: Kind, device: &DeviceInfo) -> Result<crate::export::Outputs> {
        crate::export::Outputs::new(self.output(experiment, device)?, experiment)
    }

    /// With `--require-quiet`, waits for a quiet machine (one line saying what
    /// it found) or refuses; with `--wait-for-quiet`, waits the same way and
    /// then goes on with one line saying what stayed busy; without either,
    /// returns at once.
    pub fn wait_for_quiet(&self) -> Result<()> {
        let (secs, refuse) = match (self.require_quiet, self.wait_for_quiet) {
            (Some(s), _) => (s, true),
            (None, Some(s)) => (s, false),
            (None, None) => return Ok(()),
        };
        let window = std::time::Duration::from_secs(1);
        match crate::availability::wait_for_quiet(std::time::Duration::from_secs(secs), window) {
            Ok(q) => {
                crate::note!(
                    "quiet: others used {:.1}% of the {} CPUs, steal {:.1}% (after {:.0} s)",
                    q.others_cpu_pct,
                    q.logical_cpus,
                    q.steal_pct,
                    q.waited_s
                );
                Ok(())
            }
            Err(why) if refuse => bail!("--require-quiet {secs}: {why}"),
            Err(why) => {
                crate::note!(
                    "note: --wait-for-quiet {secs}: {why}; measuring anyway (contended rows are marked)"
                );
                Ok(())
            }
        }
    }

    /// Ends a dry run: checks the output path as [`Common::output`] does (any
    /// folder that check creates is removed again), then prints the parsed
    /// flags, the plan derived from them and where the report would go. The
    /// device is not opened, so its memory is not checked and a
    /// `--results-dir` file's machine folder is left unnamed.
    pub fn dry_run(
        &self,
        experiment: Kind,
        flags: &dyn std::fmt::Debug,
        plan: &dyn std::fmt::Debug,
        side_files: &[std::path::PathBuf],
        inputs: &[crate::export::output::Input],
    ) -> Result<Completion> {
        use crate::export::output::{abandon, prepare, refuse_overlap};
        // Every file the run would write, checked as the run checks them
        // (the folders that creates are removed again): by the output policy,
        // and against the files the run reads.
        let checked = (|| -> Result<Option<Output>> {
            let mut held = Vec::new();
            let json = match &self.output {
                Some(file) => {
                    let outputs = crate::export::Outputs::new(prepare(file)?, experiment)?;
                    let json_is_stdout = outputs.is_stdout();
                    held.extend(outputs.paths().into_iter().map(|p| p.to_path_buf()));
                    Some(if json_is_stdout {
                        Output::Stdout
                    } else {
                        Output::None
                    })
                }
                None => None,
            };
            for path in side_files {
                if let Some(p) = prepare(path)?.path() {
                    held.push(p.to_path_buf());
                }
            }
            let refs: Vec<&std::path::Path> = held.iter().map(|p| p.as_path()).collect();
            refuse_overlap(&refs, inputs)?;
            Ok(json)
        })();
        drop(abandon());
        let experiment = experiment.name();
        let target = match (checked?, &self.output, &self.results_dir) {
            (Some(Output::Stdout), _, _) => "standard output".to_string(),
            (Some(_), Some(file), _) => crate::quote::shown(file),
            (_, _, Some(dir)) => format!(
                "{}/<machine>/{experiment}.json (the machine is named when the device opens)",
                crate::quote::shown(dir)
            ),
            _ => "nothing (no --output or --results-dir)".into(),
        };
        let device = self.device;
        let kind = if device.expects_cuda() {
            "a GPU"
        } else {
            "the CPU"
        };
        println!(
            "dry run: {experiment} on --device {device} ({kind}; not opened, nothing computed)"
        );
        println!("flags: {flags:#?}");
        println!("plan: {plan:#?}");
        println!("memory check: when the device is opened");
        println!("would write: {target}");
        Ok(Completion::Complete)
    }
}

/// Under `--results-dir DIR`, every file the run writes there
/// (`<machine>/<experiment>.json` and the formats beside it) is reached through
/// real folders and is a regular file or none yet, as `report` writes
/// ([`crate::read::folder::check_inside`]): a machine folder that is a link
/// would aim the write outside the results folder. `DIR` itself is the
/// user's choice and may be a link.
fn results_dir_files(dir: &std::path::Path, machine: &str, experiment: Kind) -> Result<()> {
    let extensions = std::iter::once("json").chain(
        crate::export::FORMATS
            .iter()
            .filter(|f| f.applies_to(experiment))
            .map(|f| f.extension()),
    );
    for ext in extensions {
        let rel = std::path::Path::new(machine).join(format!("{}.{ext}", experiment.name()));
        crate::read::folder::check_inside(dir, &rel)?;
    }
    Ok(())
}

/// A named set of flags, one per experiment (`--preset small`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Preset {
    /// Sizes that run in seconds on two cores: what CI, the quick `just
    /// results`, the GPU run's CPU rehearsal and the tests use. Not the
    /// machine's speed.
    Small,
    /// What the one-call run on a lent GPU gives this experiment
    /// (scripts/gpu-run.sh): its defaults, and where they leave out what the
    /// call should measure, the flags that add it.
    GpuCall,
    /// What `just results` gives this experiment: its defaults, unless they
    /// take minutes (a real model's every precision).
    Results,
}

/// Largest `--size`: keeps every byte count (3 n^2 x 8 < 2^63) far from overflow.
pub const MAX_SIZE: u64 = 1_000_000;

/// Largest `--iters`: every sample is kept, and 100,000 runs of even a 64 x 64
/// matmul is plenty; a larger count is a typo that would run for days.
pub const MAX_ITERS: u64 = 100_000;

/// Largest `--warmup`: a few runs pay the one-time costs; 10,000 is far beyond.
pub const MAX_WARMUP: u64 = 10_000;

/// Timed and untimed runs per row: every experiment that times rows takes
/// these two flags, with these bounds; the defaults are each experiment's
/// (and may depend on the device), resolved by [`RunCounts::plan`].
#[derive(Args, Debug, Clone)]
pub struct RunCounts {
    /// Timed runs per row, 1 to 100,000 (default: the experiment's; see --help
    /// of each).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=MAX_ITERS))]
    pub iters: Option<u64>,

    /// Untimed runs before timing, per row, 0 to 10,000 (default: the
    /// experiment's).
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=MAX_WARMUP))]
    pub warmup: Option<u64>,
}

impl RunCounts {
    /// The plan these flags ask for, `default` filling what they leave out.
    pub fn plan(&self, default: Plan) -> Plan {
        Plan {
            warmup: self.warmup.map_or(default.warmup, |n| n as usize),
            iters: self.iters.map_or(default.iters, |n| n as usize),
        }
    }
}

/// How far the bandwidth ladder reaches (`crate::bench::ladder`): every
/// experiment that holds rows against it takes this flag, with this bound.
#[derive(Args, Debug, Clone, Copy)]
pub struct LadderFlags {
    /// The bandwidth ladder's largest footprint, in MiB (default: four times
    /// the last cache's capacity, past every cache). Smaller is faster but may
    /// not reach memory: each bound still names the level it was measured in.
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    pub ladder_max_mib: Option<u64>,
}

impl LadderFlags {
    /// The largest footprint in bytes, when capped.
    pub fn max_bytes(&self) -> Option<u64> {
        self.ladder_max_mib.map(|m| m << 20)
    }
}

/// The host-memory check every experiment makes before it allocates
/// ([`crate::memory::fits`]), and the flag that skips it.
#[derive(Args, Debug, Clone)]
pub struct HostMemoryFlag {
    /// Do not check host memory before allocating. For machines whose memory
    /// grows on demand, where what the kernel reports at start understates what
    /// a run can have; a size that does not fit then ends the run with one
    /// `error:` line when an allocation fails.
    #[arg(long)]
    pub skip_host_memory_check: bool,
}

impl HostMemoryFlag {
    pub fn check(&self) -> HostCheck {
        if self.skip_host_memory_check {
            HostCheck::Skip
        } else {
            HostCheck::Enforce
        }
    }
}

/// The reference lab's matmul defaults: 20 timed runs, 5 warm-up runs.
pub const REFERENCE_PLAN: Plan = Plan {
    warmup: 5,
    iters: 20,
};

/// `matmul`'s sampling on the CPU unless --iters or --warmup say otherwise:
/// after one warm-up run, at least 5 samples, then until the median is known
/// to +-1% or 3 s have passed (a 4096 fp32 matmul takes about a second on two
/// cores: there the 5 samples decide).
pub const CPU_ADAPTIVE: Adaptive = Adaptive {
    warmup: 1,
    min_samples: 5,
    max_samples: 10_000,
    min_time_s: 0.1,
    max_time_s: 3.0,
    target_rel_spread: 0.01,
};

/// The size and run counts of a matmul benchmark, with the reference lab's
/// defaults (4096; 20 timed runs and 5 warm-up runs, see [`REFERENCE_PLAN`]:
/// the CPU comparison makes max(3, iters/4) runs and one warm-up).
#[derive(Args, Debug, Clone)]
pub struct BenchSize {
    /// Side n of the n x n matrices (1 to 1,000,000; the memory check refuses
    /// what does not fit).
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u64).range(1..=MAX_SIZE))]
    pub size: u64,

    #[command(flatten)]
    pub counts: RunCounts,
}

impl BenchSize {
    pub fn n(&self) -> usize {
        self.size as usize
    }

    pub fn plan(&self) -> Plan {
        self.counts.plan(REFERENCE_PLAN)
    }

    /// How `matmul` samples its rows: on a GPU, or with --iters or --warmup
    /// given, the reference lab's fixed protocol ([`Self::plan`]); else, on
    /// the CPU, adaptively ([`CPU_ADAPTIVE`]), since a fixed 25 runs of a
    /// 4096 matmul there take minutes.
    pub fn sampling(&self, on_cuda: bool) -> Sampling {
        let asked = self.counts.iters.is_some() || self.counts.warmup.is_some();
        if on_cuda || asked {
            self.plan().into()
        } else {
            CPU_ADAPTIVE.into()
        }
    }
}

use crate::outcome::Completion;

/// The precisions a matmul benchmark runs (`matmul`, `sweep`).
#[derive(Args, Debug, Clone)]
pub struct Dtypes {
    /// Precisions, comma-separated: fp64, fp32, tf32, fp16, fp16-reduced, bf16,
    /// bf16-reduced (f32, f16... also accepted). tf32 and the -reduced modes are
    /// cuBLAS settings and need a CUDA device.
    #[arg(long, value_delimiter = ',', default_value = "fp32,fp16,bf16")]
    pub dtypes: Vec<Precision>,
}

impl Dtypes {
    /// The precisions in the order given, each once; a cuBLAS mode is refused
    /// on a device that is not a GPU (there it would be a plain row in disguise).
    pub fn for_device(&self, on_cuda: bool) -> Result<Vec<Precision>> {
        let mut precisions: Vec<Precision> = Vec::new();
        for p in &self.dtypes {
            if !precisions.contains(p) {
                precisions.push(*p);
            }
        }
        if let Some(p) = precisions.iter().find(|p| p.reduced_gemm() && !on_cuda) {
            bail!(
                "--dtypes {p}: a cuBLAS GEMM mode, it needs a CUDA device (on the CPU it would be a plain {} row)",
                p.dtype().as_str()
            );
        }
        Ok(precisions)
    }
}

/// Parses a tool's command line (the experiments go through
/// [`crate::experiment::main`]). A refused command line is the exit code
/// [`crate::outcome::usage`] gives, which `main` returns.
pub fn parse<T: Parser>() -> Result<T, std::process::ExitCode> {
    match T::try_parse() {
        Ok(args) => {
            on_start();
            Ok(args)
        }
        Err(e) => Err(crate::outcome::usage(&e)),
    }
}

/// What every program installs once its command line is accepted: on SIGINT
/// or SIGTERM, and on a failed allocation, the temporary file being written
/// and the folders this run created are removed before the process exits
/// with the code [`crate::outcome`] gives.
pub fn on_start() {
    exit_on_signals();
    crate::memory::on_out_of_memory(
        crate::export::output::abandon_without_allocating,
        crate::outcome::EXIT_ERROR,
    );
}

/// On SIGINT or SIGTERM: remove the temporary file being written and the
/// folders this run created, then exit as [`crate::outcome::signal_exit_code`]
/// says. If the handler cannot be installed, the signals keep their default
/// action (end the process), which is no worse.
fn exit_on_signals() {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM]) else {
        return;
    };
    std::thread::spawn(move || {
        if let Some(signal) = signals.forever().next() {
            // Held while exiting: the run cannot start a rename after the cleanup.
            let _held = crate::export::output::abandon();
            std::process::exit(crate::outcome::signal_exit_code(signal));
        }
    });
}
