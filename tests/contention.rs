//! A contended machine, caught: with a planted competitor (busy processes the
//! test starts, two per CPU) a CPU matmul row records that it did not have its
//! cores, the table marks it and the run ends with one warning line; without
//! one, and the machine otherwise quiet, no flag. `--require-quiet` waits, then
//! refuses in one line. Rows timed in turn (A B A B) each hold their own
//! threads, not the window's. No time is asserted, only what the OS counted.
//! The tests take turns on the machine ([`MACHINE`]): one's competitors must
//! not be another's quiet run.

mod common;
use common::run;

use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use candle_core::Device;
use candle_lab::clock::{time_interleaved, Plan, Samples};
use indicatif::ProgressBar;

use serde_json::Value;

/// Held by each test while it runs: they take turns on the machine.
static MACHINE: Mutex<()> = Mutex::new(());

/// [`MACHINE`], whatever a test that panicked while holding it left.
fn machine() -> std::sync::MutexGuard<'static, ()> {
    MACHINE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Busy loops in their own processes, two per CPU, killed when dropped.
struct Competitors(Vec<Child>);

impl Competitors {
    fn start() -> Self {
        let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
        let spawn = || {
            Command::new("sh")
                .args(["-c", "while :; do :; done"])
                .stdin(Stdio::null())
                .spawn()
                .expect("sh starts")
        };
        let children = (0..2 * cpus).map(|_| spawn()).collect();
        // Let them reach the run queue before anything is measured.
        std::thread::sleep(std::time::Duration::from_millis(300));
        Self(children)
    }
}

impl Drop for Competitors {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// One fp32 CPU matmul row, long enough to be judged (at least 0.2 s of
/// samples; at 256 a fast 2-core machine took 28 ms for all of them).
fn matmul_row(extra: &[&str]) -> (Value, String) {
    let mut args = vec![
        "--device", "cpu", "--size", "1024", "--dtypes", "fp32", "--iters", "16", "--warmup", "1",
    ];
    args.extend(extra);
    let (json, out) = common::run_result("matmul", &args);
    let row = json["matmul"]["precisions"][0].clone();
    (row, String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_planted_competitor_flags_the_row_and_a_quiet_run_does_not() {
    let _turn = machine();
    let (row, stderr) = {
        let _busy = Competitors::start();
        matmul_row(&[])
    };
    let a = &row["availability"];
    assert_eq!(a["judged"], true, "{a}");
    assert_eq!(a["contended"], true, "{a}");
    assert!(!a["reasons"].as_array().unwrap().is_empty(), "{a}");
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("warning:"))
        .collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(
        warnings[0]
            .starts_with("warning: 1 of 1 timed rows ran on a contended machine (first, fp32: "),
        "{stderr}"
    );
    assert!(
        stderr.contains(" contended"),
        "the table marks the row: {stderr}"
    );

    // Without a competitor: the row records the same figures; where the
    // machine really was quiet (others under 10% of it), no flag and no warning.
    let (row, stderr) = matmul_row(&[]);
    let a = &row["availability"];
    assert!(a["threads_held"].as_f64().unwrap() > 0.0, "{a}");
    let others = a["others_cpu_pct"].as_f64().unwrap();
    if others < 10.0 && a["steal_pct"].as_f64().unwrap_or(0.0) < 5.0 {
        assert_eq!(a["contended"], false, "{a}");
        assert!(!stderr.contains("warning:"), "{stderr}");
    } else {
        eprintln!("the machine was busy without the test's competitor ({others:.0}%): quiet check skipped");
    }
}

#[test]
fn require_quiet_refuses_beside_a_competitor_in_one_line() {
    let _turn = machine();
    let _busy = Competitors::start();
    common::refused(
        "matmul",
        &["--device", "cpu", "--size", "64", "--require-quiet", "2"],
        "--require-quiet 2: others kept",
    );
    // Its bound is checked as every flag's.
    let out = run("matmul", &["--require-quiet", "0"]);
    assert_eq!(out.status.code(), Some(2));
}

/// Two works timed in turn share one window, but each one's threads held
/// are its own samples': a work that sleeps holds almost none, one that
/// spins holds about a thread.
#[test]
fn works_timed_in_turn_each_hold_their_own_threads() {
    let _turn = machine();
    let ms = Duration::from_millis(15);
    let mut sleeps = || {
        std::thread::sleep(ms);
        Ok(())
    };
    let mut spins = || {
        let t0 = std::time::Instant::now();
        while t0.elapsed() < ms {
            std::hint::spin_loop();
        }
        Ok(())
    };
    let plan = Plan {
        warmup: 0,
        iters: 8,
    };
    let bar = ProgressBar::hidden();
    let s = time_interleaved(&Device::Cpu, plan, &bar, &mut [&mut sleeps, &mut spins]).unwrap();
    let held = |s: &Samples| {
        let h = s.held.expect("/proc/self/task is readable");
        h.cpu_s / h.wall_s
    };
    let (asleep, spinning) = (held(&s[0]), held(&s[1]));
    assert!(asleep < 0.3, "a sleeping work held {asleep:.2} threads");
    assert!(spinning > asleep + 0.4, "{spinning:.2} against {asleep:.2}");
    let a = s[1].availability(1).unwrap();
    assert_eq!(a.threads_held, Some(spinning));
}
