//! The `overhead` experiment's measurement core: what a call costs beyond its
//! arithmetic. Opening the device and the first call of an operation in a fresh
//! process (on a GPU: context creation, then module loading and PTX
//! compilation, cuBLAS's first-use setup) against the same call warmed up; the
//! smallest operations, where the time per call is all launch overhead; and
//! matmuls whose inputs were flushed from the cache before each sample against
//! back-to-back ones. Every time comes from the one clock
//! ([`crate::clock::time_on_device`]).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use candle_core::{Device, Tensor};
use indicatif::ProgressBar;

use crate::clock::{time_on_device, time_with_setup, ClockOverhead, Plan, Samples};
use crate::device::largest_cache;
use crate::formulas::{matrix_bytes, payload_bytes};
use crate::memory::fits::Need;
use crate::schema::{
    CacheRow, CacheSection, FirstCall, JitCache, LaunchMode, LaunchRow, OverheadResults,
    SectionStatus, Timed,
};
use crate::telemetry::Telemetry;

/// Warm-up and timed runs per row unless --warmup and --iters say otherwise:
/// 20 timed (queued launch samples, warm and cache samples), 3 warm-up.
pub const DEFAULT_PLAN: Plan = Plan {
    warmup: 3,
    iters: 20,
};

/// The cold-cache flush writes this many times the cache's size.
pub const FLUSH_FACTOR: u64 = 3;

/// What an `overhead` run asks for, validated by the program's flags.
#[derive(Clone, Debug)]
pub struct Config {
    pub plan: Plan,
    /// Side of the first-call matmul and add.
    pub first_size: usize,
    /// Calls per queued launch sample, and samples of a synchronized launch row.
    pub calls: usize,
    /// Matmul sides for the cold/hot cache rows.
    pub cache_sizes: Vec<usize>,
    /// Bytes written before each cold sample; default FLUSH_FACTOR x the cache.
    pub flush_bytes: Option<u64>,
}

/// The one clock, on the host, around one call of `f`: for work that needs no
/// device synchronization, such as opening the device. Returns the wall time in
/// milliseconds and what `f` returned.
pub fn time_once<R>(f: impl FnOnce() -> Result<R>) -> Result<(f64, R)> {
    let mut f = Some(f);
    let mut out = None;
    let plan = Plan {
        warmup: 0,
        iters: 1,
    };
    let samples = time_on_device(&Device::Cpu, plan, &ProgressBar::hidden(), || {
        let f = f.take().context("time_once runs its work once")?;
        out = Some(f()?);
        Ok(())
    })?;
    let ms = samples.wall_ms.first().copied().context("no sample")?;
    Ok((ms, out.context("no result")?))
}

/// What opening `device` (`device::select`) did, for the result file.
pub fn device_open_includes(device: &Device) -> String {
    if device.is_cuda() {
        "cuInit, the primary context, Candle's CUDA device (its stream, cuBLAS handle and \
         cuRAND generator), the memory pool's release threshold, and the device queries"
            .into()
    } else {
        "choosing the CPU and reading its model: there is no context to create".into()
    }
}

/// Refuses sizes that do not fit, before anything is allocated: each matmul's
/// A, B and C on the device (A and B made on the host first), and the flush
/// buffer.
pub fn needs(device: &Device, cfg: &Config) -> Result<Vec<Need>> {
    let sizes = cfg.cache_sizes.iter().map(|&n| ("--cache-sizes", n));
    let mut needs: Vec<Need> = sizes
        .chain([("--first-size", cfg.first_size)])
        .map(|(flag, n)| Need {
            what: format!("{flag} {n}"),
            // Inputs are made on the host, then moved.
            host_bytes: if device.is_cpu() {
                0
            } else {
                2 * matrix_bytes(n, 4)
            },
            device_bytes: payload_bytes(n, 4),
        })
        .collect();
    let cache = largest_cache(device)?;
    let flush = match (cfg.flush_bytes, &cache) {
        (Some(b), _) => Some((format!("--flush-mib {}", b >> 20), b)),
        (None, Some(c)) => Some((
            format!(
                "the cache flush ({FLUSH_FACTOR} x the {}; set --flush-mib)",
                c.name
            ),
            FLUSH_FACTOR * c.bytes,
        )),
        (None, None) => None,
    };
    needs.extend(flush.map(|(what, bytes)| Need {
        what,
        host_bytes: 0,
        device_bytes: bytes,
    }));
    Ok(needs)
}

fn flush_bytes(cfg: &Config, cache_bytes: u64) -> u64 {
    cfg.flush_bytes.unwrap_or(FLUSH_FACTOR * cache_bytes)
}

/// Runs the experiment after the device was opened in `device_open_ms`. Call
/// it first thing after opening the device: the first calls must be the
/// process's first.
pub fn run(
    device: &Device,
    device_open_ms: f64,
    cfg: &Config,
    telemetry: &Telemetry,
) -> Result<OverheadResults> {
    // Before the first calls, which load this process's first modules.
    let jit_cache = device.is_cuda().then(jit_cache);
    let first_calls = first_calls(device, cfg, telemetry)?;
    // After the first calls, which must be the process's first of everything.
    let clock = crate::clock::clock_overhead(device)?;
    let launch = launch(device, cfg, telemetry, &clock)?;
    let cache = cache(device, cfg, telemetry)?;
    Ok(OverheadResults {
        warmup: cfg.plan.warmup,
        iters: cfg.plan.iters,
        telemetry: telemetry.source(),
        device_open_ms,
        device_open_includes: device_open_includes(device),
        first_calls,
        jit_cache,
        clock_overhead: Some(clock),
        launch,
        cache,
    })
}

/// The driver's JIT cache as this process finds it now, from the variables the
/// driver reads (CUDA's programming guide, "CUDA Environment Variables").
fn jit_cache() -> JitCache {
    let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
    jit_cache_in(
        var("CUDA_CACHE_PATH").map(PathBuf::from),
        var("HOME").map(PathBuf::from),
        var("CUDA_CACHE_DISABLE").is_some_and(|v| v == "1"),
    )
}

/// [`jit_cache`] from the variables' values: `CUDA_CACHE_PATH`, `HOME` and
/// whether `CUDA_CACHE_DISABLE` is 1.
fn jit_cache_in(cache_path: Option<PathBuf>, home: Option<PathBuf>, disabled: bool) -> JitCache {
    let from_env = cache_path.is_some();
    let path = cache_path.or_else(|| home.map(|h| h.join(".nv/ComputeCache")));
    let files_before = path.as_deref().map_or(0, files_under);
    JitCache {
        path: path.map(|p| p.display().to_string()),
        from_env,
        disabled,
        files_before,
        warm: !disabled && files_before > 0,
    }
}

/// Files in `dir` and its subfolders (0 when it cannot be read).
fn files_under(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => files_under(&e.path()),
            Ok(t) if t.is_file() => 1,
            _ => 0,
        })
        .sum()
}

/// Random n x n f32 inputs, made on the host and copied to `device`, so that
/// making them launches no kernel before the first call.
fn host_made(n: usize, device: &Device) -> Result<(Tensor, Tensor)> {
    let a = Tensor::randn(0f32, 1f32, (n, n), &Device::Cpu)?.to_device(device)?;
    let b = Tensor::randn(0f32, 1f32, (n, n), &Device::Cpu)?.to_device(device)?;
    Ok((a, b))
}

fn first_calls(device: &Device, cfg: &Config, telemetry: &Telemetry) -> Result<Vec<FirstCall>> {
    let n = cfg.first_size;
    let (a, b) = host_made(n, device)?;
    Ok(vec![
        first_call(
            device,
            cfg.plan,
            telemetry,
            "matmul",
            "a.matmul(&b)",
            n,
            || Ok(a.matmul(&b)?),
        )?,
        first_call(device, cfg.plan, telemetry, "add", "a + b", n, || {
            Ok((&a + &b)?)
        })?,
    ])
}

#[allow(clippy::too_many_arguments)]
fn first_call(
    device: &Device,
    plan: Plan,
    telemetry: &Telemetry,
    op: &str,
    call: &str,
    size: usize,
    mut work: impl FnMut() -> Result<Tensor>,
) -> Result<FirstCall> {
    let once = Plan {
        warmup: 0,
        iters: 1,
    };
    let first = time_on_device(device, once, &ProgressBar::hidden(), &mut work)?;
    let warm = telemetry.time(device, plan, &format!("warm {op}"), &mut work)?;
    let first_ms = first.wall_ms.first().copied().context("no first sample")?;
    Ok(FirstCall {
        op: op.into(),
        call: call.into(),
        size,
        first_ms,
        first_gpu_ms: first.gpu_ms.first().copied(),
        first_over_warm: first_ms / warm.median_ms,
        warm,
    })
}

fn launch(
    device: &Device,
    cfg: &Config,
    telemetry: &Telemetry,
    clock: &ClockOverhead,
) -> Result<Vec<LaunchRow>> {
    let one = Tensor::new(&[1f32], device)?;
    let (a, b) = host_made(64, device)?;
    let mut rows = launch_rows(
        device,
        cfg,
        telemetry,
        clock,
        "add, 1 element",
        "a + b",
        || Ok((&one + &one)?),
    )?;
    rows.extend(launch_rows(
        device,
        cfg,
        telemetry,
        clock,
        "matmul 64x64",
        "a.matmul(&b)",
        || Ok(a.matmul(&b)?),
    )?);
    Ok(rows)
}

/// An operation's fixed cost on `device` as `generate` holds a decode step
/// to it (issue 48's host floor): this experiment's queued one-element add,
/// `calls` back to back a sample, one synchronization at the end, so that a
/// call costs what the host pays to issue one op (Candle's dispatch and an
/// allocation, and on a GPU a launch), not a wait.
pub fn op_cost(
    device: &Device,
    telemetry: &Telemetry,
    plan: Plan,
    calls: usize,
) -> Result<LaunchRow> {
    let one = Tensor::new(&[1f32], device)?;
    let queued = Queued { plan, calls };
    queued.row(
        device,
        telemetry,
        &crate::clock::clock_overhead(device)?,
        ("add, 1 element", "a + b"),
        || Ok((&one + &one)?),
    )
}

/// `calls` of one small op back to back a sample under `plan`, one
/// synchronization at the end: the rate at which calls can be issued.
struct Queued {
    plan: Plan,
    calls: usize,
}

impl Queued {
    /// The queued row of `op` (its name and the call it makes).
    fn row(
        &self,
        device: &Device,
        telemetry: &Telemetry,
        clock: &ClockOverhead,
        (op, call): (&str, &str),
        mut work: impl FnMut() -> Result<Tensor>,
    ) -> Result<LaunchRow> {
        // Each call's output is dropped when the next replaces it: freeing is
        // part of a call's cost, as in a real loop.
        let t = telemetry.time(device, self.plan, &format!("{op} queued"), || {
            let mut last = None;
            for _ in 0..self.calls {
                last = Some(work()?);
            }
            Ok(last)
        })?;
        Ok(launch_row(
            op,
            call,
            LaunchMode::Queued,
            self.calls,
            t,
            clock,
        ))
    }
}

/// The synchronized and the queued row of one small operation.
fn launch_rows(
    device: &Device,
    cfg: &Config,
    telemetry: &Telemetry,
    clock: &ClockOverhead,
    op: &str,
    call: &str,
    mut work: impl FnMut() -> Result<Tensor>,
) -> Result<Vec<LaunchRow>> {
    let synchronized = Plan {
        warmup: cfg.plan.warmup,
        iters: cfg.calls,
    };
    let t = telemetry.time(device, synchronized, &format!("{op} sync"), &mut work)?;
    let sync_row = launch_row(op, call, LaunchMode::Synchronized, 1, t, clock);
    let queued = Queued {
        plan: cfg.plan,
        calls: cfg.calls,
    };
    let queued_row = queued.row(device, telemetry, clock, (op, call), work)?;
    Ok(vec![sync_row, queued_row])
}

/// One launch row: a sample's median over the calls it made, as measured and
/// with the clock's own cost per sample (`clock`) taken out.
pub fn launch_row(
    op: &str,
    call: &str,
    mode: LaunchMode,
    calls_per_sample: usize,
    timed: Timed,
    clock: &ClockOverhead,
) -> LaunchRow {
    let per_call = |ms: f64| ms * 1e3 / calls_per_sample as f64;
    let net = |ms: f64, clock_ms: f64| per_call((ms - clock_ms).max(0.0));
    let per_call_us = per_call(timed.median_ms);
    LaunchRow {
        op: op.into(),
        call: call.into(),
        mode,
        calls_per_sample,
        per_call_us,
        per_call_gpu_us: timed.gpu_median_ms.map(per_call),
        calls_per_s: 1e6 / per_call_us,
        per_call_net_us: Some(net(timed.median_ms, clock.wall_median_ms)),
        per_call_gpu_net_us: timed
            .gpu_median_ms
            .zip(clock.gpu_median_ms)
            .map(|(g, c)| net(g, c)),
        timed,
    }
}

/// One cache row: an n x n f32 matmul hot and cold.
pub fn cache_row(n: usize, cache_bytes: u64, hot: Timed, cold: Timed) -> CacheRow {
    let working_set_bytes = payload_bytes(n, 4);
    CacheRow {
        size: n,
        working_set_bytes,
        fits_in_cache: working_set_bytes <= cache_bytes,
        cold_over_hot: cold.median_ms / hot.median_ms,
        hot,
        cold,
    }
}

fn cache(device: &Device, cfg: &Config, telemetry: &Telemetry) -> Result<CacheSection> {
    let Some(cache) = largest_cache(device)? else {
        return Ok(CacheSection {
            status: SectionStatus::Skipped,
            reason: Some(
                "the CPU's cache sizes could not be read (/sys/devices/system/cpu/cpu0/cache)"
                    .into(),
            ),
            cache: None,
            cache_bytes: None,
            flush_bytes: None,
            rows: Vec::new(),
        });
    };
    let flush = flush_bytes(cfg, cache.bytes);
    let mut flusher = Flusher::new(device, flush)?;
    let mut rows = Vec::new();
    for &n in &cfg.cache_sizes {
        let (a, b) = host_made(n, device)?;
        let mut work = || -> Result<Tensor> { Ok(a.matmul(&b)?) };
        let hot = telemetry.time(device, cfg.plan, &format!("hot {n}"), &mut work)?;
        let cold = telemetry.timed(|| {
            cold_samples(
                device,
                cfg.plan.iters,
                &format!("cold {n}"),
                &mut flusher,
                &mut work,
            )
        })?;
        rows.push(cache_row(n, cache.bytes, hot, cold));
    }
    Ok(CacheSection {
        status: SectionStatus::Ok,
        reason: None,
        cache: Some(cache.name),
        cache_bytes: Some(cache.bytes),
        flush_bytes: Some(flush),
        rows,
    })
}

/// `iters` samples of `work`, each after a flush that the clock's untimed
/// setup step runs (the device is synchronized after it, so the flush is
/// finished and off the clock). The warm-up is the hot row's, run just before.
fn cold_samples<R>(
    device: &Device,
    iters: usize,
    label: &str,
    flusher: &mut Flusher,
    work: impl FnMut() -> Result<R>,
) -> Result<Samples> {
    let plan = Plan { warmup: 0, iters };
    let bar = crate::clock::progress_bar(&plan.into(), label);
    let samples = time_with_setup(device, plan, &bar, || flusher.flush(), work);
    bar.finish_and_clear();
    samples
}

/// A buffer larger than the cache, written before each cold sample.
enum Flusher {
    Host(Vec<u8>),
    #[cfg(feature = "cuda")]
    Cuda(crate::cuda::L2Flush),
}

impl Flusher {
    fn new(device: &Device, bytes: u64) -> Result<Self> {
        #[cfg(feature = "cuda")]
        if let Device::Cuda(dev) = device {
            return Ok(Self::Cuda(crate::cuda::L2Flush::new(dev, bytes)?));
        }
        let _ = device;
        Ok(Self::Host(vec![0u8; bytes as usize]))
    }

    fn flush(&mut self) -> Result<()> {
        match self {
            Self::Host(buf) => {
                flush_host(buf);
                Ok(())
            }
            #[cfg(feature = "cuda")]
            Self::Cuda(f) => f.flush(),
        }
    }
}

/// Reads and writes one byte of every 64-byte line of `buf` through the cache.
/// A plain loop, not `fill`: memset writes large buffers with non-temporal
/// stores, which bypass the cache and would evict nothing.
pub fn flush_host(buf: &mut [u8]) {
    for i in (0..buf.len()).step_by(64) {
        buf[i] = buf[i].wrapping_add(1);
    }
    std::hint::black_box(buf);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::timed_at as timed;

    #[test]
    fn the_jit_cache_is_warm_when_an_earlier_process_left_files_in_it() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache");
        // Missing, then empty: cold.
        let cold = jit_cache_in(Some(cache.clone()), None, false);
        assert_eq!(
            (cold.from_env, cold.files_before, cold.warm),
            (true, 0, false)
        );
        std::fs::create_dir_all(cache.join("a/b")).unwrap();
        assert!(!jit_cache_in(Some(cache.clone()), None, false).warm);
        // The driver's layout: an index and files in subfolders.
        std::fs::write(cache.join("index"), "x").unwrap();
        std::fs::write(cache.join("a/b/0123"), "x").unwrap();
        let warm = jit_cache_in(Some(cache.clone()), None, false);
        assert_eq!((warm.files_before, warm.warm), (2, true));
        assert_eq!(warm.path.as_deref(), cache.to_str());
        // Disabled: nothing is loaded from it, whatever it holds.
        assert!(!jit_cache_in(Some(cache), None, true).warm);
        // No CUDA_CACHE_PATH: the driver's default under HOME.
        let default = jit_cache_in(None, Some(dir.path().into()), false);
        assert!(!default.from_env);
        assert_eq!(
            default.path,
            Some(dir.path().join(".nv/ComputeCache").display().to_string())
        );
        assert_eq!(jit_cache_in(None, None, false).path, None);
    }

    fn clock(wall_ms: f64, gpu_ms: Option<f64>) -> ClockOverhead {
        ClockOverhead {
            samples: 200,
            wall_median_ms: wall_ms,
            wall_iqr_ms: 0.0,
            gpu_median_ms: gpu_ms,
            gpu_iqr_ms: gpu_ms.map(|_| 0.0),
        }
    }

    #[test]
    fn launch_rows_divide_a_sample_by_its_calls() {
        let row = launch_row(
            "add",
            "a + b",
            LaunchMode::Queued,
            100,
            timed(&[1.0, 2.0, 3.0], &[0.5]),
            &clock(1.0, Some(0.1)),
        );
        assert_eq!(row.per_call_us, 20.0);
        assert_eq!(row.per_call_gpu_us, Some(5.0));
        assert_eq!(row.calls_per_s, 50_000.0);
        // (2 ms - 1 ms) / 100 calls; (0.5 ms - 0.1 ms) / 100 calls.
        assert_eq!(row.per_call_net_us, Some(10.0));
        assert!((row.per_call_gpu_net_us.unwrap() - 4.0).abs() < 1e-9);
        let one = launch_row(
            "add",
            "a + b",
            LaunchMode::Synchronized,
            1,
            timed(&[0.01], &[]),
            &clock(0.004, None),
        );
        assert!((one.per_call_us - 10.0).abs() < 1e-9);
        assert!((one.per_call_net_us.unwrap() - 6.0).abs() < 1e-9);
        assert_eq!(one.per_call_gpu_us, None);
        assert_eq!(one.per_call_gpu_net_us, None);
        // A clock that costs more than the call leaves nothing, not a negative time.
        let all_clock = launch_row(
            "add",
            "a + b",
            LaunchMode::Synchronized,
            1,
            timed(&[0.01], &[]),
            &clock(0.02, None),
        );
        assert_eq!(all_clock.per_call_net_us, Some(0.0));
    }

    #[test]
    fn cache_rows_compare_cold_with_hot() {
        let row = cache_row(1024, 8 << 20, timed(&[2.0], &[]), timed(&[3.0], &[]));
        assert_eq!(row.working_set_bytes, 12 << 20);
        assert!(!row.fits_in_cache);
        assert_eq!(row.cold_over_hot, 1.5);
        assert!(cache_row(256, 8 << 20, timed(&[1.0], &[]), timed(&[1.0], &[])).fits_in_cache);
    }

    #[test]
    fn the_flush_touches_every_line() {
        let mut buf = vec![0u8; 64 * 10 + 1];
        flush_host(&mut buf);
        assert_eq!(buf.iter().filter(|&&b| b == 1).count(), 11);
        assert!(buf.chunks(64).all(|line| line[0] == 1));
    }

    #[test]
    fn time_once_returns_the_work_and_its_time() {
        let (ms, v) = time_once(|| {
            std::thread::sleep(std::time::Duration::from_millis(2));
            Ok(7)
        })
        .unwrap();
        assert_eq!(v, 7);
        assert!(ms >= 2.0, "{ms}");
        assert!(time_once(|| -> Result<()> { anyhow::bail!("no device") }).is_err());
    }

    fn overhead_run(device: &Device) {
        let cfg = Config {
            plan: Plan {
                warmup: 1,
                iters: 3,
            },
            first_size: 32,
            calls: 4,
            cache_sizes: vec![16, 48],
            flush_bytes: Some(1 << 20),
        };
        let needs = needs(device, &cfg).unwrap();
        crate::memory::fits::check_all(device, &needs, crate::memory::fits::HostCheck::Enforce)
            .unwrap();
        let r = run(device, 0.5, &cfg, &Telemetry::open(device)).unwrap();
        assert_eq!(r.first_calls.len(), 2);
        for f in &r.first_calls {
            assert_eq!(f.warm.samples_wall_ms.len(), 3);
            assert_eq!(f.first_over_warm, f.first_ms / f.warm.median_ms);
            assert_eq!(f.first_gpu_ms.is_some(), device.is_cuda());
        }
        let modes: Vec<(LaunchMode, usize, usize)> = r
            .launch
            .iter()
            .map(|l| (l.mode, l.calls_per_sample, l.timed.samples_wall_ms.len()))
            .collect();
        use LaunchMode::{Queued, Synchronized};
        assert_eq!(
            modes,
            [
                (Synchronized, 1, 4),
                (Queued, 4, 3),
                (Synchronized, 1, 4),
                (Queued, 4, 3)
            ]
        );
        if r.cache.status == SectionStatus::Ok {
            assert_eq!(r.cache.flush_bytes, Some(1 << 20));
            let sizes: Vec<usize> = r.cache.rows.iter().map(|c| c.size).collect();
            assert_eq!(sizes, [16, 48]);
            for c in &r.cache.rows {
                assert_eq!(c.cold.samples_wall_ms.len(), 3);
                assert_eq!(c.hot.samples_wall_ms.len(), 3);
                assert_eq!(c.working_set_bytes, 3 * (c.size * c.size * 4) as u64);
            }
        } else {
            assert!(r.cache.reason.is_some() && r.cache.rows.is_empty());
        }
    }

    #[test]
    fn overhead_run_cpu() {
        overhead_run(&Device::Cpu);
    }

    #[cfg(feature = "cuda")]
    #[test]
    fn overhead_run_cuda() {
        overhead_run(&Device::new_cuda(0).unwrap());
    }
}
