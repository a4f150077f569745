//! The block experiment shown: per phase the end-to-end rows with their
//! speedups beside the matmul-only and Amdahl's, where the time goes by op
//! class, fused kernels against composed ops, and the line that answers the
//! reference lab's caveat with this run's numbers. Every figure of a table is
//! read from one clock, the body's ([`BlockResults::clock`]: CUDA events on a
//! GPU, the wall clock on the CPU), and its title says which; tokens/s is
//! through one layer, and says so.

mod chart;

use super::{num, Records, Shown};
use crate::export::table::Table;
use crate::precision::Precision;
use crate::schema::{
    BlockPhase, BlockResults, KernelChoice, OpClass, Phase, ResultFile, TimeSource, Timed,
};
use crate::units::{mib, sci};

/// The header tokens/s goes by wherever a block's rows are shown: a layer's
/// rate, not a model's.
pub const TOKENS_PER_S: &str = "tokens/s through one layer";

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or("-".into(), f)
}

fn times(v: Option<f64>) -> String {
    opt(v, |x| format!("{x:.2}x"))
}

/// A median by the table's clock.
fn ms(t: &Timed) -> f64 {
    t.rate_ms().0
}

/// ", times from CUDA events": what a block table's title ends with.
pub fn clock_clause(clock: TimeSource) -> String {
    format!(", times from {}", clock.describe())
}

/// The block's tables and notes.
pub fn show(file: &ResultFile, r: &BlockResults) -> Shown {
    let s = &r.shape;
    let clock = clock_clause(r.clock());
    let mut tables = Vec::new();
    for p in &r.phases {
        let title = format!(
            "block {}: batch {} x {} tokens, hidden {}, {} heads ({} key/value), MLP {} on {} \
             ({}), {}{clock}; x fp32 end to end: timed in turn with the fp32 block's calls, with \
             its 95% interval",
            p.phase.name(),
            s.batch,
            if p.phase == Phase::Decode { 1 } else { s.seq },
            s.hidden,
            s.heads,
            s.kv_heads(),
            s.mlp,
            file.device.label,
            file.device.name,
            match r.kernels {
                KernelChoice::Candle => "candle kernels",
                KernelChoice::Lab => "lab kernels",
                KernelChoice::Both => "candle kernels (the suite's timed beside them: see below)",
            }
        );
        tables.push(rows_table(title, p));
        tables.push(parts_table(p, &clock));
    }
    let mut fused = Table::new(
        format!("fused kernels against the same math from primitive ops (prefill shapes){clock}"),
        &[
            "op",
            "precision",
            "fused ms",
            "composed ms",
            "composed / fused",
            "fused MiB",
            "composed MiB",
        ],
    );
    for f in &r.fused {
        fused.row([
            f.op.name().to_string(),
            f.precision.to_string(),
            format!("{:.3}", ms(&f.fused)),
            format!("{:.3}", ms(&f.composed)),
            format!("{:.2}x", ms(&f.composed) / ms(&f.fused)),
            format!("{:.1}", mib(f.fused_bytes)),
            format!("{:.1}", mib(f.composed_bytes)),
        ]);
    }
    tables.push(fused);
    let mut notes = vec![r.sizes_note.clone()];
    notes.extend(ceiling_note(r));
    notes.extend(caveat(r));
    notes.extend(kernels_line(r));
    Shown { tables, notes }
}

/// A layer's time with the suite's kernels over candle-nn's, its interval,
/// and a flag when the gain is larger than the time of all the op classes the
/// suite's kernels replace (projections, norms, softmax, element-wise): that
/// much cannot come from them, so it is noise or a side effect, not their gain.
fn ratio_cell(m: &crate::schema::BlockMeasured) -> Option<String> {
    let x = m.lab_vs_candle?;
    let interval = match &m.lab_vs_candle_interval {
        Some(i) if i.holds_one() => format!(" [{:.2}, {:.2}]: no difference shown", i.lo, i.hi),
        Some(i) => format!(" [{:.2}, {:.2}]", i.lo, i.hi),
        None => " (direction only: under 3 samples)".into(),
    };
    let (candle_ms, _) = m.end_to_end.rate_ms();
    let changed: f64 = m
        .parts
        .iter()
        // The suite's kernels replace the projections (its matrix-vector
        // op), the norms, the softmax and the element-wise ops: all but
        // attention's matmuls and the rotary embedding.
        .filter(|p| !matches!(p.class, OpClass::AttentionMatmul | OpClass::Rotary))
        .map(|p| p.timed.rate_ms().0)
        .sum();
    let gain_ms = candle_ms * (1.0 - x);
    let flag = if gain_ms > changed && changed > 0.0 {
        format!(
            " (flagged: the {gain_ms:.3} ms gained exceeds the {changed:.3} ms of the op classes \
             the suite's kernels replace: noise or a side effect)"
        )
    } else {
        String::new()
    };
    Some(format!("{x:.2}x{interval}{flag}"))
}

/// With `--kernels both`: what the suite's own kernels did to the layer, row
/// by row (the time with them over the time with candle-nn's, measured side
/// by side in the run, by the body's clock); `None` otherwise.
pub fn kernels_line(r: &BlockResults) -> Option<String> {
    let per_phase: Vec<String> = r
        .phases
        .iter()
        .filter_map(|ph| {
            let rows: Vec<String> = ph
                .rows
                .iter()
                .filter_map(|row| {
                    let m = row.measured.as_ref()?;
                    Some(format!("{} {}", row.precision, ratio_cell(m)?))
                })
                .collect();
            (!rows.is_empty()).then(|| format!("{}: {}", ph.phase.name(), rows.join(", ")))
        })
        .collect();
    (!per_phase.is_empty()).then(|| {
        format!(
            "the suite's kernels against candle-nn's, the layer end to end (time with them over \
             time without, timed side by side; under 1 is faster): {}",
            per_phase.join("; ")
        )
    })
}

fn rows_table(title: String, p: &BlockPhase) -> Table {
    let mut t = Table::new(
        title,
        &[
            "precision",
            "median ms",
            "threads held",
            TOKENS_PER_S,
            "GFLOP/s",
            "GB/s",
            "% bound",
            "x fp32",
            "matmuls x fp32",
            "Amdahl x fp32",
            "matmul share",
            "parts / block",
            "peak MiB",
            "max rel err",
        ],
    );
    for row in &p.rows {
        let Some(m) = &row.measured else {
            t.row([
                row.precision.to_string(),
                format!("error: {}", row.error.as_deref().unwrap_or("")),
            ]);
            continue;
        };
        t.row([
            row.precision.to_string(),
            format!("{:.3}", ms(&m.end_to_end)) + super::mark(m.end_to_end.availability.as_ref()),
            super::threads_cell(m.end_to_end.availability.as_ref()),
            format!("{:.0}", m.tokens_per_s),
            format!("{:.1}", m.gflop_per_s),
            format!("{:.1}", m.gb_per_s),
            opt(m.pct_of_copy_ceiling, |v| format!("{v:.0}%")),
            // End to end against the fp32 calls timed in turn with the row's.
            match (
                m.speedup_vs_fp32,
                m.speedup_vs_fp32_interval,
                &m.fp32_beside,
            ) {
                (Some(x), Some(i), _) => format!("{x:.2}x [{:.2}, {:.2}]", i.lo, i.hi),
                (Some(x), None, Some(_)) => format!("{x:.2}x (direction only)"),
                (x, _, _) => times(x),
            },
            times(m.matmul_speedup_vs_fp32),
            times(m.amdahl_speedup_vs_fp32),
            format!("{:.0}%", 100.0 * m.matmul_share),
            format!("{:.2}", m.parts_sum_ms / ms(&m.end_to_end)),
            opt(m.peak_bytes.map(|b| b as f64), |b| {
                format!("{:.1}", b / 1048576.0)
            }),
            sci(m.accuracy.max_rel_err, 2),
        ]);
    }
    t
}

/// Each class's median per block call and its share of the parts' sum, all
/// by the table's clock.
fn parts_table(p: &BlockPhase, clock: &str) -> Table {
    let mut header = vec!["precision"];
    header.extend(OpClass::ALL.iter().map(|c| c.name()));
    header.extend(["sum ms", "block ms"]);
    let mut t = Table::new(
        format!(
            "where the time goes, {}: ms per block call (share of the sum){clock}",
            p.phase.name()
        ),
        &header,
    );
    for row in &p.rows {
        let Some(m) = &row.measured else { continue };
        let mut cells = vec![row.precision.to_string()];
        for class in OpClass::ALL {
            cells.push(match m.parts.iter().find(|x| x.class == class) {
                Some(x) => format!(
                    "{:.3} ({:.0}%)",
                    ms(&x.timed),
                    100.0 * ms(&x.timed) / m.parts_sum_ms
                ),
                None => "-".into(),
            });
        }
        cells.push(format!("{:.3}", m.parts_sum_ms));
        cells.push(format!("{:.3}", ms(&m.end_to_end)));
        t.row(cells);
    }
    t
}

/// What "% copy" is held against, and whether the bytes fit in the device's
/// largest cache (then the layer and its copy both run from it, not DRAM).
pub fn ceiling_note(r: &BlockResults) -> Option<String> {
    let decode = r.phases.iter().find(|p| p.phase == Phase::Decode)?;
    let rows: Vec<_> = decode
        .rows
        .iter()
        .filter_map(|x| x.measured.as_ref())
        .collect();
    if rows.iter().all(|m| m.copy_bytes.is_none()) {
        return r.copy_ceiling_gb_per_s.map(|c| {
            format!(
                "% bound: GB/s against one device copy of decode's f32 bytes (32 MiB to 1 GiB), \
                 {c:.1} GB/s (a file before schema 2.3)"
            )
        });
    }
    if let Some(b) = rows.iter().find_map(|m| m.bound.as_ref()) {
        let bounds: Vec<String> = rows
            .iter()
            .filter_map(|m| m.bound.as_ref())
            .map(super::ladder::bound_cell)
            .collect();
        return Some(format!(
            "% bound: each row's GB/s (its least bytes: weights once, the cache read, the token \
             written) against the bandwidth ladder's {} at the row's own footprint, the faster \
             of one thread and the pool's, measured in this run: decode {}",
            b.kernel.name(),
            bounds.join(", ")
        ));
    }
    let (lo, hi) = rows.iter().fold((u64::MAX, 0), |(lo, hi), m| {
        (lo.min(m.bytes_min), hi.max(m.bytes_min))
    });
    let (lo_mib, hi_mib) = (format!("{:.1}", mib(lo)), format!("{:.1}", mib(hi)));
    let bytes = if lo_mib == hi_mib {
        format!("{hi_mib} MiB")
    } else {
        format!("{lo_mib}-{hi_mib} MiB")
    };
    let where_ = match r.cache_bytes {
        Some(c) if hi <= c => format!(
            "within the device's {:.0} MiB largest cache: the layer and its copy both run from \
             cache, so % copy compares cache-resident with cache-resident, not with DRAM",
            mib(c)
        ),
        Some(c) if lo > c => format!(
            "beyond the device's {:.0} MiB largest cache: both stream from memory",
            mib(c)
        ),
        Some(c) => format!(
            "some rows within the device's {:.0} MiB largest cache, some beyond",
            mib(c)
        ),
        None => "the device's cache size is unknown".into(),
    };
    Some(format!(
        "% copy: each row's GB/s against a plain copy of the same footprint (two buffers of half \
         the row's least bytes, one read, one written), measured in this run; decode moves \
         {bytes} a call (a preallocated KV cache: the new token written in place, nothing cached \
         copied), {where_}"
    ))
}

/// The reference lab's caveat answered: per narrow precision, the matmuls'
/// speedup over fp32 beside the whole block's, per phase.
pub fn caveat(r: &BlockResults) -> Vec<String> {
    let mut lines = Vec::new();
    for p in [Precision::F16, Precision::Bf16] {
        let per_phase: Vec<String> = r
            .phases
            .iter()
            .filter_map(|ph| {
                let m = ph
                    .rows
                    .iter()
                    .find(|x| x.precision == p)?
                    .measured
                    .as_ref()?;
                Some(format!(
                    "{}: matmuls {:.2}x, whole block {:.2}x (Amdahl from the parts {:.2}x)",
                    ph.phase.name(),
                    m.matmul_speedup_vs_fp32?,
                    m.speedup_vs_fp32?,
                    m.amdahl_speedup_vs_fp32?
                ))
            })
            .collect();
        if !per_phase.is_empty() {
            lines.push(format!("{p} against fp32: {}", per_phase.join("; ")));
        }
    }
    lines
}

/// One record per phase and precision: machine, experiment, phase, precision,
/// status, clock (`cuda_events` or `wall_clock`: every time and rate of the
/// record is that clock's), median_ms, tokens_per_s_through_one_layer,
/// gflop_per_s, gb_per_s, pct_of_copy_ceiling, speedup_vs_fp32,
/// matmul_speedup_vs_fp32, amdahl_speedup_vs_fp32, matmul_share, max_rel_err,
/// then each op class's median ms (`part_linear_ms`, ...).
pub fn records(machine: &str, r: &BlockResults) -> Records {
    let clock = match r.clock() {
        TimeSource::GpuMedianMs => "cuda_events",
        TimeSource::MedianMs => "wall_clock",
    };
    let mut header: Vec<String> = [
        "machine",
        "experiment",
        "phase",
        "precision",
        "status",
        "clock",
        "median_ms",
        "tokens_per_s_through_one_layer",
        "gflop_per_s",
        "gb_per_s",
        "pct_of_copy_ceiling",
        "speedup_vs_fp32",
        "matmul_speedup_vs_fp32",
        "amdahl_speedup_vs_fp32",
        "matmul_share",
        "max_rel_err",
        "lab_kernels_vs_candle",
    ]
    .map(String::from)
    .to_vec();
    header.extend(
        OpClass::ALL
            .iter()
            .map(|c| format!("part_{}_ms", c.name().replace([' ', '-'], "_"))),
    );
    let mut rows = Vec::new();
    for p in &r.phases {
        for row in &p.rows {
            let m = row.measured.as_ref();
            let mut cells = vec![
                machine.to_string(),
                "block".into(),
                p.phase.name().into(),
                row.precision.name().into(),
                if m.is_some() { "ok" } else { "error" }.into(),
                clock.into(),
                num(m.map(|m| ms(&m.end_to_end))),
                num(m.map(|m| m.tokens_per_s)),
                num(m.map(|m| m.gflop_per_s)),
                num(m.map(|m| m.gb_per_s)),
                num(m.and_then(|m| m.pct_of_copy_ceiling)),
                num(m.and_then(|m| m.speedup_vs_fp32)),
                num(m.and_then(|m| m.matmul_speedup_vs_fp32)),
                num(m.and_then(|m| m.amdahl_speedup_vs_fp32)),
                num(m.map(|m| m.matmul_share)),
                num(m.map(|m| m.accuracy.max_rel_err)),
                num(m.and_then(|m| m.lab_vs_candle)),
            ];
            for class in OpClass::ALL {
                let part = m.and_then(|m| m.parts.iter().find(|x| x.class == class));
                cells.push(num(part.map(|x| ms(&x.timed))));
            }
            rows.push(cells);
        }
    }
    Records { header, rows }
}

/// The block's view (no chart).
impl super::View for BlockResults {
    fn show(&self, file: &ResultFile) -> Shown {
        show(file, self)
    }

    fn records(&self, machine: &str) -> Option<Records> {
        Some(records(machine, self))
    }

    fn chart(&self, file: &ResultFile) -> Option<String> {
        chart::chart(file, self)
    }

    fn section(&self, _file: &ResultFile) -> super::Section {
        let s = &self.shape;
        super::Section::Own(super::Own {
            heading: Some(format!(
                "hidden {}, {} heads ({} key/value), MLP {}, {} tokens",
                s.hidden,
                s.heads,
                s.kv_heads(),
                s.mlp,
                s.seq
            )),
            ..super::Own::new(
                "A decoder block (RMSNorm, Q/K/V/O, rotary, causal attention, SwiGLU MLP) end \
                 to end: how much of the matmuls' precision speedup survives in the whole block, \
                 beside Amdahl's prediction from the parts (docs/block.md). Every time and rate \
                 of a table is one clock's (CUDA events on a GPU, the wall clock on the CPU), and \
                 tokens/s is through one layer, not a model.",
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{BlockAccuracy, BlockMeasured, BlockPart, BlockRow, BlockShape, RowStatus};
    use crate::telemetry::timed_at;

    /// A GPU-like decode row whose clocks disagree: the block takes 3 ms by
    /// the wall and 2 ms by CUDA events, each of its six parts 0.5 ms by the
    /// wall and 0.25 ms by events.
    fn gpu_result() -> BlockResults {
        let parts = OpClass::ALL
            .iter()
            .map(|&class| BlockPart {
                class,
                calls: 1,
                timed: timed_at(&[0.5; 3], &[0.25; 3]),
            })
            .collect();
        let measured = BlockMeasured {
            end_to_end: timed_at(&[3.0; 3], &[2.0; 3]),
            lab_end_to_end: Some(timed_at(&[2.4; 3], &[1.5; 3])),
            lab_vs_candle: Some(0.75),
            lab_vs_candle_interval: None,
            bytes_min: 4 << 20,
            tokens_per_s: 500.0,
            gflop_per_s: 1.0,
            gb_per_s: 2.1,
            copy_bytes: Some(4 << 20),
            copy_ceiling_gb_per_s: Some(4.2),
            pct_of_copy_ceiling: Some(50.0),
            bound: None,
            peak_bytes: None,
            parts,
            parts_sum_ms: 1.5,
            matmul_share: 1.0 / 3.0,
            speedup_vs_fp32: Some(1.0),
            fp32_beside: None,
            speedup_vs_fp32_interval: None,
            matmul_speedup_vs_fp32: Some(1.0),
            amdahl_speedup_vs_fp32: Some(1.0),
            accuracy: BlockAccuracy {
                tokens_checked: 1,
                max_rel_err: 1e-7,
                mean_rel_err: 1e-8,
            },
        };
        BlockResults {
            shape: BlockShape {
                batch: 1,
                seq: 8,
                hidden: 64,
                heads: 4,
                kv_heads: Some(2),
                head_dim: 16,
                mlp: 96,
                rms_eps: 1e-5,
                rope_theta: 10_000.0,
                accuracy_seq: 8,
            },
            sizes_note: String::new(),
            warmup: 1,
            iters: 3,
            seed: 1,
            params: 0,
            time_source: Some(TimeSource::GpuMedianMs),
            cache_bytes: Some(50 << 20),
            copy_ceiling_gb_per_s: None,
            kernels: Default::default(),
            ladder: None,
            phases: vec![BlockPhase {
                phase: Phase::Decode,
                tokens: 1,
                context: 9,
                flops: 2e6,
                rows: vec![BlockRow {
                    precision: Precision::F32,
                    status: RowStatus::Ok,
                    error: None,
                    measured: Some(measured),
                }],
            }],
            fused: Vec::new(),
        }
    }

    #[test]
    fn every_figure_of_a_table_is_one_clock_s_and_the_title_says_which() {
        let r = gpu_result();
        let clock = clock_clause(r.clock());
        let rows = rows_table(format!("decode{clock}"), &r.phases[0]).to_string();
        assert!(rows.contains("decode, times from CUDA events"), "{rows}");
        assert!(rows.contains(TOKENS_PER_S), "{rows}");
        // The block's event median, and the parts' event sum over it.
        assert!(rows.contains("2.000") && !rows.contains("3.000"), "{rows}");
        assert!(rows.contains("0.75") && !rows.contains("0.50"), "{rows}");
        let parts = parts_table(&r.phases[0], &clock).to_string();
        assert!(parts.contains("times from CUDA events"), "{parts}");
        assert!(
            parts.contains("0.250 (17%)") && parts.contains("2.000"),
            "{parts}"
        );
        assert!(
            !parts.contains("0.500") && !parts.contains("3.000"),
            "{parts}"
        );
        // The CSV says its clock and gives its medians.
        let rec = records("m", &r);
        let col = |name: &str| rec.header.iter().position(|h| h == name).unwrap();
        assert_eq!(rec.rows[0][col("clock")], "cuda_events");
        assert_eq!(rec.rows[0][col("median_ms")], "2.0");
        assert_eq!(rec.rows[0][col("part_linear_ms")], "0.25");
        assert_eq!(rec.rows[0][col("tokens_per_s_through_one_layer")], "500.0");
        // A file before 2.3 has no clock recorded: its rows' events say it.
        let mut old = r.clone();
        old.time_source = None;
        assert_eq!(old.clock(), TimeSource::GpuMedianMs);
        old.phases[0].rows[0].measured.as_mut().unwrap().end_to_end = timed_at(&[3.0], &[]);
        assert_eq!(old.clock(), TimeSource::MedianMs);
    }

    #[test]
    fn both_kernels_give_the_layer_s_change_in_a_line_and_the_csv() {
        let r = gpu_result();
        let line = kernels_line(&r).unwrap();
        assert!(line.contains("decode: fp32 0.75x"), "{line}");
        let rec = records("m", &r);
        let col = rec
            .header
            .iter()
            .position(|h| h == "lab_kernels_vs_candle")
            .unwrap();
        assert_eq!(rec.rows[0][col], "0.75");
        // A run of one kernel set says nothing of the other.
        let mut one = r.clone();
        one.phases[0].rows[0]
            .measured
            .as_mut()
            .unwrap()
            .lab_vs_candle = None;
        assert_eq!(kernels_line(&one), None);
    }

    #[test]
    fn a_body_as_schema_2_2_wrote_it_still_reads_and_shows() {
        let mut v = serde_json::to_value(gpu_result()).unwrap();
        let body = v.as_object_mut().unwrap();
        for key in ["time_source", "cache_bytes"] {
            body.remove(key);
        }
        body.insert("copy_ceiling_gb_per_s".into(), serde_json::json!(3.5));
        body["shape"].as_object_mut().unwrap().remove("kv_heads");
        body["shape"]["heads"] = serde_json::json!(4);
        let row = &mut body["phases"][0]["rows"][0]["measured"];
        for key in ["copy_bytes", "copy_ceiling_gb_per_s"] {
            row.as_object_mut().unwrap().remove(key);
        }
        let old: BlockResults = serde_json::from_value(v).unwrap();
        assert_eq!(old.shape.kv_heads(), 4);
        assert_eq!(old.clock(), TimeSource::GpuMedianMs);
        let note = ceiling_note(&old).unwrap();
        assert!(
            note.contains("3.5 GB/s (a file before schema 2.3)"),
            "{note}"
        );
        // A 2.3 body leaves the old one-for-all ceiling out.
        let new = serde_json::to_value(gpu_result()).unwrap();
        assert!(new.get("copy_ceiling_gb_per_s").is_none());
    }

    #[test]
    fn the_ceiling_note_says_where_the_bytes_sit() {
        let mut r = gpu_result();
        let note = ceiling_note(&r).unwrap();
        assert!(note.contains("decode moves 4.0 MiB"), "{note}");
        assert!(
            note.contains("within the device's 50 MiB largest cache"),
            "{note}"
        );
        r.cache_bytes = Some(1 << 20);
        let note = ceiling_note(&r).unwrap();
        assert!(note.contains("beyond the device's 1 MiB"), "{note}");
    }
}
