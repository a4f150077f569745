//! Whether the machine was ours while a row was timed. A steady competitor
//! (another process, a neighbour on a shared VM) can halve a multi-threaded CPU
//! row without widening its spread, so the noise flag cannot see it; what the
//! OS already counts can. A [`Snapshot`] is read just before a row's first
//! sample and just after its last; two of them and the threads the row computes
//! with give an [`Availability`]: how many threads this process actually held,
//! how much of the machine others used, how much the hypervisor stole, and a
//! verdict ([`verdict`]) with its reasons in plain words. [`wait_for_quiet`]
//! samples the machine, this process idle, until others leave it.
//!
//! Sources, all Linux's own counters: this process's user + system CPU time from
//! `/proc/self/stat` (every thread of the process, exited ones included; child
//! processes are not counted), the machine's from the aggregate `cpu` line of
//! `/proc/stat`, the run queue from its `procs_running`, the load from
//! `/proc/loadavg`. Where a file cannot be read the figures it gives are `None`
//! and no rule judges on them: reading never stops a run. Rows timed in turn
//! with others (A B A B) share one window: their threads held come from
//! their own samples instead, from each thread's CPU clock read around each
//! ([`ThreadClocks`], [`held_over_own_samples`]).

use std::time::{Duration, Instant};

pub use crate::schema::{
    verdict, Availability, QuietReport, RowKind, Verdict, QUIET_OTHERS_PCT_MAX, QUIET_STEAL_PCT_MAX,
};

/// Seconds per tick in `/proc/stat` and `/proc/<pid>/stat` are 1/USER_HZ, and
/// USER_HZ is 100 on every Linux architecture this suite builds for (x86_64,
/// aarch64). `sysconf(_SC_CLK_TCK)` would say so, but needs libc or a rustix
/// feature (and a rebuild of everything above rustix) for a constant.
const TICKS_PER_S: f64 = 100.0;

/// The machine's CPU time in clock ticks, summed over its logical CPUs: the
/// aggregate `cpu` line of `/proc/stat` (guest time is inside `user` already).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTicks {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
}

impl CpuTicks {
    /// Time some task ran (ours included). Steal is not in it: then nothing of
    /// this machine's ran.
    pub fn busy(&self) -> u64 {
        self.user + self.nice + self.system + self.irq + self.softirq
    }

    pub fn total(&self) -> u64 {
        self.busy() + self.idle + self.iowait + self.steal
    }

    /// The ticks from `earlier` to `self`. Saturating: iowait is known to step
    /// back on tickless kernels.
    pub fn since(&self, earlier: &CpuTicks) -> CpuTicks {
        CpuTicks {
            user: self.user.saturating_sub(earlier.user),
            nice: self.nice.saturating_sub(earlier.nice),
            system: self.system.saturating_sub(earlier.system),
            idle: self.idle.saturating_sub(earlier.idle),
            iowait: self.iowait.saturating_sub(earlier.iowait),
            irq: self.irq.saturating_sub(earlier.irq),
            softirq: self.softirq.saturating_sub(earlier.softirq),
            steal: self.steal.saturating_sub(earlier.steal),
        }
    }
}

/// The machine and this process at one instant.
#[derive(Clone, Debug, PartialEq)]
pub struct Snapshot {
    pub at: Instant,
    /// This process's user + system CPU time, all its threads.
    pub process_cpu_s: Option<f64>,
    pub machine: Option<CpuTicks>,
    /// The `cpuN` lines of `/proc/stat`: the logical CPUs online.
    pub logical_cpus: Option<usize>,
    /// Tasks runnable machine-wide right now, the one reading this included.
    pub procs_running: Option<u64>,
    pub load_1m: Option<f64>,
    /// The suite's kernels' work counters ([`crate::kernels::work`]).
    pub work: crate::kernels::work::Totals,
}

impl Snapshot {
    /// Reads the counters now; a file that cannot be read leaves its fields `None`.
    pub fn take() -> Self {
        let read = |path: &str| std::fs::read_to_string(path).ok();
        let stat = read("/proc/stat")
            .map(|t| parse_proc_stat(&t))
            .unwrap_or_default();
        Snapshot {
            at: Instant::now(),
            process_cpu_s: read("/proc/self/stat").and_then(|t| parse_self_stat(&t)),
            machine: stat.cpu,
            logical_cpus: stat.logical_cpus,
            procs_running: stat.procs_running,
            load_1m: read("/proc/loadavg").and_then(|t| parse_loadavg(&t)),
            work: crate::kernels::work::Totals::read(),
        }
    }
}

/// Each of this process's threads' CPU clocks at one moment, in nanoseconds
/// by thread id: `clock_gettime` on the thread's clock id (made from its id
/// as glibc's `pthread_getcpuclockid` makes it), which the kernel brings up
/// to date for a thread running on another CPU at the call. The process
/// clock (`CLOCK_PROCESS_CPUTIME_ID`) and `/proc`'s counters do that for the
/// calling thread only and lag up to a scheduler tick for the others: a pool
/// thread's whole share of a sample of a millisecond.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ThreadClocks(Vec<(i32, u64)>);

impl ThreadClocks {
    /// The clocks now; `None` where `/proc/self/task` cannot be listed. A
    /// thread that ends between the listing and its read is left out.
    pub fn read() -> Option<Self> {
        let mut clocks = Vec::new();
        for task in std::fs::read_dir("/proc/self/task").ok()? {
            let Some(tid) = task
                .ok()
                .and_then(|t| t.file_name().to_str()?.parse::<i32>().ok())
            else {
                continue;
            };
            // Linux's CPU clock id of thread `tid`: MAKE_THREAD_CPUCLOCK(tid,
            // CPUCLOCK_SCHED), `(~tid << 3) | CPUCLOCK_PERTHREAD_MASK | CPUCLOCK_SCHED`.
            let clock = (!tid << 3) | 4 | 2;
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: `ts` is a valid, writable timespec for the call's duration;
            // a clock id of a thread that has ended is refused with EINVAL.
            if unsafe { libc::clock_gettime(clock as libc::clockid_t, &mut ts) } == 0 {
                clocks.push((tid, ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64));
            }
        }
        clocks.sort_unstable();
        Some(Self(clocks))
    }

    /// The CPU time the threads that both readings list spent between
    /// `earlier` and this one. A thread born between them is left out (its
    /// clock holds its whole life, not the interval: a pool started during a
    /// sample of half a millisecond read as 9 threads held of 2), and so is
    /// one that ended.
    pub fn since(&self, earlier: &Self) -> u64 {
        let mut total = 0u64;
        let mut before = earlier.0.iter().peekable();
        for &(tid, ns) in &self.0 {
            while before.next_if(|(t, _)| *t < tid).is_some() {}
            if let Some(&&(_, was)) = before.peek().filter(|(t, _)| *t == tid) {
                total += ns.saturating_sub(was);
            }
        }
        total
    }
}

/// `a` with its threads held taken from a row's own samples (`cpu_s` of this
/// process's CPU time in `wall_s` of them) rather than from its window: for
/// rows timed in turn with others, whose window is all of theirs. Others'
/// use and steal stay the window's; idle is what the row's threads and
/// those leave.
pub fn held_over_own_samples(mut a: Availability, cpu_s: f64, wall_s: f64) -> Availability {
    if wall_s <= 0.0 {
        return a;
    }
    let held = cpu_s / wall_s;
    let could_run = a
        .logical_cpus
        .map_or(a.threads, |n| a.threads.min(n))
        .max(1);
    a.threads_held = Some(held);
    a.held_fraction = Some(held / could_run as f64);
    // Idle is not read per sample (`/proc/stat` counts ticks): what the
    // row's own threads, and the window's others and steal, leave of the
    // machine. So a row that leaves threads idle on a quiet machine is not
    // flagged; one whose threads others or the hypervisor took is.
    if let (Some(n), Some(others)) = (a.logical_cpus, a.others_cpu_pct) {
        let taken = (others + a.steal_pct.unwrap_or(0.0)) / 100.0 * n as f64;
        let idle = (n as f64 - held - taken).max(0.0);
        a.idle_cpu_pct = Some(100.0 * idle / n as f64);
    }
    let v = verdict(&a);
    (a.judged, a.contended, a.reasons) = (v.judged, v.contended, v.reasons);
    a
}

/// The figures of the window from `before` to `after` for a row computing
/// with `threads` threads, judged by [`verdict`].
pub fn between(before: &Snapshot, after: &Snapshot, threads: usize, kind: RowKind) -> Availability {
    let wall_s = after.at.saturating_duration_since(before.at).as_secs_f64();
    let process_cpu_s = after
        .process_cpu_s
        .zip(before.process_cpu_s)
        .map(|(a, b)| (a - b).max(0.0));
    let logical_cpus = after.logical_cpus.or(before.logical_cpus);
    let threads_held = process_cpu_s.filter(|_| wall_s > 0.0).map(|c| c / wall_s);
    let could_run = logical_cpus.map_or(threads, |n| threads.min(n)).max(1);
    let window = after
        .machine
        .zip(before.machine)
        .map(|(a, b)| a.since(&b))
        .filter(|d| d.total() > 0);
    let pct = |ticks: f64, d: &CpuTicks| 100.0 * ticks / d.total() as f64;
    let others_cpu_pct = window
        .zip(process_cpu_s)
        .map(|(d, ours_s)| pct((d.busy() as f64 - ours_s * TICKS_PER_S).max(0.0), &d));
    let mut a = Availability {
        row_kind: kind,
        wall_s,
        process_cpu_s,
        threads,
        threads_held,
        held_fraction: threads_held.map(|h| h / could_run as f64),
        // Never more than held: wall time counts a thread the OS took
        // mid-task as at work.
        threads_at_work: match kind {
            RowKind::Cpu => after.work.since(&before.work).threads_at_work(),
            RowKind::Gpu => None,
        }
        .map(|w| threads_held.map_or(w, |h| w.min(h))),
        // A count, unlike the ratio above, is only a work's own over its own
        // samples (the caller of [`held_over_own_samples`] sets it): a window holds
        // every work timed in turn in it.
        hand_offs: None,
        logical_cpus,
        others_cpu_pct,
        steal_pct: window.map(|d| pct(d.steal as f64, &d)),
        idle_cpu_pct: window.map(|d| pct((d.idle + d.iowait) as f64, &d)),
        procs_running_before: before.procs_running,
        procs_running_after: after.procs_running,
        load_1m_before: before.load_1m,
        load_1m_after: after.load_1m,
        judged: false,
        contended: false,
        reasons: Vec::new(),
    };
    let v = verdict(&a);
    (a.judged, a.contended, a.reasons) = (v.judged, v.contended, v.reasons);
    a
}

/// Samples the machine in windows of `window` (this process asleep) until
/// others use less than [`QUIET_OTHERS_PCT_MAX`] of it and the hypervisor
/// steals less than [`QUIET_STEAL_PCT_MAX`], for at most `max_wait` (at least
/// one window). `Err` is one line saying what was seen.
pub fn wait_for_quiet(max_wait: Duration, window: Duration) -> Result<QuietReport, String> {
    wait_until_quiet(max_wait, window, |w| {
        let before = Snapshot::take();
        std::thread::sleep(w);
        between(&before, &Snapshot::take(), 1, RowKind::Gpu)
    })
}

/// [`wait_for_quiet`]'s loop, `sample` measuring one window (a fake in tests).
fn wait_until_quiet(
    max_wait: Duration,
    window: Duration,
    mut sample: impl FnMut(Duration) -> Availability,
) -> Result<QuietReport, String> {
    let window = window.min(max_wait).max(Duration::from_millis(100));
    // Counted in windows, not summed wall time, so the loop ends whatever the clock says.
    let max_windows = ((max_wait.as_secs_f64() / window.as_secs_f64()) as usize).max(1);
    let mut waited_s = 0.0;
    // The least seen in any window, each on its own: so "at least" holds for every window.
    let (mut least_pct, mut least_steal, mut cpus_seen) = (f64::INFINITY, f64::INFINITY, 0);
    let mut load = None;
    for windows in 1..=max_windows {
        let a = sample(window);
        waited_s += a.wall_s;
        let (Some(pct), Some(cpus)) = (a.others_cpu_pct, a.logical_cpus) else {
            return Err(
                "cannot wait for quiet: /proc/stat does not say how busy the machine is".into(),
            );
        };
        let steal = a.steal_pct.unwrap_or(0.0);
        load = a.load_1m_after;
        if pct < QUIET_OTHERS_PCT_MAX && steal < QUIET_STEAL_PCT_MAX {
            return Ok(QuietReport {
                waited_s,
                windows,
                others_cpu_pct: pct,
                steal_pct: steal,
                logical_cpus: cpus,
                load_1m: load,
            });
        }
        (least_pct, least_steal, cpus_seen) = (least_pct.min(pct), least_steal.min(steal), cpus);
    }
    let every = format!(
        "in every {} s window for {waited_s:.0} s",
        window.as_secs_f64()
    );
    let load = load.map_or(String::new(), |l| format!(" (load {l:.2})"));
    let others = format!(
        "others kept at least {:.2} of the {cpus_seen} CPUs busy{load}",
        least_pct / 100.0 * cpus_seen as f64
    );
    let stole = format!(
        "the hypervisor stole at least {least_steal:.0}% of the {cpus_seen} CPUs (other guests on this host)"
    );
    Err(
        match (
            least_pct >= QUIET_OTHERS_PCT_MAX,
            least_steal >= QUIET_STEAL_PCT_MAX,
        ) {
            (true, false) => {
                format!("{others} {every}: stop them, or run without waiting for quiet")
            }
            (false, true) => {
                format!("{stole} {every}: run later, or run without waiting for quiet")
            }
            _ => format!(
            "no {} s window in {waited_s:.0} s was quiet ({others}; {stole}): run later, or run \
             without waiting for quiet",
            window.as_secs_f64()
        ),
        },
    )
}

/// What `/proc/stat` gives: the aggregate `cpu` line, the `cpuN` count, `procs_running`.
#[derive(Clone, Debug, Default, PartialEq)]
struct ProcStat {
    cpu: Option<CpuTicks>,
    logical_cpus: Option<usize>,
    procs_running: Option<u64>,
}

fn parse_proc_stat(text: &str) -> ProcStat {
    let cpu = text
        .lines()
        .find_map(|l| l.strip_prefix("cpu "))
        .and_then(|rest| {
            let n: Vec<u64> = rest
                .split_whitespace()
                .map_while(|f| f.parse().ok())
                .collect();
            // Kernels before 2.6.11 lack steal: too old to matter, read as unknown.
            (n.len() >= 8).then(|| CpuTicks {
                user: n[0],
                nice: n[1],
                system: n[2],
                idle: n[3],
                iowait: n[4],
                irq: n[5],
                softirq: n[6],
                steal: n[7],
            })
        });
    let online = text
        .lines()
        .filter(|l| {
            l.strip_prefix("cpu")
                .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
        })
        .count();
    let procs_running = text
        .lines()
        .find_map(|l| l.strip_prefix("procs_running"))
        .and_then(|v| v.trim().parse().ok());
    ProcStat {
        cpu,
        logical_cpus: (online > 0).then_some(online),
        procs_running,
    }
}

/// utime + stime (fields 14 and 15) of `/proc/<pid>/stat`, in seconds. The
/// command name (field 2) is in parentheses and may hold spaces and ')', so
/// fields are counted after its last ')'.
fn parse_self_stat(text: &str) -> Option<f64> {
    let (_, rest) = text.rsplit_once(')')?;
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((utime + stime) as f64 / TICKS_PER_S)
}

fn parse_loadavg(text: &str) -> Option<f64> {
    text.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Child, Command};
    use std::sync::Mutex;

    #[test]
    fn thread_clocks_count_only_threads_both_readings_list() {
        let before = ThreadClocks(vec![(1, 100), (2, 50), (4, 10)]);
        // Thread 2 ended, 3 was born with 900 ns of its life, 1 and 4 ran.
        let after = ThreadClocks(vec![(1, 130), (3, 900), (4, 15)]);
        assert_eq!(after.since(&before), 30 + 5);
        assert_eq!(after.since(&after), 0);
        let now = ThreadClocks::read().unwrap();
        let spin = std::time::Instant::now();
        while spin.elapsed().as_millis() < 20 {
            std::hint::black_box(0u64);
        }
        let later = ThreadClocks::read().unwrap();
        // This thread spun 20 ms of wall time: at least part of it on a CPU.
        assert!(later.since(&now) > 1_000_000, "{}", later.since(&now));
    }

    /// A window of `wall_s` on a machine of `cpus` CPUs where this process ran
    /// `ours_cpus` CPUs' worth, others `others_cpus` and the hypervisor stole `steal_cpus`.
    fn window(
        wall_s: f64,
        cpus: usize,
        ours: f64,
        others: f64,
        steal: f64,
    ) -> (Snapshot, Snapshot) {
        let ticks = |cpus: f64| (cpus * wall_s * TICKS_PER_S).round() as u64;
        let total = ticks(cpus as f64);
        let (busy, stolen) = (ticks(ours + others), ticks(steal));
        let start = CpuTicks {
            user: 1000,
            idle: 5000,
            iowait: 30,
            steal: 7,
            ..CpuTicks::default()
        };
        let end = CpuTicks {
            user: start.user + busy * 9 / 10,
            system: start.system + busy - busy * 9 / 10,
            idle: start.idle + total - busy - stolen,
            steal: start.steal + stolen,
            ..start
        };
        let at = Instant::now();
        let snap = |at, cpu_s, machine, run, load| Snapshot {
            at,
            process_cpu_s: Some(cpu_s),
            machine: Some(machine),
            logical_cpus: Some(cpus),
            procs_running: Some(run),
            load_1m: Some(load),
            work: Default::default(),
        };
        (
            snap(at, 12.0, start, 1, 0.5),
            snap(
                at + Duration::from_secs_f64(wall_s),
                12.0 + ours * wall_s,
                end,
                3,
                1.5,
            ),
        )
    }

    fn judge(w: (Snapshot, Snapshot), threads: usize, kind: RowKind) -> Availability {
        between(&w.0, &w.1, threads, kind)
    }

    #[test]
    fn a_quiet_window_is_not_flagged() {
        let a = judge(window(1.0, 2, 1.96, 0.02, 0.0), 2, RowKind::Cpu);
        assert!(a.judged && !a.contended, "{a:?}");
        assert!(a.reasons.is_empty());
        assert!((a.threads_held.unwrap() - 1.96).abs() < 1e-9);
        assert!((a.held_fraction.unwrap() - 0.98).abs() < 1e-9);
        assert!((a.others_cpu_pct.unwrap() - 1.0).abs() < 1e-9);
        assert_eq!(a.steal_pct, Some(0.0));
        assert_eq!(
            (a.procs_running_before, a.procs_running_after),
            (Some(1), Some(3))
        );
        assert_eq!((a.load_1m_before, a.load_1m_after), (Some(0.5), Some(1.5)));
    }

    /// A row timed in turn holds its own samples' threads; idle is what they
    /// and the window's others leave: one thread held on a quiet machine is
    /// not flagged, one held while others took the other CPU is.
    #[test]
    fn a_row_timed_in_turn_is_judged_on_its_own_threads() {
        // The turn's window: the works together held 1.96 of 2.
        let quiet = judge(window(1.0, 2, 1.96, 0.02, 0.0), 2, RowKind::Cpu);
        let own = held_over_own_samples(quiet.clone(), 0.25, 0.25);
        assert_eq!(own.threads_held, Some(1.0));
        assert!((own.held_fraction.unwrap() - 0.5).abs() < 1e-9);
        assert!((own.idle_cpu_pct.unwrap() - 49.0).abs() < 1e-6, "{own:?}");
        assert!(own.judged && !own.contended, "{own:?}");
        // Others kept one CPU busy over the turn: the row's shortfall is theirs.
        let busy = judge(window(1.0, 2, 1.0, 1.0, 0.0), 2, RowKind::Cpu);
        let own = held_over_own_samples(busy, 0.25, 0.25);
        assert!(own.contended, "{own:?}");
        assert!(
            own.reasons.iter().any(|r| r.starts_with("held 1.00 of 2")),
            "{own:?}"
        );
        // No own wall time: the window's figures stand.
        assert_eq!(held_over_own_samples(quiet.clone(), 0.0, 0.0), quiet);
    }

    #[test]
    fn a_cpu_row_that_held_half_its_threads_is_flagged() {
        // Others' share and steal each under their rules, together taking the
        // threads the row did not hold: only the held-threads rule fires.
        let a = judge(window(1.0, 2, 1.02, 0.48, 0.18), 2, RowKind::Cpu);
        assert!(a.contended);
        assert_eq!(a.reasons, ["held 1.02 of 2 threads"]);
        assert!((a.idle_cpu_pct.unwrap() - 16.0).abs() < 1e-9);
    }

    #[test]
    fn threads_a_row_left_idle_are_not_contention() {
        // The sweep's bf16 512 on an idle 2-CPU VM: 1.31 of 2 threads, the rest idle.
        let a = judge(window(2.0, 2, 1.31, 0.01, 0.0), 2, RowKind::Cpu);
        assert!(a.judged && !a.contended, "{a:?}");
        assert!(a.held_fraction.unwrap() < crate::schema::HELD_FRACTION_MIN);
        // Idle covering under half the shortfall: the rest went to someone.
        let a = judge(window(2.0, 2, 1.0, 0.45, 0.1), 2, RowKind::Cpu);
        assert_eq!(a.reasons, ["held 1.00 of 2 threads"]);
        // Files written before the idle figure: the rule judges as it did.
        let mut a = judge(window(2.0, 2, 1.31, 0.01, 0.0), 2, RowKind::Cpu);
        a.idle_cpu_pct = None;
        assert!(verdict(&a).contended);
    }

    #[test]
    fn the_held_threads_rule_does_not_judge_a_gpu_row() {
        let a = judge(window(1.0, 2, 0.1, 0.3, 0.0), 2, RowKind::Gpu);
        assert!(a.judged && !a.contended, "{a:?}");
        assert!(a.held_fraction.unwrap() < 0.1);
    }

    #[test]
    fn others_beyond_the_spare_cpus_are_flagged() {
        // On 2 CPUs what others take a 2-thread row loses: both rules fire.
        let a = judge(window(1.0, 2, 1.04, 0.96, 0.0), 2, RowKind::Cpu);
        assert_eq!(
            a.reasons,
            [
                "held 1.04 of 2 threads",
                "others kept 0.96 of the 2 CPUs busy (48%)"
            ]
        );
        // A GPU row too: its launching thread needs its core.
        let a = judge(window(1.0, 2, 0.1, 1.9, 0.0), 1, RowKind::Gpu);
        assert_eq!(a.reasons, ["others kept 1.90 of the 2 CPUs busy (95%)"]);
        // A single-threaded GPU row leaves one CPU spare on 2: one busy competitor is fine.
        let a = judge(window(1.0, 2, 0.1, 1.0, 0.0), 1, RowKind::Gpu);
        assert!(!a.contended, "{a:?}");
    }

    #[test]
    fn others_on_the_cpus_a_row_leaves_spare_are_not_contention() {
        // 64 CPUs, a 2-thread row, others on 30 of the idle ones.
        let a = judge(window(1.0, 64, 2.0, 30.0, 0.0), 2, RowKind::Cpu);
        assert!(!a.contended, "{a:?}");
        // Beyond the 62 spare CPUs plus a quarter of the row's 2, they are.
        let a = judge(window(1.0, 64, 1.0, 63.0, 0.0), 2, RowKind::Cpu);
        assert!(a.contended);
    }

    #[test]
    fn steal_is_flagged_above_its_threshold() {
        let a = judge(window(1.0, 2, 1.7, 0.0, 0.24), 2, RowKind::Cpu);
        assert_eq!(
            a.reasons,
            ["steal 12% (the hypervisor kept our CPUs waiting)"]
        );
        let a = judge(window(1.0, 2, 1.9, 0.0, 0.04), 2, RowKind::Gpu);
        assert!(!a.contended && a.steal_pct == Some(2.0));
    }

    #[test]
    fn every_rule_that_fires_gives_its_reason() {
        let a = judge(window(2.0, 2, 0.8, 1.0, 0.3), 2, RowKind::Cpu);
        assert_eq!(a.reasons.len(), 3, "{:?}", a.reasons);
    }

    #[test]
    fn a_window_too_short_is_recorded_but_not_judged() {
        let a = judge(window(0.05, 2, 0.5, 1.5, 0.0), 2, RowKind::Cpu);
        assert!(!a.judged && !a.contended && a.reasons.is_empty());
        assert!(a.held_fraction.unwrap() < 0.5, "the figures are kept");
    }

    #[test]
    fn without_proc_nothing_is_judged_and_nothing_fails() {
        let at = Instant::now();
        let blind = |at| Snapshot {
            at,
            process_cpu_s: None,
            machine: None,
            logical_cpus: None,
            procs_running: None,
            load_1m: None,
            work: Default::default(),
        };
        let a = between(
            &blind(at),
            &blind(at + Duration::from_secs(1)),
            2,
            RowKind::Cpu,
        );
        assert!(!a.judged && !a.contended);
        assert_eq!(
            (a.threads_held, a.others_cpu_pct, a.steal_pct),
            (None, None, None)
        );
        assert_eq!(a.wall_s, 1.0);
    }

    #[test]
    fn more_threads_than_cpus_are_held_against_the_cpus() {
        let a = judge(window(1.0, 2, 1.9, 0.0, 0.0), 8, RowKind::Cpu);
        assert!((a.held_fraction.unwrap() - 0.95).abs() < 1e-9);
        assert!(!a.contended);
    }

    #[test]
    fn counters_that_step_back_do_not_wrap() {
        let later = CpuTicks {
            iowait: 5,
            idle: 100,
            ..CpuTicks::default()
        };
        let earlier = CpuTicks {
            iowait: 9,
            idle: 40,
            ..CpuTicks::default()
        };
        assert_eq!(
            later.since(&earlier),
            CpuTicks {
                idle: 60,
                ..CpuTicks::default()
            }
        );
    }

    #[test]
    fn proc_files_parse_as_linux_writes_them() {
        let stat = "cpu  369745 0 47947 140772 6391 0 548 10133 0 0\n\
                    cpu0 178611 0 21406 81131 1475 0 98 4975 0 0\n\
                    cpu1 191133 0 26540 59640 4915 0 450 5158 0 0\n\
                    intr 1 2 3\nctxt 99\nbtime 1\nprocesses 9\nprocs_running 3\nprocs_blocked 0\n";
        let s = parse_proc_stat(stat);
        let cpu = s.cpu.unwrap();
        assert_eq!(
            (cpu.user, cpu.system, cpu.idle, cpu.steal),
            (369745, 47947, 140772, 10133)
        );
        assert_eq!(cpu.busy(), 369745 + 47947 + 548);
        assert_eq!(cpu.total(), cpu.busy() + 140772 + 6391 + 10133);
        assert_eq!((s.logical_cpus, s.procs_running), (Some(2), Some(3)));
        assert_eq!(parse_proc_stat("cpu 1 2 3\n"), ProcStat::default());

        let own =
            "15684 (my (odd) name) R 15679 15679 9052 0 -1 4194304 102 0 0 0 250 31 0 0 20 0 1 0";
        assert_eq!(parse_self_stat(own), Some(2.81));
        assert_eq!(parse_self_stat("15684 (cut"), None);
        assert_eq!(parse_loadavg("0.96 1.24 1.54 1/91 9420\n"), Some(0.96));
        assert_eq!(parse_loadavg(""), None);
    }

    /// A fake window with others at `pct` of 2 CPUs.
    fn sampled(pct: Option<f64>, wall_s: f64) -> Availability {
        let mut a = judge(window(wall_s, 2, 0.0, 0.0, 0.0), 1, RowKind::Gpu);
        a.others_cpu_pct = pct;
        a.load_1m_after = Some(1.9);
        a
    }

    #[test]
    fn waiting_stops_at_the_first_quiet_window() {
        let mut seen = [60.0, 30.0, 4.0, 0.0].into_iter();
        let report = wait_until_quiet(Duration::from_secs(10), Duration::from_secs(1), |w| {
            sampled(seen.next(), w.as_secs_f64())
        })
        .unwrap();
        assert_eq!(
            (report.windows, report.others_cpu_pct, report.logical_cpus),
            (3, 4.0, 2)
        );
        assert!((report.waited_s - 3.0).abs() < 1e-9);
    }

    #[test]
    fn waiting_gives_up_with_one_line_saying_what_was_seen() {
        let mut calls = 0;
        let err = wait_until_quiet(Duration::from_secs(30), Duration::from_secs(1), |w| {
            calls += 1;
            sampled(Some(if calls == 7 { 48.0 } else { 55.0 }), w.as_secs_f64())
        })
        .unwrap_err();
        assert_eq!(calls, 30);
        assert_eq!(
            err,
            "others kept at least 0.96 of the 2 CPUs busy (load 1.90) in every 1 s window for 30 s: \
             stop them, or run without waiting for quiet"
        );
        assert!(!err.contains('\n'));
        // A clock that says no time passed cannot keep it waiting.
        let mut calls = 0;
        let _ = wait_until_quiet(Duration::from_secs(2), Duration::from_secs(1), |_| {
            calls += 1;
            sampled(Some(90.0), 0.0)
        });
        assert_eq!(calls, 2);
    }

    #[test]
    fn waiting_also_waits_out_steal() {
        // Others quiet, but other guests take the host: not quiet until steal drops.
        let mut seen = [30.0, 12.0, 2.0].into_iter();
        let report = wait_until_quiet(Duration::from_secs(10), Duration::from_secs(1), |w| {
            let mut a = sampled(Some(3.0), w.as_secs_f64());
            a.steal_pct = seen.next();
            a
        })
        .unwrap();
        assert_eq!((report.windows, report.steal_pct), (3, 2.0));

        let err = wait_until_quiet(Duration::from_secs(4), Duration::from_secs(1), |w| {
            let mut a = sampled(Some(3.0), w.as_secs_f64());
            a.steal_pct = Some(29.0);
            a
        })
        .unwrap_err();
        assert_eq!(
            err,
            "the hypervisor stole at least 29% of the 2 CPUs (other guests on this host) \
             in every 1 s window for 4 s: run later, or run without waiting for quiet"
        );
        // Windows that fail for different reasons: both are named.
        let mut calls = 0;
        let err = wait_until_quiet(Duration::from_secs(2), Duration::from_secs(1), |w| {
            calls += 1;
            let mut a = sampled(Some(if calls == 1 { 50.0 } else { 3.0 }), w.as_secs_f64());
            a.steal_pct = Some(if calls == 1 { 0.0 } else { 20.0 });
            a
        })
        .unwrap_err();
        assert!(
            err.starts_with("no 1 s window in 2 s was quiet (others"),
            "{err}"
        );
        assert!(
            err.contains("others kept at least 0.06") && err.contains("stole at least 0%"),
            "{err}"
        );
    }

    #[test]
    fn waiting_blind_refuses_at_once() {
        let err = wait_until_quiet(Duration::from_secs(5), Duration::from_secs(1), |w| {
            sampled(None, w.as_secs_f64())
        })
        .unwrap_err();
        assert!(err.starts_with("cannot wait for quiet"), "{err}");
    }

    // ---- Real measurements on this machine ----

    /// The real tests plant competitors: one at a time, or they would see each other.
    static REAL: Mutex<()> = Mutex::new(());

    /// Busy child processes, two per logical CPU, killed when dropped. Another
    /// process is needed: a busy thread of ours would count as our own CPU time.
    /// Two per CPU so that they keep most of the machine even beside other tests
    /// running in this process (whose CPU time counts as ours).
    struct Competitors(Vec<Child>);

    impl Competitors {
        fn start() -> Self {
            let n = std::thread::available_parallelism().map_or(2, |n| n.get());
            let spin = || {
                Command::new("sh")
                    .args(["-c", "while :; do :; done"])
                    .spawn()
                    .expect("sh starts")
            };
            let c = Competitors((0..2 * n).map(|_| spin()).collect());
            std::thread::sleep(Duration::from_millis(200));
            c
        }
    }

    impl Drop for Competitors {
        fn drop(&mut self) {
            for child in &mut self.0 {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }

    /// A 2-thread busy loop "timed" for `secs` between two snapshots, as a CPU row.
    fn timed_busy_loop(secs: f64) -> Availability {
        let before = Snapshot::take();
        let until = Instant::now() + Duration::from_secs_f64(secs);
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    let mut x = 0u64;
                    while Instant::now() < until {
                        for i in 0..10_000u64 {
                            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
                        }
                    }
                    x
                });
            }
        });
        between(&before, &Snapshot::take(), 2, RowKind::Cpu)
    }

    fn figures(a: &Availability) -> String {
        let f = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2}"));
        format!(
            "held {} threads (fraction {}), others {}%, steal {}%, run queue {:?}->{:?}, load {}->{}, contended {} {:?}",
            f(a.threads_held),
            f(a.held_fraction),
            f(a.others_cpu_pct),
            f(a.steal_pct),
            a.procs_running_before,
            a.procs_running_after,
            f(a.load_1m_before),
            f(a.load_1m_after),
            a.contended,
            a.reasons
        )
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_planted_competitor_is_seen_and_the_row_flagged() {
        let _one = REAL.lock().unwrap_or_else(|e| e.into_inner());
        let competitors = Competitors::start();
        let a = timed_busy_loop(1.0);
        drop(competitors);
        eprintln!("with competitors: {}", figures(&a));
        // Two competitors per CPU take well over the spare CPUs plus a quarter
        // of the loop's 2 (on 2 CPUs: 0.5 CPU) whatever else runs, other tests
        // of this process included: the others rule always fires.
        assert!(a.judged && a.contended, "{a:?}");
        assert!(
            a.reasons.iter().any(|r| r.starts_with("others kept")),
            "{a:?}"
        );
        // On 2 CPUs (6 busy threads) the loop holds about 0.7 of its two.
        if a.logical_cpus == Some(2) {
            assert!(a.reasons.iter().any(|r| r.starts_with("held")), "{a:?}");
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn alone_our_loop_holds_what_it_can_and_a_quiet_machine_is_not_flagged() {
        let _one = REAL.lock().unwrap_or_else(|e| e.into_inner());
        let a = timed_busy_loop(1.0);
        eprintln!("without a competitor: {}", figures(&a));
        let (held, cpus) = (a.threads_held.unwrap(), a.logical_cpus.unwrap());
        assert!(a.judged && (0.9..3.0).contains(&a.wall_s), "{a:?}");
        // What our loop guarantees: it ran, and on no more than the CPUs there are.
        assert!(held > 0.0 && held <= cpus as f64 + 0.1, "{a:?}");
        // Not guaranteed on a shared machine (others may be busy, unseen
        // before): the no-flag check holds only where the window was quiet.
        if a.others_cpu_pct.unwrap() < QUIET_OTHERS_PCT_MAX && a.steal_pct.unwrap() < 5.0 {
            assert!(!a.contended, "{a:?}");
        } else {
            eprintln!("the machine was busy: the no-flag check is skipped");
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn waiting_for_quiet_gives_up_beside_a_competitor() {
        let _one = REAL.lock().unwrap_or_else(|e| e.into_inner());
        let _competitors = Competitors::start();
        let err = wait_for_quiet(Duration::from_secs(2), Duration::from_secs(1)).unwrap_err();
        eprintln!("with competitors: {err}");
        assert!(err.starts_with("others kept at least"), "{err}");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn waiting_for_quiet_on_this_machine_says_what_it_saw() {
        let _one = REAL.lock().unwrap_or_else(|e| e.into_inner());
        // Not guaranteed on a shared machine: others may keep it busy, and then
        // the refusal must be the one-line kind.
        match wait_for_quiet(Duration::from_secs(2), Duration::from_secs(1)) {
            Ok(report) => {
                eprintln!("without a competitor: quiet, {report:?}");
                assert!(report.others_cpu_pct < QUIET_OTHERS_PCT_MAX && report.windows <= 2);
                assert!(report.steal_pct < QUIET_STEAL_PCT_MAX);
            }
            Err(err) => {
                eprintln!("without a competitor, others were busy: {err}");
                assert!(
                    [
                        "others kept at least",
                        "the hypervisor stole",
                        "no 1 s window"
                    ]
                    .iter()
                    .any(|start| err.starts_with(start)),
                    "{err}"
                );
                assert!(!err.contains('\n'));
            }
        }
    }
}
