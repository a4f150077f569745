//! The `kernels` experiment's core: the suite's own kernels
//! ([`crate::kernels`]) beside Candle's op and the same math from primitive
//! ops, per op, shape and precision, each against the bandwidth ladder's
//! bound for the bytes the op must move, measured in the same run.
//!
//! Per row (op x case x precision): random inputs made off the clock; the
//! row's bound from the bandwidth ladder ([`crate::bench::ladder`]): the
//! ladder kernel of the op's pattern (copy for a norm or a softmax, triad for
//! an add or SwiGLU) at the row's own footprint, the faster of one thread and
//! the pool's, so that a shape that fits in a cache is held against that
//! cache at those threads, and the dram case (each tensor half the ladder's
//! memory footprint, four times the last cache) against memory. The bound is timed in turn with the implementations ([`beside`]:
//! a bound read at another moment is another machine's), each K calls a
//! sample (a decode row's call is a few hundred nanoseconds: K makes a
//! sample long against the clock, whose own cost is subtracted). Per
//! implementation: its GB/s, the row's least bytes (inputs read once, output
//! written once, as `memory` counts them) over its time per call; its speed
//! against Candle's with an interval; its output's first rows against an f64
//! computation on the host. An implementation that fails (out of memory, an
//! op Candle lacks on a device) is that variant's error; the others run.

mod beside;
pub mod compute;
pub mod matvec;
mod ops;
mod reference;

pub(crate) use beside::fill_speedups;

use anyhow::{Context, Result};
use candle_core::{Device, Tensor};

use crate::bench::ladder::{Called, Ladder};
use crate::clock::Plan;
use crate::formulas::gb_per_s;
use crate::memory::fits::Need;
use crate::precision::Precision;
use crate::schema::{
    Implementation, KernelCase, KernelCeiling, KernelOp, KernelRow, KernelVariant, KernelsResults,
    RowStatus, VariantMeasured,
};
use crate::telemetry::Telemetry;
pub use ops::{call, implementations, traffic, EPS};
pub(crate) use reference::host_f64;
pub use reference::normwise_errors;
use reference::Reference;

/// What a `kernels` run asks for, from the program's flags.
#[derive(Clone, Debug)]
pub struct Config {
    pub ops: Vec<KernelOp>,
    pub precisions: Vec<Precision>,
    pub cases: Vec<KernelCase>,
    /// Whether the dram case was asked for: its size is the device's
    /// ([`dram_case`]), known once the device is.
    pub dram: bool,
    /// The matrix-vector rows (`--ops matvec`), if asked for.
    pub matvec: Option<matvec::MatvecConfig>,
    pub plan: Plan,
    /// The ladder's largest footprint in bytes (`--ladder-max-mib`).
    pub ladder_max: Option<u64>,
}

/// Columns of the large case's tensors (one MiB of f32 is 64 rows), as `memory`'s.
pub const LARGE_COLS: usize = 4096;

/// The case names `--cases` takes, in the default order.
pub const CASE_NAMES: [&str; 6] = [
    "block-prefill",
    "block-decode",
    "smollm2-prefill",
    "smollm2-decode",
    "large",
    DRAM,
];

/// The case that lives in memory: each f32 tensor half the ladder's memory
/// footprint, so that a copy's two are that footprint (four times the last
/// cache the device reports), whatever the cache's size. fp32 only: at that
/// size Candle's 16-bit forms take seconds a call.
pub use crate::schema::DRAM_CASE as DRAM;

/// Defaults that keep a 2-core CPU run near 20 s: 2 warm-up and 10 timed runs
/// per variant; on a GPU, where a call takes microseconds, 5 and 30.
pub fn default_plan(on_cuda: bool) -> Plan {
    if on_cuda {
        Plan {
            warmup: 5,
            iters: 30,
        }
    } else {
        Plan {
            warmup: 2,
            iters: 10,
        }
    }
}

/// The large case's tensor size at f32 in MiB: twice the CPU's last-level
/// cache (a copy's two tensors, four times it), between 16 and 128 MiB (past
/// 128, Candle's 16-bit forms take seconds a call and a run tens of
/// minutes: a larger last level leaves the case in it, its bound's level
/// says so, and the [`DRAM`] case is the one past it); 1024 on a GPU
/// (twenty times an H100's L2).
pub fn default_large_mib(on_cuda: bool) -> u64 {
    if on_cuda {
        return 1024;
    }
    crate::env::cpu_last_level_cache()
        .map_or(64, |(_, bytes)| (2 * bytes) >> 20)
        .clamp(16, 128)
}

/// The large case's plan: at most one warm-up and three timed runs (a call
/// moves hundreds of MiB, and Candle's 16-bit forms take seconds there).
pub fn large_plan(plan: Plan) -> Plan {
    Plan {
        warmup: plan.warmup.min(1),
        iters: plan.iters.min(3),
    }
}

/// The cases `names` asks for (each of [`CASE_NAMES`]), with the prefill's
/// tokens (`seq`: the block's default when `None`) and the large case's size.
/// The block's sizes are `bench::block`'s defaults for the device; SmolLM2-135M's
/// are its config's (hidden 576, 9 heads and 3 KV heads, MLP 1536).
pub fn cases(
    on_cuda: bool,
    names: &[String],
    seq: Option<usize>,
    large_mib: u64,
) -> Vec<KernelCase> {
    let (hidden, heads, mlp, default_seq) = if on_cuda {
        crate::model::layer::GPU_SHAPE
    } else {
        crate::model::layer::CPU_SHAPE
    };
    let seq = seq.unwrap_or(default_seq);
    let case = |name: &str, source: String, tokens, hidden, heads, mlp, context| KernelCase {
        name: name.into(),
        source,
        tokens,
        hidden,
        heads,
        mlp,
        context,
    };
    let block = format!(
        "the block experiment's layer (hidden {hidden}, {heads} heads, MLP {mlp}), {seq} tokens"
    );
    let smol = format!("SmolLM2-135M (hidden 576, 9 heads, 3 KV heads, MLP 1536), {seq} tokens");
    let rows = (large_mib as usize * (1 << 20) / 4 / LARGE_COLS).max(1);
    let large = format!(
        "{large_mib} MiB per f32 tensor ({rows} x {LARGE_COLS}): where it lives is its bound's \
         level, at most 3 timed runs"
    );
    names
        .iter()
        .filter_map(|n| match n.as_str() {
            "block-prefill" => Some(case(n, block.clone(), seq, hidden, heads, mlp, seq)),
            "block-decode" => Some(case(n, block.clone(), 1, hidden, heads, mlp, seq + 1)),
            "smollm2-prefill" => Some(case(n, smol.clone(), seq, 576, 9, 1536, seq)),
            "smollm2-decode" => Some(case(n, smol.clone(), 1, 576, 9, 1536, seq + 1)),
            "large" => Some(case(
                n,
                large.clone(),
                rows,
                LARGE_COLS,
                1,
                LARGE_COLS,
                LARGE_COLS,
            )),
            // The dram case's size is the device's: [`dram_case`].
            _ => None,
        })
        .collect()
}

/// The dram case on `device`: [`LARGE_COLS`] columns, each f32 tensor half
/// the ladder's memory footprint (`ladder_max` caps it, as it caps the
/// ladder).
pub fn dram_case(device: &Device, ladder_max: Option<u64>) -> Result<KernelCase> {
    let tensor = crate::bench::ladder::memory_footprint(device, ladder_max)? / 2;
    let rows = (tensor as usize / 4 / LARGE_COLS).max(1);
    Ok(KernelCase {
        name: DRAM.into(),
        source: format!(
            "{} per f32 tensor ({rows} x {LARGE_COLS}): a copy's two tensors are the ladder's \
             memory footprint, past every cache; fp32 only, at most 3 timed runs",
            crate::units::size((rows * LARGE_COLS * 4) as u64)
        ),
        tokens: rows,
        hidden: LARGE_COLS,
        heads: 1,
        mlp: LARGE_COLS,
        context: LARGE_COLS,
    })
}

/// Every case `cfg` asks for on `device`: the named ones, then the dram case.
fn cases_on(cfg: &Config, device: &Device) -> Result<Vec<KernelCase>> {
    let mut out = cfg.cases.clone();
    if cfg.dram {
        out.push(dram_case(device, cfg.ladder_max)?);
    }
    Ok(out)
}

/// The precisions a case runs at: the dram case's fp32 only.
fn precisions_of<'a>(cfg: &'a Config, case: &KernelCase) -> impl Iterator<Item = Precision> + 'a {
    let dram = case.name == DRAM;
    cfg.precisions
        .iter()
        .copied()
        .filter(move |p| !dram || *p == Precision::F32)
}

/// What must fit, per case: the largest op's inputs and the composed form's
/// f32 intermediates (up to eight tensor-sized buffers at once) and the
/// ceiling's buffers (a copy row's two store kinds: four, beside two tensors), beside the case's draws (two per op size and
/// precision, kept while the case runs); on the host too for the f64 check
/// of a few rows.
pub fn needs(cfg: &Config, device: &Device) -> Result<Vec<Need>> {
    let mut out: Vec<Need> = cfg
        .matvec
        .iter()
        .map(|m| {
            let bytes = matvec::largest_bytes(m);
            Need {
                what: "the largest matrix-vector row (its weight made, held and Candle's copy)"
                    .into(),
                host_bytes: bytes,
                device_bytes: bytes / 2,
            }
        })
        .collect();
    out.extend(cases_on(cfg, device)?.iter().map(|case| {
        let sizes: std::collections::BTreeSet<u64> = cfg
            .ops
            .iter()
            .map(|op| op.shape(case).iter().product::<usize>() as u64)
            .collect();
        let elems = sizes.last().copied().unwrap_or(0);
        let per_elem: u64 = precisions_of(cfg, case)
            .map(|p| p.dtype().size_in_bytes() as u64)
            .sum();
        let draws = 2 * sizes.iter().sum::<u64>() * per_elem;
        Need {
            what: format!("the {} case ({elems} elements per tensor)", case.name),
            host_bytes: 0,
            device_bytes: elems * 4 * 10 + draws,
        }
    }));
    Ok(out)
}

/// Runs every row of `cfg` on `device`.
pub fn run(device: &Device, cfg: &Config, telemetry: &Telemetry) -> Result<KernelsResults> {
    // Before anything large is allocated: an output past 32 MiB would
    // otherwise fault in on every call ([`crate::memory::keep_freed_memory`]).
    // On a GPU the outputs come from the device's pool: not said.
    let freed_memory_kept = device.is_cpu().then(crate::memory::keep_freed_memory);
    let ladder = Ladder::new(device, telemetry, cfg.ladder_max)?;
    let cases = cases_on(cfg, device)?;
    if cfg.dram && !cfg.precisions.contains(&Precision::F32) {
        crate::note!("kernels: the dram case runs at fp32 only, and --dtypes has no fp32");
    }
    let mut rows = Vec::new();
    let roofs = compute::Roofs::default();
    // A case at a time, so that its inputs are drawn once for all its ops
    // and dropped before the next case's.
    for case in &cases {
        let draws = ops::Draws::default();
        let plan = if matches!(case.name.as_str(), "large" | DRAM) {
            large_plan(cfg.plan)
        } else {
            cfg.plan
        };
        for &op in &cfg.ops {
            for p in precisions_of(cfg, case) {
                let row = measure_row(
                    (device, telemetry),
                    plan,
                    (&ladder, &draws, &roofs),
                    op,
                    case,
                    p,
                )
                .with_context(|| format!("{} {} {p}", op.name(), case.name))?;
                rows.push(row);
            }
        }
    }
    // The file's order: op outermost, then case, then precision.
    rows.sort_by_key(|r| cfg.ops.iter().position(|o| *o == r.op));
    let mut matvec = match &cfg.matvec {
        Some(m) => matvec::run(device, m, cfg.plan, &ladder)?,
        None => Vec::new(),
    };
    for r in &mut rows {
        beside::rebound(&ladder, &mut r.ceiling, &mut r.variants);
        r.compute = roofs.last(r);
    }
    for r in &mut matvec {
        if beside::rebound(&ladder, &mut r.ceiling, &mut r.variants) {
            r.bound_ms = matvec::bound_ms(&r.ceiling, r.weight_bytes);
        }
    }
    Ok(KernelsResults {
        matvec,
        warmup: cfg.plan.warmup,
        iters: cfg.plan.iters,
        cpu_threads: candle_core::utils::get_num_threads(),
        cache_bytes: crate::device::largest_cache(device)?.map(|c| c.bytes),
        telemetry: telemetry.source(),
        cases,
        rows,
        ladder: Some(ladder.finish()),
        clock_overhead_ms: None,
        freed_memory_kept,
    })
}

fn measure_row(
    (device, telemetry): (&Device, &Telemetry),
    plan: Plan,
    (ladder, draws, roofs): (&Ladder, &ops::Draws, &compute::Roofs),
    op: KernelOp,
    case: &KernelCase,
    p: Precision,
) -> Result<KernelRow> {
    let dtype = p.dtype();
    let shape = op.shape(case);
    let width = *shape.last().unwrap_or(&1);
    let n: usize = shape.iter().product();
    let (bytes_read, bytes_written) =
        traffic(op, n as u64, width as u64, dtype.size_in_bytes() as u64);
    let bytes_moved = bytes_read + bytes_written;
    let per_elem = bytes_moved as f64 / n.max(1) as f64;

    // The compute roof first: its small inputs come and go before the row's.
    // A roof that cannot be measured leaves the row held to its bound.
    let compute = roofs
        .get(
            (device, telemetry, ladder),
            (op, p, width),
            (bytes_moved, per_elem),
        )
        .unwrap_or_else(|e| {
            let why = crate::error::error_line(&e);
            crate::note!("{} {} {p}: no compute roof ({why})", op.name(), case.name);
            None
        });
    let inputs = ops::Inputs::new(op, &shape, dtype, device, draws)?;
    let ones = Tensor::ones(width, dtype, device)?;
    let reference = Reference::new(op, &inputs, width)?;
    let label = format!("{} {} {p}", op.name(), case.name);
    let b = beside::measure(
        plan,
        ladder,
        (&ops::bound_kernels((ladder, device), op, p, n), bytes_moved),
        &label,
        &implementations_at(op, case),
        &|imp| Ok(ops::run(op, imp, &inputs, &ones)?),
    )?;
    let ceiling = b.ceiling;
    let mut variants = variants_of(b.runs, (op, &label), bytes_moved, &ceiling, &reference);
    fill_speedups(&mut variants);
    // The row's fastest variant, output elements a second: what its roof
    // must be over.
    let fastest = variants
        .iter()
        .filter_map(|v| v.measured.as_ref())
        .map(|m| n as f64 / (m.time_ms * 1e-3) / 1e9)
        .fold(0.0, f64::max);
    let compute = roofs.held(
        (device, telemetry, ladder),
        compute,
        (op, p, width),
        (fastest, per_elem, &label),
    );
    Ok(KernelRow {
        op,
        case: case.name.clone(),
        precision: p,
        shape,
        elements: n as u64,
        bytes_read,
        bytes_written,
        bytes_moved,
        ceiling,
        compute,
        variants,
    })
}

/// Each implementation's run as the row keeps it: its time, its rate
/// against the row's `ceiling` and its accuracy against `reference`.
fn variants_of(
    runs: Vec<(Implementation, Result<(Tensor, Called)>)>,
    (op, label): (KernelOp, &str),
    bytes_moved: u64,
    ceiling: &KernelCeiling,
    reference: &Reference,
) -> Vec<KernelVariant> {
    let mut variants = Vec::new();
    for (imp, run) in runs {
        let measured = run.and_then(|(out, c)| {
            let rate = gb_per_s(bytes_moved, c.per_call_ms);
            Ok(VariantMeasured {
                time_ms: c.per_call_ms,
                time_source: c.timed.rate_ms().1,
                gb_per_s: rate,
                pct_of_ceiling: 100.0 * rate / ceiling.gb_per_s,
                speedup_vs_candle: None,
                speedup_interval: None,
                accuracy: reference.check(&out)?,
                calls_per_sample: c.calls_per_sample,
                threads_held: None,
                timed: c.timed,
            })
        });
        variants.push(variant(imp, call(op, imp), label, measured));
    }
    variants
}

/// The implementations a row of `op` times at `case`: the dram case leaves
/// the composed form out (its four to eight intermediates take seconds a
/// call and several GiB there; every other case shows it). The twin leaves
/// it out alike (`pytorch/kernels/run.py`; its `WithCandle` test holds the
/// two files' variants equal).
fn implementations_at(op: KernelOp, case: &KernelCase) -> Vec<Implementation> {
    let all = implementations(op).iter().copied();
    all.filter(|i| case.name != DRAM || *i != Implementation::Composed)
        .collect()
}

/// A variant as the row keeps it: measured, or failed with its error
/// (said on the terminal).
pub(crate) fn variant(
    imp: Implementation,
    call: &str,
    label: &str,
    measured: Result<VariantMeasured>,
) -> KernelVariant {
    match measured {
        Ok(m) => KernelVariant {
            implementation: imp,
            call: call.into(),
            status: RowStatus::Ok,
            error: None,
            measured: Some(m),
        },
        Err(e) => {
            let why = crate::error::error_line(&e);
            crate::note!(
                "{label} {}: failed, recorded with its error ({why})",
                imp.name()
            );
            KernelVariant {
                implementation: imp,
                call: call.into(),
                status: RowStatus::Error,
                error: Some(why),
                measured: None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> Config {
        let names: Vec<String> = ["block-decode", "large"].map(String::from).into();
        Config {
            ops: KernelOp::ALL.to_vec(),
            precisions: vec![Precision::F32, Precision::Bf16],
            cases: cases(false, &names, Some(8), 1),
            dram: true,
            matvec: None,
            plan: Plan {
                warmup: 1,
                iters: 2,
            },
            ladder_max: Some(4 << 20),
        }
    }

    #[test]
    fn errors_are_norm_wise() {
        let (max, mean) = normwise_errors(&[1.0, 0.0, 2.1], &[1.0, 0.1, 2.0]);
        assert!((max - 0.05).abs() < 1e-12 && (mean - 0.2 / 3.1).abs() < 1e-12);
        assert_eq!(normwise_errors(&[0.0], &[0.0]), (0.0, 0.0));
    }

    #[test]
    fn cases_take_the_block_and_smollm2_sizes() {
        let names: Vec<String> = CASE_NAMES.map(String::from).into();
        let c = cases(false, &names, None, 32);
        let dims: Vec<_> = c
            .iter()
            .map(|c| {
                (
                    c.name.as_str(),
                    c.tokens,
                    c.hidden,
                    c.heads,
                    c.mlp,
                    c.context,
                )
            })
            .collect();
        assert_eq!(
            dims,
            [
                ("block-prefill", 128, 512, 8, 1376, 128),
                ("block-decode", 1, 512, 8, 1376, 129),
                ("smollm2-prefill", 128, 576, 9, 1536, 128),
                ("smollm2-decode", 1, 576, 9, 1536, 129),
                ("large", 2048, 4096, 1, 4096, 4096),
            ]
        );
        assert_eq!(KernelOp::Softmax.shape(&c[3]), [9, 1, 129]);
        assert_eq!(KernelOp::Swiglu.shape(&c[2]), [128, 1536]);
        let gpu = cases(true, &names[..1], None, 1024);
        assert_eq!((gpu[0].tokens, gpu[0].hidden), (2048, 4096));
    }

    fn kernels_run(device: &Device) {
        let cfg = tiny();
        let telemetry = Telemetry::open(device);
        let r = run(device, &cfg, &telemetry).unwrap();
        // The roof's footprint on this device, as the run's ladder has it.
        let resident = Ladder::new(device, &telemetry, cfg.ladder_max)
            .unwrap()
            .resident_footprint();
        // Two cases at two precisions, and the dram case at fp32.
        assert_eq!(r.rows.len(), 6 * (2 * 2 + 1));
        let dram: Vec<_> = r.rows.iter().filter(|x| x.case == DRAM).collect();
        assert!(dram.iter().all(|x| x.precision == Precision::F32));
        // A copy's two tensors are the ladder's memory footprint (capped
        // here at 4 MiB), and its bound is read there.
        let copy = dram.iter().find(|x| x.op == KernelOp::Copy).unwrap();
        assert_eq!(copy.bytes_moved, 4 << 20);
        assert_eq!(r.cases.last().map(|c| c.name.as_str()), Some(DRAM));
        let glibc = cfg!(all(target_os = "linux", target_env = "gnu"));
        assert_eq!(r.freed_memory_kept, device.is_cpu().then_some(glibc));
        for row in &r.rows {
            assert_eq!(row.bytes_moved, row.bytes_read + row.bytes_written);
            // Held against the ladder at the row's own footprint (within a
            // few elements), or a larger one read faster, for its pattern.
            let b = row.ceiling.bound.as_ref().unwrap();
            let (reads, writes) = ops::streams(row.op);
            if device.is_cpu() {
                // Ordinary stores, but for the copy (memcpy's choice): the
                // faster of the two store kinds; the add past the caches
                // non-temporal ones.
                let ordinary = crate::schema::LadderKernel::for_streams(reads, writes);
                let n = (row.bytes_moved / 12) as usize;
                let f32_add = row.op == KernelOp::Add && row.precision == Precision::F32;
                if ops::memcpy(row.op) {
                    assert!(ordinary.either_store().contains(&b.kernel), "{b:?}");
                } else if f32_add && crate::kernels::add_streams(n) {
                    assert_eq!(b.kernel, crate::schema::LadderKernel::TriadNt);
                } else {
                    assert_eq!(b.kernel, ordinary);
                }
            }
            // Only an op with arithmetic, on a row that moves at least the
            // roof's footprint, has a compute roof, at its width (or none,
            // where the row beat it twice: see below), which no variant of
            // the row runs over by more than 5%.
            let wants =
                compute::resource(row.op, row.precision).is_some() && row.bytes_moved >= resident;
            assert!(wants || row.compute.is_none(), "{:?} {}", row.op, row.case);
            if let Some(c) = &row.compute {
                assert_eq!(c.shape.last(), row.shape.last());
                assert!(c.g_elements_per_s > 0.0 && c.threads == ladder_threads(device));
                for m in row.variants.iter().filter_map(|v| v.measured.as_ref()) {
                    let rate = row.elements as f64 / (m.time_ms * 1e-3) / 1e9;
                    assert!(
                        rate <= 1.05 * c.g_elements_per_s,
                        "{:?} {}",
                        row.op,
                        row.case
                    );
                }
            }
            assert!(
                b.footprint_bytes
                    >= crate::bench::ladder::fitted(b.kernel, row.bytes_moved.min(4 << 20))
            );
            assert_eq!(row.ceiling.gb_per_s, b.gb_per_s);
            let names: Vec<_> = row.variants.iter().map(|v| v.implementation).collect();
            let case = r.cases.iter().find(|c| c.name == row.case).unwrap();
            assert_eq!(names, implementations_at(row.op, case), "{:?}", row.op);
            assert!(row.case != DRAM || !names.contains(&Implementation::Composed));
            let candle = row.measured(Implementation::Candle).unwrap();
            assert_eq!(candle.speedup_vs_candle, Some(1.0));
            for v in &row.variants {
                let m = v.measured.as_ref().unwrap();
                let rate = row.bytes_moved as f64 / (m.time_ms * 1e-3) / 1e9;
                assert!((m.gb_per_s - rate).abs() <= 1e-9 * rate);
                assert!((m.pct_of_ceiling - 100.0 * rate / row.ceiling.gb_per_s).abs() < 1e-9);
                assert_eq!(m.timed.samples_wall_ms.len(), 2);
                assert!(m.calls_per_sample >= 1);
                // The first 4 rows are checked.
                let width = *row.shape.last().unwrap();
                let want = (4 * width).min(row.elements as usize);
                assert_eq!(m.accuracy.elements_checked, want);
                // Half an ulp of the largest output, norm-wise. Candle's
                // 16-bit kernels round their intermediates too (its softmax
                // sums in the dtype): looser. tests/kernels.rs holds each
                // element to its own bound; here the record is checked.
                let bound = match (row.precision, v.implementation) {
                    (Precision::F32, _) => 1e-5,
                    (Precision::F16, Implementation::Lab) => 1e-3,
                    (_, Implementation::Lab) => 5e-3,
                    _ => 0.5,
                };
                assert!(
                    m.accuracy.max_rel_err < bound,
                    "{} {} {:?}: {}",
                    row.op.name(),
                    row.case,
                    v.implementation,
                    m.accuracy.max_rel_err
                );
            }
        }
        // Roofs were measured (a row drops its roof only where it beat it
        // twice).
        assert!(
            r.rows.iter().any(|x| x.compute.is_some()),
            "no compute roof"
        );
    }

    fn ladder_threads(device: &Device) -> usize {
        if device.is_cpu() {
            candle_core::utils::get_num_threads()
        } else {
            1
        }
    }

    #[test]
    fn kernels_run_cpu() {
        kernels_run(&Device::Cpu);
    }

    #[cfg(feature = "cuda")]
    #[test]
    fn kernels_run_cuda() {
        kernels_run(&Device::new_cuda(0).unwrap());
    }
}
