//! Whether the machine was ours while a row was timed, as a result file
//! records it ([`Availability`]), and the verdict on those figures
//! ([`verdict`]): a pure function of numbers the OS counted (`crate::availability`
//! reads them), with its thresholds and why each is where it is.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Windows shorter than this are recorded but not judged: `/proc` counts in
/// 10 ms ticks, so a 0.2 s window on 2 CPUs spans 40 ticks and one tick of
/// rounding per counter is a few percent, well inside the thresholds below; a
/// shorter window would flag on rounding.
pub const MIN_JUDGED_WINDOW_S: f64 = 0.2;

/// A CPU row whose process held less than this share of its threads did not
/// have its cores. A quiet 2-thread busy loop or GEMM holds above 0.9; one
/// steady competitor on 2 CPUs leaves a 2-thread row 2/3 under fair scheduling,
/// and the contended run (106 against 197 GFLOP/s) held about half.
pub const HELD_FRACTION_MIN: f64 = 0.75;

/// ... unless the threads it did not hold sat idle: when the machine's idle
/// CPUs cover at least this share of the row's shortfall, nobody took the
/// cores; the row did not use them. A small or bf16 GEMM on the CPU does not
/// keep every thread busy: on an idle 2-CPU VM (others and steal under 1%) the
/// sweep's fp32 256 and bf16 512-1023 rows held 1.31-1.47 of 2 threads. (A cgroup
/// CPU quota also shows as idle, so this rule cannot see one.)
pub const IDLE_SHARE_OF_SHORTFALL_MAX: f64 = 0.5;

/// Others may use the CPUs the row leaves spare, plus at most this share of the
/// CPUs the row needs. With a 2-thread row on 2 CPUs that is 0.5 CPU (25% of the
/// machine): one busy process there takes 0.67 CPU or more. On a 64-CPU machine
/// a 2-thread row is not contended by others using 40 idle cores.
pub const OTHERS_SHARE_MAX: f64 = 0.25;

/// Steal is time our virtual CPUs were ready to run and the hypervisor did not
/// run them: it ran other guests, or woke an idle one of ours late. Above 10% of
/// the machine's CPU time the row lost a tenth of its cores either way; 1-2% is
/// ordinary on a cloud VM. (On a 2-CPU VM, big GEMMs saw about 1%, while a
/// 128 x 128 GEMM, which parks and wakes its threads thousands of times a
/// second, saw 0-12% in four runs and once 32%: small rows are flagged more.)
pub const STEAL_PCT_MAX: f64 = 10.0;

/// `wait_for_quiet` calls the machine quiet when others use less than this
/// share of it: stricter than the contended rule, so that a run that waited
/// starts with room to spare. An idle VM's own daemons and interrupts use 1-3%.
pub const QUIET_OTHERS_PCT_MAX: f64 = 10.0;

/// ... and when the hypervisor steals less than this: half the contended
/// threshold, for the same room. Steal is other guests on the host, which no
/// one on this machine can stop; a run can only wait for them (seen here: 29%
/// over a minute-long sweep on a 2-CPU VM, then under 1% an hour later).
pub const QUIET_STEAL_PCT_MAX: f64 = 5.0;

/// What a row does with the host's threads, which decides the rules that apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RowKind {
    /// The threads compute: a row that did not hold them lost them. All rules.
    Cpu,
    /// The host threads mostly wait on the device, so their CPU time says
    /// nothing; others' use and steal still apply (the launching thread needs
    /// its core).
    Gpu,
}

/// Whether the machine was ours while one row was timed, from a [`Snapshot`]
/// before and one after. A figure is null where `/proc` could not be read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Availability {
    /// Which rules judged the row.
    pub row_kind: RowKind,
    pub wall_s: f64,
    /// This process's user + system CPU time over the window, all its threads.
    pub process_cpu_s: Option<f64>,
    /// Threads the row computes with (for a GPU row, the launching threads).
    pub threads: usize,
    /// CPU time over wall time: how many threads were running on average.
    /// For a row timed in turn with others (A B A B), whose window is all of
    /// theirs, its own samples' CPU time over their wall time (from 2.6;
    /// before, the window's, the others' threads mixed in).
    pub threads_held: Option<f64>,
    /// `threads_held` over the threads that could run at once (`threads`, or
    /// `logical_cpus` when fewer).
    pub held_fraction: Option<f64>,
    /// Of `threads_held`, the threads at work: the calling thread outside
    /// the suite's kernels' hand-offs to the pool plus every thread's tasks
    /// in them, over the same time (`kernels::work`; 2.13), at most
    /// `threads_held`. Candle's pool spins before it parks, so a thread held
    /// may be waiting. Null where the
    /// row handed no work of the suite's kernels to the pool (Candle's own
    /// ops are not seen), and on a GPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads_at_work: Option<f64>,
    /// The suite's kernels' hand-offs to the pool over the same time (2.14):
    /// the CPU's count of what a GPU launches, each a wake of the pool's
    /// threads and a wait for the last. Null where there were none (Candle's
    /// own parallel ops are not seen), and on a GPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hand_offs: Option<u64>,
    pub logical_cpus: Option<usize>,
    /// The machine's busy CPU time (user, nice, system, irq, softirq; not
    /// iowait or steal) minus this process's, as a percentage of all logical
    /// CPUs over the window.
    pub others_cpu_pct: Option<f64>,
    /// Time our CPUs were ready to run and the hypervisor did not run them, as
    /// a percentage of all logical CPUs over the window.
    pub steal_pct: Option<f64>,
    /// Idle and iowait time, as a percentage of all logical CPUs over the
    /// window: where a row's unheld threads went when nobody took them. For a
    /// row timed in turn with others (2.6), what its own threads held and the
    /// window's others and steal leave of the CPUs. Null when `/proc/stat`
    /// could not be read, and in files written before it.
    #[serde(default)]
    pub idle_cpu_pct: Option<f64>,
    /// The run queue at each end: runnable tasks machine-wide, the reading
    /// thread and any of our own threads running at the time included.
    pub procs_running_before: Option<u64>,
    pub procs_running_after: Option<u64>,
    /// The kernel's 1-minute load average at each end (our own threads count).
    pub load_1m_before: Option<f64>,
    pub load_1m_after: Option<f64>,
    /// False when the window was shorter than [`MIN_JUDGED_WINDOW_S`] or no
    /// rule had its figures: then `contended` is false for want of evidence.
    pub judged: bool,
    /// The figures say the cores were not there.
    pub contended: bool,
    /// Why, in plain words: "held 1.02 of 2 threads", "steal 12%".
    pub reasons: Vec<String>,
}

/// A CPU row that held under this share of the threads it was given says so
/// (its threads idled: a part of the work ran on one).
pub const THREADS_HELD_MIN: f64 = 0.75;

impl Availability {
    /// "held 1.0 of 2 threads" for a CPU row whose threads idled (it held
    /// under [`THREADS_HELD_MIN`] of them and no one else took them); `None`
    /// otherwise (a contended row says so on its own).
    pub fn idle_threads(&self) -> Option<String> {
        let held = self.threads_held?;
        let share = self.held_fraction?;
        (self.row_kind == RowKind::Cpu && !self.contended && share < THREADS_HELD_MIN)
            .then(|| format!("held {held:.1} of {} threads", self.threads))
    }
}

/// A row's verdict: see [`verdict`].
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    pub judged: bool,
    pub contended: bool,
    pub reasons: Vec<String>,
}

/// Judges a row on its figures alone (its own `judged`, `contended` and
/// `reasons` are ignored): contended when, over a window of at least
/// [`MIN_JUDGED_WINDOW_S`], a CPU row held under [`HELD_FRACTION_MIN`] of its
/// threads while the CPUs were not idle (see [`IDLE_SHARE_OF_SHORTFALL_MAX`]), or others used more than the spare CPUs plus [`OTHERS_SHARE_MAX`]
/// of the row's, or steal passed [`STEAL_PCT_MAX`].
pub fn verdict(a: &Availability) -> Verdict {
    let mut reasons = Vec::new();
    let mut any_rule = false;
    if a.wall_s < MIN_JUDGED_WINDOW_S {
        return Verdict {
            judged: false,
            contended: false,
            reasons,
        };
    }
    let could_run = a
        .logical_cpus
        .map_or(a.threads, |n| a.threads.min(n))
        .max(1);
    if a.row_kind == RowKind::Cpu {
        if let (Some(fraction), Some(held)) = (a.held_fraction, a.threads_held) {
            any_rule = true;
            let shortfall = could_run as f64 - held;
            let sat_idle = a.idle_cpu_pct.zip(a.logical_cpus).is_some_and(|(pct, n)| {
                pct / 100.0 * n as f64 >= IDLE_SHARE_OF_SHORTFALL_MAX * shortfall
            });
            if fraction < HELD_FRACTION_MIN && !sat_idle {
                reasons.push(format!("held {held:.2} of {could_run} threads"));
            }
        }
    }
    if let (Some(pct), Some(cpus)) = (a.others_cpu_pct, a.logical_cpus) {
        any_rule = true;
        let others = pct / 100.0 * cpus as f64;
        let spare = cpus.saturating_sub(could_run) as f64;
        if others > spare + OTHERS_SHARE_MAX * could_run as f64 {
            reasons.push(format!(
                "others kept {others:.2} of the {cpus} CPUs busy ({pct:.0}%)"
            ));
        }
    }
    if let Some(steal) = a.steal_pct {
        any_rule = true;
        if steal > STEAL_PCT_MAX {
            reasons.push(format!(
                "steal {steal:.0}% (the hypervisor kept our CPUs waiting)"
            ));
        }
    }
    Verdict {
        judged: any_rule,
        contended: !reasons.is_empty(),
        reasons,
    }
}

/// The machine found quiet by [`wait_for_quiet`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct QuietReport {
    /// Time spent sampling, the quiet window included.
    pub waited_s: f64,
    pub windows: usize,
    /// Others' use in the quiet window, as a percentage of all logical CPUs.
    pub others_cpu_pct: f64,
    /// Steal in the quiet window, as a percentage of all logical CPUs.
    pub steal_pct: f64,
    pub logical_cpus: usize,
    pub load_1m: Option<f64>,
}
